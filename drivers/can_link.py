"""The CAN link's earlier import path, kept for code written against it: the link is
`drivers.can_bus.link`, its frame `drivers.can_bus.frame`."""

from drivers.can_bus.frame import Frame
from drivers.can_bus.link import (
    BUS_OPEN_ERRORS,
    BusFactory,
    CanLink,
    frame_to_message,
    make_bus,
    message_to_frame,
    open_bus,
)

__all__ = [
    "BUS_OPEN_ERRORS",
    "BusFactory",
    "CanLink",
    "Frame",
    "frame_to_message",
    "make_bus",
    "message_to_frame",
    "open_bus",
]
