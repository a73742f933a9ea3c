"""python-can plumbing shared by the CAN drivers and the simulated CAN devices.

``bus.recv`` blocks, so a `CanLink` receives on a daemon thread and hands every message to a
callback; coroutines that wait for an answer are woken through an asyncio event (`wait_for`).
Sends never block the event loop: each frame is a non-blocking write (timeout 0), so a full
transmit queue is a `DriverIOError` at once instead of a stalled control tick. Opening a bus may
block too (SocketCAN, a USB adapter): `open_bus` runs it on a worker thread with a deadline.

Frames are the codecs' `Frame` (classic CAN, 11-bit ids; `drivers.can_bus.frame`);
`frame_to_message` and `message_to_frame` convert them to and from python-can messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import can

from drivers.can_bus.frame import Frame
from drivers.errors import DriverIOError, DriverOpenError

__all__ = [
    "BUS_OPEN_ERRORS",
    "BusFactory",
    "CanLink",
    "frame_to_message",
    "make_bus",
    "message_to_frame",
    "open_bus",
]

log = logging.getLogger(__name__)

BusFactory = Callable[[], can.BusABC]
MessageHandler = Callable[[can.Message], None]

BUS_OPEN_ERRORS = (can.CanError, OSError, ValueError, ImportError)
"""What `can.Bus` raises for an interface or channel it cannot open (ImportError: a backend whose
optional dependency is missing)."""


def frame_to_message(frame: Frame) -> can.Message:
    """A python-can message for a codec frame (11-bit id; RTR frames carry only a DLC)."""
    if frame.remote_dlc is not None:
        return can.Message(
            arbitration_id=frame.arbitration_id,
            is_extended_id=False,
            is_remote_frame=True,
            dlc=frame.remote_dlc,
        )
    return can.Message(arbitration_id=frame.arbitration_id, data=frame.data, is_extended_id=False)


def message_to_frame(message: can.Message) -> Frame:
    dlc = message.dlc if message.is_remote_frame else None
    return Frame(message.arbitration_id, bytes(message.data or b""), dlc)


def make_bus(
    interface: str,
    channel: str,
    *,
    bitrate: int | None = None,
    can_filters: Sequence[dict[str, Any]] | None = None,
    hop_limit: int = 0,
) -> can.BusABC:
    """``can.Bus`` with the options that are given (None: the interface's default, e.g. the bit
    rate set by ``ip link`` for SocketCAN). `hop_limit` is udp_multicast's IP TTL, 0 by default
    (python-can's is 1): armd uses udp_multicast between processes of one host, and frames must
    not leave it. Other interfaces ignore it. A udp_multicast bus hears its own group only
    (`_own_group_only`). Raises what `can.Bus` raises (`BUS_OPEN_ERRORS`)."""
    kwargs: dict[str, Any] = {}
    if interface == "udp_multicast":
        kwargs["hop_limit"] = hop_limit
    if can_filters is not None:
        kwargs["can_filters"] = list(can_filters)
    if bitrate is not None:
        kwargs["bitrate"] = bitrate
    bus = can.Bus(interface=interface, channel=channel, **kwargs)
    if interface == "udp_multicast":
        try:
            _own_group_only(bus.fileno())
        except OSError as exc:  # a kernel without the option (IPv6 before Linux 4.20)
            log.warning("udp_multicast %s: hears every group on its port (%s)", channel, exc)
    return bus


# Linux's socket options (<linux/in.h>, <linux/in6.h>); Python's socket module lacks them.
_IP_MULTICAST_ALL, _IPV6_MULTICAST_ALL = 49, 29


def _own_group_only(fd: int) -> None:
    """python-can's udp_multicast socket is bound to its port on every address, and Linux then
    hands it the datagrams of every group any socket of the host joined on that port: two buses
    on two groups (two arms, two test runs) would hear each other's frames. With
    ``IP_MULTICAST_ALL`` off (``IPV6_MULTICAST_ALL`` for IPv6; Linux ≥ 4.20) it hears the group it
    joined only. Elsewhere than Linux the option does not exist and nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    sock = socket.socket(fileno=os.dup(fd))  # the same socket; closing the copy keeps the bus's
    try:
        if sock.family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, _IPV6_MULTICAST_ALL, 0)
        else:
            sock.setsockopt(socket.IPPROTO_IP, _IP_MULTICAST_ALL, 0)
    finally:
        sock.close()


