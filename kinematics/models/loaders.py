"""Model files: load a `KinematicTree` from ``.kinematic.json`` or URDF, save ``.kinematic.json``.

The format is chosen by the file's suffix (case-insensitive): ``.kinematic.json`` (or any
``.json``) is the armd format of `kinematics.models.kinematic_json`; ``.urdf`` is URDF
(`kinematics.models.urdf`). A model's name is the document's (``"name"`` / ``<robot name>``),
else the file name without its suffix (``.kinematic.json`` files only: URDF requires
``<robot name>``).

This is the only module of `kinematics` that touches the file system.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from kinematics.errors import ModelError
from kinematics.models.kinematic_json import tree_from_dict, tree_to_dict
from kinematics.models.urdf import tree_from_urdf
from kinematics.tree import KinematicTree

__all__ = [
    "JSON_SUFFIXES",
    "URDF_SUFFIXES",
    "load_tree",
    "model_format",
    "model_name",
    "save_tree",
    "tree_from_dict",
    "tree_to_dict",
]

JSON_SUFFIXES = (".kinematic.json", ".json")
URDF_SUFFIXES = (".urdf",)


def model_format(path: str | Path) -> Literal["json", "urdf"]:
    """``"json"`` or ``"urdf"`` by the suffix of `path`; anything else raises `ModelError`."""
    lowered = Path(path).name.lower()
    if lowered.endswith(JSON_SUFFIXES):
        return "json"
    if lowered.endswith(URDF_SUFFIXES):
        return "urdf"
    accepted = ", ".join(JSON_SUFFIXES + URDF_SUFFIXES)
    raise ModelError(f"{path}: unsupported model file suffix (accepted: {accepted})")


def model_name(path: str | Path) -> str:
    """The file name without its model suffix: ``arms/ur5.kinematic.json`` → ``ur5``."""
    name = Path(path).name
    for suffix in JSON_SUFFIXES + URDF_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return Path(path).stem


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ModelError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _decode_json(path: Path, raw: bytes) -> object:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ModelError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    except RecursionError as exc:
        raise ModelError(f"{path}: invalid JSON: nested too deeply") from exc


def load_tree(path: str | Path) -> KinematicTree:
    """Load a model file (format by suffix). Raises `ModelError` naming the path and the problem:
    unsupported suffix, unreadable file, invalid JSON/XML (with line and column), invalid model."""
    path = Path(path)
    kind = model_format(path)
    raw = _read(path)
    if kind == "urdf":
        return tree_from_urdf(raw, source=str(path))
    return tree_from_dict(_decode_json(path, raw), source=str(path), name=model_name(path))


def save_tree(tree: KinematicTree, path: str | Path) -> None:
    """Write `tree` as ``.kinematic.json`` to `path` (which must end in ``.json``).

    The model's name is written only when it differs from the one the file name gives. Raises
    `ModelError` for another suffix and `OSError` when the file cannot be written.
    """
    path = Path(path)
    if not path.name.lower().endswith(JSON_SUFFIXES):
        raise ModelError(f"{path}: can only write .kinematic.json files (suffix .json)")
    doc = tree_to_dict(tree, include_name=tree.name != model_name(path))
    path.write_text(_dumps(doc) + "\n", encoding="utf-8")


def _dumps(value: Any, indent: str = "") -> str:
    """JSON that reads like the example of docs/kinematic-json.md: a value that fits on its line
    stays on it, otherwise objects and lists open one entry per line."""
    line = json.dumps(value, allow_nan=False)
    if len(indent) + len(line) <= 88 or not isinstance(value, dict | list) or not value:
        return line
    inner = indent + "  "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {_dumps(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    items = [inner + _dumps(v, inner) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + indent + "]"
