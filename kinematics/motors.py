"""Links and their motors: the parts a `KinematicTree` is built from.

A *motor* is a link's transform from its parent's frame to its own: constant (fixed joints, link
offsets) or parameterised by one joint value (revolute: rotation about `axis`; prismatic:
translation along `axis`). A joint motor's transform is ``parent_from_link = origin @ motion(q)``:
`origin` is a constant transform applied before the motion (identity in the plain
`.kinematic.json` format; URDF joint origins land here).

A *mimic* joint follows another joint: ``value = multiplier * q[joint] + offset``; it adds no DOF.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics.errors import ModelError
from kinematics.inertial import Inertial
from kinematics.limits import JointLimit
from kinematics.pose import Pose

__all__ = ["ConstantMotor", "JointMotor", "Link", "Mimic", "Motor"]

Array = NDArray[np.float64]


def unit_axis(axis: ArrayLike, where: str) -> tuple[float, float, float]:
    """Normalise `axis`; `where` names the link and key for the error message."""
    arr = np.asarray(axis, dtype=np.float64)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ModelError(f"{where}: {np.asarray(axis).tolist()} must be 3 finite numbers")
    norm = float(np.linalg.norm(arr))
    if norm < 1e-12:
        raise ModelError(f"{where}: axis {arr.tolist()} must be non-zero")
    x, y, z = (float(v) for v in arr / norm)
    return (x, y, z)


@dataclass(frozen=True, slots=True)
class Mimic:
    """This joint's value is ``multiplier * q[joint] + offset``."""

    joint: str
    multiplier: float = 1.0
    offset: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.multiplier) and math.isfinite(self.offset)):
            raise ModelError(f"mimic of {self.joint!r}: multiplier and offset must be finite")


@dataclass(frozen=True, slots=True)
class ConstantMotor:
    """A fixed ``parent_from_link`` transform."""

    pose: Pose = field(default_factory=Pose)

    kind: Literal["constant"] = field(default="constant", init=False)


@dataclass(frozen=True, slots=True)
class JointMotor:
    """A revolute or prismatic joint.

    kind: "revolute" (rotation in rad about `axis`) or "prismatic" (translation in m along `axis`).
    axis: unit vector in the frame after `origin` (normalised on construction).
    origin: constant transform applied before the motion.
    limits: the joint's limits; infinite bounds where absent.
    joint_name: the joint's name (the link name when None).
    mimic: set when the joint follows another joint instead of adding a DOF.
    """

    kind: Literal["revolute", "prismatic"]
    axis: tuple[float, float, float]
    origin: Pose = field(default_factory=Pose)
    limits: JointLimit = field(default_factory=JointLimit)
    joint_name: str | None = None
    mimic: Mimic | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("revolute", "prismatic"):
            raise ModelError(f"motor type {self.kind!r} must be 'revolute' or 'prismatic'")
        object.__setattr__(self, "axis", unit_axis(self.axis, f"{self.kind} motor axis"))


Motor = ConstantMotor | JointMotor


@dataclass(frozen=True, slots=True)
class Link:
    """A named link, its parent's name (None for the root), the motor placing it and its inertial
    (None: massless, as a URDF link without ``<inertial>``)."""

    name: str
    parent: str | None
    motor: Motor = field(default_factory=ConstantMotor)
    inertial: Inertial | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ModelError(f"link name {self.name!r} must be a non-empty string")
        if self.parent is not None and (not isinstance(self.parent, str) or not self.parent):
            raise ModelError(f"link {self.name!r}: parent {self.parent!r} must be a link name")

    @property
    def joint_name(self) -> str | None:
        """The name of the joint this link's motor is, or None for a constant motor."""
        if isinstance(self.motor, JointMotor):
            return self.motor.joint_name or self.name
        return None
