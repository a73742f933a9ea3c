"""The reasons of rejected payloads: pydantic's validation errors and the client's values, rendered
for a ``goal/status`` reason that names the field and says why (``position[1]: nan is not a
finite number``). Client values are shown short, JSON-like, and escaped (no log injection)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection, Sequence

from pydantic_core import ErrorDetails

from armd.contract import MAX_CARTESIAN_M, MAX_ID_LENGTH, MAX_JOINT_POSITION, MIN_SPEED

__all__ = ["MAX_REASONS", "join_reasons", "json_kind", "name", "names", "reason", "show"]

MAX_REASONS = 5  # a payload with many mistakes gets the first few, not an essay
_MAX_SHOWN_CHARS = 60  # echoed client values are truncated in reasons
_MAX_SHOWN_NAMES = 20
_ID_RULE = f"must be a non-empty string of at most {MAX_ID_LENGTH} characters"

# Messages for errors about a whole field's shape rather than one of its elements.
_SHAPE_RULES = {
    "position": "must be an array of 3 numbers [x, y, z]",
    "orientation": "must be an array of 4 numbers [w, x, y, z] or null",
    "positions": "must be an object {joint name: position}",
    "points": "must be an object {link name: [x, y, z]}",
}
_SHAPE_ERRORS = {"tuple_type", "too_short", "too_long", "dict_type", "model_type"}


def join_reasons(all_reasons: Sequence[str]) -> str:
    reasons = list(dict.fromkeys(all_reasons))  # distinct, in order
    more = len(reasons) - MAX_REASONS
    text = "; ".join(reasons[:MAX_REASONS])
    return f"{text}; and {more} more" if more > 0 else text


def reason(error: ErrorDetails, fields: Collection[str]) -> str:
    loc = error["loc"]
    kind = error["type"]
    value = error.get("input")
    head = str(loc[0]) if loc else ""
    if head == "points" and len(loc) > 1 and (kind in _SHAPE_ERRORS or kind == "missing"):
        return f"{_path(loc[:2])}: must be an array of 3 numbers [x, y, z]"
    if head == "id" and kind != "extra_forbidden":
        prefix = "required field is missing; it " if kind == "missing" else ""
        return f"id: {prefix}{_ID_RULE}"
    if head in _SHAPE_RULES and (kind in _SHAPE_ERRORS or (kind == "missing" and len(loc) > 1)):
        return f"{head}: {_SHAPE_RULES[head]}"
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(head, fields, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{_path(loc)}: unknown field{hint}"
    if kind == "float_type" and isinstance(value, int) and not isinstance(value, bool):
        kind = "finite_number"  # an integer too large for a float
    if kind in _BOUND_ERRORS and head in _BOUNDS:
        return f"{_path(loc)}: {show(value)} {_BOUNDS[head]}"
    template = _TEMPLATES.get(kind, "{field}: {message}")
    return template.format(
        field=_path(loc),
        value=show(value),
        expected=error.get("ctx", {}).get("expected", ""),
        message=error["msg"],
    )


_TEMPLATES = {
    "missing": "{field}: required field is missing",
    "finite_number": "{field}: {value} is not a finite number",
    "float_type": "{field}: {value} is not a number",
    "string_type": "{field}: {value} is not a string",
    "bool_type": "{field}: {value} is not true or false",
    "literal_error": "{field}: {value} must be {expected}",
}
# The bounded fields: speed, and Cartesian (`position`, `points`) or joint positions.
_BOUNDS = {
    "speed": f"must be in [{MIN_SPEED:g}, 1]",
    "position": f"must be within ±{MAX_CARTESIAN_M:g} m",
    "points": f"must be within ±{MAX_CARTESIAN_M:g} m",
    "positions": f"must be within ±{MAX_JOINT_POSITION:g} (rad or m)",
}
_BOUND_ERRORS = {"greater_than_equal", "less_than_equal"}


def _path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(("." if parts else "") + name(part))
    return "".join(parts) or "payload"


def show(value: object) -> str:
    """A short, JSON-like rendering of a client's value for a reason."""
    return _clip(_render(value, depth=0))


def _render(value: object, depth: int) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)  # null, true, false as the client wrote them
    if isinstance(value, int):
        text = str(value) if value.bit_length() < 200 else "a huge integer"
    elif isinstance(value, float | str):
        text = repr(value)  # nan, inf; strings quoted with control characters escaped
    elif isinstance(value, list | tuple):
        items = [_render(v, depth + 1) for v in value[:8]] if depth < 2 else ["..."]
        text = "[" + ", ".join(items) + (", ...]" if len(value) > 8 else "]")
    else:
        text = "{...}" if isinstance(value, dict) else type(value).__name__
    return text


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN_CHARS else text[: _MAX_SHOWN_CHARS - 3] + "..."


def name(text: str) -> str:
    """A client-chosen key for a reason: as is when printable, else escaped (no log injection)."""
    return _clip(text if text.isprintable() else repr(text))


def names(names: Collection[str]) -> str:
    shown = list(names)
    text = ", ".join(shown[:_MAX_SHOWN_NAMES])
    return f"[{text}{', ...' if len(shown) > _MAX_SHOWN_NAMES else ''}]"


def json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
