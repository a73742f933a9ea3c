"""Building the control side from a validated config, in one place.

The daemon loads and validates the config (`armd.config.load_config`) and derives the
`ControlSetup` (`control_setup`): everything the control process needs, typed and validated, and
nothing that needs the kinematics (no model, no numba): the control process imports neither. It
is sent over the control link as the process's first message, never parsed again.
`build_hardware` and `build_loop` build the drivers' hardware and the loop from it: in the control
process, and in tests that run the loop in-process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from armd.hardware import ArmHardware
from armd.loop import ControlLoop, LoopSettings
from armd.protocol import Event
from armd.safety import SafetyMonitor, SafetyThresholds, StallLimits
from armd.timing import Schedule
from armd.trajectory import MotionLimits
from armd.transmission import ArmTransmission
from drivers import Clock, Driver, DriverParams

if TYPE_CHECKING:  # the control process never imports the config (nor, through it, kinematics)
    from armd.config import ArmSetup

__all__ = ["ControlSetup", "DriverSetup", "build_hardware", "build_loop", "control_setup"]

Array = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class DriverSetup:
    """One configured bus: its driver class, validated params and the joints it serves (q order)."""

    name: str
    type_name: str
    cls: type[Driver]
    params: DriverParams
    joints: tuple[str, ...]

    def build(self, clock: Clock = time.monotonic) -> Driver:
        """The driver, constructed but not opened."""
        return self.cls(self.params, clock=clock)


@dataclass(frozen=True, slots=True)
class ControlSetup:
    """What the control process runs from. Arrays in q order; `lower`/`upper` are the position
    limits the loop enforces (fixed joints pinned at their position)."""

    name: str
    joint_names: tuple[str, ...]
    lower: Array
    upper: Array
    limits: MotionLimits
    loop: LoopSettings
    safety: SafetyThresholds
    transmission: ArmTransmission
    drivers: Mapping[str, DriverSetup]
    realtime_priority: int

    @property
    def loop_hz(self) -> float:
        return 1.0 / self.loop.period_s


def control_setup(arm: ArmSetup) -> ControlSetup:
    """The control side of a validated configuration."""
    limits, safety, period = arm.tree.limits, arm.safety, 1.0 / arm.loop_hz
    return ControlSetup(
        name=arm.name,
        joint_names=tuple(arm.tree.joint_names),
        lower=np.array(limits.lower),
        upper=np.array(limits.upper),
        limits=MotionLimits(
            np.array(limits.velocity), np.array(limits.acceleration), np.array(arm.jerk)
        ),
        loop=LoopSettings(
            period_s=period,
            joint_tolerance=safety.joint_tolerance,
            settle_timeout_s=safety.settle_timeout_s,
            disable_on_fault=safety.on_fault == "disable",
            # the daemon publishes the telemetry from these samples
            sample_every=max(1, round(arm.loop_hz / arm.telemetry_hz)),
            stream_timeout_s=arm.stream.timeout_s if arm.stream.enabled else None,
        ),
        safety=SafetyThresholds(
            stale_hold_s=max(safety.stale_hold_ticks * period, safety.stale_hold_s),
            stale_fault_s=safety.stale_fault_s,
            following_error=safety.following_error,
            following_error_per_velocity=safety.following_error_per_velocity,
            limit_tolerance=safety.limit_tolerance,
            stall=_stall_limits(arm),
            unfollowed=(
                (arm.tree.joint_names.index(arm.config.gripper.joint),)
                if arm.config.gripper is not None
                else ()
            ),
        ),
        transmission=arm.transmission,
        drivers=dict(arm.drivers),
        realtime_priority=arm.realtime_priority,
    )


def _stall_limits(arm: ArmSetup) -> StallLimits | None:
    """The joints' stall protection in q order (infinite effort: none); None when no joint has
    any."""
    joints = arm.config.joints
    stalls = [joints[name].stall if name in joints else None for name in arm.tree.joint_names]
    if not any(stalls):
        return None
    return StallLimits(
        effort=np.array([s.effort if s else np.inf for s in stalls]),
        time_s=np.array([s.time_s if s else np.inf for s in stalls]),
        velocity=np.array([s.velocity if s else 0.0 for s in stalls]),
    )


def build_hardware(setup: ControlSetup, clock: Clock = time.monotonic) -> ArmHardware:
    """Every configured driver (constructed, not opened) behind the arm's transmission."""
    drivers = {name: driver.build(clock) for name, driver in setup.drivers.items()}
    return ArmHardware(drivers, setup.transmission)


def build_loop(
    setup: ControlSetup,
    hardware: ArmHardware,
    schedule: Schedule,
    emit: Callable[[Event], None],
) -> ControlLoop:
    monitor = SafetyMonitor(setup.joint_names, setup.lower, setup.upper, setup.safety)
    return ControlLoop(
        setup.joint_names, hardware, monitor, setup.limits, setup.loop, schedule, emit
    )
