"""A simulated position-controlled motor, shared by every simulated device (the in-process `sim`
driver, the simulated ODrive on a CAN bus, the simulated Dynamixel chain on a pty).

The model is the cascade a real servo drive runs, on a fixed control tick (`step_s`, 2 kHz by
default), so the result depends only on the injected clock, the commands and the seed:

- Position loop (outer): velocity setpoint ``v_sp = velocity_ff + f(target - position)``, clamped to
  ±`max_velocity`. ``f`` is proportional (`position_gain`) near the target and follows the braking
  curve ``sqrt(2 · a_brake · |error|)`` farther out, so a large step decelerates within the
  acceleration limit instead of overshooting (the "square-root controller" of trajectory-less
  drives). ``a_brake`` leaves the velocity loop headroom: see `MotorParams.braking_deceleration`.
- Velocity loop (inner): a first-order lag of bandwidth `velocity_gain` toward ``v_sp``, its
  acceleration clamped to ±`max_acceleration`. Near the target the two loops form a PD controller
  with velocity feed-forward, ``a = Kv·Kp·(target - position) + Kv·(velocity_ff - velocity)``, which
  is critically damped when ``Kv = 4·Kp`` (the defaults): a step settles without overshoot and
  without a limit cycle.
- Impedance mode (`command_impedance`, the MIT actuators' law): instead of the two loops, the
  torque ``τ = kp·(position* - position) + kd·(velocity* - velocity) + τ_ff``, clamped to
  ±`max_torque`, accelerates the shaft's `inertia`, with the same velocity and acceleration
  limits. `command()` returns the motor to the cascade.
- Torque off (disabled, or a latched fault): the shaft decelerates at `max_acceleration` to rest
  (brake and friction). A stuck shaft does not move at all.

The velocity never exceeds `max_velocity` and changes by at most ``max_acceleration · step_s`` per
tick, whatever is commanded. Encoder readings are quantised to `counts_per_rev` and carry optional
Gaussian noise.

Faults are injected through the public fields of `MotorFaults` (device side) and `LinkFaults`
(transport side, used by the devices' wire layers). They take effect at the first control tick after
the motor's latest `advance()`; call `advance()` before injecting to make one start exactly now.
They and `MotorParams` live in `drivers.sim.motor_params` and are re-exported here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from drivers.base import Clock
from drivers.errors import DriverConfigError
from drivers.sim.motor_params import LinkFaults, MotorFaults, MotorParams

__all__ = ["LinkFaults", "MotorFaults", "MotorParams", "MotorSample", "SimulatedMotor"]

# Tolerance when converting clock time to a whole number of ticks, so that a clock reading of
# exactly k·step_s (up to rounding) counts as tick k.
_TICK_EPSILON = 1e-9
_SETTLED = 1e-12  # rad, rad/s: closer than this to rest on target, the motor is settled
EFFORT_PER_RAD = 2.0  # a simulated drive reaches its stall torque at 0.5 rad of position error


@dataclass(frozen=True, slots=True)
class MotorSample:
    """An encoder reading: quantised (and noisy) position in rad, velocity in rad/s, and the time in
    s (injected clock) of the control tick it was taken at."""

    position: float
    velocity: float
    timestamp: float


@dataclass(eq=False)
class SimulatedMotor:
    """A deterministic simulated motor driven by an injected clock.

    The physics advances lazily, tick by tick, to the clock's time whenever the motor is used, so a
    motor nobody looks at costs nothing and a manual clock runs it faster than real time. Given the
    same clock readings, calls and seed, two motors produce identical readings.

    Public state (read freely; change only through the methods): `position` (rad) and `velocity`
    (rad/s) of the shaft, `enabled` (closed loop), `target` (rad), `velocity_ff` (rad/s),
    `watchdog_expired`, and `torque` (N·m: in impedance mode the law's clamped torque, else
    `inertia` × the last tick's acceleration).
    """

    params: MotorParams
    clock: Clock
    seed: int = 0
    faults: MotorFaults = field(default_factory=MotorFaults)

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng(self.seed)
        self.position = self.params.initial_position
        self.velocity = 0.0
        self.enabled = False
        self.target = self.position
        self.velocity_ff = 0.0
        self.watchdog_expired = False
        self.torque = 0.0
        self._impedance: _Impedance | None = None
        self._origin = self.clock()
        self._ticks = 0
        self._last_command_time = self._origin
        self._frozen_position: float | None = None
        self._block_side = 0.0  # which side of `faults.block_at` the shaft is on (0: unknown)
        # Per-tick constants of the control loops (the tick is the hot path of every simulation).
        p = self.params
        self._velocity_blend = 1.0 - math.exp(-p.velocity_gain * p.step_s)  # exact first order
        self._max_velocity_change = p.max_acceleration * p.step_s
        self._braking_deceleration = p.braking_deceleration
        self._linear_zone = p.braking_deceleration / p.position_gain**2

    # -- what a simulated device calls ----------------------------------------------------------

    @property
    def time(self) -> float:
        """The clock time of the latest simulated control tick, s."""
        return self._origin + self._ticks * self.params.step_s

    @property
    def faulted(self) -> bool:
        """Whether a latched fault (an injected `fault_code` or an expired watchdog) is active."""
        return self.faults.fault_code != 0 or self.watchdog_expired

    def enable(self) -> None:
        """Enter closed-loop control, holding the current position and arming the watchdog.

        A faulted motor refuses and stays disabled (check `enabled`); clear its faults first.
        """
        self.advance()
        if self.faulted:
            return
        if not self.enabled:
            self.target = self.position
            self.velocity_ff = 0.0
            self._impedance = None
        self.enabled = True
        self._last_command_time = self.clock()

    def disable(self) -> None:
        """Torque off: the shaft decelerates at `max_acceleration` to rest."""
        self.advance()
        self.enabled = False

    def command(self, position: float, velocity_ff: float = 0.0) -> None:
        """Set the position target (rad) and velocity feed-forward (rad/s), effective from the next
        control tick, and feed the watchdog. A disabled motor stores them but does not move (and
        `enable()` replaces them with its current position)."""
        self.advance()
        self._impedance = None
        self.target = position
        self.velocity_ff = velocity_ff
        self._last_command_time = self.clock()

    def command_impedance(
        self,
        position: float,
        velocity: float,
        kp: float,
        kd: float,
        torque_ff: float = 0.0,
        max_torque: float = math.inf,
    ) -> None:
        """Switch to the impedance law (until the next `command()`), effective from the next
        control tick, and feed the watchdog: ``τ = kp·(position - p) + kd·(velocity - v) +
        torque_ff`` clamped to ±`max_torque` (rad, rad/s, N·m/rad, N·m·s/rad, N·m). A disabled
        motor stores it but applies no torque."""
        self.advance()
        self._impedance = _Impedance(position, velocity, kp, kd, torque_ff, max_torque)
        self.target, self.velocity_ff = position, velocity
        self._last_command_time = self.clock()

    def clear_faults(self) -> None:
        """Clear the latched faults (`fault_code` and the watchdog); the motor stays disabled."""
        self.advance()
        self.faults.fault_code = 0
        self.watchdog_expired = False

    def move_by_hand(self, position: float) -> None:
        """A hand puts the shaft at `position` (rad) and lets go: only with torque off (a motor in
        closed loop holds against the hand: nothing happens). Raises `DriverConfigError` for a
        non-finite position."""
        if not math.isfinite(position):
            raise DriverConfigError(f"move_by_hand: position {position} rad must be finite")
        self.advance()
        if not self.enabled and not self.faults.stuck:
            stops = self.faults.end_stops
            if stops is not None:
                position = min(max(position, stops[0]), stops[1])
            self.position, self.velocity = position, 0.0

    def sample(self) -> MotorSample:
        """Advance to the clock's time and read the encoder."""
        position, velocity = self.encoder()
        return MotorSample(position=position, velocity=velocity, timestamp=self.time)

    def encoder(self) -> tuple[float, float]:
        """`sample()`'s position and velocity, without building a sample (the `sim` driver reads
        every motor each control tick)."""
        self.advance()
        if self.faults.frozen_encoder:
            if self._frozen_position is None:
                self._frozen_position = self._encoder_position()
            return self._frozen_position, 0.0
        self._frozen_position = None
        return self._encoder_position(), self.velocity

    def advance(self) -> None:
        """Run the control ticks due up to the clock's current time (a clock that goes backwards
        runs none)."""
        p = self.params
        due = math.floor((self.clock() - self._origin) / p.step_s + _TICK_EPSILON)
        if self._ticks < due and self._settled():
            # At rest on its target, a tick changes nothing: skip to the last one due, or to the
            # one where the watchdog expires, which runs as usual.
            skip_to = due
            if self.enabled and p.watchdog_s > 0.0:
                expiry = (self._last_command_time + p.watchdog_s - self._origin) / p.step_s
                skip_to = min(due, max(self._ticks, math.floor(expiry) - 1))
            self._ticks = skip_to
        while self._ticks < due:
            self._ticks += 1
            self._tick()

    def _settled(self) -> bool:
        """At rest and, if enabled, on its target (within `_SETTLED`, then snapped to it), with
        nothing that a tick would change: no feed-forward, fault or stuck shaft."""
        if self.faults.stuck or self.faults.fault_code != 0 or self.velocity_ff != 0.0:
            return False
        if self.enabled and self._impedance is not None:
            return abs(self.velocity) <= _SETTLED and abs(self._impedance_torque()) <= _SETTLED
        if not self.enabled:
            return self.velocity == 0.0
        if abs(self.velocity) > _SETTLED or abs(self.target - self.position) > _SETTLED:
            return False
        self.position, self.velocity = self.target, 0.0
        return True

    # -- the model ------------------------------------------------------------------------------

    def _encoder_position(self) -> float:
        p = self.params
        reading = self.position
        if p.noise_std > 0.0:
            reading += float(self._rng.normal(0.0, p.noise_std))
        return round(reading / p.resolution) * p.resolution

    def _tick(self) -> None:
        p = self.params
        if self.enabled:
            watchdog_s = p.watchdog_s
            if watchdog_s > 0.0 and self.time - self._last_command_time > watchdog_s:
                self.watchdog_expired = True
            if self.watchdog_expired or self.faults.fault_code != 0:
                self.enabled = False
        impedance = self._impedance if self.enabled else None
        if self.faults.stuck:  # the drive still pushes (impedance) but nothing moves
            self.velocity = 0.0
            self.torque = self._impedance_torque() if impedance is not None else 0.0
            return
        previous, was_at = self.velocity, self.position
        if impedance is not None:
            self.torque = self._impedance_torque()
            change = self.torque / p.inertia * p.step_s
            self.velocity = _clamp(
                previous + _clamp(change, self._max_velocity_change), p.max_velocity
            )
            self.position += 0.5 * (previous + self.velocity) * p.step_s
            self._stop_at_obstacle(was_at)
            return
        if self.enabled:
            setpoint = _clamp(
                self.velocity_ff + self._position_loop(self.target - self.position), p.max_velocity
            )
            change = (setpoint - previous) * self._velocity_blend
        else:
            change = -previous
        self.velocity = previous + _clamp(change, self._max_velocity_change)
        self.torque = p.inertia * (self.velocity - previous) / p.step_s
        # Exact for the constant acceleration held during the tick.
        self.position += 0.5 * (previous + self.velocity) * p.step_s
        self._stop_at_obstacle(was_at)

    def _stop_at_obstacle(self, was_at: float) -> None:
        """The shaft does not pass `faults.block_at` (it was at `was_at` before this tick), nor
        leave `faults.end_stops`."""
        block = self.faults.block_at
        if block is not None:
            if was_at != block:
                self._block_side = math.copysign(1.0, was_at - block)
            if (self.position - block) * self._block_side < 0.0:
                self.position, self.velocity = block, 0.0  # against the obstacle
        stops = self.faults.end_stops
        if stops is not None and not stops[0] <= self.position <= stops[1]:
            self.position, self.velocity = min(max(self.position, stops[0]), stops[1]), 0.0

    @property
    def effort(self) -> float:
        """The drive's effort, a signed fraction of its stall torque: proportional to the
        position error while enabled (`EFFORT_PER_RAD`), saturating at 1; 0 with torque off."""
        if not self.enabled:
            return 0.0
        return _clamp((self.target - self.position) * EFFORT_PER_RAD, 1.0)

    @property
    def obstacle_effort(self) -> float:
        """The part of `effort` spent pushing against an obstacle: `effort` while the shaft rests
        at `faults.block_at` or at an end stop with its target beyond it, else 0. (A simulated
        device whose load model ignores position errors adds it: a servo pushing into a wall.)"""
        f = self.faults
        walls = [] if f.end_stops is None else list(f.end_stops)
        if f.block_at is not None:
            walls.append(f.block_at)
        push = self.target - self.position
        at_wall = any(abs(self.position - wall) <= _SETTLED for wall in walls)
        return self.effort if at_wall and push != 0.0 and self.velocity == 0.0 else 0.0

    def _impedance_torque(self) -> float:
        imp = self._impedance
        assert imp is not None
        torque = (
            imp.kp * (imp.position - self.position)
            + imp.kd * (imp.velocity - self.velocity)
            + imp.torque_ff
        )
        return _clamp(torque, imp.max_torque)

    def _position_loop(self, error: float) -> float:
        """The position loop's velocity demand for a position error (rad -> rad/s): linear within
        ``a / Kp²`` of the target, the braking curve ``sqrt(2·a·(|e| - a / 2Kp²))`` beyond, which
        joins it with the same value and slope."""
        distance = abs(error)
        if distance <= self._linear_zone:
            return self.params.position_gain * error
        deceleration = self._braking_deceleration
        return math.copysign(
            math.sqrt(2.0 * deceleration * (distance - 0.5 * self._linear_zone)), error
        )


@dataclass(frozen=True, slots=True)
class _Impedance:
    """An impedance command (see `SimulatedMotor.command_impedance`)."""

    position: float
    velocity: float
    kp: float
    kd: float
    torque_ff: float
    max_torque: float


def _clamp(value: float, bound: float) -> float:
    """`value` limited to [-bound, bound]."""
    if value > bound:
        return bound
    if value < -bound:
        return -bound
    return value
