"""`Pose`: a rigid transform as a translation (m) and a unit quaternion ``[w, x, y, z]``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics.dualquat import dq_from_matrix, dq_from_pose, dq_to_pose
from kinematics.errors import KinematicsError
from kinematics.quaternion import (
    quat_conj,
    quat_from_axis_angle,
    quat_mul,
    quat_rotate,
    quat_to_axis_angle,
    quat_to_matrix,
)

__all__ = ["Pose"]

Array = NDArray[np.float64]


def _frozen_vector(values: ArrayLike, size: int, what: str) -> Array:
    arr = np.array(values, dtype=np.float64).reshape(-1)
    if arr.shape != (size,):
        raise KinematicsError(f"{what} must have {size} elements, got {np.shape(values)}")
    if not np.all(np.isfinite(arr)):
        raise KinematicsError(f"{what} must be finite, got {arr.tolist()}")
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, slots=True, eq=False)
class Pose:
    """A transform ``a_from_b``: maps coordinates in frame b into frame a.

    translation: (3,) m, the origin of b in a. quaternion: (4,) unit ``[w, x, y, z]`` with
    w ≥ 0, the orientation of b in a (normalised and sign-fixed on construction; a zero quaternion
    is an error).
    Compose with ``@``: ``a_from_c = a_from_b @ b_from_c``.
    """

    translation: Array
    quaternion: Array

    def __init__(
        self, translation: ArrayLike = (0.0, 0.0, 0.0), quaternion: ArrayLike = (1.0, 0.0, 0.0, 0.0)
    ) -> None:
        q = _frozen_vector(quaternion, 4, "quaternion")
        norm = float(np.linalg.norm(q))
        if norm < 1e-9:
            raise KinematicsError(f"quaternion must be non-zero, got {q.tolist()}")
        if abs(norm - 1.0) > 1e-15 or q[0] < 0.0:
            q = q / norm if q[0] >= 0.0 else q / -norm  # unit, and w ≥ 0 (q ≡ -q)
            q.flags.writeable = False
        object.__setattr__(self, "translation", _frozen_vector(translation, 3, "translation"))
        object.__setattr__(self, "quaternion", q)

    @classmethod
    def identity(cls) -> Pose:
        return cls()

    @classmethod
    def _trusted(cls, translation: Array, quaternion: Array) -> Pose:
        """Wrap read-only arrays already known to be finite, shaped right and unit (kernel
        outputs): the validation of `__init__` costs more than a whole compiled FK."""
        pose = object.__new__(cls)
        _SET_TRANSLATION(pose, translation)  # the slots' own setters: cheaper than setattr
        _SET_QUATERNION(pose, quaternion)
        return pose

    @classmethod
    def from_axis_angle(cls, translation: ArrayLike, axis: ArrayLike, angle_rad: float) -> Pose:
        """Rotate by `angle_rad` about `axis` (normalised; zero is an error), then translate."""
        return cls(translation, quat_from_axis_angle(axis, angle_rad))

    @classmethod
    def from_matrix(cls, matrix: ArrayLike) -> Pose:
        """From a 4×4 homogeneous matrix with an orthonormal rotation block."""
        return cls.from_dual_quaternion(dq_from_matrix(matrix))

    @classmethod
    def from_dual_quaternion(cls, dq: ArrayLike) -> Pose:
        """From a unit dual quaternion (layout of `kinematics.dualquat`)."""
        translation, rotation = dq_to_pose(dq)
        return cls(translation, rotation)

    @property
    def matrix(self) -> Array:
        """4×4 homogeneous matrix."""
        m = np.eye(4)
        m[:3, :3] = quat_to_matrix(self.quaternion)
        m[:3, 3] = self.translation
        return m

    @property
    def rotation_matrix(self) -> Array:
        return quat_to_matrix(self.quaternion)

    @property
    def dual_quaternion(self) -> Array:
        return dq_from_pose(self.translation, self.quaternion)

    def inverse(self) -> Pose:
        """``b_from_a`` for this ``a_from_b``."""
        q_inv = quat_conj(self.quaternion)
        return Pose(-quat_rotate(q_inv, self.translation), q_inv)

    def __matmul__(self, other: Pose) -> Pose:
        return Pose(
            self.translation + quat_rotate(self.quaternion, other.translation),
            quat_mul(self.quaternion, other.quaternion),
        )

    def transform_points(self, points: ArrayLike) -> Array:
        """Map points (..., 3) from frame b into frame a."""
        return quat_rotate(self.quaternion, points) + self.translation

    def distance_to(self, other: Pose) -> tuple[float, float]:
        """(translation distance in m, rotation angle in rad ∈ [0, π]) between two poses."""
        delta = quat_mul(quat_conj(self.quaternion), other.quaternion)
        _, angle = quat_to_axis_angle(delta)
        return float(np.linalg.norm(other.translation - self.translation)), float(angle)

    def is_close(
        self, other: Pose, *, position_tol: float = 1e-9, rotation_tol: float = 1e-9
    ) -> bool:
        distance, angle = self.distance_to(other)
        return distance <= position_tol and angle <= rotation_tol

    def __repr__(self) -> str:
        t = ", ".join(f"{v:.6g}" for v in self.translation)
        q = ", ".join(f"{v:.6g}" for v in self.quaternion)
        return f"Pose(translation=[{t}], quaternion=[{q}])"


_SET_TRANSLATION = Pose.__dict__["translation"].__set__
_SET_QUATERNION = Pose.__dict__["quaternion"].__set__
