"""The MuJoCo model of the arm and its surroundings, built once from the URDF and the params.

MuJoCo compiles the URDF itself (its inertials, joint axes, origins and limits, which become end
stops); `build_scene` adds what a URDF does not say or what the params override: the joints'
damping, friction and armature, one actuator per device (its law, `drivers.mujoco.physics`, as
MuJoCo's affine actuator), the links' collision primitives, the table (a plane at z = 0 in the
root frame), the objects and the physics options (timestep, gravity, an implicit integrator for
the joints' damping) and a sensor counting the arm's contacts (`drivers.mujoco.touches`).

Meshes are ignored: every `<visual>` goes, and so does every `<collision>` holding a `<mesh>`
(the params' primitives are the collision model). Static links stay separate bodies
(``fusestatic`` off), so primitives can be hung on any link, fixed ones included.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
from numpy.typing import NDArray

from drivers.errors import DriverConfigError
from drivers.mujoco.params import (
    ActuatorKind,
    BoxShape,
    CapsuleShape,
    MujocoParams,
    ObjectParams,
    Shape,
    SphereShape,
)

__all__ = ["Scene", "build_scene"]

IntArray = NDArray[np.intp]

_COMPILER = (
    '<mujoco><compiler fusestatic="false" discardvisual="true" autolimits="true" '
    'angle="radian"/></mujoco>'
)
_HINGE_OR_SLIDE = (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
# Primitives add no mass: the URDF's inertials are the arm's.
_MASSLESS = 0.0


@dataclass(frozen=True)
class Scene:
    """A compiled model and where each device and object lives in it.

    Per device, in `device_names` order: `qpos_adr` and `dof_adr` (indices into qpos / qvel),
    `actuator_ids`, `is_mit` (MIT law, else servo). `object_bodies`: body id by object name.
    Per geom: `geom_owners`, the link, object or ``table`` it belongs to, and `arm_geoms`,
    whether it is the arm's. `touch_sensor`: the index in sensordata of the number of contacts
    the arm's geoms are in.
    """

    model: mujoco.MjModel
    device_names: tuple[str, ...]
    qpos_adr: IntArray
    dof_adr: IntArray
    actuator_ids: IntArray
    is_mit: NDArray[np.bool_]
    object_bodies: dict[str, int]
    geom_owners: tuple[str, ...]
    arm_geoms: NDArray[np.bool_]
    touch_sensor: int


def build_scene(params: MujocoParams) -> Scene:
    """Compile the scene `params` describe. Raises `DriverConfigError` naming the URDF element,
    link, joint or object at fault."""
    path = Path(params.urdf).expanduser()
    text = _urdf_text(path)
    try:
        spec = mujoco.MjSpec.from_string(text)
    except ValueError as exc:
        raise DriverConfigError(_mujoco_error(path, text, exc)) from exc
    _options(spec, params)
    _devices(spec, params, path)
    _links(spec, params, path)
    root = spec.worldbody.first_body().name  # the URDF's root link: the arm's base
    _touch_sensor(spec, root)
    for obj in params.objects:
        _add_object(spec, obj)
    try:
        model = spec.compile()
    except ValueError as exc:
        raise DriverConfigError(_mujoco_error(path, text, exc)) from exc
    owners, arm = _geom_owners(model, params.objects, root)
    names = tuple(params.devices)
    joints = [model.joint(params.joint_of(name)) for name in names]
    return Scene(
        model=model,
        device_names=names,
        qpos_adr=np.array([int(j.qposadr[0]) for j in joints], dtype=np.intp),
        dof_adr=np.array([int(j.dofadr[0]) for j in joints], dtype=np.intp),
        actuator_ids=np.array([model.actuator(name).id for name in names], dtype=np.intp),
        is_mit=np.array([params.devices[n].actuator is ActuatorKind.MIT for n in names]),
        object_bodies={o.name: model.body(_object_body(o)).id for o in params.objects},
        geom_owners=owners,
        arm_geoms=arm,
        touch_sensor=int(model.sensor(_touch_sensor_name(root)).adr[0]),
    )


def _urdf_text(path: Path) -> str:
    """The URDF as MuJoCo should read it: its own text with the compiler options appended (line
    numbers kept), or, when it has meshes, the text rewritten without them."""
    try:
        text = path.read_text(encoding="utf-8")
        root = ET.fromstring(text)
    except OSError as exc:
        raise DriverConfigError(f"mujoco: cannot read {path}: {exc}") from exc
    except ET.ParseError as exc:
        line, column = exc.position
        raise DriverConfigError(f"mujoco: {path}:{line}:{column}: not XML: {exc}") from exc
    if root.tag != "robot":
        raise DriverConfigError(f"mujoco: {path}: the root element is <{root.tag}>, not <robot>")
    if root.find(".//mesh") is None:
        end = text.rfind("</robot>")
        return text[:end] + _COMPILER + text[end:]
    for link in root.iter("link"):
        for element in list(link):
            if element.tag == "visual" or (
                element.tag == "collision" and element.find(".//mesh") is not None
            ):
                link.remove(element)
    root.append(ET.fromstring(_COMPILER))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def _mujoco_error(path: Path, text: str, exc: ValueError) -> str:
    """MuJoCo's message, on one line, with the element it names quoted from the text it read."""
    message = " ".join(str(exc).split())
    found = re.search(r"Element '(\w+)', line (\d+)", message)
    if found:
        number = int(found.group(2))
        lines = text.splitlines()
        if 1 <= number <= len(lines):
            message += f" (line {number}: {lines[number - 1].strip()[:120]})"
    return f"mujoco: {path}: the model does not build: {message}"


