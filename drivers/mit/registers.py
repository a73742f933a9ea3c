"""Damiao's register protocol, pure (no I/O); re-exported by `drivers.mit.protocol`.

A request ``[id_lo][id_hi][op][rid][value LE 4 bytes]`` goes to id 0x7FF with op 0x33 (read),
0x55 (write) or 0xAA (save to flash); the answer comes from the motor's master id with the same
layout (the value read, or the value written echoed). Registers 7-10, 13-16 and 35-36 are
uint32, the others float32 (``DM_CAN.py``'s ``is_in_ranges``; the same split in the PyPI package
``damiao-motor``'s ``REGISTER_TABLE``). Sources: Damiao's DM-J4310-2EC manual, ``DM_CAN.py``.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

__all__ = [
    "MAX_STD_ID",
    "REFRESH",
    "REGISTER_ID",
    "TIMEOUT_UNIT_S",
    "ControlMode",
    "Register",
    "RegisterFrame",
    "RegisterOp",
    "describe_mode",
    "make_refresh_request",
    "make_register_frame",
    "parse_register_frame",
]

MAX_STD_ID = 0x7FF
REGISTER_ID = 0x7FF  # Damiao: register requests go to this id
REFRESH = 0xCC  # Damiao: on REGISTER_ID, asks the motor for a feedback frame
TIMEOUT_UNIT_S = 50e-6  # the TIMEOUT register counts 50 µs units


class ControlMode(enum.IntEnum):
    """Damiao register 10, CTRL_MODE: a motor ignores the frames of the other modes silently."""

    MIT = 1
    POS_VEL = 2
    VEL = 3
    TORQUE_POS = 4


class Register(enum.IntEnum):
    """The Damiao registers armd uses (manual, parameter list)."""

    MST_ID = 7  # the id the motor answers from (uint32)
    ESC_ID = 8  # the id the motor listens to (uint32)
    TIMEOUT = 9  # CAN timeout, in 50 µs units; 0: off (uint32)
    CTRL_MODE = 10  # ControlMode (uint32)
    PMAX = 21  # position mapping range, rad (float32)
    VMAX = 22  # velocity mapping range, rad/s (float32)
    TMAX = 23  # torque mapping range, N·m (float32)


class RegisterOp(enum.IntEnum):
    READ = 0x33
    WRITE = 0x55
    SAVE = 0xAA


_UINT_REGISTERS = frozenset([*range(7, 11), *range(13, 17), 35, 36])


@dataclass(frozen=True, slots=True)
class RegisterFrame:
    """A Damiao register request or answer: the motor's (slave) id, the operation, the register
    and its 4 value bytes (little-endian uint32 or float32, see `value`)."""

    slave_id: int
    op: int
    rid: int
    raw: bytes

    @property
    def value(self) -> float:
        """The value as the register's type (uint32 registers as an exact int)."""
        if self.rid in _UINT_REGISTERS:
            return int(struct.unpack("<I", self.raw)[0])
        return float(struct.unpack("<f", self.raw)[0])


def make_register_frame(slave_id: int, op: RegisterOp, rid: int, value: float = 0) -> bytes:
    """The 8 data bytes of a register request (to `REGISTER_ID`) or of its answer (from the
    master id): ``[id_lo][id_hi][op][rid][value]``. Raises ValueError for an id or register out
    of range, or a value the register's type cannot hold."""
    if not 0 <= slave_id <= MAX_STD_ID:
        raise ValueError(f"Damiao slave id {slave_id} outside [0, 0x7FF]")
    if not 0 <= rid <= 0xFF:
        raise ValueError(f"Damiao register {rid} outside [0, 255]")
    if rid in _UINT_REGISTERS:
        if value != int(value) or not 0 <= value <= 0xFFFFFFFF:
            raise ValueError(f"Damiao register {rid}: {value} is not a uint32")
        raw = struct.pack("<I", int(value))
    else:
        raw = struct.pack("<f", value)
    return bytes([slave_id & 0xFF, slave_id >> 8, int(op), rid]) + raw


def parse_register_frame(data: bytes) -> RegisterFrame | None:
    """A register request or answer, or None when the payload is not one (byte 2 is not an
    operation, or the id's high byte exceeds 0x7FF's)."""
    if len(data) != 8 or data[2] not in _REGISTER_OPS or data[1] > 0x07:
        return None
    return RegisterFrame(data[0] | data[1] << 8, data[2], data[3], bytes(data[4:8]))


_REGISTER_OPS = frozenset(int(op) for op in RegisterOp)


def make_refresh_request(slave_id: int) -> bytes:
    """Damiao's request for a feedback frame, ``[id_lo][id_hi][0xCC][0 × 5]`` to `REGISTER_ID`
    (``DM_CAN.py``'s ``refresh_motor_status``; ``damiao-motor``'s ``request_motor_feedback``):
    reads a motor's state without commanding it."""
    return bytes([slave_id & 0xFF, slave_id >> 8, REFRESH, 0, 0, 0, 0, 0])


def describe_mode(mode: int) -> str:
    """The name of a CTRL_MODE value (``unknown (n)`` for another)."""
    try:
        return ControlMode(mode).name
    except ValueError:
        return f"unknown ({mode})"
