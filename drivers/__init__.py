"""Talking to motors: the `Driver` interface, the simulated driver, CAN and serial drivers, and
wire-level simulated devices for tests and demos. Imports nothing from `armd` or `kinematics`."""

from drivers.base import (
    CONFIG_DIR,
    Clock,
    DeviceCommand,
    DeviceFault,
    DeviceState,
    Driver,
    DriverParams,
    DriverStats,
    Lifecycle,
    LoopContext,
)
from drivers.errors import (
    DeviceFaultError,
    DriverConfigError,
    DriverError,
    DriverIOError,
    DriverOpenError,
    DriverStateError,
    DriverTimeoutError,
    UnknownDriverError,
    UnsupportedCommandError,
)
from drivers.registry import DRIVERS, load_driver_class

__all__ = [
    "CONFIG_DIR",
    "DRIVERS",
    "Clock",
    "DeviceCommand",
    "DeviceFault",
    "DeviceFaultError",
    "DeviceState",
    "Driver",
    "DriverConfigError",
    "DriverError",
    "DriverIOError",
    "DriverOpenError",
    "DriverParams",
    "DriverStateError",
    "DriverStats",
    "DriverTimeoutError",
    "Lifecycle",
    "LoopContext",
    "UnknownDriverError",
    "UnsupportedCommandError",
    "load_driver_class",
]
