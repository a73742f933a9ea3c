"""The "MIT mini cheetah" CAN codec of quasi-direct-drive actuators (Damiao DM-J series, CubeMars
AK series): pure frame builders and parsers, no I/O.

Sources: Ben Katz's mini-cheetah motor controller firmware (``motorcontrol``, ``CAN/CAN_com.cpp``
and ``math_ops.cpp``: the command and reply layouts and ``float_to_uint``/``uint_to_float``);
Damiao's DM-J4310-2EC manual and its official Python example ``DM_CAN.py`` (the error nibble,
the temperatures, the special frames, the register protocol on id 0x7FF); CubeMars's "AK Series
Module Driver User Manual" (chapter "MIT mode communication protocol").

Quantisation: ``u = (x - min) · (2ⁿ - 1) / (max - min)`` truncated toward zero after clamping
``x`` to ``[min, max]`` (the firmware casts a float to int); the inverse is ``x = u · (max - min)
/ (2ⁿ - 1) + min``. The firmware, Damiao's ``DM_CAN.py`` and the PyPI ``damiao-motor`` agree;
the third-party ``TMotorCANControl`` encodes with 2ⁿ / span (and decodes with 2ⁿ - 1), which the
firmware contradicts, so it is not followed. So an encoded value is at most one step *below* ``x``
(step = span / (2ⁿ - 1)) and 0 itself is sent as -step/2 on a symmetric range. The firmware
computes in float32, this module in float64: the two can differ by one step only when ``x`` sits
within float32 rounding (~1e-7 relative) of a step boundary.

Command frame (8 bytes, master → motor, to the motor's id)::

    [p15-8][p7-0][v11-4][v3-0|kp11-8][kp7-0][kd11-4][kd3-0|t11-8][t7-0]

Reply frame (8 bytes, motor → master)::

    Damiao:   [err<<4|id3-0][p15-8][p7-0][v11-4][v3-0|t11-8][t7-0][T_mos °C][T_rotor °C]
    CubeMars: [id][p15-8][p7-0][v11-4][v3-0|t11-8][t7-0][temperature °C][error code]
              (6 bytes, without the last two, from the mini-cheetah firmware and older CubeMars)

Special frames, to the motor's id: ``FF×7 FC`` enable (enter motor mode), ``FD`` disable,
``FE`` set the current position as zero, ``FB`` clear error (Damiao only).

Damiao's registers (on id 0x7FF) are in `drivers.mit.registers`, re-exported here.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from drivers.base import DeviceFault
from drivers.errors import DriverError
from drivers.mit.registers import (
    MAX_STD_ID,
    REFRESH,
    REGISTER_ID,
    TIMEOUT_UNIT_S,
    ControlMode,
    Register,
    RegisterFrame,
    RegisterOp,
    describe_mode,
    make_refresh_request,
    make_register_frame,
    parse_register_frame,
)

__all__ = [
    "CLEAR_ERROR",
    "DISABLE",
    "ENABLE",
    "KD_MAX",
    "KP_MAX",
    "MAX_STD_ID",
    "REFRESH",
    "REGISTER_ID",
    "SET_ZERO",
    "TIMEOUT_UNIT_S",
    "ControlMode",
    "CubeMarsError",
    "DamiaoState",
    "MalformedFrameError",
    "MitCommand",
    "MitReply",
    "Ranges",
    "Register",
    "RegisterFrame",
    "RegisterOp",
    "cubemars_fault",
    "damiao_fault",
    "decode_command",
    "decode_cubemars_reply",
    "decode_damiao_reply",
    "describe_mode",
    "encode_command",
    "encode_cubemars_reply",
    "encode_damiao_reply",
    "float_to_uint",
    "make_refresh_request",
    "make_register_frame",
    "parse_register_frame",
    "special_command",
    "uint_to_float",
]

KP_MAX = 500.0  # N·m/rad: the kp range is [0, 500] on every MIT actuator
KD_MAX = 5.0  # N·m·s/rad: the kd range is [0, 5]

_SPECIAL_PREFIX = b"\xff" * 7
ENABLE = _SPECIAL_PREFIX + b"\xfc"
DISABLE = _SPECIAL_PREFIX + b"\xfd"
SET_ZERO = _SPECIAL_PREFIX + b"\xfe"
CLEAR_ERROR = _SPECIAL_PREFIX + b"\xfb"  # Damiao only


class MalformedFrameError(DriverError):
    """A received frame does not match the layout it should have (length or value)."""


class DamiaoState(enum.IntEnum):
    """The high nibble of a Damiao reply's byte 0 (manual, "feedback frame", ERR)."""

    DISABLED = 0x0
    ENABLED = 0x1
    OVER_VOLTAGE = 0x8
    UNDER_VOLTAGE = 0x9
    OVER_CURRENT = 0xA
    MOS_OVER_TEMPERATURE = 0xB
    ROTOR_OVER_TEMPERATURE = 0xC
    LOST_COMMUNICATION = 0xD
    OVERLOAD = 0xE


