"""Compiled signed distances between primitives placed in one frame (numba).

Every function returns the signed distance (m: positive apart, negative the penetration depth) and
writes witness points into ``out[0:3]`` (on the first shape) and ``out[3:6]`` (on the second).
Capsules and spheres are segments with a radius (a sphere's segment has zero length). Points,
vectors and half-sizes may be arrays or tuples of 3 numbers: the collision kernels pass tuples read
from their shape table, since an array view costs the reference counting of its parent.

Exactness (see docs/collision.md):
- segment/segment and segment/plane, box/plane: exact, apart or penetrating (a capsule is a segment
  grown by its radius, so its signed distance is the segment's minus the radius, with no error).
- segment/box: exact apart (the squared distance along the segment is piecewise quadratic; every
  piece is minimised in closed form); penetrating, the depth along the separating axis of least
  overlap (SAT over the box's 3 face normals and the 3 cross products with the segment), which is
  the exact penetration depth of two polytopes.
- box/box: exact apart (the closest points of two disjoint convex polyhedra can be chosen with one
  of them on an edge: the least of the 24 edge/box distances); penetrating, SAT over 15 axes.
Witness points of penetrating shapes with a box lie on the separating axis, |p_a - p_b| = depth.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

_jit = nb.njit(cache=True, nogil=True)

_PARALLEL = 1e-14  # relative: segments whose direction cross product is below this are parallel
_AXIS_MIN = 1e-12  # a cross-product axis shorter than this (parallel edges) is skipped by SAT
# m: a segment nearer a box than this is taken as touching it, and its depth found by SAT (rounding
# leaves ~1e-18 m where the segment crosses the box); both answers agree within it at contact
_TOUCHING = 1e-12


@_jit
def _clamp01(x):
    return 0.0 if x < 0.0 else (1.0 if x > 1.0 else x)


@_jit
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@_jit
def _any_normal(d, out):
    """A unit vector perpendicular to d (any unit vector if d is zero)."""
    if abs(d[0]) < 0.9 * math.sqrt(_dot(d, d)) or _dot(d, d) == 0.0:
        out[0], out[1], out[2] = 0.0, d[2], -d[1]
        if _dot(out, out) == 0.0:
            out[0], out[1], out[2] = 0.0, 0.0, 1.0
    else:
        out[0], out[1], out[2] = -d[2], 0.0, d[0]
    n = math.sqrt(_dot(out, out))
    out[0] /= n
    out[1] /= n
    out[2] /= n


@_jit
def _across(d1x, d1y, d1z, d2x, d2y, d2z, first):
    """A unit vector across two touching segments (directions d1, d2): their cross product, or
    any normal of the one that has a length."""
    cx, cy, cz = d1y * d2z - d1z * d2y, d1z * d2x - d1x * d2z, d1x * d2y - d1y * d2x
    norm = math.sqrt(cx * cx + cy * cy + cz * cz)
    if norm > 0.0:
        return cx / norm, cy / norm, cz / norm
    n = np.empty(3)
    _any_normal(np.array([d1x, d1y, d1z]) if first else np.array([d2x, d2y, d2z]), n)
    return n[0], n[1], n[2]


@_jit
def segment_segment(p1, q1, r1, p2, q2, r2, out):
    """Signed distance of capsules (p1q1, r1) and (p2q2, r2) (Ericson, Real-Time Collision
    Detection, 5.1.9, for the closest points of the two segments)."""
    p1x, p1y, p1z = p1[0], p1[1], p1[2]
    p2x, p2y, p2z = p2[0], p2[1], p2[2]
    d1x, d1y, d1z = q1[0] - p1x, q1[1] - p1y, q1[2] - p1z
    d2x, d2y, d2z = q2[0] - p2x, q2[1] - p2y, q2[2] - p2z
    rx, ry, rz = p1x - p2x, p1y - p2y, p1z - p2z
    a = d1x * d1x + d1y * d1y + d1z * d1z
    e = d2x * d2x + d2y * d2y + d2z * d2z
    f = d2x * rx + d2y * ry + d2z * rz
    s = 0.0
    t = 0.0
    if a == 0.0 and e == 0.0:
        pass
    elif a == 0.0:
        t = _clamp01(f / e)
    else:
        c = d1x * rx + d1y * ry + d1z * rz
        if e == 0.0:
            s = _clamp01(-c / a)
        else:
            b = d1x * d2x + d1y * d2y + d1z * d2z
            denom = a * e - b * b
            s = _clamp01((b * f - c * e) / denom) if denom > _PARALLEL * a * e else 0.0
            t = (b * s + f) / e
            if t < 0.0:
                t = 0.0
                s = _clamp01(-c / a)
            elif t > 1.0:
                t = 1.0
                s = _clamp01((b - c) / a)
    c1x, c1y, c1z = p1x + s * d1x, p1y + s * d1y, p1z + s * d1z
    c2x, c2y, c2z = p2x + t * d2x, p2y + t * d2y, p2z + t * d2z
    nx, ny, nz = c2x - c1x, c2y - c1y, c2z - c1z
    length = math.sqrt(nx * nx + ny * ny + nz * nz)
    if length > 0.0:
        nx, ny, nz = nx / length, ny / length, nz / length
    else:  # the segments touch: any direction across them
        nx, ny, nz = _across(d1x, d1y, d1z, d2x, d2y, d2z, a > 0.0)
    out[0], out[1], out[2] = c1x + r1 * nx, c1y + r1 * ny, c1z + r1 * nz
    out[3], out[4], out[5] = c2x - r2 * nx, c2y - r2 * ny, c2z - r2 * nz
    return length - r1 - r2


@_jit
def segment_plane(p, q, radius, point, normal, out):
    """Signed distance of a capsule (pq, radius) above the plane (point, unit normal)."""
    hp = (
        (p[0] - point[0]) * normal[0]
        + (p[1] - point[1]) * normal[1]
        + (p[2] - point[2]) * normal[2]
    )
    hq = (
        (q[0] - point[0]) * normal[0]
        + (q[1] - point[1]) * normal[1]
        + (q[2] - point[2]) * normal[2]
    )
    low = p if hp <= hq else q
    h = min(hp, hq)
    for i in range(3):
        out[i] = low[i] - radius * normal[i]
        out[3 + i] = low[i] - h * normal[i]
    return h - radius


@_jit
def box_plane(c, R, h, point, normal, out):
    """Signed distance of a box (centre c, rotation R (3, 3), half-sizes h) above a plane."""
    return box_plane_flat(c, _flat(R), h, point, normal, out)


@_jit
def box_plane_flat(c, r, h, point, normal, out):
    """`box_plane` with the rotation as 9 numbers, row-major."""
    lx, ly, lz = c[0], c[1], c[2]  # the lowest corner along the normal
    for i in range(3):
        up = r[i] * normal[0] + r[3 + i] * normal[1] + r[6 + i] * normal[2]
        step = h[i] if up > 0.0 else -h[i]
        lx, ly, lz = lx - step * r[i], ly - step * r[3 + i], lz - step * r[6 + i]
    dist = (lx - point[0]) * normal[0] + (ly - point[1]) * normal[1] + (lz - point[2]) * normal[2]
    out[0], out[1], out[2] = lx, ly, lz
    out[3], out[4], out[5] = lx - dist * normal[0], ly - dist * normal[1], lz - dist * normal[2]
    return dist


@_jit
def _flat(R):
    """A (3, 3) rotation as 9 numbers, row-major (a tuple: no array)."""
    return (R[0, 0], R[0, 1], R[0, 2], R[1, 0], R[1, 1], R[1, 2], R[2, 0], R[2, 1], R[2, 2])


@_jit
def _point_box_sq_at(p0, d, t, h):
    """Squared distance of the point p0 + t d to the box [-h, h] (tuples, box frame)."""
    total = 0.0
    for i in range(3):
        x = p0[i] + t * d[i]
        if x > h[i]:
            total += (x - h[i]) ** 2
        elif x < -h[i]:
            total += (x + h[i]) ** 2
    return total


@_jit
def _segment_box_local(p0, d, h, ts):
    """(t, squared distance) of the point of the segment p0 + t d, t in [0, 1], nearest to the box
    [-h, h] (tuples, in the box's frame; ts: (8,) scratch). The squared distance is a convex
    piecewise quadratic in t, with breaks where a coordinate crosses a face's plane: each piece is
    minimised exactly."""
    n = 0
    for i in range(3):
        if d[i] != 0.0:
            for sign in (-1.0, 1.0):
                t = (sign * h[i] - p0[i]) / d[i]
                if 0.0 < t < 1.0:
                    ts[n] = t
                    n += 1
    for k in range(1, n):  # insertion sort of at most 6 breaks
        value = ts[k]
        j = k - 1
        while j >= 0 and ts[j] > value:
            ts[j + 1] = ts[j]
            j -= 1
        ts[j + 1] = value
    best_t = 0.0
    best = _point_box_sq_at(p0, d, 0.0, h)
    t0 = 0.0
    for k in range(n + 1):
        t1 = ts[k] if k < n else 1.0
        tm = 0.5 * (t0 + t1)
        qa = 0.0
        qb = 0.0
        for i in range(3):
            x = p0[i] + tm * d[i]
            if x > h[i]:
                qa += d[i] * d[i]
                qb += d[i] * (p0[i] - h[i])
            elif x < -h[i]:
                qa += d[i] * d[i]
                qb += d[i] * (p0[i] + h[i])
        t = t0 if qa == 0.0 else min(max(-qb / qa, t0), t1)
        for candidate in (t, t1):
            value = _point_box_sq_at(p0, d, candidate, h)
            if value < best:
                best, best_t = value, candidate
        t0 = t1
    return best_t, best


@_jit
def _segment_box_sat(m, e, h):
    """(depth, unit axis) of the segment m ± e into the box [-h, h] (tuples, box frame) over the
    separating axes (3 face normals, 3 cross products); the axis is oriented from the box to the
    segment. The depth is negative if an axis separates them."""
    best = np.inf
    bx, by, bz = 0.0, 0.0, 1.0
    for k in range(6):
        if k < 3:
            ux = 1.0 if k == 0 else 0.0
            uy = 1.0 if k == 1 else 0.0
            uz = 1.0 if k == 2 else 0.0
        else:  # e × unit axis k - 3
            ax = 1.0 if k == 3 else 0.0
            ay = 1.0 if k == 4 else 0.0
            az = 1.0 if k == 5 else 0.0
            ux, uy, uz = e[1] * az - e[2] * ay, e[2] * ax - e[0] * az, e[0] * ay - e[1] * ax
            norm = math.sqrt(ux * ux + uy * uy + uz * uz)
            if norm < _AXIS_MIN:
                continue
            ux, uy, uz = ux / norm, uy / norm, uz / norm
        mu = m[0] * ux + m[1] * uy + m[2] * uz
        overlap = (
            h[0] * abs(ux)
            + h[1] * abs(uy)
            + h[2] * abs(uz)
            + abs(e[0] * ux + e[1] * uy + e[2] * uz)
            - abs(mu)
        )
        if overlap < best:
            best = overlap
            sign = 1.0 if mu >= 0.0 else -1.0
            bx, by, bz = sign * ux, sign * uy, sign * uz
    return best, (bx, by, bz)


@_jit
def _to_box(r, c, p):
    """R^T (p - c) as a tuple (r: R row-major)."""
    x, y, z = p[0] - c[0], p[1] - c[1], p[2] - c[2]
    return (
        r[0] * x + r[3] * y + r[6] * z,
        r[1] * x + r[4] * y + r[7] * z,
        r[2] * x + r[5] * y + r[8] * z,
    )


@_jit
def _from_box(r, c, v, out, at):
    """out[at:at+3] = c + R v (v a tuple in the box's frame; r: R row-major)."""
    for i in range(3):
        out[at + i] = c[i] + r[3 * i] * v[0] + r[3 * i + 1] * v[1] + r[3 * i + 2] * v[2]


@_jit
def segment_box(p, q, radius, c, R, h, out):
    """Signed distance of a capsule (pq, radius) to a box (centre c, rotation R (3, 3),
    half-sizes h)."""
    return segment_box_flat(p, q, radius, c, _flat(R), h, out, np.empty(8))


@_jit
def segment_box_flat(p, q, radius, c, R, h, out, ts):
    """`segment_box` with the rotation R as 9 numbers, row-major, and a scratch ts (8,): scalar
    code, no allocation."""
    p0 = _to_box(R, c, p)
    q0 = _to_box(R, c, q)
    d = (q0[0] - p0[0], q0[1] - p0[1], q0[2] - p0[2])
    hh = (h[0], h[1], h[2])
    t, sq = _segment_box_local(p0, d, hh, ts)
    if sq > _TOUCHING * _TOUCHING:
        s = (p0[0] + t * d[0], p0[1] + t * d[1], p0[2] + t * d[2])
        b = (
            min(max(s[0], -hh[0]), hh[0]),
            min(max(s[1], -hh[1]), hh[1]),
            min(max(s[2], -hh[2]), hh[2]),
        )
        dist = math.sqrt(sq)
        k = radius / dist
        _from_box(
            R,
            c,
            (s[0] + k * (b[0] - s[0]), s[1] + k * (b[1] - s[1]), s[2] + k * (b[2] - s[2])),
            out,
            0,
        )
        _from_box(R, c, b, out, 3)
        return dist - radius
    m = (p0[0] + 0.5 * d[0], p0[1] + 0.5 * d[1], p0[2] + 0.5 * d[2])
    e = (0.5 * d[0], 0.5 * d[1], 0.5 * d[2])
    depth, u = _segment_box_sat(m, e, hh)
    up = p0[0] * u[0] + p0[1] * u[1] + p0[2] * u[2]
    uq = q0[0] * u[0] + q0[1] * u[1] + q0[2] * u[2]
    deep = p0 if up <= uq else q0
    _from_box(
        R, c, (deep[0] - radius * u[0], deep[1] - radius * u[1], deep[2] - radius * u[2]), out, 0
    )
    _from_box(
        R, c, (deep[0] + depth * u[0], deep[1] + depth * u[1], deep[2] + depth * u[2]), out, 3
    )
    return -depth - radius


@_jit
def _box_box_sat(ca, Ra, ha, cb, Rb, hb, u_out):
    """Least overlap of boxes a and b over the 15 separating axes (negative: separated), and its
    unit axis oriented from b to a."""
    T = ca - cb
    best = np.inf
    for k in range(15):
        if k < 3:
            u = Ra[:, k].copy()
        elif k < 6:
            u = Rb[:, k - 3].copy()
        else:
            u = np.cross(Ra[:, (k - 6) // 3], Rb[:, (k - 6) % 3])
            norm = math.sqrt(_dot(u, u))
            if norm < _AXIS_MIN:
                continue
            u /= norm
        ra = 0.0
        rb = 0.0
        for i in range(3):
            ra += ha[i] * abs(_dot(Ra[:, i], u))
            rb += hb[i] * abs(_dot(Rb[:, i], u))
        overlap = ra + rb - abs(_dot(T, u))
        if overlap < best:
            best = overlap
            u_out[:] = u if _dot(T, u) >= 0.0 else -u
    return best


@_jit
def _box_edges_to_box(ca, Ra, ha, cb, Rb, hb, best, out, swap):
    """Least distance of the 12 edges of box a to box b, if below `best`: witnesses into out
    (a's point first, unless `swap`)."""
    tmp = np.empty(6)
    for axis in range(3):
        j, k = (axis + 1) % 3, (axis + 2) % 3
        for sj in (-1.0, 1.0):
            for sk in (-1.0, 1.0):
                mid = ca + sj * ha[j] * Ra[:, j] + sk * ha[k] * Ra[:, k]
                p = mid - ha[axis] * Ra[:, axis]
                q = mid + ha[axis] * Ra[:, axis]
                dist = segment_box(p, q, 0.0, cb, Rb, hb, tmp)
                if dist < best:
                    best = dist
                    if swap:
                        out[0:3] = tmp[3:6]
                        out[3:6] = tmp[0:3]
                    else:
                        out[:] = tmp
    return best


@_jit
def box_box(ca, Ra, ha, cb, Rb, hb, out):
    """Signed distance of two boxes (centre, rotation (3, 3), half-sizes)."""
    u = np.empty(3)
    overlap = _box_box_sat(ca, Ra, ha, cb, Rb, hb, u)
    if overlap > 0.0:
        deepest = ca.copy()  # a's vertex deepest along -u (towards b)
        for i in range(3):
            axis = Ra[:, i]
            deepest -= (1.0 if _dot(axis, u) > 0.0 else -1.0) * ha[i] * axis
        out[0:3] = deepest
        out[3:6] = deepest + overlap * u
        return -overlap
    best = _box_edges_to_box(ca, Ra, ha, cb, Rb, hb, np.inf, out, False)
    return _box_edges_to_box(cb, Rb, hb, ca, Ra, ha, best, out, True)
