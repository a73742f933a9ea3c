"""The STS3215 memory table (control table) as armd uses it, the models this package knows, and
the device units with their conversions to SI.

Sources, and where they disagree:

- Feetech's STS memory table ("FT-SMS-STS e-manual", `doc.feetech.cn`; English translations of it
  on wiki.aifitlab.com and wiki.juxitech.com) — the manufacturer, which decides.
- LeRobot, `src/lerobot/motors/feetech/tables.py` (huggingface/lerobot): every address and size
  used here agrees with it (ID 5, Baud_Rate 6, Return_Delay_Time 7, Min/Max_Position_Limit 9/11,
  Homing_Offset 31, Operating_Mode 33, Torque_Enable 40, Acceleration 41, Goal_Position 42,
  Goal_Time 44, Goal_Velocity 46, Torque_Limit 48, Lock 55, Present_Position 56,
  Present_Velocity 58, Present_Load 60, Present_Voltage 62, Present_Temperature 63, Status 65,
  Moving 66, Present_Current 69; the model number is the word at 3).
- Feetech's Python SDK `feetech-servo-sdk` 1.0.0 (`scservo_sdk`): `ping()` reads the model number
  as the word at address 3, as LeRobot does; its status error bits (ERRBIT_*).
- Feetech's C++ SCServo library, `SMS_STS.cpp` (read in Waveshare's fork for its ST servos):
  `readLoad` takes bit 10 as the direction, `readPosition`, `readSpeed` and `readCurrent` bit 15,
  `writePositionCorrection` (Homing_Offset) bit 11; Torque Enable = 128 calibrates the middle;
  Return Delay Time is 0..254 in 2 µs. Its baud-rate constants (SMS_STS_76800 = 5 …) agree with
  Feetech's table.

Disagreements:

- Baud-rate codes (6): Feetech's table gives 0..7 = 1 000 000, 500 000, 250 000, 128 000, 115 200,
  76 800, 57 600, 38 400; LeRobot's `STS_SMS_SERIES_BAUDRATE_TABLE` gives 5 = 57 600,
  6 = 38 400, 7 = 19 200 (no 76 800). `BAUD_RATE_CODES` follows Feetech; `LEROBOT_BAUD_RATE_CODES`
  keeps LeRobot's for reference. armd never writes the baud rate.
- Address 7: LeRobot and the older Feetech manuals name it Return Delay Time (2 µs units); the
  current Feetech STS table marks it "reserved". armd sets it to 0 (no delay) at open, which is
  harmless either way.
- Addresses 3-4: Feetech names them servo major/minor version; LeRobot and the SDK read the pair as
  one word, the model number (STS3215: 777 = 0x0309).
- Sign-magnitude items: LeRobot lists Homing_Offset (bit 11) and Goal/Present_Velocity (bit 15)
  only; Feetech's library also decodes Present_Load (bit 10), Present_Position and
  Present_Current (bit 15), and encodes Goal_Position with bit 15 (meaningful in multi-turn or
  step mode). `SIGN_BITS` follows Feetech: LeRobot would read a load of -300 as 1324.
- Lock (55): Feetech's STS manual (from memory of its Chinese original; not in the stored
  translations) gives 1 as "values written to EEPROM addresses are not kept after a power cycle"
  (they still take effect until then), where LeRobot and the libraries ("lockEEPROM") treat it as
  a write guard. Both readings agree on what armd does: EEPROM items are written with Lock = 0,
  then Lock is set back to 1. The simulation models the manual's reading.
- Power-on values of the protection items (Unloading_Condition 44, Protection_Time 200 × 10 ms,
  Overload_Torque 80 %, Protective_Torque 20 %, Max_Voltage_Limit 14.0 V) are the usual STS3215
  factory values as read from servos, not from a document: the simulation's defaults only.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from drivers.feetech.protocol import ByteOrder, decode_signed

__all__ = [
    "BAUD_RATE_CODES",
    "CENTER_COUNTS",
    "ITEMS",
    "LEROBOT_BAUD_RATE_CODES",
    "MODELS",
    "SCS_ITEMS",
    "SIGN_BITS",
    "STATUS_BLOCK_ADDRESS",
    "STATUS_BLOCK_LENGTH",
    "Addr",
    "Item",
    "ModelSpec",
    "StatusBlock",
    "counts_to_rad",
    "decode_status_block",
    "load_fraction",
    "rad_s_to_steps",
    "rad_to_counts",
    "steps_to_rad_s",
    "torque_limit_units",
]


class Addr(enum.IntEnum):
    """STS3215 memory-table addresses (STS/SMS series)."""

    MODEL_NUMBER = 3  # 2, R (servo major/minor version in Feetech's table)
    ID = 5  # 1, EEPROM
    BAUD_RATE = 6  # 1, EEPROM
    RETURN_DELAY_TIME = 7  # 1, EEPROM, 2 µs
    RESPONSE_STATUS_LEVEL = 8  # 1, EEPROM; 0: only Read and Ping answered
    MIN_POSITION_LIMIT = 9  # 2, EEPROM, counts
    MAX_POSITION_LIMIT = 11  # 2, EEPROM, counts
    MAX_TEMPERATURE_LIMIT = 13  # 1, EEPROM, °C
    MAX_VOLTAGE_LIMIT = 14  # 1, EEPROM, 0.1 V
    MIN_VOLTAGE_LIMIT = 15  # 1, EEPROM, 0.1 V
    MAX_TORQUE_LIMIT = 16  # 2, EEPROM, 0.1 % (Torque_Limit's power-on value)
    UNLOADING_CONDITION = 19  # 1, EEPROM, status bits that switch torque off
    HOMING_OFFSET = 31  # 2, EEPROM, counts, sign bit 11
    OPERATING_MODE = 33  # 1, EEPROM; 0 position
    PROTECTIVE_TORQUE = 34  # 1, EEPROM, % (output after an overload trip)
    PROTECTION_TIME = 35  # 1, EEPROM, 10 ms
    OVERLOAD_TORQUE = 36  # 1, EEPROM, %
    TORQUE_ENABLE = 40  # 1
    ACCELERATION = 41  # 1, 100 steps/s²
    GOAL_POSITION = 42  # 2, counts, sign bit 15
    GOAL_TIME = 44  # 2, ms
    GOAL_VELOCITY = 46  # 2, steps/s, sign bit 15
    TORQUE_LIMIT = 48  # 2, 0.1 % of stall torque
    LOCK = 55  # 1
    PRESENT_POSITION = 56  # 2, R, counts, sign bit 15
    PRESENT_VELOCITY = 58  # 2, R, steps/s, sign bit 15
    PRESENT_LOAD = 60  # 2, R, 0.1 %, sign bit 10
    PRESENT_VOLTAGE = 62  # 1, R, 0.1 V
    PRESENT_TEMPERATURE = 63  # 1, R, °C
    STATUS = 65  # 1, R, the error bits (`protocol.ErrorBit`)
    MOVING = 66  # 1, R
    PRESENT_CURRENT = 69  # 2, R, 6.5 mA


@dataclass(frozen=True, slots=True)
class Item:
    """One memory-table item: size in bytes, whether it lives in EEPROM, whether it is writable,
    and its power-on (factory) value on an STS3215."""

    address: int
    size: int
    eeprom: bool
    writable: bool
    default: int


def _item(address: int, size: int, default: int = 0, *, eeprom: bool, writable: bool) -> Item:
    return Item(address, size, eeprom, writable, default)


ITEMS: Mapping[int, Item] = MappingProxyType({
    0: _item(0, 1, 3, eeprom=True, writable=False),  # firmware major version
    1: _item(1, 1, 10, eeprom=True, writable=False),  # firmware minor version
    Addr.MODEL_NUMBER: _item(3, 2, 777, eeprom=True, writable=False),
    Addr.ID: _item(5, 1, 1, eeprom=True, writable=True),
    Addr.BAUD_RATE: _item(6, 1, 0, eeprom=True, writable=True),
    Addr.RETURN_DELAY_TIME: _item(7, 1, 250, eeprom=True, writable=True),
    Addr.RESPONSE_STATUS_LEVEL: _item(8, 1, 1, eeprom=True, writable=True),
    Addr.MIN_POSITION_LIMIT: _item(9, 2, 0, eeprom=True, writable=True),
    Addr.MAX_POSITION_LIMIT: _item(11, 2, 4095, eeprom=True, writable=True),
    Addr.MAX_TEMPERATURE_LIMIT: _item(13, 1, 70, eeprom=True, writable=True),
    Addr.MAX_VOLTAGE_LIMIT: _item(14, 1, 140, eeprom=True, writable=True),
    Addr.MIN_VOLTAGE_LIMIT: _item(15, 1, 40, eeprom=True, writable=True),
    Addr.MAX_TORQUE_LIMIT: _item(16, 2, 1000, eeprom=True, writable=True),
    Addr.UNLOADING_CONDITION: _item(19, 1, 44, eeprom=True, writable=True),
    Addr.HOMING_OFFSET: _item(31, 2, 0, eeprom=True, writable=True),
    Addr.OPERATING_MODE: _item(33, 1, 0, eeprom=True, writable=True),
    Addr.PROTECTIVE_TORQUE: _item(34, 1, 20, eeprom=True, writable=True),
    Addr.PROTECTION_TIME: _item(35, 1, 200, eeprom=True, writable=True),
    Addr.OVERLOAD_TORQUE: _item(36, 1, 80, eeprom=True, writable=True),
    Addr.TORQUE_ENABLE: _item(40, 1, 0, eeprom=False, writable=True),
    Addr.ACCELERATION: _item(41, 1, 0, eeprom=False, writable=True),
    Addr.GOAL_POSITION: _item(42, 2, 0, eeprom=False, writable=True),
    Addr.GOAL_TIME: _item(44, 2, 0, eeprom=False, writable=True),
    Addr.GOAL_VELOCITY: _item(46, 2, 0, eeprom=False, writable=True),
    Addr.TORQUE_LIMIT: _item(48, 2, 1000, eeprom=False, writable=True),
    Addr.LOCK: _item(55, 1, 1, eeprom=False, writable=True),
    Addr.PRESENT_POSITION: _item(56, 2, eeprom=False, writable=False),
    Addr.PRESENT_VELOCITY: _item(58, 2, eeprom=False, writable=False),
    Addr.PRESENT_LOAD: _item(60, 2, eeprom=False, writable=False),
    Addr.PRESENT_VOLTAGE: _item(62, 1, 120, eeprom=False, writable=False),
    Addr.PRESENT_TEMPERATURE: _item(63, 1, 25, eeprom=False, writable=False),
    64: _item(64, 1, eeprom=False, writable=False),  # asynchronous (Reg Write) flag
    Addr.STATUS: _item(65, 1, eeprom=False, writable=False),
    Addr.MOVING: _item(66, 1, eeprom=False, writable=False),
    Addr.PRESENT_CURRENT: _item(69, 2, eeprom=False, writable=False),
})  # fmt: skip
"""The items a simulated STS3215 implements, by address."""

SIGN_BITS: Mapping[int, int] = MappingProxyType({
    Addr.HOMING_OFFSET: 11,
    Addr.GOAL_POSITION: 15,
    Addr.GOAL_VELOCITY: 15,
    Addr.PRESENT_POSITION: 15,
    Addr.PRESENT_VELOCITY: 15,
    Addr.PRESENT_LOAD: 10,
    Addr.PRESENT_CURRENT: 15,
})  # fmt: skip
"""The direction bit of each sign-magnitude item (see the module docstring)."""

BAUD_RATE_CODES: Mapping[int, int] = MappingProxyType({
    0: 1_000_000, 1: 500_000, 2: 250_000, 3: 128_000, 4: 115_200, 5: 76_800, 6: 57_600, 7: 38_400,
})  # fmt: skip
"""Baud Rate (6) codes, from Feetech's STS memory table."""

