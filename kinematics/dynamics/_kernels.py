"""Compiled kernels (numba) for rigid-body dynamics: gravity torques, inverse dynamics (recursive
Newton–Euler) and the joint-space mass matrix (composite rigid bodies).

The validated public API is `kinematics.dynamics.Dynamics`. The packed body rows and the payload
row are `kinematics._layout`'s (``D_*``, ``P_*``); a body's frame is its joint link's frame, and a
joint value is ``SCALE * q[QIDX] + OFFSET`` (mimic joints), so its rate is ``SCALE * qd[QIDX]``
and its generalized force adds ``SCALE`` times into ``tau[QIDX]``.

Spatial vectors are (angular, linear) pairs in a body's frame, about its origin (Featherstone's
convention): motion (ω, v), force (n, f). Rotations are 3×3 row-major 9-vectors. The gravity
acceleration enters as the root's acceleration, ``-g`` (the fictitious upward acceleration).
Nothing compiles on import; `kinematics.compiled` compiles each entry of `ENTRIES` once.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from kinematics._kernels import all_finite
from kinematics._layout import (
    AXIS,
    D_H,
    D_MASS,
    D_PARENT,
    D_POS,
    D_ROT,
    KIND,
    OFFSET,
    P_BODY,
    QIDX,
    REVOLUTE,
    SCALE,
)

_jit = nb.njit(cache=True, nogil=True)

_packed = nb.types.Array(nb.float64, 2, "C", readonly=True)
_ro1 = nb.types.Array(nb.float64, 1, "C", readonly=True)
_f8_1 = nb.types.Array(nb.float64, 1, "C")
_f8_2 = nb.types.Array(nb.float64, 2, "C")


@_jit
def placement(row, q, rot, pos):
    """rot (9,), pos (3,) = parent_from_body of one body row at q: the joint origin, then the
    rotation about (revolute) or translation along (prismatic) the unit axis."""
    value = row[SCALE] * q[int(row[QIDX])] + row[OFFSET]
    ux, uy, uz = row[AXIS], row[AXIS + 1], row[AXIS + 2]
    e = row[D_ROT : D_ROT + 9]
    if row[KIND] == REVOLUTE:
        c, s = math.cos(value), math.sin(value)
        t = 1.0 - c
        j0, j1, j2 = c + t * ux * ux, t * ux * uy - s * uz, t * ux * uz + s * uy
        j3, j4, j5 = t * ux * uy + s * uz, c + t * uy * uy, t * uy * uz - s * ux
        j6, j7, j8 = t * ux * uz - s * uy, t * uy * uz + s * ux, c + t * uz * uz
        for r in range(3):
            a, b, d = e[3 * r], e[3 * r + 1], e[3 * r + 2]
            rot[3 * r] = a * j0 + b * j3 + d * j6
            rot[3 * r + 1] = a * j1 + b * j4 + d * j7
            rot[3 * r + 2] = a * j2 + b * j5 + d * j8
        for r in range(3):
            pos[r] = row[D_POS + r]
    else:
        for k in range(9):
            rot[k] = e[k]
        for r in range(3):
            pos[r] = row[D_POS + r] + value * (
                e[3 * r] * ux + e[3 * r + 1] * uy + e[3 * r + 2] * uz
            )


@_jit
def compose(world, parent, rot, pos, out):
    """out (12,) = root_from_body (rotation 9, position 3) from the parent's row of `world`
    (the root when parent < 0) and parent_from_body (rot, pos)."""
    if parent < 0:
        out[:9] = rot
        out[9:] = pos
        return
    wp = world[parent]
    for r in range(3):
        a, b, c = wp[3 * r], wp[3 * r + 1], wp[3 * r + 2]
        for k in range(3):
            out[3 * r + k] = a * rot[k] + b * rot[3 + k] + c * rot[6 + k]
        out[9 + r] = wp[9 + r] + a * pos[0] + b * pos[1] + c * pos[2]


@_jit
def body_inertia(bodies, payload, i, out):
    """out (10,) = mass, first moment (3), rotational inertia about the origin (6) of body i,
    the payload added when it rides on body i."""
    for k in range(10):
        out[k] = bodies[i, D_MASS + k]
    if int(payload[P_BODY]) == i:
        for k in range(10):
            out[k] += payload[1 + k]


@_jit
def sym_mul(ib, x, y, z):
    """(Ī (x, y, z)) for Ī packed as (ixx, ixy, ixz, iyy, iyz, izz)."""
    return (
        ib[0] * x + ib[1] * y + ib[2] * z,
        ib[1] * x + ib[3] * y + ib[4] * z,
        ib[2] * x + ib[4] * y + ib[5] * z,
    )


@_jit
def to_parent_inertia(ine, rot, pos, out):
    """out (10,) += the inertia `ine` (10,) of a body, expressed in its parent's frame (rot, pos:
    parent_from_body): m' = m, h' = R h + m p, Ī' = R Ī Rᵀ + m (p·p 1 - p pᵀ)
    + 2 (p·h'') 1 - h'' pᵀ - p h''ᵀ with h'' = R h."""
    m = ine[0]
    hx = rot[0] * ine[1] + rot[1] * ine[2] + rot[2] * ine[3]
    hy = rot[3] * ine[1] + rot[4] * ine[2] + rot[5] * ine[3]
    hz = rot[6] * ine[1] + rot[7] * ine[2] + rot[8] * ine[3]
    px, py, pz = pos[0], pos[1], pos[2]
    out[0] += m
    out[1] += hx + m * px
    out[2] += hy + m * py
    out[3] += hz + m * pz
    ib = ine[4:10]
    # R Ī Rᵀ: column c of Ī Rᵀ is Ī (row c of R)
    a0, a1, a2 = sym_mul(ib, rot[0], rot[1], rot[2])
    b0, b1, b2 = sym_mul(ib, rot[3], rot[4], rot[5])
    c0, c1, c2 = sym_mul(ib, rot[6], rot[7], rot[8])
    pp = px * px + py * py + pz * pz
    ph = 2.0 * (px * hx + py * hy + pz * hz)
    out[4] += rot[0] * a0 + rot[1] * a1 + rot[2] * a2 + m * (pp - px * px) + ph - 2.0 * hx * px
    out[5] += rot[0] * b0 + rot[1] * b1 + rot[2] * b2 - m * px * py - hx * py - px * hy
    out[6] += rot[0] * c0 + rot[1] * c1 + rot[2] * c2 - m * px * pz - hx * pz - px * hz
    out[7] += rot[3] * b0 + rot[4] * b1 + rot[5] * b2 + m * (pp - py * py) + ph - 2.0 * hy * py
    out[8] += rot[3] * c0 + rot[4] * c1 + rot[5] * c2 - m * py * pz - hy * pz - py * hz
    out[9] += rot[6] * c0 + rot[7] * c1 + rot[8] * c2 + m * (pp - pz * pz) + ph - 2.0 * hz * pz


@_jit
def force_to_parent(f, rot, pos, out):
    """out (6,) = the force f (n, f) of a body (6,) in its parent's frame: R n + p × R f, R f."""
    fx = rot[0] * f[3] + rot[1] * f[4] + rot[2] * f[5]
    fy = rot[3] * f[3] + rot[4] * f[4] + rot[5] * f[5]
    fz = rot[6] * f[3] + rot[7] * f[4] + rot[8] * f[5]
    px, py, pz = pos[0], pos[1], pos[2]
    out[0] = rot[0] * f[0] + rot[1] * f[1] + rot[2] * f[2] + py * fz - pz * fy
    out[1] = rot[3] * f[0] + rot[4] * f[1] + rot[5] * f[2] + pz * fx - px * fz
    out[2] = rot[6] * f[0] + rot[7] * f[1] + rot[8] * f[2] + px * fy - py * fx
    out[3] = fx
    out[4] = fy
    out[5] = fz


