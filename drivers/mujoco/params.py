"""The `mujoco` driver's configuration: the arm's URDF, its devices (one actuator per joint), the
collision primitives of its links and the free or fixed objects around it.

Frames and units: SI throughout (m, kg, rad, N·m). A link's primitives are in that link's frame
(the URDF link frame); objects are placed in the root frame (the URDF's root link, which stands
on the table plane z = 0). Efforts are N·m at the joint, positive along the joint's axis.

Two actuator families, like the real ones (`ActuatorKind`):

- ``servo``: a position servo (Feetech, Dynamixel): the loop runs inside the servo,
  ``τ = kp·(p* - q) - kd·q̇`` clamped to ±`torque_limit`; p* is the commanded position; the load
  it reports is τ.
- ``mit``: an MIT impedance actuator (Damiao, CubeMars): ``τ = kp·(p* - q) + kd·(v* - q̇) + τff``
  clamped to ±`torque_limit`, with p*, v* commanded each tick and τff the torque feed-forward
  (`torque_feedforward`).
"""

from __future__ import annotations

import enum
import math
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from drivers.base import CONFIG_DIR, DriverParams, config_dir

__all__ = [
    "CONFIG_DIR",
    "ActuatorKind",
    "BoxShape",
    "CapsuleShape",
    "FeedForward",
    "MujocoDeviceParams",
    "MujocoParams",
    "ObjectParams",
    "Shape",
    "SphereShape",
    "config_dir",
]

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
Vector3 = tuple[FiniteFloat, FiniteFloat, FiniteFloat]


class ActuatorKind(enum.StrEnum):
    SERVO = "servo"
    MIT = "mit"


