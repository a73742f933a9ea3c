"""Collision primitives: the shapes of a link, in the link's frame, and the environment, in the
root frame. Values only (frozen dataclasses), validated on construction.

Units are m; orientations are unit quaternions ``[w, x, y, z]`` mapping the shape's own frame
into its link's frame (shapes) or into the root frame (environment), normalised on construction.

Shapes (`Shape`) of a link:
- `Capsule`: the points within `radius` of the segment `a`–`b` (a == b is a sphere);
- `Sphere`: the points within `radius` of `center`;
- `Box`: a cuboid of full edge lengths `size` centred on `center`, turned by `orientation`.

Environment objects (`EnvironmentObject`), fixed in the root frame:
- `Plane`: the half-space behind `normal` is solid; a link must stay on the side `normal` points
  to (a table: point on its top, normal up);
- `ObstacleBox`: a keep-out box;
- `KeepInBox`: the workspace; every moving link's geometry must stay inside it.

Errors are `ModelError`s naming the field and the value (and the object, where it has a name);
the config loader (`kinematics.collision.spec`) prefixes the link.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics.errors import ModelError
from kinematics.quaternion import quat_to_matrix

__all__ = [
    "Box",
    "Capsule",
    "EnvironmentObject",
    "KeepInBox",
    "ObstacleBox",
    "Plane",
    "Shape",
    "Sphere",
    "Vec3",
]

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]
Array = NDArray[np.float64]


def _vector(value: ArrayLike, size: int, where: str) -> tuple[float, ...]:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: {value!r} must be {size} finite numbers") from None
    if arr.shape != (size,) or not np.all(np.isfinite(arr)):
        raise ModelError(f"{where}: {value!r} must be {size} finite numbers")
    return tuple(float(v) for v in arr)


def vec3(value: ArrayLike, where: str) -> Vec3:
    """3 finite numbers as a tuple; raises `ModelError` naming `where` and the value."""
    x, y, z = _vector(value, 3, where)
    return (x, y, z)


def unit_quaternion(value: ArrayLike, where: str) -> Quat:
    """A quaternion [w, x, y, z] normalised; raises `ModelError` for a zero or non-finite one."""
    q = np.array(_vector(value, 4, where))
    norm = float(np.linalg.norm(q))
    if norm < 1e-9:
        raise ModelError(f"{where}: {list(value)!r} has norm {norm:.3g}: cannot be normalised")  # type: ignore[arg-type]
    w, x, y, z = (float(v) for v in q / norm)
    return (w, x, y, z)


def _unit_vector(value: ArrayLike, where: str) -> Vec3:
    v = np.array(vec3(value, where))
    norm = float(np.linalg.norm(v))
    if norm < 1e-9:
        raise ModelError(f"{where}: {v.tolist()} must be non-zero")
    x, y, z = (float(c) for c in v / norm)
    return (x, y, z)


def _radius(value: float, where: str) -> float:
    try:
        r = float(value)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: {value!r} must be a number ≥ 0") from None
    if not (math.isfinite(r) and r >= 0.0):
        raise ModelError(f"{where}: {value!r} must be a finite number ≥ 0 (m)")
    return r


def _size(value: ArrayLike, where: str) -> Vec3:
    size = vec3(value, where)
    if min(size) <= 0.0:
        raise ModelError(f"{where}: {list(size)} must be > 0 on every axis (m)")
    return size


def _name(value: str, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ModelError(f"{where}: name {value!r} must be a non-empty string")
    return value


@dataclass(frozen=True, slots=True)
class Capsule:
    """The points within `radius` (m) of the segment `a`–`b` (m, link frame)."""

    a: Vec3
    b: Vec3
    radius: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", vec3(self.a, "capsule a"))
        object.__setattr__(self, "b", vec3(self.b, "capsule b"))
        object.__setattr__(self, "radius", _radius(self.radius, "capsule radius"))


@dataclass(frozen=True, slots=True)
class Sphere:
    """The points within `radius` (m) of `center` (m, link frame)."""

    center: Vec3
    radius: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "center", vec3(self.center, "sphere center"))
        object.__setattr__(self, "radius", _radius(self.radius, "sphere radius"))


@dataclass(frozen=True, slots=True)
class Box:
    """A cuboid of full edge lengths `size` (m, > 0) centred on `center` (m, link frame), its
    edges along the axes of `orientation` ([w, x, y, z], normalised)."""

    center: Vec3
    size: Vec3
    orientation: Quat = (1.0, 0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "center", vec3(self.center, "box center"))
        object.__setattr__(self, "size", _size(self.size, "box size"))
        object.__setattr__(
            self, "orientation", unit_quaternion(self.orientation, "box orientation")
        )

    @property
    def rotation(self) -> Array:
        """The rotation matrix (3, 3) of `orientation`."""
        return np.asarray(quat_to_matrix(np.array(self.orientation)))


Shape = Capsule | Sphere | Box


@dataclass(frozen=True, slots=True)
class Plane:
    """A solid half-space: the points behind the plane through `point` (m, root frame) with unit
    `normal` (normalised). Links must stay on the side `normal` points to."""

    name: str
    point: Vec3
    normal: Vec3

    def __post_init__(self) -> None:
        where = f"plane {_name(self.name, 'plane')!r}"
        object.__setattr__(self, "point", vec3(self.point, f"{where} point"))
        object.__setattr__(self, "normal", _unit_vector(self.normal, f"{where} normal"))


@dataclass(frozen=True, slots=True)
class ObstacleBox:
    """A keep-out box in the root frame (`center`, full edge lengths `size`, `orientation`)."""

    name: str
    center: Vec3
    size: Vec3
    orientation: Quat = (1.0, 0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        where = f"box {_name(self.name, 'box')!r}"
        object.__setattr__(self, "center", vec3(self.center, f"{where} center"))
        object.__setattr__(self, "size", _size(self.size, f"{where} size"))
        object.__setattr__(
            self, "orientation", unit_quaternion(self.orientation, f"{where} orientation")
        )


@dataclass(frozen=True, slots=True)
class KeepInBox:
    """The workspace: every moving link's geometry must stay inside this box (root frame). Its
    distance to a link is the least clearance to its six faces, negative outside."""

    center: Vec3
    size: Vec3
    orientation: Quat = (1.0, 0.0, 0.0, 0.0)
    name: str = field(default="workspace")

    def __post_init__(self) -> None:
        where = f"keep-in box {_name(self.name, 'keep-in box')!r}"
        object.__setattr__(self, "center", vec3(self.center, f"{where} center"))
        object.__setattr__(self, "size", _size(self.size, f"{where} size"))
        object.__setattr__(
            self, "orientation", unit_quaternion(self.orientation, f"{where} orientation")
        )

    def faces(self) -> tuple[Plane, ...]:
        """The six faces as planes whose normals point inwards (the free side is the inside)."""
        R = np.asarray(quat_to_matrix(np.array(self.orientation)))
        c = np.array(self.center)
        faces = []
        for axis in range(3):
            for sign in (1.0, -1.0):
                normal = -sign * R[:, axis]
                point = c + sign * 0.5 * self.size[axis] * R[:, axis]
                faces.append(Plane(self.name, vec3(point, "face"), vec3(normal, "face")))
        return tuple(faces)


EnvironmentObject = Plane | ObstacleBox | KeepInBox
