"""The ``.kinematic.json`` format: parse a decoded document into a `KinematicTree`, and back.

The documented format (docs/kinematic-json.md; loads exactly as written)::

    {"links": [
      {"name": "base",
       "motor": {"type": "constant", "properties": {"pose": {"translation": [0, 0, 0],
                 "rotation": {"axis": [0, 0, 1], "angle_radians": 0.0}}}}},
      {"name": "joint1", "parent": "base",
       "motor": {"type": "revolute", "properties": {"axis": [0, 0, 1],
                 "limits": {"lower": -2.9, "upper": 2.9, "velocity": 2.0, "acceleration": 10.0}}}}
    ]}

- A link without ``parent`` is the root (exactly one). Motor types: ``constant`` (``pose``),
  ``revolute`` and ``prismatic`` (``axis``, optional ``limits``).
- A pose is ``translation`` (3 numbers, m) and ``rotation``: ``axis`` (3 numbers, any non-zero
  length: normalised) and exactly one of ``angle_radians`` / ``angle_degrees``.
- ``limits``: ``lower``, ``upper`` (rad or m), ``velocity``, ``acceleration`` (per s, per s²), each
  optional; an absent bound is unbounded, so a revolute joint without position bounds is continuous.

Compatible extensions (a file using none of them is a plain file):

- top level ``"name"``: the model's name (otherwise the file name without its suffix);
- revolute/prismatic ``properties.pose`` (same shape as the constant pose): the fixed transform
  applied *before* the motion, ``parent_from_link = pose @ motion(q)`` (URDF joint origins go here;
  identity when absent);
- revolute/prismatic ``properties.joint``: the joint's name when it differs from the link's name;
- revolute/prismatic ``properties.mimic``: ``{"joint": name, "multiplier": 1.0, "offset": 0.0}`` —
  this joint's value is ``multiplier * q[joint] + offset`` and it adds no degree of freedom;
- link ``"inertial"``: ``{"mass": kg, "com": [x, y, z], "inertia": [ixx, ixy, ixz, iyy, iyz,
  izz]}`` — the link's mass, its centre of mass in the link's frame (m, default 0) and its
  rotational inertia about the centre of mass in the link's axes (kg·m², default 0), checked as
  `kinematics.inertial` says; a link without it is massless.

Strictness: unknown keys are errors (a typo must not be silently ignored); numbers must be finite
JSON numbers (not booleans, strings, NaN or Infinity). Every error is a `ModelError` naming the
link, the key, the value and what was expected, e.g.
``link 'joint1': motor.properties.axis: [0, 0, 0] must be non-zero``.

`tree_to_dict` writes this format, using the extensions only where a tree needs them, so that
load → save → load gives identical forward kinematics and a plain file exports to the same structure
(rotations are written as a unit axis and ``angle_radians``).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kinematics.errors import InertialError, ModelError
from kinematics.inertial import Inertial
from kinematics.limits import JointLimit
from kinematics.motors import ConstantMotor, JointMotor, Link, Mimic, Motor
from kinematics.pose import Pose
from kinematics.quaternion import quat_from_axis_angle, quat_to_axis_angle
from kinematics.tree import KinematicTree

__all__ = ["tree_from_dict", "tree_to_dict"]

_LINK_KEYS = ("name", "parent", "motor", "inertial")
_INERTIAL_KEYS = ("mass", "com", "inertia")
_MOTOR_KEYS = ("type", "properties")
_MOTOR_TYPES = ("constant", "revolute", "prismatic")
_JOINT_KEYS = ("axis", "limits", "pose", "joint", "mimic")
_LIMIT_KEYS = ("lower", "upper", "velocity", "acceleration")
_ANGLE_KEYS = ("angle_radians", "angle_degrees")


def _show(value: object) -> str:
    """A value as the user wrote it (JSON spelling), shortened when long."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True, slots=True)
class _At:
    """Where in the document a value sits: the link and the dotted key path."""

    link: str
    key: str = ""

    def __truediv__(self, key: str) -> _At:
        return _At(self.link, f"{self.key}.{key}" if self.key else key)

    def error(self, message: str) -> ModelError:
        return ModelError(
            f"{self.link}: {self.key}: {message}" if self.key else f"{self.link}: {message}"
        )


