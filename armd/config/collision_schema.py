"""The ``collision:`` section of the configuration file (docs/collision.md): the arm's collision
geometry, its surroundings and the margin it keeps. The shapes themselves are checked by the
collision model's own parser (`kinematics.collision.spec`) in `armd.config.collision`, one link
and one object at a time, so that each problem is reported at its path with the value.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from armd.config.base import Section

__all__ = ["CollisionConfig"]

Pair = Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=2, max_length=2)]


class CollisionConfig(Section):
    """What the daemon checks every motion against: no goal, stream target or measured state may
    bring two checked bodies closer than `margin`."""

    geometry: str | None = Field(
        None,
        min_length=1,
        description="a file of per-link shapes (config/collision/*.yaml), relative to the config",
    )
    links: dict[str, list[dict[str, Any]]] = Field(
        {}, description="link: its shapes, replacing the geometry file's for that link"
    )
    margin: float = Field(0.01, ge=0.0, description="bodies closer than this are in contact, m")
    self_collision: bool = Field(True, description="check the links against each other")
    allowed: list[Pair] = Field(
        [], description="pairs never checked: [link, link] or [link, environment object]"
    )
    environment: list[dict[str, Any]] = Field(
        [], description="planes, keep-out boxes and one keep-in box, in the root frame"
    )
