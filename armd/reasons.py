"""How armd says what is wrong with input it was given: one renderer for pydantic's validation
errors, shared by config files (`armd.config.schema`) and MQTT payloads (`armd.api.payloads`).

A reason names the place, the value as the user wrote it, and what was expected::

    joints.elbow.gear_ratio: -3 must be > 0              (config file, YAML spelling)
    position[1]: nan must be a finite number             (payload, JSON spelling)
    drivers.sim.params.timeout: unknown option; did you mean 'reply_timeout_s'? ...

The two kinds of input differ only in their `Vocabulary`: what an entry is called (an *option* of
a config file, a *field* of a payload) and how values are spelled back (YAML or JSON). Values are
shown short and escaped, so a client cannot inject lines into logs through a reason.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from pydantic_core import ErrorDetails

__all__ = [
    "CONFIG",
    "PAYLOAD",
    "Loc",
    "Vocabulary",
    "join",
    "key_name",
    "missing",
    "names",
    "path",
    "show_json",
    "show_yaml",
    "unknown",
    "value_problem",
]

Loc = tuple[str | int, ...]
"""A path into a document: ``("joints", "elbow", "gear_ratio")``, ``("position", 1)``."""

MAX_SHOWN_CHARS = 60  # echoed values are truncated
_MAX_SHOWN_NAMES = 20


def _clip(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 3] + "..."


def show_json(value: object) -> str:
    """A short rendering of a value in JSON spelling (``null``, ``true``, ``nan``, ``[1, 2]``)."""
    return _clip(_render(value, depth=0))


def _render(value: object, depth: int) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value) if value.bit_length() < 200 else "a huge integer"
    if isinstance(value, float | str):
        return repr(value)  # nan, inf; strings quoted with control characters escaped
    if isinstance(value, list | tuple):
        items = [_render(v, depth + 1) for v in value[:8]] if depth < 2 else ["..."]
        return "[" + ", ".join(items) + (", ...]" if len(value) > 8 else "]")
    return "{...}" if isinstance(value, dict) else type(value).__name__


def show_yaml(value: object) -> str:
    """A short rendering of a value in YAML spelling (``null``, ``true``, ``1e-06``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return _clip(repr(value))


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """How one kind of input is talked about."""

    entry: str  # what a key is called: "option", "field"
    show: Callable[[object], str]


CONFIG = Vocabulary("option", show_yaml)
PAYLOAD = Vocabulary("field", show_json)


def key_name(text: str) -> str:
    """A user-chosen key, as is when printable, else escaped (no log injection)."""
    return _clip(text if text.isprintable() else repr(text))


def path(loc: Loc) -> str:
    """``joints.elbow.limits``, ``position[1]``; keys escaped as `key_name` does."""
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(("." if parts else "") + key_name(part))
    return "".join(parts)


def names(items: Collection[str]) -> str:
    """A list of known names for a reason: ``[a, b, c, ...]``."""
    shown = [key_name(item) for item in items]
    text = ", ".join(shown[:_MAX_SHOWN_NAMES])
    return f"[{text}{', ...' if len(shown) > _MAX_SHOWN_NAMES else ''}]"


def join(reasons: Sequence[str], most: int) -> str:
    """Distinct reasons in order, the first `most` of them and a count of the rest."""
    distinct = list(dict.fromkeys(reasons))
    more = len(distinct) - most
    text = "; ".join(distinct[:most])
    return f"{text}; and {more} more" if more > 0 else text


def unknown(key: str, known: Collection[str], vocabulary: Vocabulary, *, listed: bool) -> str:
    """``unknown option; did you mean 'x'? options: a, b`` (the list only when `listed`)."""
    options = list(known)
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.6) or [
        option for option in options if key and (key in option or option in key)
    ]
    text = f"unknown {vocabulary.entry}"
    if listed:
        maybe = f"did you mean {close[0]!r}? " if close else ""
        return f"{text}; {maybe}{vocabulary.entry}s: {', '.join(options)}" if options else text
    return f"{text} (did you mean {close[0]!r}?)" if close else text


def missing(vocabulary: Vocabulary, description: str | None = None) -> str:
    about = f" ({description})" if description else ""
    return f"required {vocabulary.entry} is missing{about}"


_COMPARISONS = {
    "greater_than": ">",
    "greater_than_equal": ">=",
    "less_than": "<",
    "less_than_equal": "<=",
}
_TEMPLATES = {
    "finite_number": "{value} must be a finite number",
    "literal_error": "{value} must be {expected}",
    "value_error": "{error}",
    "assertion_error": "{error}",
    "string_too_short": "must not be empty",
    "too_short": "must have at least {min_length} {entries}",
    "too_long": "must have at most {max_length} {entries}",
}
_TYPES = {
    "float": "a number",
    "int": "an integer",
    "string": "a string",
    "bool": "true or false",
    "dict": "a mapping (key: value entries)",
    "model": "a mapping (key: value entries)",
    "model_attributes": "a mapping (key: value entries)",
    "list": "a list",
    "tuple": "a list",
}


def value_problem(details: ErrorDetails, vocabulary: Vocabulary) -> str:
    """What is wrong with a value that was given: ``-3 must be > 0``, ``nan must be a finite
    number``; the place is the caller's to add."""
    kind, ctx = details["type"], details.get("ctx", {})
    raw = details.get("input")
    value = vocabulary.show(raw)
    if kind == "float_type" and isinstance(raw, int) and not isinstance(raw, bool):
        kind = "finite_number"  # an integer too large for a float
    if kind in _COMPARISONS:
        bound = next(iter(ctx.values()))
        return f"{value} must be {_COMPARISONS[kind]} {vocabulary.show(bound)}"
    if kind in _TEMPLATES:
        count = ctx.get("min_length", ctx.get("max_length"))
        entries = "entry" if count == 1 else "entries"
        fields = {key: str(item) for key, item in ctx.items()}
        return _TEMPLATES[kind].format(value=value, entries=entries, **fields)
    base = kind.removesuffix("_type").removesuffix("_parsing")
    if base in _TYPES:
        return f"{value} must be {_TYPES[base]}"
    return f"{details['msg']} (got {value})"