def _object(
    value: object, at: _At, allowed: tuple[str, ...], required: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    """`value` as a JSON object with only `allowed` keys and all `required` ones."""
    if not isinstance(value, dict):
        raise at.error(f"{_show(value)} must be an object with keys {', '.join(allowed)}")
    for key in value:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise at.error(f"unknown key {key!r} (expected {', '.join(map(repr, allowed))}){hint}")
    for key in required:
        if key not in value:
            raise at.error(f"missing key {key!r}")
    return value


def _finite(value: object) -> float | None:
    """`value` as a finite float, or None for anything else (booleans, strings, NaN, ±inf, and
    integers too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        result = float(value)
    except OverflowError:
        return None
    return result if math.isfinite(result) else None


def _number(value: object, at: _At) -> float:
    result = _finite(value)
    if result is None:
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        raise at.error(f"{_show(value)} must be a {'finite ' if is_number else ''}number")
    return result


def _vector3(value: object, at: _At) -> tuple[float, float, float]:
    values = [_finite(v) for v in value] if isinstance(value, list) else []
    if len(values) != 3 or None in values:
        raise at.error(f"{_show(value)} must be a list of 3 finite numbers")
    x, y, z = (float(v) for v in values if v is not None)
    return (x, y, z)


def _axis(value: object, at: _At) -> tuple[float, float, float]:
    axis = _vector3(value, at)
    if math.hypot(*axis) < 1e-12:
        raise at.error(f"{_show(value)} must be non-zero")
    return axis


def _pose(value: object, at: _At) -> Pose:
    data = _object(value, at, ("translation", "rotation"), ("translation", "rotation"))
    translation = _vector3(data["translation"], at / "translation")
    rot_at = at / "rotation"
    rotation = _object(data["rotation"], rot_at, ("axis", *_ANGLE_KEYS), ("axis",))
    angles = [key for key in _ANGLE_KEYS if key in rotation]
    if len(angles) != 1:
        raise rot_at.error("needs exactly one of 'angle_radians', 'angle_degrees'")
    angle = _number(rotation[angles[0]], rot_at / angles[0])
    if angles[0] == "angle_degrees":
        angle = math.radians(angle)
    axis = _axis(rotation["axis"], rot_at / "axis")
    return Pose(translation, quat_from_axis_angle(axis, angle))


def _limits(value: object, at: _At) -> JointLimit:
    data = _object(value, at, _LIMIT_KEYS)
    bounds = {key: _number(data[key], at / key) for key in _LIMIT_KEYS if key in data}
    for key in ("velocity", "acceleration"):
        if key in bounds and bounds[key] <= 0.0:
            raise (at / key).error(f"{_show(data[key])} must be > 0")
    lower, upper = bounds.get("lower", -math.inf), bounds.get("upper", math.inf)
    if lower > upper:
        raise at.error(f"lower {_show(data['lower'])} must be <= upper {_show(data['upper'])}")
    return JointLimit(**bounds)


def _mimic(value: object, at: _At) -> Mimic:
    data = _object(value, at, ("joint", "multiplier", "offset"), ("joint",))
    joint = data["joint"]
    if not isinstance(joint, str) or not joint:
        raise (at / "joint").error(f"{_show(joint)} must be a joint name")
    multiplier = _number(data.get("multiplier", 1.0), at / "multiplier")
    offset = _number(data.get("offset", 0.0), at / "offset")
    return Mimic(joint, multiplier, offset)


def _inertial(value: object, at: _At) -> Inertial:
    data = _object(value, at, _INERTIAL_KEYS, ("mass",))
    mass = _number(data["mass"], at / "mass")
    com = _vector3(data["com"], at / "com") if "com" in data else (0.0, 0.0, 0.0)
    inertia = data.get("inertia", [0.0] * 6)
    values = [_finite(v) for v in inertia] if isinstance(inertia, list) else []
    if len(values) != 6 or None in values:
        raise (at / "inertia").error(
            f"{_show(inertia)} must be a list of 6 finite numbers [ixx, ixy, ixz, iyy, iyz, izz]"
        )
    try:
        return Inertial(mass, com, tuple(values))  # type: ignore[arg-type]
    except InertialError as exc:
        raise InertialError(f"{at.link}: {at.key}: {exc}") from None


def _motor(value: object, at: _At) -> Motor:
    data = _object(value, at, _MOTOR_KEYS, _MOTOR_KEYS)
    kind = data["type"]
    if kind not in _MOTOR_TYPES:
        raise (at / "type").error(
            f"{_show(kind)} must be one of {', '.join(map(repr, _MOTOR_TYPES))}"
        )
    at = at / "properties"
    if kind == "constant":
        props = _object(data["properties"], at, ("pose",), ("pose",))
        return ConstantMotor(_pose(props["pose"], at / "pose"))
    props = _object(data["properties"], at, _JOINT_KEYS, ("axis",))
    joint = props.get("joint")
    if "joint" in props and (not isinstance(joint, str) or not joint):
        raise (at / "joint").error(f"{_show(joint)} must be a non-empty joint name")
    return JointMotor(
        kind,
        _axis(props["axis"], at / "axis"),
        _pose(props["pose"], at / "pose") if "pose" in props else Pose(),
        _limits(props["limits"], at / "limits") if "limits" in props else JointLimit(),
        joint,
        _mimic(props["mimic"], at / "mimic") if "mimic" in props else None,
    )


def _link(value: object, index: int) -> Link:
    at = _At(f"links[{index}]")
    if isinstance(value, dict) and isinstance(value.get("name"), str) and value["name"]:
        at = _At(f"link {value['name']!r}")
    data = _object(value, at, _LINK_KEYS, ("name", "motor"))
    name = data["name"]
    if not isinstance(name, str) or not name:
        raise (at / "name").error(f"{_show(name)} must be a non-empty string")
    parent = data.get("parent")
    if "parent" in data and (not isinstance(parent, str) or not parent):
        raise (at / "parent").error(f"{_show(parent)} must be a link name (omit it for the root)")
    inertial = _inertial(data["inertial"], at / "inertial") if "inertial" in data else None
    return Link(name, parent, _motor(data["motor"], at / "motor"), inertial)


def _check_mimics(links: list[Link]) -> None:
    """Mimic targets must be independent joints (the tree checks too; this names the key)."""
    joints = {link.joint_name: link for link in links if link.joint_name is not None}
    for link in links:
        motor = link.motor
        if not isinstance(motor, JointMotor) or motor.mimic is None:
            continue
        at = _At(f"link {link.name!r}", "motor.properties.mimic.joint")
        target = joints.get(motor.mimic.joint)
        if target is None:
            raise at.error(
                f"{_show(motor.mimic.joint)} is not a joint of this model "
                f"(joints: {', '.join(map(repr, joints))})"
            )
        if target is link or (isinstance(target.motor, JointMotor) and target.motor.mimic):
            raise at.error(
                f"{_show(motor.mimic.joint)} must be an independent joint "
                "(not a mimic joint, not itself)"
            )


def tree_from_dict(data: object, *, source: str = "", name: str = "") -> KinematicTree:
    """Build a tree from a decoded ``.kinematic.json`` document.

    source: prefixed to error messages (the file path). name: the model's name unless the document
    has a ``"name"``. Raises `ModelError` naming the link, key, value and expectation.
    """
    try:
        doc = _object(data, _At("document"), ("links", "name"), ("links",))
        if "name" in doc:
            if not isinstance(doc["name"], str) or not doc["name"]:
                raise _At("document", "name").error(
                    f"{_show(doc['name'])} must be a non-empty string"
                )
            name = doc["name"]
        raw_links = doc["links"]
        if not isinstance(raw_links, list) or not raw_links:
            raise _At("document", "links").error(
                f"{_show(raw_links)} must be a non-empty list of links"
            )
        links = [_link(value, i) for i, value in enumerate(raw_links)]
        _check_mimics(links)
        return KinematicTree(links, name=name)
    except ModelError as exc:
        if not source:
            raise
        raise type(exc)(f"{source}: {exc}") from exc


# -- export -------------------------------------------------------------------------------------


def _pose_to_dict(pose: Pose) -> dict[str, Any]:
    axis, angle = quat_to_axis_angle(pose.quaternion)
    if float(angle) == 0.0:
        axis = np.array([0.0, 0.0, 1.0])  # the documented example's spelling of "no rotation"
    return {
        "translation": [float(v) for v in pose.translation],
        "rotation": {"axis": [float(v) for v in axis], "angle_radians": float(angle)},
    }


def _limits_to_dict(limits: JointLimit) -> dict[str, float]:
    values = {key: float(getattr(limits, key)) for key in _LIMIT_KEYS}
    return {key: value for key, value in values.items() if math.isfinite(value)}


def _motor_to_dict(link: Link) -> dict[str, Any]:
    motor = link.motor
    if isinstance(motor, ConstantMotor):
        return {"type": "constant", "properties": {"pose": _pose_to_dict(motor.pose)}}
    props: dict[str, Any] = {"axis": list(motor.axis)}
    limits = _limits_to_dict(motor.limits)
    if limits:
        props["limits"] = limits
    if not _is_identity(motor.origin):
        props["pose"] = _pose_to_dict(motor.origin)
    if motor.joint_name is not None and motor.joint_name != link.name:
        props["joint"] = motor.joint_name
    if motor.mimic is not None:
        props["mimic"] = {
            "joint": motor.mimic.joint,
            "multiplier": motor.mimic.multiplier,
            "offset": motor.mimic.offset,
        }
    return {"type": motor.kind, "properties": props}


def _is_identity(pose: Pose) -> bool:
    return bool(np.all(pose.translation == 0.0) and np.all(pose.quaternion == [1.0, 0, 0, 0]))


def tree_to_dict(tree: KinematicTree, *, include_name: bool = True) -> dict[str, Any]:
    """The ``.kinematic.json`` document of `tree` (links in the tree's order, the root first).

    The model's name is written as ``"name"`` when `include_name` and the tree has one.
    """
    links: list[dict[str, Any]] = []
    for link in tree.links:
        entry: dict[str, Any] = {"name": link.name}
        if link.parent is not None:
            entry["parent"] = link.parent
        entry["motor"] = _motor_to_dict(link)
        if link.inertial is not None:
            entry["inertial"] = {
                "mass": link.inertial.mass,
                "com": list(link.inertial.com),
                "inertia": list(link.inertial.inertia),
            }
        links.append(entry)
    doc: dict[str, Any] = {}
    if include_name and tree.name:
        doc["name"] = tree.name
    doc["links"] = links
    return doc
