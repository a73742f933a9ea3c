"""The link between the daemon and its control process: the process's lifecycle messages and the
framing of everything that crosses it.

The control loop runs in a process of its own (`armd.control_process`), so that nothing the MQTT
side does — parsing a flood of goals, planning, collecting garbage — holds the interpreter lock a
tick needs. The two talk over a Unix stream socket pair, in frames of a 4-byte big-endian length
and a pickle (both ends are this package, at the same version: the daemon starts the child).

Daemon → control: the `ControlSetup` (`armd.wiring`) first, then the loop's commands
(`armd.protocol.Command`).
Control → daemon: `Opened` or `OpenFailed` once; then the loop's events (`armd.protocol.Event`)
and `Watchdog` as they happen; `Closed` last.

The control side never waits for the daemon: it writes into its transport's buffer and drops
`Sample` events (the latest wins) while the buffer is backed up; everything else is kept.
"""

from __future__ import annotations

import asyncio
import copyreg
import io
import pickle
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "Closed",
    "OpenFailed",
    "Opened",
    "Watchdog",
    "read_message",
    "write_message",
    "write_messages",
]

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


# -- framing ---------------------------------------------------------------------------------------


def write_message(writer: asyncio.StreamWriter, message: object) -> None:
    """Queue one frame on `writer` (never blocks; the transport buffers)."""
    writer.write(_frame(message))


def write_messages(writer: asyncio.StreamWriter, messages: Iterable[object]) -> None:
    """Queue one frame per message on `writer`, in one write."""
    writer.write(b"".join(map(_frame, messages)))


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


async def read_message(reader: asyncio.StreamReader) -> object | None:
    """The next message, or None at the end of the stream."""
    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ConnectionError("control link: the stream ended inside a frame header") from exc
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ConnectionError(f"control link: frame of {size} bytes (at most {MAX_FRAME})")
    try:
        data = await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise ConnectionError("control link: the stream ended inside a frame") from exc
    message: object = pickle.loads(data)  # our own child process, over a private socket pair
    return message
