"""What a simulated motor (`drivers.sim.motor.SimulatedMotor`) is built and injected with: its
physical and control parameters (`MotorParams`), and the panels through which tests and
simulated devices inject faults, on the device side (`MotorFaults`) and on the transport side
(`LinkFaults`). Units are SI at the shaft (rad, rad/s, rad/s², s; m for a linear axis).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from drivers.errors import DriverConfigError

__all__ = ["LinkFaults", "MotorFaults", "MotorParams"]


@dataclass(frozen=True, slots=True)
class MotorParams:
    """Physical and control parameters of a simulated motor (SI at the shaft: rad, rad/s, rad/s²,
    or m, m/s, m/s² for a linear axis).

    max_velocity: velocity limit, > 0.
    max_acceleration: acceleration limit, > 0.
    position_gain: Kp of the position loop, 1/s, > 0.
    velocity_gain: bandwidth Kv of the velocity loop, 1/s, > position_gain; 4 × position_gain is
        critically damped, less is underdamped (it overshoots: useful to exercise following-error
        checks).
    counts_per_rev: encoder resolution in counts per 2π of travel, ≥ 1.
    noise_std: standard deviation of the encoder's Gaussian noise, rad, ≥ 0.
    initial_position: the shaft's position at construction, rad.
    step_s: the drive's control tick, s, > 0.
    watchdog_s: when > 0, an enabled motor that receives no `command()` for this long drops torque
        and latches `watchdog_expired`; 0 disables the watchdog.
    inertia: the shaft's moment of inertia, kg·m², > 0; only the impedance mode uses it (and the
        reported `torque`).
    """

    max_velocity: float = 6.0
    max_acceleration: float = 60.0
    position_gain: float = 60.0
    velocity_gain: float = 240.0
    counts_per_rev: int = 16384
    noise_std: float = 0.0
    initial_position: float = 0.0
    step_s: float = 0.0005
    watchdog_s: float = 0.0
    inertia: float = 0.01

    def __post_init__(self) -> None:
        positive = {
            "max_velocity": self.max_velocity,
            "max_acceleration": self.max_acceleration,
            "position_gain": self.position_gain,
            "step_s": self.step_s,
            "inertia": self.inertia,
        }
        for name, value in positive.items():
            if not (math.isfinite(value) and value > 0.0):
                raise DriverConfigError(f"motor parameter {name}: {value} must be finite and > 0")
        if not (math.isfinite(self.velocity_gain) and self.velocity_gain > self.position_gain):
            raise DriverConfigError(
                f"motor parameter velocity_gain: {self.velocity_gain} 1/s must be finite and > "
                f"position_gain ({self.position_gain} 1/s); 4 × position_gain is critically damped"
            )
        if self.counts_per_rev < 1:
            raise DriverConfigError(
                f"motor parameter counts_per_rev: {self.counts_per_rev} must be >= 1"
            )
        for name, value in {
            "noise_std": self.noise_std,
            "watchdog_s": self.watchdog_s,
        }.items():
            if not (math.isfinite(value) and value >= 0.0):
                raise DriverConfigError(f"motor parameter {name}: {value} must be finite and >= 0")
        if not math.isfinite(self.initial_position):
            raise DriverConfigError(
                f"motor parameter initial_position: {self.initial_position} must be finite"
            )

    @property
    def resolution(self) -> float:
        """One encoder count, rad."""
        return 2.0 * math.pi / self.counts_per_rev

    @property
    def braking_deceleration(self) -> float:
        """The deceleration the position loop plans its braking curve with, rad/s².

        Following a braking curve through a first-order velocity loop takes more than the curve's
        own deceleration (the loop lags by about ``a / Kv``, and the curve steepens as it nears the
        target); planning with ``max_acceleration · (1 - Kp / Kv)`` keeps the velocity loop out of
        its acceleration clamp, so the motor stops on the target instead of sliding past it.
        """
        return self.max_acceleration * (1.0 - self.position_gain / self.velocity_gain)


@dataclass(slots=True)
class MotorFaults:
    """Device-side faults, injected by setting these fields (a control panel, hence mutable).

    fault_code: a nonzero device fault code, like a drive's error register: while it is set the
        motor drops torque, leaves closed loop and refuses `enable()`. It stays set until the test
        resets it or `SimulatedMotor.clear_faults()` (a device's "clear errors") does. What a code
        means is up to the device protocol that reports it.
    frozen_encoder: the reported reading freezes (last position, velocity 0) while the shaft keeps
        moving, as with a failed output encoder on a drive that commutates from another sensor.
        Not a latched fault: it lasts while set.
    stuck: the shaft does not move whatever is commanded (mechanical jam); the drive stays enabled.
        Not a latched fault: it lasts while set.
    block_at: an obstacle at this shaft position (an object between a gripper's fingers, an end
        stop): the shaft stops there instead of passing it, from either side, while the drive
        keeps pushing (`SimulatedMotor.effort` rises). None: no obstacle.
    end_stops: (low, high), the shaft's mechanical travel: it never leaves [low, high] (a hand
        cannot push it out either), and pushing beyond one stops it there, like `block_at`.
        None: unbounded.
    """

    fault_code: int = 0
    frozen_encoder: bool = False
    stuck: bool = False
    block_at: float | None = None
    end_stops: tuple[float, float] | None = None


@dataclass(slots=True)
class LinkFaults:
    """Transport-side faults of one simulated device, injected by setting these fields.

    The motor does not use them: a simulated device's wire layer does (the in-process `sim` driver,
    or a simulated ODrive / Dynamixel device), so every simulation injects the same faults the same
    way.

    drop_probability: probability in [0, 1] that a reply is lost (never arrives).
    delay_s: transport latency of every reply, s, ≥ 0.
    disconnected: the device is unreachable (cable unplugged, adapter gone).
    """

    drop_probability: float = 0.0
    delay_s: float = 0.0
    disconnected: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.drop_probability <= 1.0:
            raise DriverConfigError(
                f"link fault drop_probability: {self.drop_probability} outside [0, 1]"
            )
        if not (math.isfinite(self.delay_s) and self.delay_s >= 0.0):
            raise DriverConfigError(f"link fault delay_s: {self.delay_s} s must be finite and >= 0")
