"""What an ODrive sends (CAN Simple v0.6, see `drivers.odrive.protocol`): the heartbeat, the
encoder estimates, the error status and the version, as values, with the builders the simulated
ODrive sends them with and the parsers the driver reads them with. Sent cyclically or answered
on an RTR request (`drivers.odrive.protocol.make_request`). Units: turns, turns/s.
The codec `drivers.odrive.protocol` re-exports these names.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from drivers.can_bus.frame import Frame
from drivers.odrive.enums import Command
from drivers.odrive.framing import MalformedFrameError, arbitration_id, check_length

__all__ = [
    "EncoderEstimates",
    "ErrorStatus",
    "Heartbeat",
    "Version",
    "make_encoder_estimates",
    "make_error_status",
    "make_heartbeat",
    "make_version",
    "parse_encoder_estimates",
    "parse_error_status",
    "parse_heartbeat",
    "parse_version",
]


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Heartbeat (0x001): axis error bits (active_errors | disarm_reason), state, last result.

    `axis_state` and `procedure_result` are raw ints, because newer firmware may add values.
    """

    axis_error: int
    axis_state: int
    procedure_result: int
    trajectory_done: bool


@dataclass(frozen=True, slots=True)
class EncoderEstimates:
    """Get_Encoder_Estimates (0x009): position in turns, velocity in turns/s."""

    position_turns: float
    velocity_turns_s: float


@dataclass(frozen=True, slots=True)
class ErrorStatus:
    """Get_Error (0x003): the currently active errors and the error that last disarmed the axis."""

    active_errors: int
    disarm_reason: int


@dataclass(frozen=True, slots=True)
class Version:
    """Get_Version (0x000): protocol, hardware and firmware versions."""

    protocol: int
    hw_major: int
    hw_minor: int
    hw_variant: int
    fw_major: int
    fw_minor: int
    fw_revision: int
    fw_unreleased: int


# -- builders (used by the simulated ODrive) ------------------------------------------------


def make_heartbeat(node_id: int, beat: Heartbeat) -> Frame:
    data = struct.pack(
        "<IBBBx", beat.axis_error, beat.axis_state, beat.procedure_result, beat.trajectory_done
    )
    return Frame(arbitration_id(node_id, Command.HEARTBEAT), data)


def make_encoder_estimates(node_id: int, estimates: EncoderEstimates) -> Frame:
    data = struct.pack("<ff", estimates.position_turns, estimates.velocity_turns_s)
    return Frame(arbitration_id(node_id, Command.GET_ENCODER_ESTIMATES), data)


def make_error_status(node_id: int, status: ErrorStatus) -> Frame:
    data = struct.pack("<II", status.active_errors, status.disarm_reason)
    return Frame(arbitration_id(node_id, Command.GET_ERROR), data)


def make_version(node_id: int, version: Version) -> Frame:
    v = version
    data = bytes(
        [
            v.protocol,
            v.hw_major,
            v.hw_minor,
            v.hw_variant,
            v.fw_major,
            v.fw_minor,
            v.fw_revision,
            v.fw_unreleased,
        ]
    )
    return Frame(arbitration_id(node_id, Command.GET_VERSION), data)


# -- parsers (used by the driver) ----------------------------------------------------------


def parse_heartbeat(data: bytes) -> Heartbeat:
    """Raises MalformedFrameError unless `data` is 8 bytes."""
    check_length(Command.HEARTBEAT, data, 8)
    error, state, result, flags = struct.unpack_from("<IBBB", data)
    return Heartbeat(error, state, result, bool(flags & 0x01))


def parse_encoder_estimates(data: bytes) -> EncoderEstimates:
    """Raises MalformedFrameError unless `data` is 8 bytes holding two finite floats."""
    check_length(Command.GET_ENCODER_ESTIMATES, data, 8)
    position, velocity = struct.unpack("<ff", data)
    if not (math.isfinite(position) and math.isfinite(velocity)):
        raise MalformedFrameError(
            f"GET_ENCODER_ESTIMATES: non-finite value (pos {position}, vel {velocity})"
        )
    return EncoderEstimates(position, velocity)


def parse_error_status(data: bytes) -> ErrorStatus:
    check_length(Command.GET_ERROR, data, 8)
    active, disarm = struct.unpack("<II", data)
    return ErrorStatus(active, disarm)


def parse_version(data: bytes) -> Version:
    check_length(Command.GET_VERSION, data, 8)
    return Version(*data)
