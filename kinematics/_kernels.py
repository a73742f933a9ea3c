"""Compiled kernels (numba) for forward kinematics and Jacobians.

These are the hot paths behind `KinematicTree.fk`, `.jacobian` and the IK solver; the validated
public API lives in `kinematics.tree`. Dual quaternions follow `kinematics.dualquat`
(``[rw, rx, ry, rz, dw, dx, dy, dz]``); Jacobians are 6×dof, linear rows first, root frame.

The packed array layouts are `kinematics._layout`'s. Nothing compiles on import: each entry kernel
is compiled for the one signature of `ENTRIES` by `kinematics.compiled` (or loaded from numba's
cache), when a tree first needs it.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from kinematics._layout import (
    AXIS,
    CONSTANT,
    KIND,
    OFFSET,
    ORIGIN,
    PARENT,
    QIDX,
    REVOLUTE,
    SCALE,
)

_jit = nb.njit(cache=True, nogil=True)

_packed = nb.types.Array(nb.float64, 2, "C", readonly=True)
_f8_1 = nb.types.Array(nb.float64, 1, "C")
_f8_2 = nb.types.Array(nb.float64, 2, "C")
_f8_3 = nb.types.Array(nb.float64, 3, "C")


@_jit
def dq_mul_into(a, b, out):
    """out = a ⊗ b for 8-vectors (out must not alias a or b)."""
    aw, ax, ay, az, adw, adx, ady, adz = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
    bw, bx, by, bz, bdw, bdx, bdy, bdz = b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]
    out[0] = aw * bw - ax * bx - ay * by - az * bz
    out[1] = aw * bx + ax * bw + ay * bz - az * by
    out[2] = aw * by - ax * bz + ay * bw + az * bx
    out[3] = aw * bz + ax * by - ay * bx + az * bw
    out[4] = aw * bdw - ax * bdx - ay * bdy - az * bdz + adw * bw - adx * bx - ady * by - adz * bz
    out[5] = aw * bdx + ax * bdw + ay * bdz - az * bdy + adw * bx + adx * bw + ady * bz - adz * by
    out[6] = aw * bdy - ax * bdz + ay * bdw + az * bdx + adw * by - adx * bz + ady * bw + adz * bx
    out[7] = aw * bdz + ax * bdy - ay * bdx + az * bdw + adw * bz + adx * by - ady * bx + adz * bw


@_jit
def apply_motion(row, value, acc, out):
    """out = acc ⊗ motion, the motion of `row`'s joint at `value` (rad or m): a rotation about,
    or a translation along, its unit axis. Written out to skip the zero terms."""
    aw, ax, ay, az, adw, adx, ady, adz = (
        acc[0],
        acc[1],
        acc[2],
        acc[3],
        acc[4],
        acc[5],
        acc[6],
        acc[7],
    )
    ux, uy, uz = row[AXIS], row[AXIS + 1], row[AXIS + 2]
    if row[KIND] == REVOLUTE:
        c = math.cos(0.5 * value)
        s = math.sin(0.5 * value)
        bx, by, bz = s * ux, s * uy, s * uz
        out[0] = aw * c - ax * bx - ay * by - az * bz
        out[1] = aw * bx + ax * c + ay * bz - az * by
        out[2] = aw * by - ax * bz + ay * c + az * bx
        out[3] = aw * bz + ax * by - ay * bx + az * c
        out[4] = adw * c - adx * bx - ady * by - adz * bz
        out[5] = adw * bx + adx * c + ady * bz - adz * by
        out[6] = adw * by - adx * bz + ady * c + adz * bx
        out[7] = adw * bz + adx * by - ady * bx + adz * c
    else:
        h = 0.5 * value
        bx, by, bz = h * ux, h * uy, h * uz
        out[0] = aw
        out[1] = ax
        out[2] = ay
        out[3] = az
        out[4] = adw - ax * bx - ay * by - az * bz
        out[5] = adx + aw * bx + ay * bz - az * by
        out[6] = ady + aw * by - ax * bz + az * bx
        out[7] = adz + aw * bz + ax * by - ay * bx


@_jit
def translation_of(dq, out):
    """out (3,) = translation of a unit dual quaternion: the vector part of 2 d ⊗ r*."""
    rw, rx, ry, rz = dq[0], -dq[1], -dq[2], -dq[3]
    dw, dx, dy, dz = dq[4], dq[5], dq[6], dq[7]
    out[0] = 2.0 * (dw * rx + dx * rw + dy * rz - dz * ry)
    out[1] = 2.0 * (dw * ry - dx * rz + dy * rw + dz * rx)
    out[2] = 2.0 * (dw * rz + dx * ry - dy * rx + dz * rw)


@_jit
def rotate_into(dq, row, out):
    """out (3,) = the axis of `row` rotated by the real part of `dq`."""
    w, x, y, z = dq[0], dq[1], dq[2], dq[3]
    vx, vy, vz = row[AXIS], row[AXIS + 1], row[AXIS + 2]
    tx = 2.0 * (y * vz - z * vy)
    ty = 2.0 * (z * vx - x * vz)
    tz = 2.0 * (x * vy - y * vx)
    out[0] = vx + w * tx + (y * tz - z * ty)
    out[1] = vy + w * ty + (z * tx - x * tz)
    out[2] = vz + w * tz + (x * ty - y * tx)


@_jit
def all_finite(q):
    for v in q:
        if not math.isfinite(v):
            return False
    return True


@_jit
def chain_walk(chain, q, out, axes, points):
    """out (8,) = root_from_link at q. When `axes`/`points` have one row per chain row, also store
    each joint's axis and origin in the root frame (for Jacobians); 0-row arrays skip that."""
    acc = np.empty(8)
    tmp = np.empty(8)
    acc[:] = 0.0
    acc[0] = 1.0
    store = axes.shape[0] > 0
    for j in range(chain.shape[0]):
        row = chain[j]
        dq_mul_into(acc, row[ORIGIN : ORIGIN + 8], tmp)
        if row[KIND] == CONSTANT:
            acc[:] = tmp
            continue
        if store:
            rotate_into(tmp, row, axes[j])
            translation_of(tmp, points[j])
        apply_motion(row, row[SCALE] * q[int(row[QIDX])] + row[OFFSET], tmp, acc)
    out[:] = acc


