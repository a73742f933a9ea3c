"""The Feetech driver's serial line: one port, one I/O thread, and SCS/STS transactions with
deadlines computed from the baud rate.

pyserial blocks, so every call on the port runs on one dedicated thread, never on the event loop.
A transaction sends a request, then collects the status packets of the expected ids until all
came or its deadline ran out: the request's and the replies' wire time, each servo's Return Delay
Time (`return_delay_s`), twice the USB adapter's latency (``usb_latency_s``) and `reply_margin_s`.
Undecodable bytes are skipped and counted (`Reply.corrupt`); what to make of a missing reply is
the driver's business, except for `command`, an instruction one servo must answer.
"""

from __future__ import annotations

import asyncio
import logging
import select
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar

import serial

from drivers.errors import DriverIOError, DriverOpenError, DriverTimeoutError
from drivers.feetech import protocol as ft
from drivers.feetech.protocol import Packet

__all__ = ["FeetechLink", "Reply", "Target"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class Target(Protocol):
    """A servo as the link addresses it: its bus id; ``str()`` names it in error messages."""

    @property
    def id(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Reply:
    """What one transaction brought back: the first status packet of each expected id."""

    packets: Mapping[int, Packet]
    corrupt: int  # runs of undecodable bytes, including a truncated packet at the deadline
    timed_out: bool


class _Port:
    """The serial port. Every method blocks: call them on the link's I/O thread only."""

    def __init__(self, port: str, baudrate: int) -> None:
        self.port = port
        try:
            self._serial = serial.Serial(
                port, baudrate, timeout=0, write_timeout=1.0, exclusive=True
            )
        except (serial.SerialException, OSError, ValueError) as exc:
            raise DriverOpenError(f"port {port!r} at {baudrate} baud: cannot open: {exc}") from exc

    def transact(self, request: bytes, expect: Sequence[int], timeout_s: float) -> Reply:
        try:
            stale = self._serial.in_waiting
            if stale:
                self._serial.read(stale)  # a late reply to an earlier transaction
            self._serial.write(request)
            return self._collect(expect, time.monotonic() + timeout_s)
        except (serial.SerialException, OSError) as exc:
            raise DriverIOError(f"port {self.port!r}: {exc}") from exc

    def _collect(self, expect: Sequence[int], deadline: float) -> Reply:
        parser = ft.PacketParser()
        packets: dict[int, Packet] = {}
        while len(packets) < len(expect):
            remaining = deadline - time.monotonic()
            if remaining <= 0.0:
                break
            select.select([self._serial.fileno()], [], [], remaining)
            for packet in parser.feed(self._serial.read(self._serial.in_waiting or 1)):
                if packet.id in expect:
                    packets.setdefault(packet.id, packet)
        corrupt = parser.corrupt + (1 if parser.pending else 0)
        return Reply(packets, corrupt, timed_out=len(packets) < len(expect))

    def close(self) -> None:
        try:
            self._serial.close()
        except (serial.SerialException, OSError) as exc:
            log.debug("port %r: error while closing: %s", self.port, exc)


class FeetechLink:
    """An SCS/STS bus on one serial port: `await open()`, transactions, `await close()`.

    `retries` applies to `command` only (configuration), never to the cyclic transactions.
    """

    def __init__(
        self,
        port: str,
        baudrate: int,
        *,
        reply_margin_s: float,
        usb_latency_s: float,
        retries: int,
    ) -> None:
        self.port = port
        self.baudrate = baudrate
        self.latency_s = usb_latency_s
        self.return_delay_s = 254 * 2e-6  # the longest possible until the servos are configured
        self._reply_margin_s = reply_margin_s
        self._retries = retries
        self._port: _Port | None = None
        self._executor: ThreadPoolExecutor | None = None

    async def open(self) -> None:
        """Open the port. Raises DriverOpenError, DriverTimeoutError."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="feetech-io")
        self._port = await self._io(lambda: _Port(self.port, self.baudrate), timeout_s=2.0)

    async def close(self) -> None:
        """Close the port and stop the I/O thread. Idempotent; never raises."""
        port, executor = self._port, self._executor
        self._port, self._executor = None, None
        if executor is None:
            return
        if port is not None:
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(2.0):
                    await loop.run_in_executor(executor, port.close)
            except TimeoutError:
                log.warning("port %r: closing timed out", self.port)
        executor.shutdown(wait=False)

    def deadline_s(self, request_size: int, reply_sizes: Sequence[int]) -> float:
        """How long a transaction may take: its bus time, the adapter's latency both ways and
        the margin (s)."""
        bus = ft.transaction_time_s(request_size, reply_sizes, self.baudrate, self.return_delay_s)
        return bus + 2 * self.latency_s + self._reply_margin_s

    async def transact(self, request: bytes, expect: Sequence[int], data_length: int) -> Reply:
        """Send `request` and collect the status packets (of `data_length` data bytes) of the ids
        in `expect` (none: nobody answers). Raises DriverIOError, DriverTimeoutError (hung port).
        """
        port = self._port
        if port is None:
            raise DriverIOError(f"port {self.port!r} is not open")
        reply_size = ft.status_packet_size(data_length)
        timeout_s = self.deadline_s(len(request), [reply_size] * len(expect))
        return await self._io(
            lambda: port.transact(request, expect, timeout_s), timeout_s=timeout_s
        )

    async def command(
        self, device: Target, request: bytes, what: str, data_length: int = 0
    ) -> Packet:
        """An instruction the servo answers; returns its status packet, retrying when it stays
        silent. Raises `DriverTimeoutError` (silent), `DriverIOError` (wrong data length)."""
        attempts = self._retries + 1
        for _ in range(attempts):
            reply = await self.transact(request, (device.id,), data_length)
            packet = reply.packets.get(device.id)
            if packet is not None:
                break
        else:
            raise DriverTimeoutError(f"{device}: no answer to {what} ({attempts} attempts)")
        if len(packet.params) != data_length:
            raise DriverIOError(
                f"{device}: {what}: {len(packet.params)} bytes, expected {data_length}"
            )
        return packet

    async def read_item(self, device: Target, address: int, length: int, what: str) -> bytes:
        """`length` bytes from `address`. Raises DriverTimeoutError, DriverIOError."""
        request = ft.make_read(device.id, address, length)
        packet = await self.command(device, request, f"Read of {what} ({address})", length)
        return packet.params

    async def write_item(self, device: Target, address: int, data: bytes, what: str) -> int:
        """Write `data` at `address`; returns the status error bits of the answer."""
        packet = await self.command(
            device, ft.make_write(device.id, address, data), f"Write of {what}"
        )
        return packet.error

    async def _io(self, call: Callable[[], T], *, timeout_s: float) -> T:
        """Run a blocking call on the I/O thread; its own deadline is `timeout_s`."""
        if self._executor is None:
            raise DriverIOError(f"port {self.port!r} is not open")
        future = asyncio.get_running_loop().run_in_executor(self._executor, call)
        limit_s = timeout_s + 2.0  # the thread honours timeout_s; this guards a hung port
        try:
            async with asyncio.timeout(limit_s):
                return await future
        except TimeoutError as exc:
            raise DriverTimeoutError(f"port {self.port!r}: I/O hung for {limit_s:.1f} s") from exc
