"""How the configuration's validation errors read: each pydantic error of a config file (or of a
file validated like one: calibration, LeRobot) as its path and a message rendered by
`armd.reasons`, with the options a section knows and hints for what YAML misreads.
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping
from typing import Annotated, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from armd import reasons
from armd.config.schema import ArmConfig
from armd.reasons import Loc

__all__ = ["describe_errors"]

_HINTS: dict[Loc, str] = {
    ("mqtt", "password"): "the password is read from a file: set mqtt.password_file",
}


_NOT_TEXT = "must be a string"
_KEY_PROBLEMS = {  # keys chosen by the user (pose names): what the pydantic error meant
    "string_pattern_mismatch": "may contain only letters, digits, '_' and '-'",
    "string_too_long": "is longer than {max_length} characters",
}


def describe_errors(
    error: ValidationError,
    root: type[BaseModel],
    params_models: Mapping[str, type[BaseModel]],
    prefix: Loc = (),
) -> list[tuple[Loc, str]]:
    """Each error of `error` (raised validating `root` at `prefix`) as (path, readable message),
    rendered by `armd.reasons`.

    `params_models` maps driver names to their `Params` model, to list the options of driver
    parameters. Values of unknown options are never echoed (they could be secrets).
    """
    out = []
    for details in error.errors():
        loc: Loc = prefix + tuple(details["loc"])
        if loc and loc[-1] == "[key]":
            shown = reasons.show_yaml(details["input"])
            problem = _KEY_PROBLEMS.get(details["type"], _NOT_TEXT)
            out.append((loc[:-1], f"key {shown} {problem.format(**details.get('ctx', {}))}"))
            continue
        out.append((loc, _message(details, _model_at(root, params_models, loc[:-1]), loc)))
    return out


def _message(details: ErrorDetails, parent: type[BaseModel] | None, loc: Loc) -> str:
    key = str(loc[-1]) if loc else ""
    if details["type"] == "extra_forbidden":
        hint = _HINTS.get(loc)
        if hint:
            return f"unknown option; {hint}"
        known = list(parent.model_fields) if parent is not None else []
        return reasons.unknown(key, known, reasons.CONFIG, listed=True)
    if details["type"] == "missing":
        field = parent.model_fields.get(key) if parent is not None else None
        return reasons.missing(reasons.CONFIG, field.description if field is not None else None)
    message = reasons.value_problem(details, reasons.CONFIG)
    raw = details.get("input")
    if details["type"].startswith("float_") and isinstance(raw, str):
        message += _yaml_number_hint(raw)
    return message


def _yaml_number_hint(text: str) -> str:
    """YAML 1.1 reads ``1e3`` (no dot) as text: say how to write it as a number."""
    try:
        number = float(text)
    except ValueError:
        return ""
    if not math.isfinite(number):
        return ""
    mantissa, e, exponent = repr(number).partition("e")
    if e and "." not in mantissa:
        mantissa += ".0"  # YAML 1.1 floats need a dot and a signed exponent: 1.0e-06
    return f" (YAML reads it as text; write {mantissa}{e}{exponent})"


def _model_at(
    root: type[BaseModel], params_models: Mapping[str, type[BaseModel]], loc: Loc
) -> type[BaseModel] | None:
    """The model class found at `loc` below `root` (None when there is none)."""
    tp: object = root
    if len(loc) >= 3 and loc[0] == "drivers" and loc[2] == "params" and root is ArmConfig:
        tp, loc = params_models.get(str(loc[1])), loc[3:]
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(str(part))
            tp = None if field is None else field.annotation
        elif get_origin(tp) in (dict, Mapping):
            tp = get_args(tp)[1]
        else:
            return None
    tp = _unwrap(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _unwrap(tp: object) -> object:
    """`X` from ``Annotated[X, ...]`` and ``X | None``."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _unwrap(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        args = [arg for arg in get_args(tp) if arg is not type(None)]
        return _unwrap(args[0]) if len(args) == 1 else tp
    return tp