@_jit
def fill_jacobian(chain, axes, points, end, J):
    """J (6, dof) from the root-frame axes and origins of the chain's joints and the link origin.
    Columns of joints off the chain stay zero; a mimic joint adds into its driver's column."""
    J[:, :] = 0.0
    for j in range(chain.shape[0]):
        kind = chain[j, KIND]
        if kind == CONSTANT:
            continue
        c = int(chain[j, QIDX])
        s = chain[j, SCALE]
        zx, zy, zz = axes[j, 0], axes[j, 1], axes[j, 2]
        if kind == REVOLUTE:
            rx = end[0] - points[j, 0]
            ry = end[1] - points[j, 1]
            rz = end[2] - points[j, 2]
            J[0, c] += s * (zy * rz - zz * ry)
            J[1, c] += s * (zz * rx - zx * rz)
            J[2, c] += s * (zx * ry - zy * rx)
            J[3, c] += s * zx
            J[4, c] += s * zy
            J[5, c] += s * zz
        else:
            J[0, c] += s * zx
            J[1, c] += s * zy
            J[2, c] += s * zz


@_jit
def chain_pose_jacobian(chain, q, dq, J):
    """dq (8,) = root_from_link at q and J (6, dof) its geometric Jacobian."""
    axes = np.empty((chain.shape[0], 3))
    points = np.empty((chain.shape[0], 3))
    chain_walk(chain, q, dq, axes, points)
    end = np.empty(3)
    translation_of(dq, end)
    fill_jacobian(chain, axes, points, end, J)


@_jit
def dq_to_pose7(dq, out7):
    """out7 = [tx, ty, tz, w, x, y, z] of a unit dual quaternion, with w ≥ 0 (q and -q are the
    same rotation; the canonical one reads better in telemetry)."""
    translation_of(dq, out7[:3])
    sign = -1.0 if dq[0] < 0.0 else 1.0
    for i in range(4):
        out7[3 + i] = sign * dq[i]


# -- entry points: explicit signatures, called through `entry` ---------------------------------


@_jit
def fk_pose(chain, q, out7):
    """out7 (7,) = [translation, quaternion] of root_from_link at q. False if q is not finite."""
    if not all_finite(q):
        return False
    dq = np.empty(8)
    none = np.empty((0, 3))
    chain_walk(chain, q, dq, none, none)
    dq_to_pose7(dq, out7)
    return True


@_jit
def fk_pose_jacobian(chain, q, out7, J):
    """out7 (7,) pose and J (6, dof) Jacobian at q. False if q is not finite."""
    if not all_finite(q):
        return False
    dq = np.empty(8)
    chain_pose_jacobian(chain, q, dq, J)
    dq_to_pose7(dq, out7)
    return True


@_jit
def fk_batch(chain, qs, out):
    """For each row of qs (N, dof): out (N, 8) dual quaternions, or (N, 7) [translation,
    quaternion] rows of root_from_link. False if qs is not finite."""
    dq = np.empty(8)
    none = np.empty((0, 3))
    for i in range(qs.shape[0]):
        if not all_finite(qs[i]):
            return False
        chain_walk(chain, qs[i], dq, none, none)
        if out.shape[1] == 8:
            out[i] = dq
        else:
            dq_to_pose7(dq, out[i])
    return True


@_jit
def jacobian_batch(chain, qs, J):
    """J (N, 6, dof) Jacobians for each row of qs (N, dof). False if qs is not finite."""
    dq = np.empty(8)
    for i in range(qs.shape[0]):
        if not all_finite(qs[i]):
            return False
        chain_pose_jacobian(chain, qs[i], dq, J[i])
    return True


@_jit
def tree_fk(tree, q, out):
    """out (n_links, 8) = root_from_link of every link of a tree array. False if q is not finite."""
    if not all_finite(q):
        return False
    tmp = np.empty(8)
    identity = np.zeros(8)
    identity[0] = 1.0
    for i in range(tree.shape[0]):
        row = tree[i]
        parent = int(row[PARENT])
        base = identity if parent < 0 else out[parent]
        if row[KIND] == CONSTANT:
            dq_mul_into(base, row[ORIGIN : ORIGIN + 8], out[i])
        else:
            dq_mul_into(base, row[ORIGIN : ORIGIN + 8], tmp)
            apply_motion(row, row[SCALE] * q[int(row[QIDX])] + row[OFFSET], tmp, out[i])
    return True


# The entry kernels the Python side calls, each with the one signature it is compiled for, so that
# `kinematics.compiled` can call its entry point directly (no per-call type dispatch).
ENTRIES = {
    "fk_pose": (fk_pose, nb.boolean(_packed, _f8_1, _f8_1)),
    "fk_pose_jacobian": (fk_pose_jacobian, nb.boolean(_packed, _f8_1, _f8_1, _f8_2)),
    "fk_batch": (fk_batch, nb.boolean(_packed, _f8_2, _f8_2)),
    "jacobian_batch": (jacobian_batch, nb.boolean(_packed, _f8_2, _f8_3)),
    "tree_fk": (tree_fk, nb.boolean(_packed, _f8_1, _f8_2)),
}
