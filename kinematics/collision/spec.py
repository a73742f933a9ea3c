"""`CollisionSpec`: what a collision model is built from (margin, per-link shapes, environment,
allowed pairs), and its plain-dict form, as in a config file's ``collision:`` section::

    margin: 0.01                  # m; contact = distance < margin
    self_collision: true
    links:
      upper_arm_link:
        - {type: capsule, a: [0, 0, 0], b: [0, 0, 0.425], radius: 0.06}
        - {type: sphere, center: [0, 0, 0], radius: 0.08}
        - {type: box, center: [0, 0, 0.1], size: [0.1, 0.1, 0.2], orientation: [1, 0, 0, 0]}
    allowed: [[link_a, link_b]]   # pairs never checked (links, or a link and an object's name)
    environment:
      - {name: table, type: plane, point: [0, 0, 0], normal: [0, 0, 1]}
      - {name: shelf, type: box, center: [0.5, 0, 0.3], size: [0.3, 0.6, 0.02]}
      - {name: workspace, type: keep_in, center: [0, 0, 0.5], size: [2, 2, 1.2]}

`spec_from_dict` takes the already parsed dict (the caller reads YAML or JSON); unknown keys are
errors, and every error names the link or object, the field and the value. Link names are checked
against the tree when the model is built (`CollisionModel`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kinematics.collision.geometry import (
    Box,
    Capsule,
    EnvironmentObject,
    KeepInBox,
    ObstacleBox,
    Plane,
    Shape,
    Sphere,
)
from kinematics.errors import ModelError

__all__ = ["DEFAULT_MARGIN", "CollisionSpec", "shape_to_dict", "spec_from_dict"]

DEFAULT_MARGIN = 0.01
"""m: two bodies closer than this are in contact."""

_SHAPE_KEYS = {
    "capsule": ({"a", "b", "radius"}, set()),
    "sphere": ({"center", "radius"}, set()),
    "box": ({"center", "size"}, {"orientation"}),
}
_ENV_KEYS = {
    "plane": ({"name", "point", "normal"}, set()),
    "box": ({"name", "center", "size"}, {"orientation"}),
    "keep_in": ({"center", "size"}, {"name", "orientation"}),
}
_TOP_KEYS = {"margin", "self_collision", "links", "allowed", "environment"}


@dataclass(frozen=True)
class CollisionSpec:
    """The inputs of a collision model.

    links: link name → its shapes in the link's frame (links not named have no geometry and are
        never checked).
    environment: objects in the root frame; at most one `KeepInBox`.
    margin: m, ≥ 0; two bodies closer than this are in contact.
    self_collision: check the links against each other (the environment is always checked).
    allowed: pairs never checked, each a link and a link or an environment object's name.
    """

    links: Mapping[str, tuple[Shape, ...]] = field(default_factory=dict)
    environment: tuple[EnvironmentObject, ...] = ()
    margin: float = DEFAULT_MARGIN
    self_collision: bool = True
    allowed: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not (isinstance(self.margin, int | float) and math.isfinite(self.margin)):
            raise ModelError(f"collision margin: {self.margin!r} must be a finite number (m)")
        if self.margin < 0.0:
            raise ModelError(f"collision margin: {self.margin} must be ≥ 0 (m)")
        names = [obj.name for obj in self.environment]
        for name in names:
            if names.count(name) > 1:
                raise ModelError(f"environment object {name!r}: duplicate name")
            if name in self.links:
                raise ModelError(f"environment object {name!r}: a link has the same name")
        if sum(isinstance(obj, KeepInBox) for obj in self.environment) > 1:
            raise ModelError("environment: at most one keep_in box (the workspace)")
        for link, shapes in self.links.items():
            if not shapes:
                raise ModelError(f"link {link!r}: an empty list of shapes (omit the link instead)")


def _check_keys(
    item: Mapping[str, Any], required: set[str], optional: set[str], where: str
) -> None:
    missing = sorted(required - set(item))
    if missing:
        raise ModelError(f"{where}: missing {missing}")
    unknown = sorted(set(item) - required - optional - {"type"})
    if unknown:
        raise ModelError(
            f"{where}: unknown keys {unknown} (allowed: {sorted(required | optional)})"
        )


def shape_from_dict(item: Mapping[str, Any], where: str) -> Shape:
    """One shape from ``{type: capsule|sphere|box, ...}``; `where` prefixes errors."""
    if not isinstance(item, Mapping):
        raise ModelError(f"{where}: {item!r} must be a mapping with a 'type'")
    kind = item.get("type")
    if kind not in _SHAPE_KEYS:
        raise ModelError(f"{where}: type {kind!r} must be one of {sorted(_SHAPE_KEYS)}")
    _check_keys(item, *_SHAPE_KEYS[kind], where)
    try:
        if kind == "capsule":
            return Capsule(item["a"], item["b"], item["radius"])
        if kind == "sphere":
            return Sphere(item["center"], item["radius"])
        return Box(item["center"], item["size"], item.get("orientation", (1.0, 0.0, 0.0, 0.0)))
    except ModelError as exc:
        raise ModelError(f"{where}: {exc}") from None


def _environment_object(item: Mapping[str, Any], where: str) -> EnvironmentObject:
    if not isinstance(item, Mapping):
        raise ModelError(f"{where}: {item!r} must be a mapping with a 'type'")
    kind = item.get("type")
    if kind not in _ENV_KEYS:
        raise ModelError(f"{where}: type {kind!r} must be one of {sorted(_ENV_KEYS)}")
    where = f"{where} ({item.get('name', kind)!r})"
    _check_keys(item, *_ENV_KEYS[kind], where)
    orientation = item.get("orientation", (1.0, 0.0, 0.0, 0.0))
    try:
        if kind == "plane":
            return Plane(item["name"], item["point"], item["normal"])
        if kind == "box":
            return ObstacleBox(item["name"], item["center"], item["size"], orientation)
        return KeepInBox(item["center"], item["size"], orientation, item.get("name", "workspace"))
    except ModelError as exc:
        raise ModelError(f"{where}: {exc}") from None


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list | tuple):
        raise ModelError(f"collision allowed: {value!r} must be a list of [name, name] pairs")
    pairs = []
    for i, pair in enumerate(value):
        if (
            not isinstance(pair, list | tuple)
            or len(pair) != 2
            or not all(isinstance(name, str) and name for name in pair)
        ):
            raise ModelError(f"collision allowed #{i + 1}: {pair!r} must be [name, name]")
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def spec_from_dict(data: Mapping[str, Any]) -> CollisionSpec:
    """A `CollisionSpec` from its plain-dict form (module docstring). Raises `ModelError`."""
    if not isinstance(data, Mapping):
        raise ModelError(f"collision: {data!r} must be a mapping")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ModelError(f"collision: unknown keys {unknown} (allowed: {sorted(_TOP_KEYS)})")
    links_in = data.get("links") or {}
    if not isinstance(links_in, Mapping):
        raise ModelError(f"collision links: {links_in!r} must map link names to lists of shapes")
    links: dict[str, tuple[Shape, ...]] = {}
    for link, shapes in links_in.items():
        if not isinstance(shapes, list | tuple):
            raise ModelError(f"link {link!r}: {shapes!r} must be a list of shapes")
        links[str(link)] = tuple(
            shape_from_dict(item, f"link {link!r} shape #{i + 1}") for i, item in enumerate(shapes)
        )
    env_in = data.get("environment") or []
    if not isinstance(env_in, list | tuple):
        raise ModelError(f"collision environment: {env_in!r} must be a list of objects")
    environment = tuple(
        _environment_object(item, f"environment #{i + 1}") for i, item in enumerate(env_in)
    )
    self_collision = data.get("self_collision", True)
    if not isinstance(self_collision, bool):
        raise ModelError(f"collision self_collision: {self_collision!r} must be true or false")
    return CollisionSpec(
        links=links,
        environment=environment,
        margin=data.get("margin", DEFAULT_MARGIN),
        self_collision=self_collision,
        allowed=_pairs(data.get("allowed") or []),
    )


def shape_to_dict(shape: Shape) -> dict[str, Any]:
    """The plain-dict form of a shape (lists of floats)."""
    if isinstance(shape, Capsule):
        return {"type": "capsule", "a": list(shape.a), "b": list(shape.b), "radius": shape.radius}
    if isinstance(shape, Sphere):
        return {"type": "sphere", "center": list(shape.center), "radius": shape.radius}
    return {
        "type": "box",
        "center": list(shape.center),
        "size": list(shape.size),
        "orientation": list(shape.orientation),
    }


def environment_to_dict(obj: EnvironmentObject) -> dict[str, Any]:
    """The plain-dict form of an environment object."""
    if isinstance(obj, Plane):
        return {
            "name": obj.name,
            "type": "plane",
            "point": list(obj.point),
            "normal": list(obj.normal),
        }
    kind = "keep_in" if isinstance(obj, KeepInBox) else "box"
    return {
        "name": obj.name,
        "type": kind,
        "center": list(obj.center),
        "size": list(obj.size),
        "orientation": list(obj.orientation),
    }
