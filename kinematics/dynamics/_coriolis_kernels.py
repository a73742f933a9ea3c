"""Compiled kernel (numba) for the Coriolis matrix C(q, q̇): the one with C q̇ the Coriolis and
centrifugal torques and Ṁ - 2C skew-symmetric (Christoffel symbols of the first kind), by the
algorithm of Echeandia and Wensing, "Numerical Methods to Compute the Coriolis Matrix and
Christoffel Symbols for Rigid-Body Systems" (J. Comput. Nonlinear Dyn., 2021), Algorithm 1.

It works in the root frame: spatial motions (ω, v) with v the velocity of the point at the root's
origin, spatial inertias about that origin, so that composite quantities simply add. For each
body, with S its joint's motion, Ṡ = v × S its rate, and
``B(v, I) = ½ ((v ×*) I + (I v) ×̄* - I (v ×))`` (``f ×̄* v = v ×* f``), composites of I and B
are carried toward the root and ``C[j, j] = Sⱼᵀ (Iᶜ Ṡⱼ + Bᶜ Sⱼ)``,
``C[i, j] = Sᵢᵀ (Iᶜ Ṡⱼ + Bᶜ Sⱼ)``, ``C[j, i] = Ṡᵢᵀ Iᶜ Sⱼ + Sᵢᵀ Bᶜᵀ Sⱼ`` for each ancestor i of j.
Mimic joints fold in as for the mass matrix: ``C = Gᵀ C_joints G``.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from kinematics._kernels import all_finite
from kinematics._layout import AXIS, D_PARENT, KIND, QIDX, REVOLUTE, SCALE
from kinematics.dynamics._kernels import body_inertia, compose, placement, to_parent_inertia

_jit = nb.njit(cache=True, nogil=True)

_packed = nb.types.Array(nb.float64, 2, "C", readonly=True)
_ro1 = nb.types.Array(nb.float64, 1, "C", readonly=True)
_f8_1 = nb.types.Array(nb.float64, 1, "C")
_f8_2 = nb.types.Array(nb.float64, 2, "C")


@_jit
def add_skew(out, r0, c0, a, scale):
    """out[r0:r0+3, c0:c0+3] += scale × (a ×), the cross-product matrix of a (3,)."""
    out[r0, c0 + 1] -= scale * a[2]
    out[r0, c0 + 2] += scale * a[1]
    out[r0 + 1, c0] += scale * a[2]
    out[r0 + 1, c0 + 2] -= scale * a[0]
    out[r0 + 2, c0] -= scale * a[1]
    out[r0 + 2, c0 + 1] += scale * a[0]


@_jit
def cross_motion_matrix(v, out):
    """out (6, 6) = (v ×) for the motion v = (ω, u): [[ω×, 0], [u×, ω×]]."""
    out[:, :] = 0.0
    add_skew(out, 0, 0, v[0:3], 1.0)
    add_skew(out, 3, 3, v[0:3], 1.0)
    add_skew(out, 3, 0, v[3:6], 1.0)


@_jit
def spatial_inertia(ine, out):
    """out (6, 6) = [[Ī, h×], [(h×)ᵀ, m 1]] of ine (10,): mass, first moment, Ī (6)."""
    m, hx, hy, hz = ine[0], ine[1], ine[2], ine[3]
    out[:, :] = 0.0
    out[0, 0], out[0, 1], out[0, 2] = ine[4], ine[5], ine[6]
    out[1, 0], out[1, 1], out[1, 2] = ine[5], ine[7], ine[8]
    out[2, 0], out[2, 1], out[2, 2] = ine[6], ine[8], ine[9]
    out[0, 4], out[0, 5], out[1, 3], out[1, 5], out[2, 3], out[2, 4] = -hz, hy, hz, -hx, -hy, hx
    for r in range(3):
        for c in range(3):
            out[3 + c, r] = out[r, 3 + c]
        out[3 + r, 3 + r] = m


@_jit
def bias_matrix(inertia, v, cross, out):
    """out (6, 6) = B(v, I) = ½ ((v ×*) I + (I v) ×̄* - I (v ×)) for I = `inertia`;
    `cross` is scratch."""
    cross_motion_matrix(v, cross)
    for r in range(6):
        for c in range(6):
            acc = 0.0
            for k in range(6):  # (v ×*) = -(v ×)ᵀ
                acc -= cross[k, r] * inertia[k, c] + inertia[r, k] * cross[k, c]
            out[r, c] = 0.5 * acc
    f = np.zeros(6)
    for r in range(6):
        for k in range(6):
            f[r] += inertia[r, k] * v[k]
    # (f ×̄*) = [[-(n×), -(l×)], [-(l×), 0]] for f = (n, l)
    add_skew(out, 0, 0, f[0:3], -0.5)
    add_skew(out, 0, 3, f[3:6], -0.5)
    add_skew(out, 3, 0, f[3:6], -0.5)


@_jit
def motion_subspace(row, world, out):
    """out (6,) = the joint's unit motion in the root frame: (z, p × z) revolute, (0, z)
    prismatic, z its axis and p the body's origin (`world`: rotation 9, position 3)."""
    ux, uy, uz = row[AXIS], row[AXIS + 1], row[AXIS + 2]
    zx = world[0] * ux + world[1] * uy + world[2] * uz
    zy = world[3] * ux + world[4] * uy + world[5] * uz
    zz = world[6] * ux + world[7] * uy + world[8] * uz
    if row[KIND] == REVOLUTE:
        px, py, pz = world[9], world[10], world[11]
        out[0], out[1], out[2] = zx, zy, zz
        out[3], out[4], out[5] = py * zz - pz * zy, pz * zx - px * zz, px * zy - py * zx
    else:
        out[0], out[1], out[2], out[3], out[4], out[5] = 0.0, 0.0, 0.0, zx, zy, zz