class FeedForward(enum.StrEnum):
    """Where an MIT actuator's torque feed-forward τff comes from.

    command: the command's (`DeviceCommand.torque`, N·m, where the daemon sends one: its gravity
        compensation), else 0, as the `mit` driver sends without gravity compensation.
    gravity: the gravity torque of the arm (its URDF links, no payload) at the commanded
        positions, computed by the driver at each `write()`, standing in for the daemon's; the
        command's torque is ignored.
    """

    COMMAND = "command"
    GRAVITY = "gravity"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CapsuleShape(_Model):
    """A capsule from `start` to `end` (m, link frame) of `radius` (m)."""

    type: Literal["capsule"]
    start: Vector3
    end: Vector3
    radius: float = Field(gt=0.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _has_length(self) -> Self:
        if math.dist(self.start, self.end) <= 0.0:
            raise ValueError(f"capsule start and end are the same point {list(self.start)}")
        return self


class SphereShape(_Model):
    """A sphere centred at `center` (m, link frame) of `radius` (m)."""

    type: Literal["sphere"]
    center: Vector3
    radius: float = Field(gt=0.0, allow_inf_nan=False)


class BoxShape(_Model):
    """A box centred at `center` (m, link frame), edges `size` (m, full lengths along the link
    frame's axes, turned by `rpy`, rad, fixed-axis roll-pitch-yaw as in URDF)."""

    type: Literal["box"]
    center: Vector3
    size: Vector3
    rpy: Vector3 = (0.0, 0.0, 0.0)

    @field_validator("size")
    @classmethod
    def _positive_edges(cls, size: Vector3) -> Vector3:
        if min(size) <= 0.0:
            raise ValueError(f"box size {list(size)} m: every edge must be > 0")
        return size


Shape = Annotated[CapsuleShape | SphereShape | BoxShape, Field(discriminator="type")]


class ObjectParams(_Model):
    """A box in the scene.

    size: its edges, m (full lengths). mass: kg. position: its centre in the root frame, m.
    fixed: welded to the world (a block bolted to the table) or free (a part to pick up).
    known_to_collision_check: whether the daemon's collision check is told about it; the driver
        only simulates it either way.
    """

    name: str = Field(min_length=1)
    size: Vector3
    mass: float = Field(gt=0.0, allow_inf_nan=False)
    position: Vector3
    fixed: bool = False
    known_to_collision_check: bool = True
    friction: float = Field(1.0, gt=0.0, allow_inf_nan=False, description="sliding friction")

    @field_validator("size")
    @classmethod
    def _positive_edges(cls, size: Vector3) -> Vector3:
        if min(size) <= 0.0:
            raise ValueError(f"object size {list(size)} m: every edge must be > 0")
        return size


class MujocoDeviceParams(_Model):
    """One actuator driving one URDF joint (N·m, rad, s).

    joint: the URDF joint; None: the device's own name.
    actuator: `ActuatorKind`. kp: N·m/rad; kd: N·m·s/rad; torque_limit: N·m, the clamp of the
        torque it applies and reports.
    torque_feedforward: MIT actuators only (`FeedForward`).
    initial_position: rad, where the joint starts.
    damping: N·m·s/rad, friction: N·m (Coulomb), armature: kg·m², the rotor's inertia reflected
        through the gearbox (a geared servo's dominates its link's): the joint's passive terms.
    brake_torque: N·m a brake (or a gearbox that does not back-drive) holds while torque is off;
        0: the joint is limp.
    effort_filter_s: s, the time constant of the low-pass filter through which the effort is
        read (a drive's load measurement); 0: the instantaneous torque.
    """

    joint: str | None = Field(None, min_length=1)
    actuator: ActuatorKind = ActuatorKind.SERVO
    kp: float = Field(gt=0.0, allow_inf_nan=False)
    kd: float = Field(ge=0.0, allow_inf_nan=False)
    torque_limit: float = Field(gt=0.0, allow_inf_nan=False)
    torque_feedforward: FeedForward = FeedForward.COMMAND
    initial_position: float = Field(0.0, allow_inf_nan=False)
    damping: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    friction: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    armature: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    brake_torque: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    effort_filter_s: float = Field(0.01, ge=0.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _feedforward_needs_mit(self) -> Self:
        if self.actuator is ActuatorKind.SERVO and self.torque_feedforward is FeedForward.GRAVITY:
            raise ValueError(
                f"torque_feedforward {self.torque_feedforward.value!r}: a servo takes no torque "
                "feed-forward; only actuator 'mit' does"
            )
        return self


class MujocoParams(DriverParams):
    """The `mujoco` driver's configuration.

    urdf: the arm's URDF file. A relative path starts at the config file's folder, given when
        the params are validated as ``context={CONFIG_DIR: folder}`` (the validated value is
        then that absolute path, so that every process reads the same file), else at the
        working directory; an absolute one is kept. Meshes are ignored: the collision model is
        `links`' primitives.
    devices: the actuators by device name, in order; joints no device names are passive.
    links: collision primitives by URDF link name, in each link's frame.
    objects: boxes in the scene (free or fixed).
    table: a plane at z = 0 in the root frame (the arm's base stands on it).
    timestep_s: the physics step, s (at most 1 ms: the actuators' loops run at ≥ 1 kHz).
    gravity: m/s² in the root frame.
    friction: the sliding friction of the arm's primitives and the table.
    max_lag_s: the real-time thread catches up at most this far behind the clock at once; a
        longer stall (the machine busy) is skipped, counted in `MujocoDriver.skipped_steps`.
    """

    urdf: str = Field(min_length=1)
    devices: dict[str, MujocoDeviceParams] = Field(min_length=1)
    links: dict[str, list[Shape]] = Field(default_factory=dict)
    objects: list[ObjectParams] = Field(default_factory=list)
    table: bool = True
    timestep_s: float = Field(0.001, gt=0.0, le=0.001, allow_inf_nan=False)
    gravity: Vector3 = (0.0, 0.0, -9.81)
    friction: float = Field(1.0, gt=0.0, allow_inf_nan=False)
    max_lag_s: float = Field(0.05, gt=0.0, allow_inf_nan=False)

    @field_validator("urdf")
    @classmethod
    def _urdf_exists(cls, urdf: str, info: ValidationInfo) -> str:
        raw = Path(urdf).expanduser()
        folder = config_dir(info.context)
        path = raw if raw.is_absolute() or folder is None else folder / raw
        if not path.is_file():
            where = "" if raw.is_absolute() else f" (relative to {folder or Path.cwd()})"
            raise ValueError(f"no such file {urdf!r}{where}")
        return urdf if folder is None else str(path)

    @model_validator(mode="after")
    def _distinct(self) -> Self:
        joints: dict[str, str] = {}
        for name, device in self.devices.items():
            joint = device.joint or name
            if joint in joints:
                raise ValueError(
                    f"devices {joints[joint]!r} and {name!r} both drive joint {joint!r}"
                )
            joints[joint] = name
        names = [o.name for o in self.objects]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"objects named more than once: {twice}")
        return self

    def joint_of(self, device: str) -> str:
        """The URDF joint `device` drives."""
        return self.devices[device].joint or device
