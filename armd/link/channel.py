"""The link between the daemon and its control process: the process's lifecycle messages and the
framing of everything that crosses it.

The control loop runs in a process of its own (`armd.control.process`), so that nothing the MQTT
side does — parsing a flood of goals, planning, collecting garbage — holds the interpreter lock a
tick needs. The two talk over a Unix stream socket pair, in frames of a 4-byte big-endian length
and a pickle (both ends are this package, at the same version: the daemon starts the child).

Daemon → control: the `ControlSetup` (`armd.control.wiring`) first, then the loop's commands
(`armd.link.protocol.Command`).
Control → daemon: `Opened` or `OpenFailed` once; then the loop's events (`armd.link.protocol.Event`)
and `Watchdog` as they happen; `Closed` last.

Each end is a `Link`, an asyncio protocol: a frame is handed to its handler from the read
callback itself, so no task wakes up for it (a command reaches the loop, an event the daemon, one
event-loop iteration sooner: on this kind of VM an iteration after a sleep costs tens of µs).
The control side never waits for the daemon: it writes into its transport's buffer and drops
`Sample` events (the latest wins) while the buffer is backed up; everything else is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import copyreg
import io
import pickle
import socket
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

__all__ = ["Closed", "Link", "OpenFailed", "Opened", "Watchdog"]

_HEADER = struct.Struct(">I")
MAX_FRAME = 16 * 1024 * 1024  # a frame this large is a bug, not a message


@dataclass(frozen=True, slots=True)
class Opened:
    """The drivers are open; the loop runs."""


@dataclass(frozen=True, slots=True)
class OpenFailed:
    message: str


@dataclass(frozen=True, slots=True)
class Watchdog:
    """The loop ticks: feed systemd's watchdog."""


@dataclass(frozen=True, slots=True)
class Closed:
    """The arm is at rest and the drives are disabled and closed."""


# -- one end of the link ---------------------------------------------------------------------------


class Link(asyncio.Protocol):
    """One end of the control link, on a connected stream socket (`connect`).

    Messages are read as they arrive: until `handle_with` names a handler they wait for `next`;
    from then on each goes to the handler from the read callback. `send` and `send_all` queue
    frames in the transport's buffer (never blocking; `backlog` bytes wait). `closed` waits for
    the end of the stream: it returns at a clean end, between frames, and raises
    `ConnectionError` otherwise (a torn or absurd frame, a broken socket, a handler that raised).
    """

    def __init__(self) -> None:
        self._handler: Callable[[object], None] | None = None
        self._held: deque[object] = deque()  # read before there was a handler
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._ended.add_done_callback(_retrieve)  # raised by `closed`, to whoever waits
        self._arrival: asyncio.Future[None] | None = None

    @classmethod
    async def connect(cls, sock: socket.socket) -> Link:
        _, link = await asyncio.get_running_loop().create_unix_connection(cls, sock=sock)
        return link

    # -- reading ----------------------------------------------------------------------------------

    async def next(self) -> object | None:
        """The next message not given to a handler; None once the stream has ended."""
        while not self._held:
            if self._ended.done():
                self._ended.result()  # raises the ConnectionError of a broken stream
                return None
            self._arrival = asyncio.get_running_loop().create_future()
            await self._arrival
        return self._held.popleft()

    def handle_with(self, handler: Callable[[object], None]) -> None:
        """Give every message from now on to `handler` (those already read first, in order)."""
        self._handler = handler
        while self._held:
            handler(self._held.popleft())

    async def closed(self) -> None:
        """Wait for the end of the stream (see the class docstring)."""
        await asyncio.wait([self._ended])  # never cancels the shared future
        self._ended.result()

    # -- writing ----------------------------------------------------------------------------------

    def send(self, message: object) -> None:
        """Queue one frame (dropped once the link is closing: nobody would read it)."""
        if not self.closing:
            cast(asyncio.Transport, self._transport).write(_frame(message))

    def send_all(self, messages: Iterable[object]) -> None:
        """Queue one frame per message, in one write."""
        if not self.closing:
            cast(asyncio.Transport, self._transport).write(b"".join(map(_frame, messages)))

    @property
    def backlog(self) -> int:
        """Bytes queued and not yet taken by the socket."""
        return 0 if self._transport is None else self._transport.get_write_buffer_size()

    @property
    def closing(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    def close(self) -> None:
        """Close once the queued frames are written (`closed` then returns)."""
        if self._transport is not None:
            self._transport.close()

    async def finish(self, timeout_s: float) -> None:
        """The last word: end this side after the queued frames (a half close), drop what the
        peer still sends until it ends its side too (at most `timeout_s`), then close.

        Closing at once instead races the peer: a frame it writes after the close fails (a
        broken pipe), and its transport drops with it the frames it had not read yet, the last
        of them (`Closed`) among them."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        self._handler = _drop
        self._held.clear()
        transport.write_eof()
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(timeout_s):
                await self.closed()
        transport.close()

    # -- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        start = 0
        try:
            while len(buffer) - start >= _HEADER.size:
                (size,) = _HEADER.unpack_from(buffer, start)
                if size > MAX_FRAME:
                    reason = f"control link: frame of {size} bytes (at most {MAX_FRAME})"
                    self._end(ConnectionError(reason))
                    cast(asyncio.Transport, self._transport).abort()
                    return
                end = start + _HEADER.size + size
                if len(buffer) < end:
                    break
                # our own process's peer, over a private socket pair
                message: object = pickle.loads(buffer[start + _HEADER.size : end])
                start = end
                self._deliver(message)
        finally:
            del buffer[:start]

    def eof_received(self) -> bool | None:
        return None  # the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None and self._buffer:
            exc = ConnectionError("control link: the stream ended inside a frame")
        elif exc is not None and not isinstance(exc, ConnectionError):
            error = ConnectionError(f"control link: {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            exc = error
        self._end(exc)

    def _deliver(self, message: object) -> None:
        if self._handler is not None:
            self._handler(message)
            return
        self._held.append(message)
        self._wake()

    def _end(self, exc: Exception | None) -> None:
        if not self._ended.done():
            if exc is None:
                self._ended.set_result(None)
            else:
                self._ended.set_exception(exc)
        self._wake()

    def _wake(self) -> None:
        if self._arrival is not None and not self._arrival.done():
            self._arrival.set_result(None)


def _drop(message: object) -> None:
    pass


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


# -- framing ---------------------------------------------------------------------------------------


def _frame(message: object) -> bytes:
    stream = io.BytesIO()
    _LinkPickler(stream, protocol=pickle.HIGHEST_PROTOCOL).dump(message)
    data = stream.getbuffer()
    return _HEADER.pack(len(data)) + data


def _array(data: bytes, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(bytearray(data), dtype=dtype).reshape(shape)  # writable, as pickled


def _reduce_array(array: np.ndarray) -> Any:
    """A numeric array as its bytes: numpy's own reduction runs Python code on both ends that
    costs ~30 µs per round trip, several times that on a cold cache (every command carries 4)."""
    if array.dtype.kind not in "biuf" or array.dtype.fields is not None:
        return array.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    return _array, (array.tobytes(), array.dtype.str, array.shape)


_DISPATCH: dict[type, Any] = {**copyreg.dispatch_table, np.ndarray: _reduce_array}


class _LinkPickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, protocol: int) -> None:
        super().__init__(file, protocol)
        self.dispatch_table = _DISPATCH
