"""The MIT mapping ranges of each actuator model, chosen by ``model:`` per device.

A command or reply field is quantised over ``[-max, max]`` (kp over [0, 500] N·m/rad, kd over
[0, 5] N·m·s/rad on every model), so master and motor must use the same ranges: a wrong table
scales every position, velocity and torque silently. On Damiao motors the ranges are registers
(PMAX 21, VMAX 22, TMAX 23); the driver reads them at open and refuses a mismatch, so the table
below is checked against the device itself. CubeMars motors have fixed ranges per model.

Sources, and where they disagree:

- Damiao: ``Limit_Param`` of Damiao's official Python example ``DM_CAN.py`` (``DM_Motor_Type``
  order DM4310, DM4310_48V, DM4340, DM4340_48V, DM6006, DM8006, DM8009, DM10010L, DM10010,
  DMH3510, DMH6215, DMG6220), cross-checked against the PyPI package ``damiao-motor`` 1.0.6
  (``_MOTOR_LIMIT_PARAM``). They agree except **DM4340**: V ±8 rad/s in ``DM_CAN.py`` (24 V
  version; ±10 for DM4340_48V), ±10 in ``damiao-motor`` for both. The manufacturer's table is
  used (8); the motor's VMAX register settles it at open. **DM3507** is only in
  ``damiao-motor`` (P ±12.566 = 4π, V ±50, T ±5).
- CubeMars AK series: the MIT-mode range table of CubeMars's "AK Series Module Driver User
  Manual", as reproduced in ``TMotorCANControl`` (neurobionics, ``MIT_Params``); AK80-64
  (V ±8, T ±144) also as given in armd's brief. Not re-checked against the PDF here: override
  with ``v_max``/``t_max`` in the device params when the manual of your firmware says otherwise.
- ``MINI_CHEETAH``: the defaults of Ben Katz's mini-cheetah firmware (``CAN_com.h``:
  P ±12.5, V ±65, T ±18).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from drivers.mit.protocol import Ranges

__all__ = ["MODELS", "MotorModel", "Vendor", "lookup"]


class Vendor(enum.Enum):
    """Who made the actuator: decides the reply layout, the ids and the extra frames."""

    DAMIAO = "damiao"  # error nibble, two temperatures, registers on 0x7FF, clear-error frame
    CUBEMARS = "cubemars"  # id byte, one temperature, an error code in byte 7


@dataclass(frozen=True, slots=True)
class MotorModel:
    name: str
    vendor: Vendor
    ranges: Ranges


def _damiao(name: str, p: float, v: float, t: float) -> MotorModel:
    return MotorModel(name, Vendor.DAMIAO, Ranges(p, v, t))


def _cubemars(name: str, v: float, t: float) -> MotorModel:
    return MotorModel(name, Vendor.CUBEMARS, Ranges(12.5, v, t))


MODELS: dict[str, MotorModel] = {
    m.name: m
    for m in (
        _damiao("DM3507", 12.566, 50.0, 5.0),
        _damiao("DM4310", 12.5, 30.0, 10.0),
        _damiao("DM4310_48V", 12.5, 50.0, 10.0),
        _damiao("DM4340", 12.5, 8.0, 28.0),
        _damiao("DM4340_48V", 12.5, 10.0, 28.0),
        _damiao("DM6006", 12.5, 45.0, 20.0),
        _damiao("DM8006", 12.5, 45.0, 40.0),
        _damiao("DM8009", 12.5, 45.0, 54.0),
        _damiao("DM10010L", 12.5, 25.0, 200.0),
        _damiao("DM10010", 12.5, 20.0, 200.0),
        _damiao("DMH3510", 12.5, 280.0, 1.0),
        _damiao("DMH6215", 12.5, 45.0, 10.0),
        _damiao("DMG6220", 12.5, 45.0, 10.0),
        _cubemars("AK10-9", 50.0, 65.0),
        _cubemars("AK60-6", 50.0, 15.0),
        _cubemars("AK70-10", 50.0, 25.0),
        _cubemars("AK80-6", 76.0, 12.0),
        _cubemars("AK80-9", 50.0, 18.0),
        _cubemars("AK80-64", 8.0, 144.0),
        MotorModel("MINI_CHEETAH", Vendor.CUBEMARS, Ranges(12.5, 65.0, 18.0)),
    )
}


def lookup(name: str) -> MotorModel:
    """The model called `name` (exact spelling). Raises KeyError naming the known models."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown MIT actuator model {name!r}; known: {sorted(MODELS)}") from None
