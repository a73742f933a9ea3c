"""The Dynamixel driver's serial line: one port, one I/O thread, and Protocol 2.0 transactions with
deadlines computed from the baud rate.

pyserial blocks, so every call on the port runs on one dedicated thread, never on the event loop.
A transaction sends a request, then collects the status packets of the expected ids until all
came or its deadline ran out: the request's wire time, then for each device its Return Delay Time
(`set_return_delay`) and its reply's wire time, plus `reply_margin_s` and twice the USB adapter's
latency (``usb_latency_s``, read from the FTDI ``latency_timer`` in sysfs when not configured).
Undecodable bytes are skipped and counted (`Reply.corrupt`); what to make of a missing or refused
reply is the driver's business, except for `command`, an instruction one device must answer.

Protocol 2.0 status packets carry no sequence number, so a reply that arrives after its deadline
would pass for the reply to the next request of the same id. A status packet counts only when its
data length is the one the request asked for (or it reports an error); others are late replies
to an earlier transaction, skipped and counted (`Reply.stale`). When the deadline passes, what
has already arrived is still read: the I/O thread itself may have been scheduled late.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar

import serial

from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.protocol import Packet
from drivers.errors import DeviceFaultError, DriverIOError, DriverOpenError, DriverTimeoutError

__all__ = ["PTY_REPLY_MARGIN_S", "SERIAL_REPLY_MARGIN_S", "DynamixelLink", "Reply", "Target"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class Target(Protocol):
    """A device as the link addresses it: its bus id; ``str()`` names it in error messages."""

    @property
    def id(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Reply:
    """What one transaction brought back: the first status packet of each expected id."""

    packets: Mapping[int, Packet]
    corrupt: int  # runs of undecodable bytes, including a truncated packet at the deadline
    timed_out: bool
    stale: int = 0  # status packets of another length: late replies to an earlier request


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

    def transact(
        self, request: bytes, expect: Sequence[int], data_length: int, timeout_s: float
    ) -> Reply:
        """Send `request`, then collect the status packets of `expect` carrying `data_length`
        bytes until all came or `timeout_s` ran out."""
        try:
            stale = self._serial.in_waiting
            if stale:
                self._serial.read(stale)  # a late reply to an earlier transaction
            self._serial.write(request)
            return self._collect(expect, data_length, time.monotonic() + timeout_s)
        except (serial.SerialException, OSError) as exc:
            raise DriverIOError(f"port {self.port!r}: {exc}") from exc

    def _collect(self, expect: Sequence[int], data_length: int, deadline: float) -> Reply:
        max_length = 2 * dxl.status_packet_size(data_length)  # LEN, with room for byte stuffing
        parser = dxl.PacketParser(max_length)
        packets: dict[int, Packet] = {}
        stale = 0
        while len(packets) < len(expect):
            remaining = deadline - time.monotonic()
            if remaining > 0.0:
                select.select([self._serial.fileno()], [], [], remaining)
            data = self._serial.read(self._serial.in_waiting or (1 if remaining > 0.0 else 0))
            for packet in parser.feed(data):
                if not packet.is_status or packet.id not in expect:
                    continue
                if len(packet.data) == data_length or packet.error & ~dxl.ALERT_BIT:
                    packets.setdefault(packet.id, packet)
                else:
                    stale += 1
            if remaining <= 0.0:
                break  # what had arrived by the deadline is read
        corrupt = parser.corrupt + (1 if parser.pending else 0)
        return Reply(packets, corrupt, timed_out=len(packets) < len(expect), stale=stale)

    def close(self) -> None:
        try:
            self._serial.close()
        except (serial.SerialException, OSError) as exc:
            log.debug("port %r: error while closing: %s", self.port, exc)


SERIAL_REPLY_MARGIN_S = 0.002
PTY_REPLY_MARGIN_S = 0.05
_PTY_SLAVE_MAJORS = range(136, 144)  # Unix98 pseudo-terminal slaves (/dev/pts/N), Linux


def _is_pty(port: str) -> bool:
    """Whether `port` is a pseudo-terminal: a process on the other end, not a bus."""
    try:
        return os.major(os.stat(port).st_rdev) in _PTY_SLAVE_MAJORS
    except OSError:
        return False


def _usb_latency_s(port: str) -> float:
    """The FTDI latency timer of a USB serial port (0 when there is none, e.g. a pty)."""
    name = os.path.basename(os.path.realpath(port))
    try:
        with open(f"/sys/bus/usb-serial/devices/{name}/latency_timer") as file:
            return int(file.read()) / 1000.0
    except (OSError, ValueError):
        return 0.0


class DynamixelLink:
    """A Protocol 2.0 bus on one serial port: `await open()`, transactions, `await close()`.

    `retries` applies to `command` only (configuration), never to the cyclic transactions.
    """

    def __init__(
        self, port: str, baudrate: int, *, reply_margin_s: float | None, retries: int
    ) -> None:
        """`reply_margin_s` None: `SERIAL_REPLY_MARGIN_S`, or `PTY_REPLY_MARGIN_S` when the port
        turns out to be a pseudo-terminal (a simulated chain)."""
        self.port = port
        self.baudrate = baudrate
        self.latency_s = 0.0
        self._configured_margin_s = reply_margin_s
        self._reply_margin_s = SERIAL_REPLY_MARGIN_S if reply_margin_s is None else reply_margin_s
        self._retries = retries
        self._return_delays: dict[int, float] = {}
        self._port: _Port | None = None
        self._executor: ThreadPoolExecutor | None = None

    async def open(self, usb_latency_s: float | None) -> None:
        """Open the port; `usb_latency_s` None: read the adapter's latency timer from sysfs.
        Raises DriverOpenError, DriverTimeoutError."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dynamixel-io")
        self._port = await self._io(lambda: _Port(self.port, self.baudrate), timeout_s=2.0)
        if usb_latency_s is None:
            usb_latency_s = await self._io(lambda: _usb_latency_s(self.port), timeout_s=1.0)
        self.latency_s = usb_latency_s
        if self._configured_margin_s is None and await self._io(
            lambda: _is_pty(self.port), timeout_s=1.0
        ):
            self._reply_margin_s = PTY_REPLY_MARGIN_S
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
        """A device's Return Delay Time (s), as read from it; deadlines use the longest."""
        self._return_delays[device_id] = delay_s

    @property
    def return_delay_s(self) -> float:
        """The longest Return Delay Time known (the maximum, 508 µs, before any is known)."""
        return max(self._return_delays.values(), default=dxl.return_delay_s(254))

    def deadline_s(self, request_size: int, reply_sizes: Sequence[int]) -> float:
        """How long a transaction may take: its bus time, the adapter's latency both ways and
        the margin (s)."""
        bus = dxl.transaction_time_s(request_size, reply_sizes, self.baudrate, self.return_delay_s)
        return bus + 2 * self.latency_s + self._reply_margin_s

    async def transact(self, request: bytes, expect: Sequence[int], data_length: int) -> Reply:
        """Send `request` and collect the status packets (of `data_length` data bytes) of the ids
        in `expect` (none: nobody answers). Raises DriverIOError, DriverTimeoutError (hung port).
        """
        port = self._port
        if port is None:
            raise DriverIOError(f"port {self.port!r} is not open")
        reply_size = dxl.status_packet_size(data_length)
        timeout_s = self.deadline_s(len(request), [reply_size] * len(expect))
        return await self._io(
            lambda: port.transact(request, expect, data_length, timeout_s), timeout_s=timeout_s
        )

    async def command(
        self, device: Target, request: bytes, what: str, data_length: int = 0
    ) -> bytes:
        """An instruction the device answers; returns its data, retrying when it stays silent.
        Raises `DriverTimeoutError` (silent), `DeviceFaultError` (refused), `DriverIOError`."""
        attempts = self._retries + 1
        for _ in range(attempts):
            packet = (await self.transact(request, (device.id,), data_length)).packets.get(
                device.id
            )
            if packet is not None:
                break
        else:
            raise DriverTimeoutError(f"{device}: no answer to {what} ({attempts} attempts)")
        if packet.error & ~dxl.ALERT_BIT:
            raise DeviceFaultError(f"{device}: {what}: {dxl.describe_status_error(packet.error)}")
        if len(packet.data) != data_length:
            raise DriverIOError(
                f"{device}: {what}: {len(packet.data)} bytes, expected {data_length}"
            )
        return packet.data

    async def read_item(self, device: Target, address: int, length: int, what: str) -> bytes:
        request = dxl.make_read(device.id, address, length)
        return await self.command(device, request, f"Read of {what} ({address})", length)

    async def write_item(self, device: Target, address: int, data: bytes, what: str) -> None:
        await self.command(device, dxl.make_write(device.id, address, data), f"Write of {what}")

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
