"""The link between the daemon and its control process: messages and their framing.

The control loop runs in a process of its own (`armd.control_process`), so that nothing the MQTT
side does — parsing a flood of goals, planning, collecting garbage — holds the interpreter lock a
tick needs. The two talk over a Unix stream socket pair, in frames of a 4-byte big-endian length
and a pickle (both ends are this package, at the same version: the daemon starts the child).

Daemon → control: `Submit`, `Estop`, `Reset`, `Shutdown`.
Control → daemon: `Opened` or `OpenFailed` once; then `LoopState` after every tick, `Status`,
`FaultChanged`, `TelemetrySample`, `ModeChanged`, `Ready`, `Watchdog` and `Notice` as they happen;
`Closed` last.

The control side never waits for the daemon: it writes into its transport's buffer and drops
`LoopState` frames (the latest wins) while the buffer is backed up; everything else is kept.
"""

from __future__ import annotations

import asyncio
import pickle
import struct
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from armd.loop import MoveRequest, StopRequest
from armd.messages import Fault, Mode, StatusUpdate, Telemetry
from armd.safety import MeasuredState
from armd.trajectory import Setpoint
from drivers import DeviceFault

__all__ = [
    "Closed",
    "Estop",
    "FaultChanged",
    "LoopState",
    "ModeChanged",
    "Notice",
    "OpenFailed",
    "Opened",
    "Ready",
    "Reset",
    "Shutdown",
    "Status",
    "Submit",
    "TelemetrySample",
    "Watchdog",
    "read_message",
    "write_message",
]

_HEADER = struct.Struct(">I")
MAX_FRAME = 16 * 1024 * 1024  # a frame this large is a bug, not a message


# -- daemon → control ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Submit:
    seq: int  # increasing; `LoopState.taken` says which the loop has taken in
    request: MoveRequest | StopRequest


@dataclass(frozen=True, slots=True)
class Estop:
    pass


@dataclass(frozen=True, slots=True)
class Reset:
    pass


@dataclass(frozen=True, slots=True)
class Shutdown:
    """Bring the arm to rest (its goal aborted), disable and close the drives, answer `Closed`."""


# -- control → daemon ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Opened:
    pass


@dataclass(frozen=True, slots=True)
class OpenFailed:
    message: str


@dataclass(frozen=True, slots=True)
class LoopState:
    """What the goal pipeline and the daemon read of the loop, as of one tick."""

    tick: int
    mode: Mode
    taken: int  # the last `Submit.seq` the loop has taken in
    busy: bool
    moving: bool
    measured: MeasuredState | None
    commanded: Setpoint | None
    fault: Fault | None

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """One frame per tick: the six joint arrays travel as one buffer of float64 and the rest
        as plain values (pickling the dataclasses and arrays one by one costs ~0.3 ms a tick)."""
        arrays: list[NDArray[np.float64]] = []
        faults: tuple[tuple[str, DeviceFault], ...] = ()
        if self.measured is not None:
            m = self.measured
            arrays += [m.position, m.velocity, m.timestamp]
            faults = m.faults
        if self.commanded is not None:
            c = self.commanded
            arrays += [c.position, c.velocity, c.acceleration]
        buffer = np.concatenate(arrays).tobytes() if arrays else b""
        flags = (self.measured is not None, self.commanded is not None)
        plain = (self.tick, self.mode.value, self.taken, self.busy, self.moving, self.fault)
        return _loop_state, (*plain, *flags, faults, buffer)


def _loop_state(
    tick: int,
    mode: str,
    taken: int,
    busy: bool,
    moving: bool,
    fault: Fault | None,
    has_measured: bool,
    has_commanded: bool,
    faults: tuple[tuple[str, DeviceFault], ...],
    buffer: bytes,
) -> LoopState:
    measured = commanded = None
    groups = 3 * (has_measured + has_commanded)
    rows = np.frombuffer(buffer, dtype=np.float64).reshape(groups, -1) if groups else None
    if rows is not None and has_measured:
        measured = MeasuredState(rows[0].copy(), rows[1].copy(), rows[2].copy(), faults)
    if rows is not None and has_commanded:
        first = 3 if has_measured else 0
        commanded = Setpoint(*(rows[first + i].copy() for i in range(3)))
    return LoopState(tick, Mode(mode), taken, busy, moving, measured, commanded, fault)


@dataclass(frozen=True, slots=True)
class Status:
    update: StatusUpdate


@dataclass(frozen=True, slots=True)
class FaultChanged:
    fault: Fault | None


@dataclass(frozen=True, slots=True)
class TelemetrySample:
    telemetry: Telemetry


@dataclass(frozen=True, slots=True)
class ModeChanged:
    mode: Mode


@dataclass(frozen=True, slots=True)
class Ready:
    drivers: int


@dataclass(frozen=True, slots=True)
class Watchdog:
    pass


@dataclass(frozen=True, slots=True)
class Notice:
    """A line for systemd's STATUS= (e.g. drivers reconnected)."""

    text: str


@dataclass(frozen=True, slots=True)
class Closed:
    pass


# -- framing ---------------------------------------------------------------------------------------


def write_message(writer: asyncio.StreamWriter, message: object) -> None:
    """Queue one frame on `writer` (never blocks; the transport buffers)."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    writer.write(_HEADER.pack(len(data)) + data)


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