LEROBOT_BAUD_RATE_CODES: Mapping[int, int] = MappingProxyType({
    0: 1_000_000, 1: 500_000, 2: 250_000, 3: 128_000, 4: 115_200, 5: 57_600, 6: 38_400, 7: 19_200,
})  # fmt: skip
"""LeRobot's reading of the same codes (disagrees from 5 on; not used)."""


SCS_ITEMS: Mapping[int, Item] = MappingProxyType({
    0: _item(0, 1, 3, eeprom=True, writable=False),  # firmware major version
    1: _item(1, 1, 0, eeprom=True, writable=False),  # firmware minor version
    Addr.MODEL_NUMBER: _item(3, 2, 1284, eeprom=True, writable=False),
    Addr.ID: _item(5, 1, 1, eeprom=True, writable=True),
    Addr.BAUD_RATE: _item(6, 1, 0, eeprom=True, writable=True),
    Addr.RETURN_DELAY_TIME: _item(7, 1, 0, eeprom=True, writable=True),
    Addr.RESPONSE_STATUS_LEVEL: _item(8, 1, 1, eeprom=True, writable=True),
    Addr.MIN_POSITION_LIMIT: _item(9, 2, 0, eeprom=True, writable=True),
    Addr.MAX_POSITION_LIMIT: _item(11, 2, 1023, eeprom=True, writable=True),
    Addr.MAX_TEMPERATURE_LIMIT: _item(13, 1, 70, eeprom=True, writable=True),
    Addr.MAX_VOLTAGE_LIMIT: _item(14, 1, 80, eeprom=True, writable=True),
    Addr.MIN_VOLTAGE_LIMIT: _item(15, 1, 40, eeprom=True, writable=True),
    Addr.MAX_TORQUE_LIMIT: _item(16, 2, 1000, eeprom=True, writable=True),
    Addr.UNLOADING_CONDITION: _item(19, 1, 37, eeprom=True, writable=True),
    37: _item(37, 1, 20, eeprom=True, writable=True),  # protective torque, %
    38: _item(38, 1, 200, eeprom=True, writable=True),  # protection time, 10 ms
    Addr.TORQUE_ENABLE: _item(40, 1, 0, eeprom=False, writable=True),
    Addr.ACCELERATION: _item(41, 1, 0, eeprom=False, writable=True),
    Addr.GOAL_POSITION: _item(42, 2, 0, eeprom=False, writable=True),
    Addr.GOAL_TIME: _item(44, 2, 0, eeprom=False, writable=True),
    Addr.GOAL_VELOCITY: _item(46, 2, 0, eeprom=False, writable=True),
    48: _item(48, 1, 1, eeprom=False, writable=True),  # Lock
    Addr.PRESENT_POSITION: _item(56, 2, eeprom=False, writable=False),
    Addr.PRESENT_VELOCITY: _item(58, 2, eeprom=False, writable=False),
    Addr.PRESENT_LOAD: _item(60, 2, eeprom=False, writable=False),
    Addr.PRESENT_VOLTAGE: _item(62, 1, 60, eeprom=False, writable=False),
    Addr.PRESENT_TEMPERATURE: _item(63, 1, 25, eeprom=False, writable=False),
    64: _item(64, 1, eeprom=False, writable=False),  # sync write flag
    Addr.STATUS: _item(65, 1, eeprom=False, writable=False),
    Addr.MOVING: _item(66, 1, eeprom=False, writable=False),
})  # fmt: skip
"""The SCS series (SCS0009) items, from LeRobot's SCS_SERIES_CONTROL_TABLE and Feetech's SCSCL
table: words big-endian, 1024 counts per turn, Lock at 48, no Torque_Limit, Homing_Offset,
Operating_Mode or Present_Current. Its sign bits are assumed to be the STS ones (LeRobot lists
none for SCS; not verified against a device)."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What the driver and the simulation need to know of a servo model."""

    name: str
    model_number: int
    counts_per_rev: int
    byteorder: ByteOrder
    sync_read: bool
    items: Mapping[int, Item]
    lock_address: int
    torque_limit_address: int | None
    operating_mode_address: int | None
    homing_offset_address: int | None
    protection_time_address: int
    overload_torque_address: int | None  # None: a fixed 80 % (the SCS has no such item)
    present_current_address: int | None


