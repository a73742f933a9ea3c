"""The Feetech driver's serial line: SCS/STS on the half-duplex servo bus
(`drivers.serial_bus.link`: one port, one I/O thread, deadlines from the baud rate).

What SCS/STS adds: a status packet of an expected id answers the request when it carries the data
asked for (a servo's error bits are the read path's business, never a refusal); one of another
length answers an earlier request (a ping sent again while a loaded host held up its first
reply, answered twice) and is counted stale. Reading stops at the deadline: what arrives later
is dropped before the next request.
"""

from __future__ import annotations

from typing import ClassVar

from drivers.feetech import protocol as ft
from drivers.feetech.protocol import Packet
from drivers.serial_bus.link import Codec, Reply, SerialLink, SerialPort, Target

__all__ = ["FeetechLink", "Reply", "Target"]


class FeetechLink(SerialLink[Packet]):
    """An SCS/STS bus on one serial port: `await open()`, transactions, `await close()`.

    `retries` applies to `command` only (configuration), never to the cyclic transactions.
    """

    codec: ClassVar[Codec] = ft
    io_thread_name = "feetech-io"

    def data(self, packet: Packet) -> bytes:
        return packet.params

    def _new_parser(self, data_length: int) -> ft.PacketParser:
        return ft.PacketParser()

    def _matches(self, packet: Packet, data_length: int) -> bool | None:
        return len(packet.params) == data_length

    def _read_at_deadline(self, port: SerialPort) -> bytes:
        return b""
