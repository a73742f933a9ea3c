"""A half-duplex servo bus on one serial port: one I/O thread, and transactions with reply deadlines
computed from the baud rate. What the Dynamixel and Feetech links share.

pyserial blocks, so every call on the port runs on one dedicated thread, never on the event loop.
A transaction sends a request, then collects the status packets of the expected ids until all
came or its deadline ran out: the request's wire time, then for each device its Return Delay Time
(`set_return_delay`; the longest known counts) and its reply's wire time, plus `reply_margin_s`
and twice the USB adapter's latency (`latency_s`). Undecodable bytes are skipped and counted
(`Reply.corrupt`); what to make of a missing reply is the driver's business, except for
`command`, an instruction one device must answer (configuration: the pings at open, the writes
of enable and of clearing faults), sent again while the device stays silent: `retries` more times
at least, and until `COMMAND_PATIENCE_S` has passed since it was first sent: a USB adapter or a
loaded host can hold a reply up past its deadline of a few ms (a pty, for 30-900 ms), and a count
of deadlines gave a healthy servo ~15 ms, failing the arm's enable. Only start-up and reset wait
on it. The cyclic transactions are never sent again. What is not configured is found out at
`open()`: the adapter's latency from the FTDI ``latency_timer`` in sysfs, and a wider reply
margin and patience on a pseudo-terminal (a simulated chain, a process on the other end).

A protocol names its `codec` (its module's packet builders) and implements the hooks: its parser
(`_new_parser`), which packets answer a request (`_matches`), a status packet's data (`data`)
and a refusal it reports (`refusal`).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import ClassVar, Generic, Protocol, Self, TypeVar

from drivers.errors import DeviceFaultError, DriverIOError, DriverTimeoutError
from drivers.serial_bus.framing import FrameParser, transaction_time_s
from drivers.serial_bus.port import SerialPort, is_pty, latency_timer_s

__all__ = [
    "COMMAND_PATIENCE_S",
    "MAX_RETURN_DELAY_S",
    "PTY_COMMAND_PATIENCE_S",
    "PTY_REPLY_MARGIN_S",
    "SERIAL_REPLY_MARGIN_S",
    "Codec",
    "LinkParams",
    "Reply",
    "SerialLink",
    "SerialPort",
    "StatusPacket",
    "Target",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_RETURN_DELAY_S = 254 * 2e-6
"""The longest Return Delay Time (254 units of 2 µs), assumed until the devices' are known."""
SERIAL_REPLY_MARGIN_S = 0.002
PTY_REPLY_MARGIN_S = 0.05
COMMAND_PATIENCE_S = 0.25  # s: how long a silent device's configuration command is sent again
PTY_COMMAND_PATIENCE_S = 1.0  # s: on a pty, whose bytes a busy machine held up for 30-900 ms


class LinkParams(Protocol):
    """The port's configuration, as a servo-bus driver's parameters hold it."""

    @property
    def port(self) -> str: ...
    @property
    def baudrate(self) -> int: ...
    @property
    def reply_margin_s(self) -> float | None: ...
    @property
    def usb_latency_s(self) -> float | None: ...
    @property
    def retries(self) -> int: ...


class Target(Protocol):
    """A device as the link addresses it: its bus id; ``str()`` names it in error messages."""

    @property
    def id(self) -> int: ...


class StatusPacket(Protocol):
    """What the link reads of a decoded packet: the sender's id and the status error byte."""

    @property
    def id(self) -> int: ...
    @property
    def error(self) -> int: ...


PacketT = TypeVar("PacketT", bound=StatusPacket)


class Codec(Protocol):
    """The builders a protocol module provides (`drivers.dynamixel.protocol`,
    `drivers.feetech.protocol`)."""

    def status_packet_size(self, data_length: int) -> int: ...
    def make_ping(self, device_id: int) -> bytes: ...
    def make_read(self, device_id: int, address: int, length: int) -> bytes: ...
    def make_write(self, device_id: int, address: int, data: bytes) -> bytes: ...
    def make_sync_read(self, address: int, length: int, ids: Sequence[int]) -> bytes: ...
    def make_sync_write(
        self, address: int, length: int, data_by_id: Mapping[int, bytes]
    ) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Reply(Generic[PacketT]):
    """What one transaction brought back: the first status packet of each expected id."""

    packets: Mapping[int, PacketT]
    corrupt: int  # runs of undecodable bytes, including a truncated packet at the deadline
    timed_out: bool
    stale: int = 0  # status packets that answer an earlier request (Protocol 2.0: by length)