def _sts(name: str, model_number: int) -> ModelSpec:
    return ModelSpec(
        name, model_number, 4096, "little", True, ITEMS, Addr.LOCK, Addr.TORQUE_LIMIT,
        Addr.OPERATING_MODE, Addr.HOMING_OFFSET, Addr.PROTECTION_TIME, Addr.OVERLOAD_TORQUE,
        Addr.PRESENT_CURRENT,
    )  # fmt: skip


MODELS: Mapping[str, ModelSpec] = MappingProxyType({
    "sts3215": _sts("sts3215", 777),
    "sts3250": _sts("sts3250", 2825),
    "scs0009": ModelSpec(
        "scs0009", 1284, 1024, "big", False, SCS_ITEMS, 48, None, None, None, 38, None, None
    ),
})  # fmt: skip
"""Model numbers from LeRobot's MODEL_NUMBER_TABLE."""

CENTER_COUNTS = 2048  # position 0 rad (the middle of the STS3215's single turn)


# -- the status block: read from every servo every cycle --------------------------------------

STATUS_BLOCK_ADDRESS = Addr.PRESENT_POSITION
STATUS_BLOCK_LENGTH = Addr.STATUS + 1 - Addr.PRESENT_POSITION  # 56..65: 10 bytes


@dataclass(frozen=True, slots=True)
class StatusBlock:
    """One servo's feedback in device units (signed where the item is sign-magnitude)."""

    position: int  # counts
    velocity: int  # steps/s
    load: int  # 0.1 % of stall torque
    voltage: int  # 0.1 V
    temperature: int  # °C
    status: int  # error bits


