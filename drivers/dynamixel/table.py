"""The X-series (and MX 2.0) control table as armd uses it: item addresses, the status block read
every cycle through Indirect Data, the model numbers that share this layout, and the device units
of the items with their conversions to SI.

Source: ROBOTIS e-Manual, control tables of the XM430-W350 and its X-series siblings. Device units
(counts, 0.229 rpm, 20 ms, 2 µs) appear only here and in `drivers.dynamixel.protocol`, which
re-exports these names.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "BAUD_RATES",
    "COUNTS_PER_REV",
    "CURRENT_UNITS_A",
    "EXTENDED_POSITION_LIMIT",
    "KNOWN_MODELS",
    "STATUS_BLOCK_LENGTH",
    "STATUS_BLOCK_SOURCES",
    "WATCHDOG_ERROR",
    "Addr",
    "OperatingMode",
    "StatusBlock",
    "baud_rate_index",
    "counts_to_rad",
    "decode_status_block",
    "indirect_data_address",
    "make_indirect_mapping",
    "rad_s_to_velocity",
    "rad_to_counts",
    "return_delay_s",
    "return_delay_units",
    "velocity_to_rad_s",
    "watchdog_s",
    "watchdog_units",
]

WATCHDOG_ERROR = -1  # Bus Watchdog (98) reads -1 after it expired
EXTENDED_POSITION_LIMIT = 1_048_575  # Goal Position range in extended position mode, ± counts


class OperatingMode(enum.IntEnum):
    CURRENT = 0
    VELOCITY = 1
    POSITION = 3
    EXTENDED_POSITION = 4
    CURRENT_BASED_POSITION = 5
    PWM = 16


class Addr(enum.IntEnum):
    """X-series (and MX 2.0) control-table addresses; sizes in bytes in the comments."""

    MODEL_NUMBER = 0  # 2, R
    FIRMWARE_VERSION = 6  # 1, R
    ID = 7  # 1, EEPROM
    BAUD_RATE = 8  # 1, EEPROM
    RETURN_DELAY_TIME = 9  # 1, EEPROM, 2 µs
    OPERATING_MODE = 11  # 1, EEPROM
    CURRENT_LIMIT = 38  # 2, EEPROM, current units (`CURRENT_UNITS_A`)
    MAX_POSITION_LIMIT = 48  # 4, EEPROM, counts
    MIN_POSITION_LIMIT = 52  # 4, EEPROM, counts
    TORQUE_ENABLE = 64  # 1
    STATUS_RETURN_LEVEL = 68  # 1
    REGISTERED_INSTRUCTION = 69  # 1, R
    HARDWARE_ERROR_STATUS = 70  # 1, R
    BUS_WATCHDOG = 98  # 1, signed, 20 ms
    GOAL_CURRENT = 102  # 2, signed current units; the current cap in current-based position mode
    GOAL_POSITION = 116  # 4, signed counts
    MOVING = 122  # 1, R
    PRESENT_CURRENT = 126  # 2, R, signed current units (Present Load, 0.1 %, on the XL/XC/2XL)
    PRESENT_VELOCITY = 128  # 4, R, signed 0.229 rpm
    PRESENT_POSITION = 132  # 4, R, signed counts
    INDIRECT_ADDRESS_1 = 168  # 2 each, 28 of them
    INDIRECT_DATA_1 = 224  # 1 each, 28 of them
    INDIRECT_ADDRESS_29 = 578  # 2 each, 28 of them (Protocol 2.0 only)
    INDIRECT_DATA_29 = 634  # 1 each, 28 of them (Protocol 2.0 only)


KNOWN_MODELS: Mapping[int, str] = MappingProxyType({
    30: "MX-28(2.0)", 311: "MX-64(2.0)", 321: "MX-106(2.0)", 1000: "XH430-W350",
    1001: "XD430-T350", 1010: "XH430-W210", 1011: "XD430-T210", 1020: "XM430-W350",
    1030: "XM430-W210", 1040: "XH430-V350", 1050: "XH430-V210", 1060: "XL430-W250",
    1070: "XC430-W150", 1080: "XC430-W240", 1090: "2XL430-W250", 1100: "XH540-W270",
    1101: "XD540-T270", 1110: "XH540-W150", 1111: "XD540-T150", 1120: "XM540-W270",
    1130: "XM540-W150", 1140: "XH540-V270", 1150: "XH540-V150", 1160: "2XC430-W250",
    1170: "XW540-T260", 1180: "XW540-T140", 1190: "XL330-M077", 1200: "XL330-M288",
    1210: "XC330-T181", 1220: "XC330-T288", 1230: "XC330-M181", 1240: "XC330-M288",
    1270: "XW430-T333", 1280: "XW430-T200", 1310: "XW540-H260",
})  # fmt: skip
"""Model numbers whose control table has the X-series addresses this driver uses."""

CURRENT_UNITS_A: Mapping[int, float] = MappingProxyType({
    1020: 0.00269, 1030: 0.00269,  # XM430-W350/W210
    1000: 0.00134, 1010: 0.00134, 1001: 0.00134, 1011: 0.00134,  # XH430-W, XD430-T
    1040: 0.00269, 1050: 0.00269,  # XH430-V350/V210
    1100: 0.00269, 1110: 0.00269, 1101: 0.00269, 1111: 0.00269,  # XH540-W, XD540-T
    1120: 0.00269, 1130: 0.00269, 1140: 0.00269, 1150: 0.00269,  # XM540-W, XH540-V
    311: 0.00336, 321: 0.00336,  # MX-64(2.0), MX-106(2.0)
})  # fmt: skip
"""A (per unit) of Current Limit (38), Goal Current (102) and Present Current (126), for the
models that sense current (e-Manual control tables); the others (XL430, XC430, 2XL430, XL330,
MX-28) have no current-based position mode and report Present Load instead."""


# -- the status block: what armd reads from each device every cycle ------------------------------


STATUS_BLOCK_SOURCES: tuple[int, ...] = (
    Addr.TORQUE_ENABLE,
    Addr.HARDWARE_ERROR_STATUS,
    Addr.BUS_WATCHDOG,
    *range(Addr.PRESENT_VELOCITY, Addr.PRESENT_VELOCITY + 4),
    *range(Addr.PRESENT_POSITION, Addr.PRESENT_POSITION + 4),
    *range(Addr.PRESENT_CURRENT, Addr.PRESENT_CURRENT + 2),
)
"""The control-table bytes mapped, in order, onto consecutive Indirect Data items so that one Sync
Read returns torque state, hardware error, bus watchdog, present velocity, present position and
present current."""

STATUS_BLOCK_LENGTH = len(STATUS_BLOCK_SOURCES)


@dataclass(frozen=True, slots=True)
class StatusBlock:
    """One device's status block in device units."""

    torque_enabled: bool
    hardware_error: int
    bus_watchdog: int  # 20 ms units; -1 after expiry
    velocity: int  # 0.229 rpm
    position: int  # counts
    current: int = 0  # current units (`CURRENT_UNITS_A`), or Present Load on the XL/XC


