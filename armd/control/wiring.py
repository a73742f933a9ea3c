"""Building the control side from a validated config, in one place.

The daemon loads and validates the config (`armd.config.load.load_config`) and derives the
`ControlSetup` (`armd.config.control_setup`): everything the control process needs, typed and
validated, and nothing that needs the kinematics (no model, no numba): the control process
imports neither. It is sent over the control link as the process's first message, never parsed
again.
`build_hardware` and `build_loop` build the drivers' hardware and the loop from it: in the control
process, and in tests that run the loop in-process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from armd.control.hardware import ArmHardware
from armd.control.loop import ControlLoop, LoopSettings
from armd.control.safety import SafetyMonitor, SafetyThresholds
from armd.control.timing import Schedule
from armd.control.transmission import ArmTransmission
from armd.link.protocol import Event
from armd.motion.trajectory import MotionLimits
from drivers import Clock, Driver, DriverParams

__all__ = ["ControlSetup", "DriverSetup", "build_hardware", "build_loop"]

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
