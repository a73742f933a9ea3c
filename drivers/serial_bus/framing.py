"""What the framing of a half-duplex servo bus shares (Dynamixel Protocol 2.0, Feetech SCS/STS):
resynchronising a byte stream on a header, and a transaction's time on the wire.

`FrameParser` finds packets in a byte stream: it scans for its protocol's `header`, asks
`_try_decode` (the protocol's layout, length and checksum) whether a complete valid packet starts
there, and skips what cannot belong to one. Every run of discarded bytes counts once in
`corrupt`. A candidate that is still incomplete is dropped as soon as a complete valid packet
starts after it, so one bogus length field cannot swallow the packets that follow.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import ClassVar, Generic, Literal, TypeVar

__all__ = [
    "Decoded",
    "FrameParser",
    "describe_bits",
    "sync_write_data",
    "sync_write_params",
    "transaction_time_s",
    "wire_time_s",
]

PacketT = TypeVar("PacketT")

Decoded = tuple[PacketT, int] | Literal["incomplete", "invalid"]
"""What `_try_decode` finds at a header: the packet and the index just past it, or why not."""


class FrameParser(abc.ABC, Generic[PacketT]):
    """Turns a byte stream into packets, resynchronising after garbage (see the module docstring).

    `feed` returns the complete packets found so far; `max_length` bounds the length field.
    """

    header: ClassVar[bytes]

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length
        self.corrupt = 0
        self._buffer = bytearray()
        self._in_garbage = False

    @property
    def pending(self) -> int:
        """Bytes held back: a packet that is not complete yet (or a partial header)."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[PacketT]:
        self._buffer += data
        packets: list[PacketT] = []
        while (found := self._next_packet()) is not None:
            packets.append(found)
        return packets

    def reset(self) -> int:
        """Drop the buffer; returns how many bytes were pending."""
        pending = len(self._buffer)
        self._buffer.clear()
        self._in_garbage = False
        return pending

    @abc.abstractmethod
    def _try_decode(self, start: int) -> Decoded[PacketT]:
        """The packet whose header starts at `start` in `self._buffer`, if it is complete and
        valid."""

    def _next_packet(self) -> PacketT | None:
        buf = self._buffer
        first_incomplete: int | None = None
        start = buf.find(self.header)
        while start >= 0:
            outcome = self._try_decode(start)
            if isinstance(outcome, tuple):
                packet, end = outcome
                self._discard(start)
                del buf[: end - start]
                self._in_garbage = False
                return packet
            if outcome == "incomplete" and first_incomplete is None:
                first_incomplete = start
            start = buf.find(self.header, start + 1)
        keep_from = first_incomplete if first_incomplete is not None else self._partial_header()
        self._discard(keep_from)
        return None

    def _partial_header(self) -> int:
        """Where a header might begin in the buffer's last bytes (so it is kept), else its end."""
        buf = self._buffer
        for start in range(max(0, len(buf) - (len(self.header) - 1)), len(buf)):
            if self.header.startswith(buf[start:]):
                return start
        return len(buf)

    def _discard(self, count: int) -> None:
        if count <= 0:
            return
        del self._buffer[:count]
        if not self._in_garbage:
            self.corrupt += 1
            self._in_garbage = True


def wire_time_s(n_bytes: int, baudrate: int) -> float:
    """Seconds to send `n_bytes` at `baudrate` (8N1: 10 bits per byte)."""
    return n_bytes * 10.0 / baudrate


def transaction_time_s(
    request_size: int, reply_sizes: Sequence[int], baudrate: int, return_delay_s: float
) -> float:
    """Bus time of one transaction, s: the request on the wire, then each device in turn waits
    its Return Delay Time and sends its status packet (as devices do for a Sync Read)."""
    wire = wire_time_s(request_size + sum(reply_sizes), baudrate)
    return wire + return_delay_s * len(reply_sizes)


def sync_write_params(start: bytes, length: int, data_by_id: Mapping[int, bytes]) -> bytes:
    """A Sync Write's parameters: `start` (its address and length fields), then each device's id
    and its `length` bytes. Raises ValueError for data of another length."""
    params = bytearray(start)
    for device_id, data in data_by_id.items():
        if len(data) != length:
            raise ValueError(f"sync write: id {device_id} has {len(data)} bytes, expected {length}")
        params += bytes([device_id]) + data
    return bytes(params)


def sync_write_data(params: bytes, start: int, length: int, device_id: int) -> list[bytes]:
    """What a Sync Write carries for `device_id`, as a device reads it: the `length` bytes after
    each of its ids, in the parameters from `start` on (the inverse of `sync_write_params`)."""
    return [
        params[i + 1 : i + 1 + length]
        for i in range(start, len(params) - length, length + 1)
        if params[i] == device_id
    ]


def describe_bits(bits: int, texts: Mapping[int, str], none: str) -> str:
    """A readable list of the flags set in `bits` (`texts` by flag; others as unknown bits), or
    `none` when no bit is set."""
    found = [text for flag, text in texts.items() if bits & flag]
    unknown = bits & ~sum(texts)
    if unknown:
        found.append(f"unknown bits 0x{unknown:02X}")
    return ", ".join(found) if found else none
