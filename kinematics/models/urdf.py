"""URDF robot descriptions → `KinematicTree`.

Read: the top-level ``<link name>`` (with its ``<inertial>``) and ``<joint>`` children of
``<robot name>`` (the model's name); everything else (geometry, ``<transmission>``, ``<gazebo>``,
joint dynamics, safety controllers) is ignored, including the ``<joint>`` elements nested in
transmissions.

Inertials: ``<mass value>`` and ``<inertia ixx ixy ixz iyy iyz izz>`` are required (as urdfdom
requires them); ``<origin xyz rpy>`` (default 0) places the centre of mass and the frame the tensor
is given in, which is rotated into the link's axes (`kinematics.inertial`). A link without
``<inertial>`` is massless. An inertial no rigid body has is refused, naming the link.

Joints: ``fixed`` (a constant motor), ``revolute``, ``continuous`` (a revolute joint with infinite
position bounds) and ``prismatic``. ``floating`` and ``planar`` are rejected. Each joint's child
link gets the motor, with the joint's ``<origin xyz rpy>`` (default 0) as the constant transform
applied before the motion and the joint's name as its joint name. ``rpy`` is fixed-axis roll, pitch,
yaw: ``R = Rz(yaw) Ry(pitch) Rx(roll)``. ``<axis xyz>`` defaults to (1, 0, 0) and is normalised.
``<limit lower upper velocity>`` is required for revolute and prismatic joints as URDF requires
(lower/upper default to 0, velocity is required, effort is ignored; URDF has no acceleration limit,
so it is infinite); a continuous joint's ``<limit>`` is optional and only its velocity is used.
``<mimic joint multiplier offset>`` (defaults 1, 0) makes a joint follow another one.

The root is the one link that is no joint's child. Links are ordered depth-first from the root,
siblings in the order their joints appear in the file, so ``joint_names`` (the order of ``q``) is
the non-mimic joints in that order.

Errors are `ModelError`s naming the joint or link, the element/attribute and the value.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from kinematics.errors import InertialError, ModelError
from kinematics.inertial import Inertial
from kinematics.limits import JointLimit
from kinematics.motors import ConstantMotor, JointMotor, Link, Mimic, Motor
from kinematics.pose import Pose
from kinematics.quaternion import quat_from_rpy
from kinematics.tree import KinematicTree

__all__ = ["tree_from_urdf"]

_SUPPORTED = ("fixed", "revolute", "continuous", "prismatic")
_INERTIA = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
_UNSUPPORTED = ("floating", "planar")


@dataclass(frozen=True, slots=True)
class _Joint:
    """One URDF joint, parsed."""

    name: str
    kind: str
    parent: str
    child: str
    motor: Motor


def _attr(elem: ET.Element, key: str, where: str) -> str:
    value = elem.get(key)
    if value is None or not value.strip():
        raise ModelError(f"{where}: <{elem.tag}> needs a non-empty attribute {key!r}")
    return value.strip()


def _floats(text: str, count: int, where: str) -> tuple[float, ...]:
    """`count` finite numbers separated by whitespace."""
    try:
        values = tuple(float(part) for part in text.split())
    except ValueError:
        values = ()
    if len(values) != count or not all(math.isfinite(v) for v in values):
        expected = "a finite number" if count == 1 else f"{count} finite numbers"
        raise ModelError(f"{where}: {text!r} must be {expected}")
    return values


def _float(elem: ET.Element, key: str, where: str, default: float | None) -> float:
    text = elem.get(key)
    if text is None:
        if default is None:
            raise ModelError(f"{where}: <{elem.tag}> needs the attribute {key!r}")
        return default
    return _floats(text, 1, f"{where}: <{elem.tag} {key}>")[0]


def _origin(parent: ET.Element, where: str) -> Pose:
    elem = parent.find("origin")
    if elem is None:
        return Pose()
    xyz = _floats(elem.get("xyz", "0 0 0"), 3, f"{where}: <origin xyz>")
    rpy = _floats(elem.get("rpy", "0 0 0"), 3, f"{where}: <origin rpy>")
    return Pose(xyz, quat_from_rpy(rpy))


def _axis(joint: ET.Element, where: str) -> tuple[float, float, float]:
    elem = joint.find("axis")
    text = "1 0 0" if elem is None else elem.get("xyz", "1 0 0")
    x, y, z = _floats(text, 3, f"{where}: <axis xyz>")
    if math.hypot(x, y, z) < 1e-12:
        raise ModelError(f"{where}: <axis xyz>: {text!r} must be non-zero")
    return (x, y, z)


def _limit(joint: ET.Element, kind: str, where: str) -> JointLimit:
    elem = joint.find("limit")
    if elem is None:
        if kind == "continuous":
            return JointLimit()
        raise ModelError(f"{where}: a {kind} joint needs a <limit> element (URDF requires one)")
    velocity = _float(elem, "velocity", where, None)
    if velocity <= 0.0:
        raise ModelError(f"{where}: <limit velocity>: {velocity} must be > 0")
    if kind == "continuous":
        return JointLimit(velocity=velocity)
    lower = _float(elem, "lower", where, 0.0)
    upper = _float(elem, "upper", where, 0.0)
    if lower > upper:
        raise ModelError(f"{where}: <limit>: lower {lower} must be <= upper {upper}")
    return JointLimit(lower, upper, velocity)


def _mimic(joint: ET.Element, where: str) -> Mimic | None:
    elem = joint.find("mimic")
    if elem is None:
        return None
    return Mimic(
        _attr(elem, "joint", where),
        _float(elem, "multiplier", where, 1.0),
        _float(elem, "offset", where, 0.0),
    )


def _inertial(link: ET.Element, where: str) -> Inertial | None:
    """The link's ``<inertial>`` in its own frame, or None when it has none."""
    elem = link.find("inertial")
    if elem is None:
        return None
    where = f"{where}: <inertial>"
    mass_elem, inertia_elem = elem.find("mass"), elem.find("inertia")
    if mass_elem is None or inertia_elem is None:
        missing = "mass" if mass_elem is None else "inertia"
        raise ModelError(f"{where}: missing <{missing}> (URDF requires one)")
    mass = _float(mass_elem, "value", where, None)
    inertia = tuple(_float(inertia_elem, key, where, None) for key in _INERTIA)
    try:
        in_inertial_frame = Inertial(mass, (0.0, 0.0, 0.0), inertia)  # type: ignore[arg-type]
        return in_inertial_frame.transformed(_origin(elem, where))
    except InertialError as exc:
        raise InertialError(f"{where}: {exc}") from None