def decode_status_block(data: bytes) -> StatusBlock:
    """Decode the `STATUS_BLOCK_LENGTH` bytes of a status block. Raises ValueError."""
    if len(data) != STATUS_BLOCK_LENGTH:
        raise ValueError(f"status block has {len(data)} bytes, expected {STATUS_BLOCK_LENGTH}")
    return StatusBlock(
        torque_enabled=data[0] == 1,
        hardware_error=data[1],
        bus_watchdog=int.from_bytes(data[2:3], "little", signed=True),
        velocity=int.from_bytes(data[3:7], "little", signed=True),
        position=int.from_bytes(data[7:11], "little", signed=True),
        current=int.from_bytes(data[11:13], "little", signed=True),
    )


def indirect_data_address(index: int) -> int:
    """Address of Indirect Data `index` (1-based, 1..28)."""
    return Addr.INDIRECT_DATA_1 + index - 1


def make_indirect_mapping(
    index: int, sources: Iterable[int] = STATUS_BLOCK_SOURCES
) -> tuple[int, bytes]:
    """Where and what to write so that Indirect Data `index`, `index + 1`, … mirror `sources`:
    the address of Indirect Address `index` and 2 bytes per mapped address."""
    return Addr.INDIRECT_ADDRESS_1 + 2 * (index - 1), b"".join(
        a.to_bytes(2, "little") for a in sources
    )


# -- units ------------------------------------------------------------------------------------


COUNTS_PER_REV = 4096
_RAD_PER_COUNT = 2.0 * math.pi / COUNTS_PER_REV
_RAD_S_PER_VELOCITY_UNIT = 0.229 * 2.0 * math.pi / 60.0
_WATCHDOG_UNIT_S = 0.020
_RETURN_DELAY_UNIT_S = 2e-6


def counts_to_rad(counts: int) -> float:
    """Position counts (4096 per revolution) to rad."""
    return counts * _RAD_PER_COUNT


def rad_to_counts(rad: float) -> int:
    """rad to the nearest position count."""
    return round(rad / _RAD_PER_COUNT)


def velocity_to_rad_s(units: int) -> float:
    """Present Velocity (0.229 rpm units) to rad/s."""
    return units * _RAD_S_PER_VELOCITY_UNIT


def rad_s_to_velocity(rad_s: float) -> int:
    return round(rad_s / _RAD_S_PER_VELOCITY_UNIT)


def watchdog_units(seconds: float) -> int:
    """Bus Watchdog value (20 ms units, 1..127) for `seconds`. Raises ValueError."""
    units = round(seconds / _WATCHDOG_UNIT_S)
    if not 1 <= units <= 127:
        raise ValueError(f"bus watchdog {seconds} s outside [0.02, 2.54] s")
    return units


def watchdog_s(units: int) -> float:
    return units * _WATCHDOG_UNIT_S


def return_delay_s(units: int) -> float:
    """Return Delay Time (9), in 2 µs units, to seconds."""
    return units * _RETURN_DELAY_UNIT_S


BAUD_RATES: Mapping[int, int] = MappingProxyType({
    0: 9600, 1: 57_600, 2: 115_200, 3: 1_000_000, 4: 2_000_000, 5: 3_000_000, 6: 4_000_000,
    7: 4_500_000,
})  # fmt: skip
"""Baud Rate (8) values of the X series and the rates they select, bps."""


def baud_rate_index(baudrate: int) -> int:
    """The Baud Rate (8) value selecting `baudrate`. Raises ValueError for a rate the X series
    does not offer."""
    for index, rate in BAUD_RATES.items():
        if rate == baudrate:
            return index
    raise ValueError(
        f"baud rate {baudrate} is not an X-series rate ({sorted(BAUD_RATES.values())})"
    )


def return_delay_units(seconds: float) -> int:
    """The nearest Return Delay Time (9) value, in 2 µs units, for `seconds`."""
    return round(seconds / _RETURN_DELAY_UNIT_S)
