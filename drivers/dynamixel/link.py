"""The Dynamixel driver's serial line: Protocol 2.0 on the half-duplex servo bus
(`drivers.serial_bus.link`: one port, one I/O thread, deadlines from the baud rate).

What Protocol 2.0 adds: each device's Return Delay Time is read from it (`set_return_delay`), and
a status packet reporting an error is a refusal (`DeviceFaultError` from `command`).

Protocol 2.0 status packets carry no sequence number, so a reply that arrives after its deadline
would pass for the reply to the next request of the same id. A status packet counts only when its
data length is the one the request asked for (or it reports an error); others are late replies
to an earlier transaction, skipped and counted (`Reply.stale`). When the deadline passes, what
has already arrived is still read: the I/O thread itself may have been scheduled late.
"""

from __future__ import annotations

from typing import ClassVar

from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.protocol import Packet
from drivers.serial_bus.link import (
    PTY_REPLY_MARGIN_S,
    SERIAL_REPLY_MARGIN_S,
    Codec,
    Reply,
    SerialLink,
    Target,
)

__all__ = ["PTY_REPLY_MARGIN_S", "SERIAL_REPLY_MARGIN_S", "DynamixelLink", "Reply", "Target"]


class DynamixelLink(SerialLink[Packet]):
    """A Protocol 2.0 bus on one serial port: `await open()`, transactions, `await close()`.

    `retries` applies to `command` only (configuration), never to the cyclic transactions.
    """

    codec: ClassVar[Codec] = dxl
    io_thread_name = "dynamixel-io"

    # -- Protocol 2.0 ------------------------------------------------------------------------------

    def refusal(self, packet: Packet) -> str | None:
        return dxl.describe_status_error(packet.error) if packet.error & ~dxl.ALERT_BIT else None

    def data(self, packet: Packet) -> bytes:
        return packet.data

    def _new_parser(self, data_length: int) -> dxl.PacketParser:
        return dxl.PacketParser(2 * dxl.status_packet_size(data_length))  # room for stuffing

    def _matches(self, packet: Packet, data_length: int) -> bool | None:
        if not packet.is_status:
            return None
        return len(packet.data) == data_length or bool(packet.error & ~dxl.ALERT_BIT)
