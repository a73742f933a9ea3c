"""Unit dual quaternions for rigid transforms, vectorised over leading batch dimensions.

Layout (owned by this module): an array of shape ``(..., 8)`` holding the real part (the rotation
quaternion ``[w, x, y, z]``) followed by the dual part ``½ t ⊗ r``, where ``t = [0, tx, ty, tz]`` is
the translation. ``dq_mul(a_from_b, b_from_c)`` is ``a_from_c``, like matrix products.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics.errors import KinematicsError
from kinematics.quaternion import (
    quat_conj,
    quat_from_matrix,
    quat_mul,
    quat_rotate,
    quat_to_matrix,
)

__all__ = [
    "DQ_IDENTITY",
    "dq_conj",
    "dq_from_matrix",
    "dq_from_pose",
    "dq_inverse",
    "dq_mul",
    "dq_normalize",
    "dq_to_matrix",
    "dq_to_pose",
    "dq_transform_points",
]

Array = NDArray[np.float64]

DQ_IDENTITY: Array = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
DQ_IDENTITY.flags.writeable = False


def _as_dq(dq: ArrayLike) -> Array:
    arr = np.asarray(dq, dtype=np.float64)
    if arr.shape[-1:] != (8,):
        raise KinematicsError(f"dual quaternion must have shape (..., 8), got {arr.shape}")
    return arr


def dq_mul(a: ArrayLike, b: ArrayLike) -> Array:
    """Product ``a ⊗ b``: the transform b followed (outermost) by a."""
    a, b = _as_dq(a), _as_dq(b)
    real = quat_mul(a[..., :4], b[..., :4])
    dual = quat_mul(a[..., :4], b[..., 4:]) + quat_mul(a[..., 4:], b[..., :4])
    return np.concatenate((real, dual), axis=-1)


def dq_conj(dq: ArrayLike) -> Array:
    """Quaternion conjugate of both parts; for unit dual quaternions this is the inverse."""
    dq = _as_dq(dq)
    return np.concatenate((quat_conj(dq[..., :4]), quat_conj(dq[..., 4:])), axis=-1)


def dq_inverse(dq: ArrayLike) -> Array:
    """Inverse of a (not necessarily unit) dual quaternion with a non-zero real part."""
    dq = _as_dq(dq)
    real_norm2 = np.sum(dq[..., :4] ** 2, axis=-1, keepdims=True)
    if np.any(real_norm2 < 1e-24):
        raise KinematicsError("cannot invert a dual quaternion with a zero real part")
    real_inv = quat_conj(dq[..., :4]) / real_norm2
    dual_inv = -quat_mul(real_inv, quat_mul(dq[..., 4:], real_inv))
    return np.concatenate((real_inv, dual_inv), axis=-1)


def dq_normalize(dq: ArrayLike) -> Array:
    """The nearest unit dual quaternion: unit real part, dual part orthogonal to it."""
    dq = _as_dq(dq)
    norm = np.linalg.norm(dq[..., :4], axis=-1, keepdims=True)
    if np.any(norm < 1e-12):
        raise KinematicsError("cannot normalise a dual quaternion with a zero real part")
    real, dual = dq[..., :4] / norm, dq[..., 4:] / norm
    dual = dual - np.sum(real * dual, axis=-1, keepdims=True) * real
    return np.concatenate((real, dual), axis=-1)


def dq_from_pose(translation: ArrayLike, quaternion: ArrayLike) -> Array:
    """Dual quaternion of rotating by `quaternion` (unit, ``[w,x,y,z]``), then translating (m)."""
    t = np.asarray(translation, dtype=np.float64)
    r = np.asarray(quaternion, dtype=np.float64)
    t_quat = np.concatenate((np.zeros((*t.shape[:-1], 1)), t), axis=-1)
    dual = 0.5 * quat_mul(t_quat, r)
    real = np.broadcast_to(r, dual.shape)
    return np.concatenate((real, dual), axis=-1)


def dq_to_pose(dq: ArrayLike) -> tuple[Array, Array]:
    """(translation (..., 3) in m, unit quaternion (..., 4)) of a unit dual quaternion."""
    dq = _as_dq(dq)
    real = dq[..., :4]
    translation = 2.0 * quat_mul(dq[..., 4:], quat_conj(real))[..., 1:]
    return translation, real.copy()


def dq_to_matrix(dq: ArrayLike) -> Array:
    """4×4 homogeneous matrices of unit dual quaternions."""
    translation, rotation = dq_to_pose(dq)
    matrix = np.zeros((*translation.shape[:-1], 4, 4))
    matrix[..., :3, :3] = quat_to_matrix(rotation)
    matrix[..., :3, 3] = translation
    matrix[..., 3, 3] = 1.0
    return matrix


def dq_from_matrix(matrix: ArrayLike) -> Array:
    """Unit dual quaternions of 4×4 homogeneous matrices (rotation part must be orthonormal)."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.shape[-2:] != (4, 4):
        raise KinematicsError(f"homogeneous matrix must have shape (..., 4, 4), got {m.shape}")
    return dq_from_pose(m[..., :3, 3], quat_from_matrix(m[..., :3, :3]))


def dq_transform_points(dq: ArrayLike, points: ArrayLike) -> Array:
    """Map points (..., 3) in frame b into frame a by ``a_from_b`` (..., 8)."""
    translation, rotation = dq_to_pose(dq)
    return quat_rotate(rotation, points) + translation