@_jit
def motion_to_child(rot, pos, wp, vp, w, v):
    """(w, v) = the parent's motion (wp, vp) seen in the body: Rᵀ wp, Rᵀ (vp + wp × p)."""
    px, py, pz = pos[0], pos[1], pos[2]
    ux = vp[0] + wp[1] * pz - wp[2] * py
    uy = vp[1] + wp[2] * px - wp[0] * pz
    uz = vp[2] + wp[0] * py - wp[1] * px
    for k in range(3):
        w[k] = rot[k] * wp[0] + rot[3 + k] * wp[1] + rot[6 + k] * wp[2]
        v[k] = rot[k] * ux + rot[3 + k] * uy + rot[6 + k] * uz


@_jit
def projected(row, f):
    """Sᵀ f: the joint's share of the body force f (6,): a · n (revolute) or a · f (prismatic)."""
    o = 0 if row[KIND] == REVOLUTE else 3
    return row[AXIS] * f[o] + row[AXIS + 1] * f[o + 1] + row[AXIS + 2] * f[o + 2]


# -- entry points: explicit signatures, called through `kinematics.compiled` --------------------


@_jit
def weights(bodies, q, payload, world, mass, moment):
    """Per body: world (12,) = root_from_body (rotation 9, position 3), mass (kg) and first
    moment in the root frame (3,), kg·m, the payload included."""
    rot = np.empty(9)
    pos = np.empty(3)
    for i in range(bodies.shape[0]):
        row = bodies[i]
        placement(row, q, rot, pos)
        wi = world[i]
        compose(world, int(row[D_PARENT]), rot, pos, wi)
        m = row[D_MASS]
        hx, hy, hz = row[D_H], row[D_H + 1], row[D_H + 2]
        if int(payload[P_BODY]) == i:
            m += payload[1]
            hx, hy, hz = hx + payload[2], hy + payload[3], hz + payload[4]
        mass[i] = m
        for r in range(3):
            moment[i, r] = m * wi[9 + r] + wi[3 * r] * hx + wi[3 * r + 1] * hy + wi[3 * r + 2] * hz


