"""ODrive "CAN Simple" codec: frame ids, enums, pure frame builders and parsers (no I/O).

Spec followed: ODrive firmware **v0.6** CAN Simple protocol (ODrive Pro / S1 / Micro), as published
in the ODrive documentation, "CAN Protocol" (https://docs.odriverobotics.com/v/latest/manual/
can-protocol.html) and its machine-readable DBC file (``odrive-cansimple-0.6.x.dbc``); byte layouts
cross-checked against the DBC-generated ``src/can_simple_messages.hpp`` of the official
odriverobotics/ODriveArduino library. Axis error bits: ``ODrive.Error`` in the v0.6 API reference.

Framing: 11-bit standard ids, ``arbitration_id = node_id << 5 | cmd_id`` (node ids 0..63), all
payloads little-endian. Messages the ODrive sends (Heartbeat, Get_Encoder_Estimates, Get_Error,
Get_Version) are either *cyclic* (rates set by ``<axis>.config.can.*_msg_rate_ms``; by default the
heartbeat every 100 ms and the encoder estimates every 10 ms) or answered on request, by sending
an RTR frame with the same id (`make_request`).

Firmware 0.5.x (ODrive v3.x) shares the ids used here but not the heartbeat's upper bytes, the
meaning of the error bits, nor Get_Error; this module decodes v0.6 only.

Device units (turns, turns/s, Nm) live in this codec (here and in `drivers.odrive.feedback`) and
nowhere else; `drivers.odrive.driver` converts to SI.
The enumerations (command ids, states, modes, error bits) live in `drivers.odrive.enums`, the
ids and length checks in `drivers.odrive.framing`, and what the ODrive sends (heartbeat, encoder
estimates, errors, version) in `drivers.odrive.feedback`; all are re-exported here, which holds
the commands the master sends.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from drivers.can_bus.frame import Frame
from drivers.odrive.enums import (
    AxisError,
    AxisState,
    Command,
    ControlMode,
    InputMode,
    ProcedureResult,
    describe_axis_error,
)
from drivers.odrive.feedback import (
    EncoderEstimates,
    ErrorStatus,
    Heartbeat,
    Version,
    make_encoder_estimates,
    make_error_status,
    make_heartbeat,
    make_version,
    parse_encoder_estimates,
    parse_error_status,
    parse_heartbeat,
    parse_version,
)
from drivers.odrive.framing import (
    MAX_NODE_ID,
    MalformedFrameError,
    arbitration_id,
    check_length,
    split_id,
)

__all__ = [
    "DEFAULT_TORQUE_FF_SCALE",
    "DEFAULT_VEL_FF_SCALE",
    "MAX_NODE_ID",
    "AxisError",
    "AxisState",
    "Command",
    "ControlMode",
    "EncoderEstimates",
    "ErrorStatus",
    "Frame",
    "Heartbeat",
    "InputMode",
    "InputPos",
    "MalformedFrameError",
    "ProcedureResult",
    "Version",
    "arbitration_id",
    "describe_axis_error",
    "make_clear_errors",
    "make_encoder_estimates",
    "make_error_status",
    "make_estop",
    "make_heartbeat",
    "make_request",
    "make_set_absolute_position",
    "make_set_axis_state",
    "make_set_controller_mode",
    "make_set_input_pos",
    "make_set_input_vel",
    "make_set_limits",
    "make_version",
    "parse_clear_errors",
    "parse_encoder_estimates",
    "parse_error_status",
    "parse_heartbeat",
    "parse_set_absolute_position",
    "parse_set_axis_state",
    "parse_set_controller_mode",
    "parse_set_input_pos",
    "parse_set_input_vel",
    "parse_set_limits",
    "parse_version",
    "split_id",
]

DEFAULT_VEL_FF_SCALE = 0.001  # turns/s per LSB of Set_Input_Pos.Vel_FF
DEFAULT_TORQUE_FF_SCALE = 0.001  # Nm per LSB of Set_Input_Pos.Torque_FF
_INT16_MIN, _INT16_MAX = -(2**15), 2**15 - 1


@dataclass(frozen=True, slots=True)
class InputPos:
    """Set_Input_Pos (0x00C): position in turns, feed-forwards in turns/s and Nm."""

    position_turns: float
    vel_ff_turns_s: float
    torque_ff_nm: float


# -- builders (master → ODrive) ---------------------------------------------------------------


def _scaled_int16(value: float, scale: float) -> int:
    """Round to the nearest step and saturate to int16 (a feed-forward may saturate safely)."""
    return max(_INT16_MIN, min(_INT16_MAX, round(value / scale)))


def _require_finite(name: str, value: float) -> None:
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")


def make_set_input_pos(
    node_id: int,
    position_turns: float,
    vel_ff_turns_s: float = 0.0,
    torque_ff_nm: float = 0.0,
    *,
    vel_ff_scale: float = DEFAULT_VEL_FF_SCALE,
    torque_ff_scale: float = DEFAULT_TORQUE_FF_SCALE,
) -> Frame:
    """Set_Input_Pos: float32 position (turns), int16 vel_ff and int16 torque_ff in scaled units.

    The feed-forwards are rounded to their scale (default 0.001 turns/s and 0.001 Nm per LSB; the
    ODrive's CAN scales must match) and saturate at the int16 range, which is safe for a
    feed-forward. Raises ValueError for a non-finite input.
    """
    _require_finite("position_turns", position_turns)
    _require_finite("vel_ff_turns_s", vel_ff_turns_s)
    _require_finite("torque_ff_nm", torque_ff_nm)
    data = struct.pack(
        "<fhh",
        position_turns,
        _scaled_int16(vel_ff_turns_s, vel_ff_scale),
        _scaled_int16(torque_ff_nm, torque_ff_scale),
    )
    return Frame(arbitration_id(node_id, Command.SET_INPUT_POS), data)


def make_set_input_vel(node_id: int, velocity_turns_s: float, torque_ff_nm: float = 0.0) -> Frame:
    """Set_Input_Vel: float32 velocity (turns/s), float32 torque feed-forward (Nm).
    Raises ValueError for a non-finite input."""
    _require_finite("velocity_turns_s", velocity_turns_s)
    _require_finite("torque_ff_nm", torque_ff_nm)
    data = struct.pack("<ff", velocity_turns_s, torque_ff_nm)
    return Frame(arbitration_id(node_id, Command.SET_INPUT_VEL), data)


def make_set_absolute_position(node_id: int, position_turns: float) -> Frame:
    """Set_Absolute_Position (0x19): float32 position (turns) the encoder now reads, padded to
    the DBC's 8 data bytes. Raises ValueError for a non-finite input."""
    _require_finite("position_turns", position_turns)
    data = struct.pack("<f4x", position_turns)
    return Frame(arbitration_id(node_id, Command.SET_ABSOLUTE_POSITION), data)


def make_set_axis_state(node_id: int, state: AxisState) -> Frame:
    """Set_Axis_State: uint32 requested state, padded to the 8 data bytes of the official DBC
    (``odrive-cansimple-0.6.x.dbc``); strict DBC decoders reject the 4-byte frame of the ODrive
    python-can guide."""
    return Frame(arbitration_id(node_id, Command.SET_AXIS_STATE), struct.pack("<I4x", state))


def make_set_controller_mode(node_id: int, control: ControlMode, input_mode: InputMode) -> Frame:
    """Set_Controller_Mode: uint32 control mode, uint32 input mode."""
    data = struct.pack("<II", control, input_mode)
    return Frame(arbitration_id(node_id, Command.SET_CONTROLLER_MODE), data)


def make_set_limits(node_id: int, velocity_limit_turns_s: float, current_limit_a: float) -> Frame:
    """Set_Limits: float32 velocity limit (turns/s, the controller's vel_limit), float32 current
    limit (A, the motor's current_lim). Raises ValueError for a non-finite or negative input."""
    for name, value in (
        ("velocity_limit", velocity_limit_turns_s),
        ("current_limit", current_limit_a),
    ):
        _require_finite(name, value)
        if value < 0.0:
            raise ValueError(f"{name}: {value} must be >= 0")
    data = struct.pack("<ff", velocity_limit_turns_s, current_limit_a)
    return Frame(arbitration_id(node_id, Command.SET_LIMITS), data)


def make_clear_errors(node_id: int, *, identify: bool = False) -> Frame:
    """Clear_Errors: one byte, nonzero to also blink the LED (identify)."""
    return Frame(arbitration_id(node_id, Command.CLEAR_ERRORS), bytes([int(identify)]))


def make_estop(node_id: int) -> Frame:
    """Estop: no payload; the axis disarms with ESTOP_REQUESTED."""
    return Frame(arbitration_id(node_id, Command.ESTOP))


_REPLY_LENGTH = {
    Command.GET_VERSION: 8,
    Command.HEARTBEAT: 8,
    Command.GET_ERROR: 8,
    Command.GET_ENCODER_ESTIMATES: 8,
}


def make_request(node_id: int, command: Command) -> Frame:
    """An RTR frame asking the ODrive to send `command` now (DLC = the reply's length)."""
    if command not in _REPLY_LENGTH:
        raise ValueError(f"{command.name} cannot be requested by RTR here")
    return Frame(arbitration_id(node_id, command), remote_dlc=_REPLY_LENGTH[command])


# -- parsers ----------------------------------------------------------------------------------


def parse_set_input_pos(
    data: bytes,
    *,
    vel_ff_scale: float = DEFAULT_VEL_FF_SCALE,
    torque_ff_scale: float = DEFAULT_TORQUE_FF_SCALE,
) -> InputPos:
    """Raises MalformedFrameError unless `data` is 8 bytes with a finite position."""
    check_length(Command.SET_INPUT_POS, data, 8)
    position, vel_ff, torque_ff = struct.unpack("<fhh", data)
    if not math.isfinite(position):
        raise MalformedFrameError(f"SET_INPUT_POS: non-finite position {position}")
    return InputPos(position, vel_ff * vel_ff_scale, torque_ff * torque_ff_scale)


def parse_set_input_vel(data: bytes) -> tuple[float, float]:
    """(velocity turns/s, torque feed-forward Nm). Raises MalformedFrameError unless `data` is 8
    bytes holding finite floats."""
    check_length(Command.SET_INPUT_VEL, data, 8)
    velocity, torque_ff = struct.unpack("<ff", data)
    if not (math.isfinite(velocity) and math.isfinite(torque_ff)):
        raise MalformedFrameError(f"SET_INPUT_VEL: non-finite value ({velocity}, {torque_ff})")
    return float(velocity), float(torque_ff)


def parse_set_absolute_position(data: bytes) -> float:
    """The position (turns). Raises MalformedFrameError unless `data` is 4..8 bytes with a
    finite float first."""
    check_length(Command.SET_ABSOLUTE_POSITION, data, 4)
    (position,) = struct.unpack_from("<f", data)
    if not math.isfinite(position):
        raise MalformedFrameError(f"SET_ABSOLUTE_POSITION: non-finite position {position}")
    return float(position)


def parse_set_axis_state(data: bytes) -> int:
    """Raises MalformedFrameError unless `data` is the DBC's 8 bytes."""
    check_length(Command.SET_AXIS_STATE, data, 8)
    return int(struct.unpack_from("<I", data)[0])


def parse_set_controller_mode(data: bytes) -> tuple[int, int]:
    check_length(Command.SET_CONTROLLER_MODE, data, 8)
    control, input_mode = struct.unpack("<II", data)
    return int(control), int(input_mode)


def parse_set_limits(data: bytes) -> tuple[float, float]:
    """(velocity limit turns/s, current limit A) of a Set_Limits frame."""
    check_length(Command.SET_LIMITS, data, 8)
    velocity, current = struct.unpack("<ff", data)
    return float(velocity), float(current)


def parse_clear_errors(data: bytes) -> bool:
    """The identify flag; an empty payload (older masters) means no identify."""
    check_length(Command.CLEAR_ERRORS, data, 0)
    return bool(data and data[0])
