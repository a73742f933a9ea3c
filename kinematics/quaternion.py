"""Unit quaternions for rotations, ``[w, x, y, z]`` (scalar first), vectorised over leading batch
dimensions: every function accepts arrays of shape ``(..., 4)`` (and ``(..., 3)`` vectors,
``(..., 3, 3)`` matrices) and broadcasts.

Convention (owned by this module): a quaternion q rotates a vector v as ``q v q*``; the rotation
matrix of q maps coordinates in the rotated frame into the reference frame. Roll-pitch-yaw follows
URDF: ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)`` (fixed axes x, y, z).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics.errors import KinematicsError

__all__ = [
    "quat_conj",
    "quat_from_axis_angle",
    "quat_from_matrix",
    "quat_from_rpy",
    "quat_mul",
    "quat_normalize",
    "quat_rotate",
    "quat_to_axis_angle",
    "quat_to_matrix",
]

Array = NDArray[np.float64]


def _as_quat(q: ArrayLike) -> Array:
    arr = np.asarray(q, dtype=np.float64)
    if arr.shape[-1:] != (4,):
        raise KinematicsError(f"quaternion must have shape (..., 4), got {arr.shape}")
    return arr


def quat_mul(a: ArrayLike, b: ArrayLike) -> Array:
    """Hamilton product ``a ⊗ b`` (apply b, then a)."""
    a, b = _as_quat(a), _as_quat(b)
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        axis=-1,
    )


def quat_conj(q: ArrayLike) -> Array:
    """Conjugate ``[w, -x, -y, -z]``: the inverse of a unit quaternion."""
    conj: Array = _as_quat(q) * np.array([1.0, -1.0, -1.0, -1.0])
    return conj


def quat_normalize(q: ArrayLike) -> Array:
    """Scale to unit norm. Raises `KinematicsError` for a zero quaternion."""
    q = _as_quat(q)
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    if np.any(norm < 1e-12):
        raise KinematicsError("cannot normalise a zero quaternion")
    unit: Array = q / norm
    return unit


def quat_from_axis_angle(axis: ArrayLike, angle: ArrayLike) -> Array:
    """Rotation by `angle` (rad) about `axis` (any non-zero length; normalised here)."""
    axis = np.asarray(axis, dtype=np.float64)
    norm = np.linalg.norm(axis, axis=-1, keepdims=True)
    if np.any(norm < 1e-12):
        raise KinematicsError(f"rotation axis must be non-zero, got {axis.tolist()}")
    half = 0.5 * np.asarray(angle, dtype=np.float64)[..., None]
    return np.concatenate((np.cos(half), np.sin(half) * axis / norm), axis=-1)


def quat_to_axis_angle(q: ArrayLike) -> tuple[Array, Array]:
    """The (unit axis, angle in [0, π]) of a unit quaternion; the axis is x for no rotation."""
    q = _as_quat(q)
    q = np.where(q[..., :1] < 0.0, -q, q)
    sin_half = np.linalg.norm(q[..., 1:], axis=-1)
    angle = 2.0 * np.arctan2(sin_half, q[..., 0])
    safe = np.where(sin_half[..., None] > 1e-12, sin_half[..., None], 1.0)
    axis = np.where(sin_half[..., None] > 1e-12, q[..., 1:] / safe, [1.0, 0.0, 0.0])
    return axis, angle


def quat_rotate(q: ArrayLike, v: ArrayLike) -> Array:
    """Rotate vectors `v` (..., 3) by unit quaternions `q` (..., 4)."""
    q = _as_quat(q)
    v = np.asarray(v, dtype=np.float64)
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_to_matrix(q: ArrayLike) -> Array:
    """3×3 rotation matrices of unit quaternions."""
    w, x, y, z = np.moveaxis(_as_quat(q), -1, 0)
    return np.stack(
        (
            np.stack((1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)), -1),
            np.stack((2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)), -1),
            np.stack((2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)), -1),
        ),
        axis=-2,
    )


def quat_from_matrix(m: ArrayLike) -> Array:
    """Unit quaternions (w ≥ 0) of 3×3 rotation matrices (Shepperd's method, stable near π)."""
    m = np.asarray(m, dtype=np.float64)
    if m.shape[-2:] != (3, 3):
        raise KinematicsError(f"rotation matrix must have shape (..., 3, 3), got {m.shape}")
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    # Four candidate forms; pick per element the one with the largest (best-conditioned) pivot.
    candidates = np.stack(
        (
            np.stack(
                (
                    1 + m00 + m11 + m22,
                    m[..., 2, 1] - m[..., 1, 2],
                    m[..., 0, 2] - m[..., 2, 0],
                    m[..., 1, 0] - m[..., 0, 1],
                ),
                -1,
            ),
            np.stack(
                (
                    m[..., 2, 1] - m[..., 1, 2],
                    1 + m00 - m11 - m22,
                    m[..., 0, 1] + m[..., 1, 0],
                    m[..., 0, 2] + m[..., 2, 0],
                ),
                -1,
            ),
            np.stack(
                (
                    m[..., 0, 2] - m[..., 2, 0],
                    m[..., 0, 1] + m[..., 1, 0],
                    1 - m00 + m11 - m22,
                    m[..., 1, 2] + m[..., 2, 1],
                ),
                -1,
            ),
            np.stack(
                (
                    m[..., 1, 0] - m[..., 0, 1],
                    m[..., 0, 2] + m[..., 2, 0],
                    m[..., 1, 2] + m[..., 2, 1],
                    1 - m00 - m11 + m22,
                ),
                -1,
            ),
        ),
        axis=-2,
    )
    pivots = np.stack(
        (1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22), -1
    )
    best = np.argmax(pivots, axis=-1)
    q = np.take_along_axis(candidates, best[..., None, None], axis=-2)[..., 0, :]
    q = quat_normalize(q)
    return np.where(q[..., :1] < 0.0, -q, q)


def quat_from_rpy(rpy: ArrayLike) -> Array:
    """Quaternions of URDF roll-pitch-yaw angles (rad): ``Rz(yaw) @ Ry(pitch) @ Rx(roll)``."""
    rpy = np.asarray(rpy, dtype=np.float64)
    roll, pitch, yaw = np.moveaxis(rpy, -1, 0)
    qx = quat_from_axis_angle([1.0, 0.0, 0.0], roll)
    qy = quat_from_axis_angle([0.0, 1.0, 0.0], pitch)
    qz = quat_from_axis_angle([0.0, 0.0, 1.0], yaw)
    return quat_mul(qz, quat_mul(qy, qx))