class SerialLink(abc.ABC, Generic[PacketT]):
    """A servo bus on one serial port: `await open()`, transactions, `await close()`."""

    codec: ClassVar[Codec]
    io_thread_name: ClassVar[str] = "serial-io"

    def __init__(
        self,
        port: str,
        baudrate: int,
        *,
        reply_margin_s: float | None,
        usb_latency_s: float | None = None,
        retries: int,
        command_patience_s: float | None = None,
    ) -> None:
        """`reply_margin_s` None: `SERIAL_REPLY_MARGIN_S`, or `PTY_REPLY_MARGIN_S` when the port
        turns out to be a pseudo-terminal (a simulated chain); `command_patience_s` None:
        `COMMAND_PATIENCE_S`, or `PTY_COMMAND_PATIENCE_S` (`keeps_trying`). `usb_latency_s`
        None: read the adapter's latency timer from sysfs at `open()`."""
        self.port = port
        self.baudrate = baudrate
        self.latency_s = 0.0 if usb_latency_s is None else usb_latency_s
        self._configured_latency_s = usb_latency_s
        self._configured_margin_s = reply_margin_s
        self._reply_margin_s = SERIAL_REPLY_MARGIN_S if reply_margin_s is None else reply_margin_s
        self._retries = retries
        self._configured_patience_s = command_patience_s
        self._command_patience_s = (
            COMMAND_PATIENCE_S if command_patience_s is None else command_patience_s
        )
        self._impatient = False
        self._return_delays: dict[int, float] = {}
        self._port: SerialPort | None = None
        self._executor: ThreadPoolExecutor | None = None

    @classmethod
    def for_params(cls, params: LinkParams) -> Self:
        """The link a driver's parameters configure."""
        return cls(
            params.port, params.baudrate, reply_margin_s=params.reply_margin_s,
            usb_latency_s=params.usb_latency_s, retries=params.retries,
        )  # fmt: skip

    async def open(self, usb_latency_s: float | None = None) -> None:
        """Open the port; `usb_latency_s` (or the one given at construction) None: read the
        adapter's latency timer from sysfs. Raises DriverOpenError, DriverTimeoutError."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.io_thread_name)
        self._port = await self._io(lambda: SerialPort(self.port, self.baudrate), timeout_s=2.0)
        if usb_latency_s is None:
            usb_latency_s = self._configured_latency_s
        if usb_latency_s is None:
            usb_latency_s = await self._io(lambda: latency_timer_s(self.port), timeout_s=1.0)
        self.latency_s = usb_latency_s
        if await self._io(lambda: is_pty(self.port), timeout_s=1.0):
            if self._configured_margin_s is None:
                self._reply_margin_s = PTY_REPLY_MARGIN_S
            if self._configured_patience_s is None:
                self._command_patience_s = PTY_COMMAND_PATIENCE_S
        if self.latency_s > 0.002:
            log.warning(
                "port %r: USB latency timer %.0f ms delays every reply; set it to 1 ms "
                "(echo 1 > /sys/bus/usb-serial/devices/<tty>/latency_timer, or a udev rule)",
                self.port, self.latency_s * 1e3,
            )  # fmt: skip

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

    def set_return_delay(self, device_id: int, delay_s: float) -> None:
        """A device's Return Delay Time (s), as read from or written to it; deadlines use the
        longest."""
        self._return_delays[device_id] = delay_s

    @property
    def return_delay_s(self) -> float:
        """The longest Return Delay Time known (`MAX_RETURN_DELAY_S` before any is known)."""
        return max(self._return_delays.values(), default=MAX_RETURN_DELAY_S)

    def deadline_s(self, request_size: int, reply_sizes: Sequence[int]) -> float:
        """How long a transaction may take: its bus time, the adapter's latency both ways and
        the margin (s)."""
        bus = transaction_time_s(request_size, reply_sizes, self.baudrate, self.return_delay_s)
        return bus + 2 * self.latency_s + self._reply_margin_s

    async def transact(
        self, request: bytes, expect: Sequence[int], data_length: int
    ) -> Reply[PacketT]:
        """Send `request` and collect the status packets (of `data_length` data bytes) of the ids
        in `expect` (none: nobody answers). Raises DriverIOError, DriverTimeoutError (hung port).
        """
        port = self._port
        if port is None:
            raise DriverIOError(f"port {self.port!r} is not open")
        reply_size = self.codec.status_packet_size(data_length)
        timeout_s = self.deadline_s(len(request), [reply_size] * len(expect))

        def collect(port: SerialPort) -> Reply[PacketT]:  # the deadline runs from the request
            return self._collect(port, expect, data_length, time.monotonic() + timeout_s)

        return await self._io(lambda: port.transact(request, collect), timeout_s=timeout_s)

    async def command(
        self, device: Target, request: bytes, what: str, data_length: int = 0
    ) -> PacketT:
        """An instruction the device answers; returns its status packet, sending it again while
        the device stays silent (see the module docstring). Raises `DriverTimeoutError`
        (silent), `DeviceFaultError` (refused), `DriverIOError` (wrong data length)."""
        packet = await self._answer(device, request, what, data_length)
        refusal = self.refusal(packet)
        if refusal is not None:
            raise DeviceFaultError(f"{device}: {what}: {refusal}")
        data = self.data(packet)
        if len(data) != data_length:
            raise DriverIOError(f"{device}: {what}: {len(data)} bytes, expected {data_length}")
        return packet

    async def _answer(self, device: Target, request: bytes, what: str, data_length: int) -> PacketT:
        """`device`'s status packet to `request`, sent while `keeps_trying`."""
        started, attempts = time.monotonic(), 0
        while True:
            reply = await self.transact(request, (device.id,), data_length)
            attempts += 1
            packet = reply.packets.get(device.id)
            if packet is not None:
                return packet
            if not self.keeps_trying(started, attempts):
                waited_s = time.monotonic() - started
                raise DriverTimeoutError(
                    f"{device}: no answer to {what} ({attempts} attempts in {waited_s:.2f} s)"
                )

    def keeps_trying(self, started: float, attempts: int) -> bool:
        """Whether a configuration request first sent at `started` (`time.monotonic`), still
        unanswered after `attempts`, is sent again: `retries` more times, then while
        `within_patience` (unless `impatient`)."""
        if attempts <= self._retries:
            return True
        return not self._impatient and self.within_patience(started)

    def within_patience(self, started: float) -> bool:
        """Whether less than `command_patience_s` has passed since `started`."""
        return time.monotonic() - started < self._command_patience_s

    @contextlib.contextmanager
    def impatient(self) -> Iterator[None]:
        """Meanwhile configuration requests are sent `retries` + 1 times only: for a caller that
        tries again itself, or that must report a silent device at once (disabling)."""
        self._impatient = True
        try:
            yield
        finally:
            self._impatient = False

    async def read_item(self, device: Target, address: int, length: int, what: str) -> bytes:
        """`length` bytes from `address`. Raises DriverTimeoutError, DeviceFaultError,
        DriverIOError."""
        request = self.codec.make_read(device.id, address, length)
        return self.data(await self.command(device, request, f"Read of {what} ({address})", length))

    async def write_item(self, device: Target, address: int, data: bytes, what: str) -> int:
        """Write `data` at `address`; returns the status error byte of the answer."""
        request = self.codec.make_write(device.id, address, data)
        return (await self.command(device, request, f"Write of {what}")).error

    async def sync_read(self, address: int, length: int, ids: Sequence[int]) -> Reply[PacketT]:
        """One Sync Read of `length` bytes at `address` from each of `ids`, in that order."""
        return await self.transact(self.codec.make_sync_read(address, length, ids), ids, length)

    async def sync_write(self, address: int, length: int, data_by_id: Mapping[int, bytes]) -> None:
        """One Sync Write of `length` bytes per device at `address`; nobody answers."""
        await self.transact(self.codec.make_sync_write(address, length, data_by_id), (), 0)

    # -- what a protocol implements --------------------------------------------------------------

    def refusal(self, packet: PacketT) -> str | None:
        """Why the device refused the instruction its status packet answers, or None."""
        return None

    @abc.abstractmethod
    def data(self, packet: PacketT) -> bytes:
        """A status packet's data."""

    @abc.abstractmethod
    def _new_parser(self, data_length: int) -> FrameParser[PacketT]:
        """A parser for the replies of one transaction that asked for `data_length` bytes."""

    @abc.abstractmethod
    def _matches(self, packet: PacketT, data_length: int) -> bool | None:
        """Whether a packet from an expected id answers this request (True), an earlier one
        (False: stale), or is no reply at all (None)."""

    def _read_at_deadline(self, port: SerialPort) -> bytes:
        """What is read once the deadline has passed: what had arrived by then (the I/O thread
        itself may have been scheduled late)."""
        return port.read_waiting()

    # -- the I/O thread --------------------------------------------------------------------------

    def _collect(
        self, port: SerialPort, expect: Sequence[int], data_length: int, deadline: float
    ) -> Reply[PacketT]:
        parser = self._new_parser(data_length)
        packets: dict[int, PacketT] = {}
        stale = 0
        while len(packets) < len(expect):
            remaining = deadline - time.monotonic()
            late = remaining <= 0.0
            data = self._read_at_deadline(port) if late else port.read(remaining)
            for packet in parser.feed(data):
                match = self._matches(packet, data_length) if packet.id in expect else None
                if match:
                    packets.setdefault(packet.id, packet)
                elif match is not None:
                    stale += 1
            if late:
                break
        corrupt = parser.corrupt + (1 if parser.pending else 0)
        return Reply(packets, corrupt, timed_out=len(packets) < len(expect), stale=stale)

    async def _io(self, call: Callable[[], T], *, timeout_s: float) -> T:
        """Run a blocking call on the I/O thread; its own deadline is `timeout_s`."""
        if self._executor is None:
            raise DriverIOError(f"port {self.port!r} is not open")
        future = asyncio.get_running_loop().run_in_executor(self._executor, call)
        limit_s = timeout_s + 2.0  # the thread honours timeout_s; this guards a hung port
        try:
            # Not asyncio.wait_for: before Python 3.12 it can swallow a cancellation.
            async with asyncio.timeout(limit_s):
                return await future
        except TimeoutError as exc:
            raise DriverTimeoutError(f"port {self.port!r}: I/O hung for {limit_s:.1f} s") from exc