async def open_bus(factory: BusFactory, *, timeout_s: float, label: str) -> can.BusABC:
    """Run `factory` on a worker thread and wait at most `timeout_s` for the bus; a bus that opens
    after that is shut down. Raises DriverOpenError (the message starts with `label`)."""
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(None, factory)
    try:
        async with asyncio.timeout(timeout_s):  # not wait_for, which can swallow a cancellation
            return await asyncio.shield(future)
    except TimeoutError as exc:
        future.add_done_callback(_shutdown_late_bus)
        raise DriverOpenError(f"{label}: not open after {timeout_s} s") from exc
    except BUS_OPEN_ERRORS as exc:
        raise DriverOpenError(f"{label}: cannot open: {exc}") from exc


def _shutdown_late_bus(future: asyncio.Future[can.BusABC]) -> None:
    """Release a bus whose opening finished after we gave up on it."""
    if not future.cancelled() and future.exception() is None:
        future.result().shutdown()


class CanLink:
    """An open bus and the thread that receives from it; `label` names the bus in messages.

    `start()` (on the event loop that will call `wait_for`) starts receiving; `on_message(message)`
    then runs on the receiver thread for every message, after which waiters are woken. When
    receiving fails (the bus went away), the error is logged and kept: `raise_if_failed` and
    `wait_for` raise DriverIOError from then on. `await close()` stops the thread and shuts the bus
    down.
    """

    def __init__(
        self,
        bus: can.BusABC,
        on_message: MessageHandler,
        *,
        label: str,
        poll_s: float = 0.02,
        thread_name: str = "can-rx",
    ) -> None:
        self.bus = bus
        self.label = label
        self._on_message = on_message
        self._poll_s = poll_s  # s: how long closing may wait for the receiver thread
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, name=thread_name, daemon=True)
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._waiters = 0

    @property
    def error(self) -> BaseException | None:
        """Why receiving stopped, if it failed."""
        return self._error

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread.start()

    async def close(self) -> None:
        """Stop receiving and shut the bus down. Never raises: a failure is logged."""
        self._stop.set()
        try:
            if self._thread.is_alive():
                await asyncio.to_thread(self._thread.join, 2 * self._poll_s + 1.0)
            self.bus.shutdown()
        except Exception as exc:  # closing must not raise: log and release what is left
            log.warning("%s: error while closing: %s", self.label, exc)

    def send(self, frames: Iterable[Frame]) -> None:
        """Send a batch now, each frame a non-blocking write (timeout 0). Raises DriverIOError."""
        try:
            for frame in frames:
                self.bus.send(frame_to_message(frame), timeout=0.0)
        except (can.CanError, OSError, ValueError) as exc:
            raise DriverIOError(f"{self.label}: send failed: {exc}") from exc

    def raise_if_failed(self) -> None:
        """Raises DriverIOError when receiving has failed."""
        exc = self._error
        if exc is not None:
            raise DriverIOError(f"{self.label}: bus failed: {exc}") from exc

    async def wait_for(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `done()` holds, evaluating it now and after every received message; False
        after `timeout_s`. Raises DriverIOError when receiving fails meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self._waiters += 1
        try:
            while True:
                self._wake.clear()
                self.raise_if_failed()
                if done():
                    return True
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                try:
                    async with asyncio.timeout(remaining):
                        await self._wake.wait()
                except TimeoutError:
                    pass
        finally:
            self._waiters -= 1

    # -- the receiver thread -------------------------------------------------------------------

    def _receive(self) -> None:
        try:
            while not self._stop.is_set():
                message = self.bus.recv(self._poll_s)
                if message is not None:
                    self._on_message(message)
                    self._wake_waiters()
        except Exception as exc:  # thread boundary: the bus is gone; waiters now raise
            if not self._stop.is_set():
                self._error = exc
                log.error("%s: receiving failed: %s", self.label, exc)
        self._wake_waiters()

    def _wake_waiters(self) -> None:
        loop = self._loop
        if self._waiters and loop is not None:
            # A closed loop (RuntimeError) means nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._wake.set)