def _options(spec: mujoco.MjSpec, params: MujocoParams) -> None:
    spec.option.timestep = params.timestep_s
    spec.option.gravity = list(params.gravity)
    # Joint damping integrated implicitly: stable for any damping at this timestep.
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    # Elliptic friction cones, stiff friction (impratio) and a no-slip pass: a part held between
    # two jaws stays put instead of creeping out of the soft contacts (~7 mm in 5 s without).
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = 10.0
    spec.option.noslip_iterations = 3
    if params.table:
        spec.worldbody.add_geom(
            name="table",
            type=mujoco.mjtGeom.mjGEOM_PLANE,
            size=[0.0, 0.0, 1.0],
            friction=[params.friction, 0.005, 0.0001],
        )


def _devices(spec: mujoco.MjSpec, params: MujocoParams, path: Path) -> None:
    for name, device in params.devices.items():
        joint_name = params.joint_of(name)
        joint = spec.joint(joint_name)
        if joint is None:
            known = ", ".join(j.name for j in spec.joints if j.type in _HINGE_OR_SLIDE)
            raise DriverConfigError(
                f"mujoco: device {name!r}: {path} has no joint {joint_name!r}; "
                f"its movable joints: {known}"
            )
        if joint.type not in _HINGE_OR_SLIDE:
            raise DriverConfigError(
                f"mujoco: device {name!r}: joint {joint_name!r} is not revolute or prismatic"
            )
        joint.damping = [device.damping, 0.0, 0.0]  # linear damping (MuJoCo 4: a polynomial)
        joint.frictionloss = device.friction
        joint.armature = device.armature
        # The actuator law as MuJoCo's affine actuator, so that no Python runs per step:
        # τ = ctrl - kp·q - kd·q̇ clamped to ±torque_limit, with ctrl = kp·p* + kd·v* + τff set
        # per command (`physics.Physics.command`); its velocity term is integrated implicitly.
        actuator = spec.add_actuator(name=name, target=joint_name)
        actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
        actuator.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        actuator.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        actuator.gainprm = [1.0] + [0.0] * 9
        actuator.biasprm = [0.0, -device.kp, -device.kd] + [0.0] * 7
        actuator.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
        actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        actuator.forcerange = [-device.torque_limit, device.torque_limit]


