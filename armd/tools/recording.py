"""Recordings of an arm's measured state (`armd record`) and what `armd replay` makes of them.

The format is CSV with one header row and one row per ``state`` message (docs/recording.md): read
by pandas, numpy, spreadsheets and every plotting tool, with no dependency (Parquet would need
pyarrow, ~100 MB, for files of a few MB). A name ending in ``.gz`` is gzip-compressed (pandas and
``zcat`` read it as is). Columns, in this order:

- ``t``: s, the robot computer's monotonic clock at the loop's sample (the state's ``t``);
- ``received``: s, the recorder's monotonic clock when the state arrived (the same clock as the
  daemon's on one machine: it shows the delivery delay, and aligns the stream file);
- ``mode``, ``missed_ticks``: as in the state;
- ``<joint>.position``, ``<joint>.velocity``, ``<joint>.effort`` for every joint in the model's
  order (rad or m, per s; effort in the device's units, empty where the device reports none);
- ``tcp.x``, ``tcp.y``, ``tcp.z`` (m) and ``tcp.qw``, ``tcp.qx``, ``tcp.qy``, ``tcp.qz``: the
  measured pose of the config's tool link.

`simplify` keeps the fewest samples from which the straight lines between them stay within a
tolerance of every recorded position (Ramer-Douglas-Peucker in joint space, over time), so that a
recording fits a ``trajectory`` goal's bounds.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
from numpy.typing import NDArray

from armd.errors import ArmdError

__all__ = [
    "Recording",
    "RecordingError",
    "StateWriter",
    "header",
    "open_text",
    "read_recording",
    "simplify",
    "stream_path",
]

Array = NDArray[np.float64]
_TCP = ("tcp.x", "tcp.y", "tcp.z", "tcp.qw", "tcp.qx", "tcp.qy", "tcp.qz")
_QUANTITIES = ("position", "velocity", "effort")


class RecordingError(ArmdError):
    """A recording that cannot be read (the message names the file, the line and the column)."""


def open_text(path: Path, mode: Literal["r", "w"]) -> IO[str]:
    """`path` opened as text for reading or writing, through gzip for ``*.gz``."""
    if path.suffix == ".gz":
        binary = gzip.GzipFile(path, mode + "b")
        return io.TextIOWrapper(binary, encoding="utf-8", newline="")
    return path.open(mode, encoding="utf-8", newline="")


def stream_path(out: Path) -> Path:
    """Where the stream's messages go beside the recording `out`: ``demo.csv`` →
    ``demo.stream.jsonl``, ``demo.csv.gz`` → ``demo.stream.jsonl.gz``."""
    gz = out.suffix == ".gz"
    stem = Path(out.stem).stem if gz else out.stem
    return out.with_name(f"{stem}.stream.jsonl" + (".gz" if gz else ""))


def header(joints: Sequence[str]) -> list[str]:
    columns = ["t", "received", "mode", "missed_ticks"]
    columns += [f"{joint}.{quantity}" for joint in joints for quantity in _QUANTITIES]
    return columns + list(_TCP)


class StateWriter:
    """Writes ``state`` messages as rows; the joints are those of the first state."""

    def __init__(self, stream: IO[str]) -> None:
        self._writer = csv.writer(stream, lineterminator="\n")
        self._stream = stream
        self.joints: tuple[str, ...] | None = None
        self.rows = 0
        self.first_t: float | None = None
        self.last_t: float | None = None

    def write(self, state: Mapping[str, Any], received: float) -> bool:
        """One row for a ``state`` payload; False (nothing written) for one without a time or
        whose time does not advance (a duplicate delivery)."""
        t = state.get("t")
        if not isinstance(t, int | float) or (self.last_t is not None and t <= self.last_t):
            return False
        joints: Mapping[str, Any] = state.get("joints") or {}
        if self.joints is None:
            self.joints = tuple(joints)
            self._writer.writerow(header(self.joints))
        row: list[object] = [repr(float(t)), f"{received:.6f}", state.get("mode", "")]
        row.append(state.get("missed_ticks", ""))
        for joint in self.joints:
            values = joints.get(joint) or {}
            row += [_cell(values.get(quantity)) for quantity in _QUANTITIES]
        tcp = state.get("tcp") or {}
        pose = list(tcp.get("position") or [None] * 3) + list(tcp.get("orientation") or [None] * 4)
        row += [_cell(value) for value in pose[: len(_TCP)]]
        self._writer.writerow(row)
        self.rows += 1
        self.first_t = t if self.first_t is None else self.first_t
        self.last_t = t
        return True

    def flush(self) -> None:
        self._stream.flush()


def _cell(value: object) -> str:
    return repr(float(value)) if isinstance(value, int | float) else ""


@dataclass(frozen=True, slots=True)
class Recording:
    """The joint columns of a recording: `times` (m,), s from its first row; `positions` and
    `velocities` (m, n) of `joints`."""

    joints: tuple[str, ...]
    times: Array
    positions: Array
    velocities: Array


def read_recording(path: Path) -> Recording:
    """The recording at `path` (CSV, gzip for ``*.gz``). Raises `RecordingError` naming the line
    and column of the first problem, or `OSError`."""
    try:
        with open_text(path, "r") as stream:
            rows = list(csv.reader(stream))
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError, csv.Error) as exc:
        raise RecordingError(f"{path}: not a readable CSV recording: {exc}") from None
    if not rows or "t" not in rows[0]:
        raise RecordingError(f"{path}: no header row with a 't' column (see docs/recording.md)")
    columns = {name: i for i, name in enumerate(rows[0])}
    joints = tuple(name.removesuffix(".position") for name in rows[0] if name.endswith(".position"))
    if not joints:
        raise RecordingError(f"{path}: no '<joint>.position' column")
    if len(rows) < 3:
        raise RecordingError(f"{path}: {len(rows) - 1} sample(s); a replay needs at least 2")
    wanted = ["t"] + [f"{j}.{q}" for j in joints for q in ("position", "velocity")]
    table = np.empty((len(rows) - 1, len(wanted)))
    for line, row in enumerate(rows[1:], start=2):
        for k, name in enumerate(wanted):
            table[line - 2, k] = _number(path, line, name, row, columns)
    times = table[:, 0]
    if not np.all(np.diff(times) > 0.0):
        bad = int(np.argmin(np.diff(times) > 0.0)) + 3
        raise RecordingError(f"{path}:{bad}: t does not increase")
    return Recording(joints, times - times[0], table[:, 1::2], table[:, 2::2])


def _number(path: Path, line: int, name: str, row: list[str], columns: Mapping[str, int]) -> float:
    index = columns.get(name)
    text = row[index] if index is not None and index < len(row) else ""
    try:
        value = float(text) if text or not name.endswith(".velocity") else 0.0
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise RecordingError(f"{path}:{line}: column {name}: {text!r} is not a finite number")
    return value


def simplify(times: Array, positions: Array, tolerance: float) -> NDArray[np.intp]:
    """The indices of the samples to keep (the first and last always): every dropped sample is
    within `tolerance` (per joint) of the straight line between the kept ones around it."""
    keep = np.zeros(times.shape[0], dtype=bool)
    keep[0] = keep[-1] = True
    pending = [(0, times.shape[0] - 1)]
    while pending:
        first, last = pending.pop()
        if last - first < 2:
            continue
        inner = slice(first + 1, last)
        fraction = (times[inner] - times[first]) / (times[last] - times[first])
        line = positions[first] + fraction[:, None] * (positions[last] - positions[first])
        error = np.abs(positions[inner] - line).max(axis=1)
        worst = int(np.argmax(error))
        if error[worst] > tolerance:
            split = first + 1 + worst
            keep[split] = True
            pending += [(first, split), (split, last)]
    return np.flatnonzero(keep)