def _link_of(joint: ET.Element, tag: str, where: str) -> str:
    elem = joint.find(tag)
    if elem is None:
        raise ModelError(f"{where}: missing <{tag} link=...>")
    return _attr(elem, "link", where)


def _joint(elem: ET.Element, index: int) -> _Joint:
    name = _attr(elem, "name", f"<joint> #{index + 1}")
    where = f"joint {name!r}"
    kind = _attr(elem, "type", where)
    if kind in _UNSUPPORTED:
        raise ModelError(
            f"{where}: type {kind!r} is not supported (supported: {', '.join(_SUPPORTED)})"
        )
    if kind not in _SUPPORTED:
        raise ModelError(f"{where}: unknown type {kind!r} (supported: {', '.join(_SUPPORTED)})")
    parent, child = _link_of(elem, "parent", where), _link_of(elem, "child", where)
    origin = _origin(elem, where)
    motor: Motor
    if kind == "fixed":
        if elem.find("mimic") is not None:
            raise ModelError(f"{where}: <mimic> on a fixed joint")
        motor = ConstantMotor(origin)
    else:
        motor = JointMotor(
            "prismatic" if kind == "prismatic" else "revolute",
            _axis(elem, where),
            origin,
            _limit(elem, kind, where),
            name,
            _mimic(elem, where),
        )
    return _Joint(name, kind, parent, child, motor)