@_jit
def forward_pass(bodies, q, qd, payload, S, Sdot, inertia, bias):
    """Per body, root frame: S, Ṡ = v × S, the spatial inertia and B(v, I)."""
    n = bodies.shape[0]
    world = np.empty((n, 12))
    velocity = np.empty((n, 6))
    rot, pos = np.empty(9), np.empty(3)
    ine, wine = np.empty(10), np.empty(10)
    cross = np.empty((6, 6))
    for i in range(n):
        row = bodies[i]
        placement(row, q, rot, pos)
        parent = int(row[D_PARENT])
        compose(world, parent, rot, pos, world[i])
        motion_subspace(row, world[i], S[i])
        rate = row[SCALE] * qd[int(row[QIDX])]
        for k in range(6):
            velocity[i, k] = (velocity[parent, k] if parent >= 0 else 0.0) + S[i, k] * rate
        cross_motion_matrix(velocity[i], cross)
        for r in range(6):
            acc = 0.0
            for k in range(6):
                acc += cross[r, k] * S[i, k]
            Sdot[i, r] = acc
        body_inertia(bodies, payload, i, ine)
        wine[:] = 0.0
        to_parent_inertia(ine, world[i, :9], world[i, 9:], wine)
        spatial_inertia(wine, inertia[i])
        bias_matrix(inertia[i], velocity[i], cross, bias[i])


@_jit
def coriolis_matrix(bodies, q, qd, payload, C):
    """C (dof, dof) = the Coriolis matrix at (q, qd). False if q or qd is not finite."""
    if not (all_finite(q) and all_finite(qd)):
        return False
    n = bodies.shape[0]
    S, Sdot = np.empty((n, 6)), np.empty((n, 6))
    inertia, bias = np.empty((n, 6, 6)), np.empty((n, 6, 6))
    forward_pass(bodies, q, qd, payload, S, Sdot, inertia, bias)
    C[:, :] = 0.0
    f1, f2, f3 = np.empty(6), np.empty(6), np.empty(6)
    for j in range(n - 1, -1, -1):
        Ic, Bc = inertia[j], bias[j]
        for r in range(6):
            a = b = c = 0.0
            for k in range(6):
                a += Ic[r, k] * Sdot[j, k] + Bc[r, k] * S[j, k]
                b += Ic[r, k] * S[j, k]
                c += Bc[k, r] * S[j, k]
            f1[r], f2[r], f3[r] = a, b, c
        kj, sj = int(bodies[j, QIDX]), bodies[j, SCALE]
        C[kj, kj] += sj * sj * dot6(S[j], f1)
        i = int(bodies[j, D_PARENT])
        while i >= 0:
            ki, si = int(bodies[i, QIDX]), bodies[i, SCALE]
            C[ki, kj] += si * sj * dot6(S[i], f1)
            C[kj, ki] += si * sj * (dot6(Sdot[i], f2) + dot6(S[i], f3))
            i = int(bodies[i, D_PARENT])
        parent = int(bodies[j, D_PARENT])
        if parent >= 0:
            for r in range(6):
                for k in range(6):
                    inertia[parent, r, k] += Ic[r, k]
                    bias[parent, r, k] += Bc[r, k]
    return True


@_jit
def dot6(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


ENTRIES = {
    "coriolis_matrix": (coriolis_matrix, nb.boolean(_packed, _f8_1, _f8_1, _ro1, _f8_2)),
}
