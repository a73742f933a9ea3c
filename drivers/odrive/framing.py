"""ODrive CAN Simple framing: the 11-bit arbitration ids (``node_id << 5 | cmd_id``), the length
check every parser makes, and the error a frame that does not match its command's layout raises.
The codec is `drivers.odrive.protocol`, which re-exports these names.
"""

from __future__ import annotations

from drivers.errors import DriverError
from drivers.odrive.enums import Command

__all__ = ["MAX_NODE_ID", "MalformedFrameError", "arbitration_id", "check_length", "split_id"]

MAX_NODE_ID = 0x3F


class MalformedFrameError(DriverError):
    """A received frame does not match the layout of its command (length or value)."""


def arbitration_id(node_id: int, command: Command) -> int:
    """``node_id << 5 | cmd_id``. Raises ValueError for a node id outside 0..63."""
    if not 0 <= node_id <= MAX_NODE_ID:
        raise ValueError(f"ODrive node id {node_id} outside [0, {MAX_NODE_ID}]")
    return node_id << 5 | int(command)


def split_id(arbitration_id: int) -> tuple[int, int]:
    """(node_id, cmd_id) of an 11-bit arbitration id."""
    return (arbitration_id >> 5) & MAX_NODE_ID, arbitration_id & 0x1F


def check_length(command: Command, data: bytes, minimum: int, maximum: int = 8) -> None:
    """Raises `MalformedFrameError` unless `data` holds `minimum`..`maximum` bytes."""
    if not minimum <= len(data) <= maximum:
        expected = f"{minimum}" if minimum == maximum else f"{minimum}..{maximum}"
        raise MalformedFrameError(
            f"{command.name}: {len(data)} data bytes, expected {expected}: {data.hex(' ')}"
        )
