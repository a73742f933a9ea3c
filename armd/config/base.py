"""The base of every section of the configuration file's schema, shared by `armd.config.schema`
and the sections kept in modules of their own (`armd.config.leader_schema`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Section", "positive"]


class Section(BaseModel):
    """A section of the file: frozen, unknown options are errors."""

    # strict: YAML already types its scalars, so "3" is not silently a number (ints are floats).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def positive(default: float | None, description: str) -> Any:  # a pydantic FieldInfo
    """A field that must be > 0."""
    return Field(default, gt=0.0, description=description)