@_jit
def gravity_torques(bodies, q, gravity, payload, tau):
    """tau (dof,) = g(q), the joint torques (forces) that hold the tree still against the
    gravity acceleration `gravity` (3,) of the root frame, m/s². False if q is not finite.

    Root-frame form of Newton–Euler at rest: each revolute joint holds the moment about its axis
    of the weight of its subtree, a prismatic one the weight's component along its axis."""
    if not all_finite(q):
        return False
    n = bodies.shape[0]
    world, mass, moment = np.empty((n, 12)), np.empty(n), np.empty((n, 3))
    weights(bodies, q, payload, world, mass, moment)
    tau[:] = 0.0
    gx, gy, gz = -gravity[0], -gravity[1], -gravity[2]
    for i in range(n - 1, -1, -1):  # leaves first: mass and moment become the subtree's
        row = bodies[i]
        wi = world[i]
        ux, uy, uz = row[AXIS], row[AXIS + 1], row[AXIS + 2]
        zx = wi[0] * ux + wi[1] * uy + wi[2] * uz
        zy = wi[3] * ux + wi[4] * uy + wi[5] * uz
        zz = wi[6] * ux + wi[7] * uy + wi[8] * uz
        m = mass[i]
        if row[KIND] == REVOLUTE:
            rx = moment[i, 0] - m * wi[9]
            ry = moment[i, 1] - m * wi[10]
            rz = moment[i, 2] - m * wi[11]
            t = zx * (ry * gz - rz * gy) + zy * (rz * gx - rx * gz) + zz * (rx * gy - ry * gx)
        else:
            t = m * (zx * gx + zy * gy + zz * gz)
        tau[int(row[QIDX])] += row[SCALE] * t
        parent = int(row[D_PARENT])
        if parent >= 0:
            mass[parent] += m
            for r in range(3):
                moment[parent, r] += moment[i, r]
    return True