class CubeMarsError(enum.IntEnum):
    """Byte 7 of a CubeMars MIT reply (AK manual, MIT mode feedback)."""

    NONE = 0
    MOTOR_OVER_TEMPERATURE = 1
    OVER_CURRENT = 2
    OVER_VOLTAGE = 3
    UNDER_VOLTAGE = 4
    ENCODER = 5
    PHASE_CURRENT_UNBALANCE = 6


_DAMIAO_FAULTS = {
    DamiaoState.OVER_VOLTAGE: "over-voltage",
    DamiaoState.UNDER_VOLTAGE: "under-voltage",
    DamiaoState.OVER_CURRENT: "over-current",
    DamiaoState.MOS_OVER_TEMPERATURE: "MOSFET over-temperature",
    DamiaoState.ROTOR_OVER_TEMPERATURE: "rotor over-temperature",
    DamiaoState.LOST_COMMUNICATION: "lost communication (CAN timeout)",
    DamiaoState.OVERLOAD: "overload",
}
_CUBEMARS_FAULTS = {
    CubeMarsError.MOTOR_OVER_TEMPERATURE: "motor over-temperature",
    CubeMarsError.OVER_CURRENT: "over-current",
    CubeMarsError.OVER_VOLTAGE: "over-voltage",
    CubeMarsError.UNDER_VOLTAGE: "under-voltage",
    CubeMarsError.ENCODER: "encoder fault",
    CubeMarsError.PHASE_CURRENT_UNBALANCE: "phase current unbalance",
}


@dataclass(frozen=True, slots=True)
class Ranges:
    """The symmetric mapping ranges of one actuator: position ±p_max rad, velocity ±v_max rad/s,
    torque ±t_max N·m; kp in [0, kp_max] N·m/rad, kd in [0, kd_max] N·m·s/rad."""

    p_max: float
    v_max: float
    t_max: float
    kp_max: float = KP_MAX
    kd_max: float = KD_MAX

    def __post_init__(self) -> None:
        for name in ("p_max", "v_max", "t_max", "kp_max", "kd_max"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name}: {value} must be finite and > 0")


@dataclass(frozen=True, slots=True)
class MitCommand:
    """An MIT command: the actuator applies ``τ = kp·(position - p) + kd·(velocity - v) +
    torque`` (rad, rad/s, N·m; kp N·m/rad, kd N·m·s/rad)."""

    position: float
    velocity: float
    kp: float
    kd: float
    torque: float


@dataclass(frozen=True, slots=True)
class MitReply:
    """A decoded reply: `motor_id` as the frame carries it (Damiao: its low 4 bits), position rad,
    velocity rad/s, torque N·m; `state` the Damiao state nibble or the CubeMars error code;
    temperatures in °C (CubeMars has one, reported as both)."""

    motor_id: int
    position: float
    velocity: float
    torque: float
    state: int
    mos_temperature_c: int
    rotor_temperature_c: int


# -- quantisation --------------------------------------------------------------------------------


def float_to_uint(x: float, x_min: float, x_max: float, bits: int) -> int:
    """``x`` clamped to [x_min, x_max], mapped to 0 .. 2^bits - 1 and truncated (as the firmware
    casts). Raises ValueError for NaN (the firmware would send garbage)."""
    if math.isnan(x):
        raise ValueError("cannot encode NaN")
    x = min(max(x, x_min), x_max)
    return int((x - x_min) * ((1 << bits) - 1) / (x_max - x_min))


def uint_to_float(u: int, x_min: float, x_max: float, bits: int) -> float:
    return u * (x_max - x_min) / ((1 << bits) - 1) + x_min


# -- command frames ------------------------------------------------------------------------------


def encode_command(command: MitCommand, ranges: Ranges) -> bytes:
    """The 8 data bytes of an MIT command; every field is clamped to its range.

    Raises ValueError for a NaN field.
    """
    r = ranges
    p = float_to_uint(command.position, -r.p_max, r.p_max, 16)
    v = float_to_uint(command.velocity, -r.v_max, r.v_max, 12)
    kp = float_to_uint(command.kp, 0.0, r.kp_max, 12)
    kd = float_to_uint(command.kd, 0.0, r.kd_max, 12)
    t = float_to_uint(command.torque, -r.t_max, r.t_max, 12)
    return bytes(
        [
            p >> 8,
            p & 0xFF,
            v >> 4,
            (v & 0xF) << 4 | kp >> 8,
            kp & 0xFF,
            kd >> 4,
            (kd & 0xF) << 4 | t >> 8,
            t & 0xFF,
        ]
    )


def decode_command(data: bytes, ranges: Ranges) -> MitCommand:
    """The inverse of `encode_command` (what the actuator does). Raises MalformedFrameError."""
    if len(data) != 8:
        raise MalformedFrameError(f"MIT command: {len(data)} data bytes, expected 8")
    r = ranges
    p = data[0] << 8 | data[1]
    v = data[2] << 4 | data[3] >> 4
    kp = (data[3] & 0xF) << 8 | data[4]
    kd = data[5] << 4 | data[6] >> 4
    t = (data[6] & 0xF) << 8 | data[7]
    return MitCommand(
        position=uint_to_float(p, -r.p_max, r.p_max, 16),
        velocity=uint_to_float(v, -r.v_max, r.v_max, 12),
        kp=uint_to_float(kp, 0.0, r.kp_max, 12),
        kd=uint_to_float(kd, 0.0, r.kd_max, 12),
        torque=uint_to_float(t, -r.t_max, r.t_max, 12),
    )