def _check_mimics(joints: list[_Joint]) -> None:
    by_name = {joint.name: joint for joint in joints}
    for joint in joints:
        if not isinstance(joint.motor, JointMotor) or joint.motor.mimic is None:
            continue
        target = by_name.get(joint.motor.mimic.joint)
        where = f"joint {joint.name!r}: <mimic joint>"
        if target is None:
            raise ModelError(f"{where}: {joint.motor.mimic.joint!r} is not a joint of the robot")
        if not isinstance(target.motor, JointMotor) or target.motor.mimic or target is joint:
            raise ModelError(
                f"{where}: {target.name!r} must be a movable joint that is not itself a mimic joint"
            )


def _root(link_names: list[str], joints: list[_Joint], robot: str) -> str:
    declared = set(link_names)
    parent_joint: dict[str, str] = {}
    for joint in joints:
        for tag, link in (("parent", joint.parent), ("child", joint.child)):
            if link not in declared:
                raise ModelError(
                    f"joint {joint.name!r}: <{tag} link>: {link!r} is not a <link> of the robot"
                )
        if joint.child in parent_joint:
            raise ModelError(
                f"link {joint.child!r}: the child of both joint "
                f"{parent_joint[joint.child]!r} and joint {joint.name!r}"
            )
        parent_joint[joint.child] = joint.name
    if not link_names:
        raise ModelError(f"robot {robot!r}: has no <link>")
    roots = [name for name in link_names if name not in parent_joint]
    if len(roots) != 1:
        why = "every link is a joint's child (a cycle)" if not roots else f"several: {roots}"
        raise ModelError(
            f"robot {robot!r}: needs exactly one root link (one that is no joint's child), {why}"
        )
    return roots[0]


def _parse(data: str | bytes) -> ET.Element:
    try:
        return ET.fromstring(data)
    except ET.ParseError as exc:
        line, column = exc.position
        reason = str(exc).split(": line ")[0]  # expat appends a 0-based position; ours is 1-based
        raise ModelError(f"invalid XML at line {line}, column {column + 1}: {reason}") from exc


def tree_from_urdf(data: str | bytes, *, source: str = "") -> KinematicTree:
    """Build a tree from the text of a URDF file. `source` (the path) prefixes error messages.

    Raises `ModelError` for invalid XML (with line and column), unsupported joint types, missing
    or malformed elements and attributes, and anything that is not one tree.
    """
    try:
        robot = _parse(data)
        if robot.tag != "robot":
            raise ModelError(f"the root element is <{robot.tag}>, expected <robot>")
        name = _attr(robot, "name", "robot")
        link_elems = robot.findall("link")
        link_names = [_attr(e, "name", f"<link> #{i + 1}") for i, e in enumerate(link_elems)]
        seen: set[str] = set()
        for link in link_names:
            if link in seen:
                raise ModelError(f"link {link!r}: duplicate <link name>")
            seen.add(link)
        joints = [_joint(e, i) for i, e in enumerate(robot.findall("joint"))]
        names = [joint.name for joint in joints]
        for joint in joints:
            if names.count(joint.name) > 1:
                raise ModelError(f"joint {joint.name!r}: duplicate <joint name>")
        _check_mimics(joints)
        root = _root(link_names, joints, name)
        inertials = {
            link: _inertial(elem, f"link {link!r}")
            for link, elem in zip(link_names, link_elems, strict=True)
        }
        links = [Link(root, None, inertial=inertials[root])]
        links += [
            Link(joint.child, joint.parent, joint.motor, inertials[joint.child]) for joint in joints
        ]
        return KinematicTree(links, name=name)
    except ModelError as exc:
        if not source:
            raise
        raise type(exc)(f"{source}: {exc}") from exc