@_jit
def rnea(bodies, q, qd, qdd, gravity, payload, tau):
    """tau (dof,) = M(q) qdd + C(q, qd) qd + g(q): inverse dynamics by recursive Newton–Euler.
    False if q, qd or qdd is not finite."""
    if not (all_finite(q) and all_finite(qd) and all_finite(qdd)):
        return False
    n = bodies.shape[0]
    place = np.empty((n, 12))  # parent_from_body: rotation (9), position (3)
    motion = np.empty((n, 12))  # ω, v, ω̇, v̇ (spatial acceleration), body frame
    force = np.empty((n, 6))
    ine = np.empty(10)
    root = np.zeros(6)
    root[3], root[4], root[5] = -gravity[0], -gravity[1], -gravity[2]
    for i in range(n):
        row = bodies[i]
        pl = place[i]
        placement(row, q, pl[:9], pl[9:])
        parent = int(row[D_PARENT])
        mo = motion[i]
        if parent < 0:
            motion_to_child(pl[:9], pl[9:], root[:3], root[:3], mo[0:3], mo[3:6])
            motion_to_child(pl[:9], pl[9:], root[:3], root[3:], mo[6:9], mo[9:12])
        else:
            mp = motion[parent]
            motion_to_child(pl[:9], pl[9:], mp[0:3], mp[3:6], mo[0:3], mo[3:6])
            motion_to_child(pl[:9], pl[9:], mp[6:9], mp[9:12], mo[6:9], mo[9:12])
        k, s = int(row[QIDX]), row[SCALE]
        add_joint_motion(row, s * qd[k], s * qdd[k], mo)
        body_inertia(bodies, payload, i, ine)
        body_force(ine, mo, force[i])
    return backward_forces(bodies, place, force, tau)


@_jit
def add_joint_motion(row, rate, accel, mo):
    """mo (12,): ω, v, ω̇, v̇ of the body moved by its joint at `rate` and `accel`: + S q̇ to the
    velocity, + S q̈ + (ω, v) × S q̇ to the acceleration."""
    ax, ay, az = row[AXIS] * rate, row[AXIS + 1] * rate, row[AXIS + 2] * rate
    o = 0 if row[KIND] == REVOLUTE else 3  # the part the joint moves: ω or v
    mo[o] += ax
    mo[o + 1] += ay
    mo[o + 2] += az
    # (ω, v) × S q̇ is (ω × a q̇, v × a q̇) when revolute, (0, ω × a q̇) when prismatic
    add_cross(mo[0:3], ax, ay, az, mo[6 + o : 9 + o])
    if o == 0:
        add_cross(mo[3:6], ax, ay, az, mo[9:12])
    mo[6 + o] += row[AXIS] * accel
    mo[6 + o + 1] += row[AXIS + 1] * accel
    mo[6 + o + 2] += row[AXIS + 2] * accel


@_jit
def add_cross(w, ax, ay, az, out):
    """out (3,) += w × (ax, ay, az)."""
    out[0] += w[1] * az - w[2] * ay
    out[1] += w[2] * ax - w[0] * az
    out[2] += w[0] * ay - w[1] * ax


@_jit
def body_force(ine, mo, out):
    """out (6,) = I a + v ×* (I v): the force that gives the body its motion mo (ω, v, ω̇, v̇)."""
    m, hx, hy, hz = ine[0], ine[1], ine[2], ine[3]
    ib = ine[4:10]
    wx, wy, wz, vx, vy, vz = mo[0], mo[1], mo[2], mo[3], mo[4], mo[5]
    ax, ay, az, bx, by, bz = mo[6], mo[7], mo[8], mo[9], mo[10], mo[11]
    # momentum: n = Ī ω + h × v, l = m v + ω × h
    n0, n1, n2 = sym_mul(ib, wx, wy, wz)
    n0 += hy * vz - hz * vy
    n1 += hz * vx - hx * vz
    n2 += hx * vy - hy * vx
    l0 = m * vx + wy * hz - wz * hy
    l1 = m * vy + wz * hx - wx * hz
    l2 = m * vz + wx * hy - wy * hx
    # n_f = Ī ω̇ + h × v̇ + ω × n + v × l;  f = m v̇ + ω̇ × h + ω × l
    t0, t1, t2 = sym_mul(ib, ax, ay, az)
    out[0] = t0 + hy * bz - hz * by + wy * n2 - wz * n1 + vy * l2 - vz * l1
    out[1] = t1 + hz * bx - hx * bz + wz * n0 - wx * n2 + vz * l0 - vx * l2
    out[2] = t2 + hx * by - hy * bx + wx * n1 - wy * n0 + vx * l1 - vy * l0
    out[3] = m * bx + ay * hz - az * hy + wy * l2 - wz * l1
    out[4] = m * by + az * hx - ax * hz + wz * l0 - wx * l2
    out[5] = m * bz + ax * hy - ay * hx + wx * l1 - wy * l0