def _links(spec: mujoco.MjSpec, params: MujocoParams, path: Path) -> None:
    for link, shapes in params.links.items():
        body = spec.body(link)
        if body is None or link == "world":
            known = ", ".join(b.name for b in spec.bodies if b.name != "world")
            raise DriverConfigError(f"mujoco: links: {path} has no link {link!r}; links: {known}")
        for index, shape in enumerate(shapes):
            geom = body.add_geom(name=f"{link}/{index}", **_shape(shape))
            geom.mass = _MASSLESS
            geom.friction = [params.friction, 0.005, 0.0001]


def _touch_sensor(spec: mujoco.MjSpec, root: str) -> None:
    """A sensor counting the contacts of the geoms in `root`'s subtree (the arm's links)."""
    sensor = spec.add_sensor(name=_touch_sensor_name(root), type=mujoco.mjtSensor.mjSENS_CONTACT)
    sensor.objtype = mujoco.mjtObj.mjOBJ_XBODY  # a subtree
    sensor.objname = root
    sensor.intprm = [1, 0, 1]  # data: "found" (the number of contacts); no reduction; 1 slot


def _touch_sensor_name(root: str) -> str:
    return f"touch/{root}"


def _geom_owners(
    model: mujoco.MjModel, objects: list[ObjectParams], root: str
) -> tuple[tuple[str, ...], NDArray[np.bool_]]:
    """Each geom's owner (its link, its object, or ``table``) and whether it is the arm's (a
    body under the arm's `root`)."""
    names = {model.body(_object_body(o)).id: o.name for o in objects}
    arm_root = model.body(root).id
    owners, arm = [], []
    for geom in range(model.ngeom):
        body = int(model.geom_bodyid[geom])
        owners.append(names.get(body, model.body(body).name if body else "table"))
        arm.append(int(model.body_rootid[body]) == arm_root)
    return tuple(owners), np.array(arm, dtype=bool)


def _shape(shape: Shape) -> dict[str, object]:
    """The geom attributes of a primitive (MuJoCo sizes are half-lengths)."""
    if isinstance(shape, CapsuleShape):
        return {
            "type": mujoco.mjtGeom.mjGEOM_CAPSULE,
            "fromto": [*shape.start, *shape.end],
            "size": [shape.radius, 0.0, 0.0],
        }
    if isinstance(shape, SphereShape):
        return {
            "type": mujoco.mjtGeom.mjGEOM_SPHERE,
            "pos": list(shape.center),
            "size": [shape.radius, 0.0, 0.0],
        }
    assert isinstance(shape, BoxShape)
    return {
        "type": mujoco.mjtGeom.mjGEOM_BOX,
        "pos": list(shape.center),
        "quat": _quat_from_rpy(*shape.rpy),
        "size": [edge / 2.0 for edge in shape.size],
    }


def _quat_from_rpy(roll: float, pitch: float, yaw: float) -> list[float]:
    """[w, x, y, z] of URDF's rpy: about the fixed x, then y, then z axes (Rz·Ry·Rx)."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return [
        cr * cp * cy + sr * sp * sy,
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
    ]


def _object_body(obj: ObjectParams) -> str:
    return f"object/{obj.name}"


def _add_object(spec: mujoco.MjSpec, obj: ObjectParams) -> None:
    body = spec.worldbody.add_body(name=_object_body(obj), pos=list(obj.position))
    if not obj.fixed:
        body.add_freejoint(name=f"{_object_body(obj)}/free")
    geom = body.add_geom(
        name=obj.name,
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[edge / 2.0 for edge in obj.size],
        friction=[obj.friction, 0.005, 0.0001],
    )
    geom.mass = obj.mass
    # A part held between two jaws turns about the grip axis unless contacts resist torsion.
    geom.condim = 4
