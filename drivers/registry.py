"""Driver registry: config names map to ``"module:Class"`` strings, imported lazily so that a
missing optional backend fails with a clear error only when it is asked for."""

from __future__ import annotations

import importlib

from drivers.base import Driver
from drivers.errors import UnknownDriverError

__all__ = ["DRIVERS", "load_driver_class"]

DRIVERS: dict[str, str] = {
    "sim": "drivers.sim.driver:SimDriver",
    "odrive": "drivers.odrive.driver:ODriveDriver",
    "dynamixel": "drivers.dynamixel.driver:DynamixelDriver",
    "feetech": "drivers.feetech.driver:FeetechDriver",
    "mujoco": "drivers.mujoco.driver:MujocoDriver",
    "mit": "drivers.mit.driver:MitDriver",
    "cia402": "drivers.cia402.driver:CiA402Driver",
}


def load_driver_class(name: str) -> type[Driver]:
    """The driver class registered as `name`. Raises `UnknownDriverError`."""
    try:
        target = DRIVERS[name]
    except KeyError:
        raise UnknownDriverError(
            f"unknown driver {name!r}; expected one of {sorted(DRIVERS)}"
        ) from None
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownDriverError(f"driver {name!r}: cannot import {module_name}: {exc}") from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Driver)):
        raise UnknownDriverError(f"driver {name!r}: {target} is not a Driver subclass")
    return cls