@_jit
def backward_forces(bodies, place, force, tau):
    """tau (dof,) = Sᵀ of each body's force with its subtree's, leaves first. Returns True."""
    tau[:] = 0.0
    moved = np.empty(6)
    for i in range(bodies.shape[0] - 1, -1, -1):
        row = bodies[i]
        tau[int(row[QIDX])] += row[SCALE] * projected(row, force[i])
        parent = int(row[D_PARENT])
        if parent >= 0:
            force_to_parent(force[i], place[i, :9], place[i, 9:], moved)
            for k in range(6):
                force[parent, k] += moved[k]
    return True


@_jit
def mass_matrix(bodies, q, payload, M):
    """M (dof, dof) = the joint-space mass matrix at q by the composite-rigid-body algorithm
    (Featherstone), each body's column folded into its driving joint's (G^T M G for mimic
    joints). False if q is not finite."""
    if not all_finite(q):
        return False
    n = bodies.shape[0]
    place = np.empty((n, 12))
    composite = np.empty((n, 10))
    for i in range(n):
        placement(bodies[i], q, place[i, :9], place[i, 9:])
        body_inertia(bodies, payload, i, composite[i])
    for i in range(n - 1, -1, -1):
        parent = int(bodies[i, D_PARENT])
        if parent >= 0:
            to_parent_inertia(composite[i], place[i, :9], place[i, 9:], composite[parent])
    M[:, :] = 0.0
    f = np.empty(6)
    moved = np.empty(6)
    for i in range(n):
        row = bodies[i]
        composite_force(row, composite[i], f)
        ki, si = int(row[QIDX]), row[SCALE]
        M[ki, ki] += si * si * projected(row, f)
        j = i
        parent = int(bodies[j, D_PARENT])
        while parent >= 0:
            force_to_parent(f, place[j, :9], place[j, 9:], moved)
            f[:] = moved
            j = parent
            kj = int(bodies[j, QIDX])
            value = si * bodies[j, SCALE] * projected(bodies[j], f)
            M[ki, kj] += value
            M[kj, ki] += value
            parent = int(bodies[j, D_PARENT])
    return True


@_jit
def composite_force(row, ine, f):
    """f (6,) = I S, the force of the joint's unit motion S on the composite inertia `ine`."""
    ux, uy, uz = row[AXIS], row[AXIS + 1], row[AXIS + 2]
    m, hx, hy, hz = ine[0], ine[1], ine[2], ine[3]
    if row[KIND] == REVOLUTE:  # S = (a, 0): n = Ī a, f = a × h
        f[0], f[1], f[2] = sym_mul(ine[4:10], ux, uy, uz)
        f[3] = uy * hz - uz * hy
        f[4] = uz * hx - ux * hz
        f[5] = ux * hy - uy * hx
    else:  # S = (0, a): n = h × a, f = m a
        f[0] = hy * uz - hz * uy
        f[1] = hz * ux - hx * uz
        f[2] = hx * uy - hy * ux
        f[3], f[4], f[5] = m * ux, m * uy, m * uz


# The entry kernels the Python side calls, each with the one signature it is compiled for.
ENTRIES = {
    "gravity_torques": (gravity_torques, nb.boolean(_packed, _f8_1, _ro1, _ro1, _f8_1)),
    "rnea": (rnea, nb.boolean(_packed, _f8_1, _f8_1, _f8_1, _ro1, _ro1, _f8_1)),
    "mass_matrix": (mass_matrix, nb.boolean(_packed, _f8_1, _ro1, _f8_2)),
}