def decode_status_block(data: bytes, byteorder: ByteOrder = "little") -> StatusBlock:
    """Decode the bytes of addresses 56..65. Raises ValueError."""
    if len(data) != STATUS_BLOCK_LENGTH:
        raise ValueError(f"status block has {len(data)} bytes, expected {STATUS_BLOCK_LENGTH}")

    def word(address: int) -> int:
        offset = address - STATUS_BLOCK_ADDRESS
        raw = int.from_bytes(data[offset : offset + 2], byteorder)
        return decode_signed(raw, SIGN_BITS[address])

    return StatusBlock(
        position=word(Addr.PRESENT_POSITION),
        velocity=word(Addr.PRESENT_VELOCITY),
        load=word(Addr.PRESENT_LOAD),
        voltage=data[Addr.PRESENT_VOLTAGE - STATUS_BLOCK_ADDRESS],
        temperature=data[Addr.PRESENT_TEMPERATURE - STATUS_BLOCK_ADDRESS],
        status=data[Addr.STATUS - STATUS_BLOCK_ADDRESS],
    )


# -- units ------------------------------------------------------------------------------------


def counts_to_rad(counts: int, counts_per_rev: int = 4096) -> float:
    """Position counts to rad, 0 rad at the middle of the turn (2048 of 4096 counts)."""
    return (counts - counts_per_rev // 2) * 2.0 * math.pi / counts_per_rev


def rad_to_counts(rad: float, counts_per_rev: int = 4096) -> int:
    """rad to the nearest position count (the inverse of `counts_to_rad`)."""
    return round(rad * counts_per_rev / (2.0 * math.pi)) + counts_per_rev // 2


def steps_to_rad_s(steps_s: int, counts_per_rev: int = 4096) -> float:
    """Velocity in steps (counts) per second to rad/s."""
    return steps_s * 2.0 * math.pi / counts_per_rev


def rad_s_to_steps(rad_s: float, counts_per_rev: int = 4096) -> int:
    return round(rad_s * counts_per_rev / (2.0 * math.pi))


def load_fraction(load: int) -> float:
    """Present Load (0.1 % of stall torque, signed) as a fraction of the stall torque."""
    return load / 1000.0


def torque_limit_units(fraction: float) -> int:
    """Torque Limit (0.1 % of stall torque, 0..1000) for a fraction 0..1. Raises ValueError."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"torque limit {fraction} outside [0, 1]")
    return round(fraction * 1000.0)
