"""`armd goal trajectory`'s points, as the goal's ``joints`` and ``points`` fields
(docs/mqtt.md#trajectories), from one of:

- ``FILE.json``: an object with those two fields of the goal, ``{"joints": [NAME, ...],
  "points": [{"t": S, "positions": [...], "velocities": [...]}, ...]}`` (velocities optional);
- ``FILE.csv``: a header ``t,NAME,NAME...`` and one row per point: its time (s) and each joint's
  position (rad or m), e.g. as a spreadsheet writes it;
- ``--point t=S NAME=VALUE ...``, once per point: its time and each joint's position, the joints
  named as ``armd goal joints`` names them, the same ones in every point.

A file or an argument that cannot make those fields raises `UsageError` naming the file and
line, or the point; the values (times increasing, joints known, positions within the limits) are
the daemon's to check, which the caller asks first (`armd.api.payloads.parse_goal`).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from armd.cli.common import UsageError

__all__ = ["named_values", "trajectory_fields"]

FIELDS = ("joints", "points")


def named_values(items: list[str], where: str, *, timed: bool = False) -> dict[str, float]:
    """``NAME=VALUE`` words as {name: value}, finite numbers; `where` starts each error. With
    `timed`, ``t`` is a time (s), the other names joints (rad or m)."""
    values: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise UsageError(f"{where}: {item!r}: expected NAME=VALUE")
        if name in values:
            raise UsageError(f"{where}: {name}: given twice")
        try:
            values[name] = float(text)
        except ValueError:
            unit = "s" if timed and name == "t" else "rad or m"
            raise UsageError(f"{where}: {name}: {text!r} must be a number ({unit})") from None
        if not math.isfinite(values[name]):
            raise UsageError(f"{where}: {name}: {text!r} must be finite")
    return values


def trajectory_fields(file: Path | None, points: list[list[str]] | None) -> dict[str, Any]:
    """The goal's ``joints`` and ``points`` from `file` or from the ``--point`` arguments."""
    if (file is None) == (points is None):
        raise UsageError(
            "trajectory: give the points either in a FILE (.json or .csv) or as --point t=S "
            "NAME=VALUE ..., one of them"
        )
    if points is not None:
        return _from_points(points)
    assert file is not None
    suffix = file.suffix.lower()
    if suffix == ".json":
        return _from_json(file, _read(file))
    if suffix == ".csv":
        return _from_csv(file, _read(file))
    raise UsageError(f"trajectory: {file}: expected a .json or .csv file")


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"trajectory: {file}: {exc}") from None


def _from_points(arguments: list[list[str]]) -> dict[str, Any]:
    joints: list[str] = []
    points: list[dict[str, Any]] = []
    for number, words in enumerate(arguments, 1):
        where = f"trajectory: --point {number}"
        values = named_values(words, where, timed=True)
        if "t" not in values:
            raise UsageError(f"{where}: t=S is missing: each point starts with its time")
        t = values.pop("t")
        if number == 1:
            joints = list(values)
        if not values:
            raise UsageError(f"{where}: no joint: expected NAME=VALUE after t={t:g}")
        if set(values) != set(joints):
            raise UsageError(
                f"{where}: names {', '.join(values)}; every point names the first one's joints: "
                f"{', '.join(joints)}"
            )
        points.append({"t": t, "positions": [values[name] for name in joints]})
    return {"joints": joints, "points": points}


def _from_json(file: Path, text: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"trajectory: {file}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(document, dict):
        raise UsageError(f'trajectory: {file}: expected an object {{"joints": ..., "points": ...}}')
    unknown = sorted(set(document) - set(FIELDS))
    missing = [name for name in FIELDS if name not in document]
    if unknown or missing:
        problem = f"unknown field {unknown[0]!r}" if unknown else f"{missing[0]!r} is missing"
        raise UsageError(
            f"trajectory: {file}: {problem}; the file has the goal's joints and points"
        )
    return {name: document[name] for name in FIELDS}


def _from_csv(file: Path, text: str) -> dict[str, Any]:
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    points: list[dict[str, Any]] = []
    for row in reader:
        cells = [cell.strip() for cell in row]
        if not any(cells):
            continue
        where = f"trajectory: {file}:{reader.line_num}"
        if header is None:
            if len(cells) < 2 or cells[0] != "t" or not all(cells[1:]):
                raise UsageError(f"{where}: the header must be t,NAME,...; it is {','.join(cells)}")
            header = cells
            continue
        if len(cells) != len(header):
            raise UsageError(f"{where}: {len(cells)} values; the header names {len(header)}")
        pairs = [f"{name}={cell}" for name, cell in zip(header, cells, strict=True)]
        values = named_values(pairs, where, timed=True)
        points.append({"t": values["t"], "positions": [values[name] for name in header[1:]]})
    if header is None:
        raise UsageError(f"trajectory: {file}: empty; expected a header t,NAME,... and rows")
    return {"joints": header[1:], "points": points}