def special_command(data: bytes) -> int | None:
    """The last byte of a special frame (0xFB..0xFE), or None for any other payload."""
    if len(data) == 8 and data[:7] == _SPECIAL_PREFIX and 0xFB <= data[7] <= 0xFE:
        return data[7]
    return None


# -- reply frames --------------------------------------------------------------------------------


def _pack_reply(head: int, reply: MitReply, ranges: Ranges, tail: tuple[int, int]) -> bytes:
    r = ranges
    p = float_to_uint(reply.position, -r.p_max, r.p_max, 16)
    v = float_to_uint(reply.velocity, -r.v_max, r.v_max, 12)
    t = float_to_uint(reply.torque, -r.t_max, r.t_max, 12)
    t6, t7 = (max(0, min(255, round(x))) for x in tail)
    return bytes([head, p >> 8, p & 0xFF, v >> 4, (v & 0xF) << 4 | t >> 8, t & 0xFF, t6, t7])


def _unpack_reply(
    data: bytes, ranges: Ranges, what: str, lengths: tuple[int, ...] = (8,)
) -> tuple[float, float, float]:
    if len(data) not in lengths:
        expected = " or ".join(map(str, lengths))
        raise MalformedFrameError(f"{what} reply: {len(data)} data bytes, expected {expected}")
    r = ranges
    p = data[1] << 8 | data[2]
    v = data[3] << 4 | data[4] >> 4
    t = (data[4] & 0xF) << 8 | data[5]
    return (
        uint_to_float(p, -r.p_max, r.p_max, 16),
        uint_to_float(v, -r.v_max, r.v_max, 12),
        uint_to_float(t, -r.t_max, r.t_max, 12),
    )


def encode_damiao_reply(reply: MitReply, ranges: Ranges) -> bytes:
    """A Damiao feedback frame (what the motor sends). Raises ValueError for a NaN field."""
    head = (reply.state & 0xF) << 4 | (reply.motor_id & 0xF)
    temperatures = (reply.mos_temperature_c, reply.rotor_temperature_c)
    return _pack_reply(head, reply, ranges, temperatures)


def decode_damiao_reply(data: bytes, ranges: Ranges) -> MitReply:
    """A Damiao feedback frame. Raises MalformedFrameError for a wrong length, and for a
    register answer (byte 2 is 0x33/0x55/0xAA and the low byte of the id matches), which the
    caller must route first."""
    position, velocity, torque = _unpack_reply(data, ranges, "Damiao")
    return MitReply(
        motor_id=data[0] & 0xF,
        position=position,
        velocity=velocity,
        torque=torque,
        state=data[0] >> 4,
        mos_temperature_c=data[6],
        rotor_temperature_c=data[7],
    )


def encode_cubemars_reply(reply: MitReply, ranges: Ranges) -> bytes:
    """A CubeMars MIT reply (id, p, v, t, temperature, error code)."""
    tail = (reply.rotor_temperature_c, reply.state)
    return _pack_reply(reply.motor_id & 0xFF, reply, ranges, tail)


def decode_cubemars_reply(data: bytes, ranges: Ranges) -> MitReply:
    """A CubeMars MIT reply: 8 bytes, or the 6 of the original mini-cheetah firmware and older
    CubeMars firmware (no temperature, no error code: reported as 0). Raises MalformedFrameError
    for another length."""
    position, velocity, torque = _unpack_reply(data, ranges, "CubeMars", (8, 6))
    temperature, error = (data[6], data[7]) if len(data) == 8 else (0, 0)
    return MitReply(
        motor_id=data[0],
        position=position,
        velocity=velocity,
        torque=torque,
        state=error,
        mos_temperature_c=temperature,
        rotor_temperature_c=temperature,
    )


# -- faults --------------------------------------------------------------------------------------


def damiao_fault(state: int) -> DeviceFault | None:
    """The fault a Damiao state nibble reports, or None (disabled, enabled)."""
    if state in (DamiaoState.DISABLED, DamiaoState.ENABLED):
        return None
    try:
        text = _DAMIAO_FAULTS[DamiaoState(state)]
    except ValueError:
        text = "unknown error state"
    return DeviceFault(state, f"Damiao error 0x{state:X}: {text}")


def cubemars_fault(code: int) -> DeviceFault | None:
    """The fault a CubeMars error code reports, or None (0)."""
    if code == 0:
        return None
    try:
        text = _CUBEMARS_FAULTS[CubeMarsError(code)]
    except ValueError:
        text = "unknown error code"
    return DeviceFault(code, f"CubeMars error {code}: {text}")
