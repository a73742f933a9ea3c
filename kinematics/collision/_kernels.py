"""Compiled collision queries (numba): place every shape at a configuration, then the signed
distance of every checked pair, the first pair closer than a bound, or a whole path.

The array layouts are `kinematics.collision._layout`'s; forward kinematics is the tree kernel of
`kinematics._kernels`. Nothing compiles on import: each entry kernel is compiled for the one
signature of `ENTRIES` by `kinematics.collision.compiled` (or loaded from numba's cache).

numba's cache of these entries is keyed on this file only: after editing
`kinematics.collision._primitive_kernels` (or a layout constant, or `kinematics._kernels`), clear it
(``kinematics/collision/__pycache__/*.nbi``, ``*.nbc``), or the entries keep the old code. An
install rewrites every file, which clears it.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from kinematics._kernels import all_finite, apply_motion, dq_mul_into, translation_of, tree_fk
from kinematics._layout import CONSTANT, OFFSET, ORIGIN, PARENT, QIDX, SCALE
from kinematics._layout import KIND as TREE_KIND
from kinematics.collision._layout import (
    BOX,
    HALF,
    KIND,
    LINK,
    P0,
    P1,
    PAIR_A,
    PAIR_B,
    PAIR_ID,
    PAIR_SWAP,
    R_DISTANCE,
    R_EVALUATED,
    R_FOUND,
    R_FRACTION,
    R_PAIR,
    R_SAMPLES,
    RADIUS,
    ROT,
    SEGMENT,
)
from kinematics.collision._primitive_kernels import (
    box_box,
    box_plane_flat,
    segment_box_flat,
    segment_plane,
    segment_segment,
)

_jit = nb.njit(cache=True, nogil=True)

_packed = nb.types.Array(nb.float64, 2, "C", readonly=True)
_pairs = nb.types.Array(nb.int64, 2, "C", readonly=True)
_f8_1 = nb.types.Array(nb.float64, 1, "C")
_f8_2 = nb.types.Array(nb.float64, 2, "C")
_f8_2r = nb.types.Array(nb.float64, 2, "C", readonly=True)


@_jit
def _frames(tree, q, dqs, rot, trans):
    """rot (n_links, 3, 3), trans (n_links, 3): root_from_link of every link at q (dqs
    (n_links, 8): scratch). False if q is not finite."""
    if not tree_fk(tree, q, dqs):
        return False
    _matrices(dqs, rot, trans, tree.shape[0] - 1)
    return True


@_jit
def _frames_upto(tree, q, dqs, rot, trans, upto):
    """`_frames` of the links in rows 0..upto only (a tree array lists parents first), for a
    finite q: as `tree_fk`, stopping there."""
    identity = np.zeros(8)
    identity[0] = 1.0
    tmp = np.empty(8)
    for i in range(upto + 1):
        row = tree[i]
        parent = int(row[PARENT])
        base = identity if parent < 0 else dqs[parent]
        if row[TREE_KIND] == CONSTANT:
            dq_mul_into(base, row[ORIGIN : ORIGIN + 8], dqs[i])
        else:
            dq_mul_into(base, row[ORIGIN : ORIGIN + 8], tmp)
            apply_motion(row, row[SCALE] * q[int(row[QIDX])] + row[OFFSET], tmp, dqs[i])
    _matrices(dqs, rot, trans, upto)


@_jit
def _matrices(dqs, rot, trans, upto):
    """rot and trans of rows 0..upto from their unit dual quaternions."""
    for i in range(upto + 1):
        w, x, y, z = dqs[i, 0], dqs[i, 1], dqs[i, 2], dqs[i, 3]
        rot[i, 0, 0] = 1.0 - 2.0 * (y * y + z * z)
        rot[i, 0, 1] = 2.0 * (x * y - w * z)
        rot[i, 0, 2] = 2.0 * (x * z + w * y)
        rot[i, 1, 0] = 2.0 * (x * y + w * z)
        rot[i, 1, 1] = 1.0 - 2.0 * (x * x + z * z)
        rot[i, 1, 2] = 2.0 * (y * z - w * x)
        rot[i, 2, 0] = 2.0 * (x * z - w * y)
        rot[i, 2, 1] = 2.0 * (y * z + w * x)
        rot[i, 2, 2] = 1.0 - 2.0 * (x * x + y * y)
        translation_of(dqs[i], trans[i])


@_jit
def _transform_point(rot, trans, link, shapes, s, col, world):
    """world[s, col:col+3] = R shapes[s, col:col+3] + t, with link `link`'s R and t."""
    x, y, z = shapes[s, col], shapes[s, col + 1], shapes[s, col + 2]
    for i in range(3):
        world[s, col + i] = (
            rot[link, i, 0] * x + rot[link, i, 1] * y + rot[link, i, 2] * z + trans[link, i]
        )


@_jit
def _place(shapes, rot, trans, world, wrot):
    """world (S, SROW) and wrot (S, 3, 3): every shape in the root frame."""
    for s in range(shapes.shape[0]):
        _place_shape(shapes, s, rot, trans, world, wrot)


@_jit
def _place_shape(shapes, s, rot, trans, world, wrot):
    """Shape s in the root frame (scalar indexing: an array view per shape would cost reference
    counting)."""
    world[s, KIND] = shapes[s, KIND]
    world[s, LINK] = shapes[s, LINK]
    world[s, RADIUS] = shapes[s, RADIUS]
    link = int(shapes[s, LINK])
    if link < 0:  # the environment: already in the root frame
        for i in range(3):
            world[s, P0 + i] = shapes[s, P0 + i]
            world[s, P1 + i] = shapes[s, P1 + i]
            world[s, HALF + i] = shapes[s, HALF + i]
            for j in range(3):
                wrot[s, i, j] = shapes[s, ROT + 3 * i + j]
        return
    _transform_point(rot, trans, link, shapes, s, P0, world)
    if shapes[s, KIND] == SEGMENT:
        _transform_point(rot, trans, link, shapes, s, P1, world)
        return
    for i in range(3):
        world[s, HALF + i] = shapes[s, HALF + i]
        for j in range(3):
            wrot[s, i, j] = (
                rot[link, i, 0] * shapes[s, ROT + j]
                + rot[link, i, 1] * shapes[s, ROT + 3 + j]
                + rot[link, i, 2] * shapes[s, ROT + 6 + j]
            )


@_jit
def _place_needed(tree, shapes, pairs, slack, q, scratch, needed):
    """Place only the shapes of the pairs with slack < 0, computing the frames only as far down
    the tree as their links (q finite; needed (S,): scratch)."""
    world, wrot, dqs, rot, trans = scratch[0], scratch[1], scratch[2], scratch[3], scratch[4]
    needed[:] = False
    upto = -1
    for k in range(pairs.shape[0]):
        if slack[k] < 0.0:
            for s in (pairs[k, PAIR_A], pairs[k, PAIR_B]):
                needed[s] = True
                upto = max(upto, int(shapes[s, LINK]))
    _frames_upto(tree, q, dqs, rot, trans, upto)
    for s in range(shapes.shape[0]):
        if needed[s]:
            _place_shape(shapes, s, rot, trans, world, wrot)


@_jit
def _point(world, s, col):
    """world[s, col:col+3] as a tuple: read in place (an array view would cost the reference
    counting of `world` on every pair)."""
    return (world[s, col], world[s, col + 1], world[s, col + 2])


@_jit
def _rotation(wrot, s):
    """wrot[s] as 9 numbers, row-major."""
    return (
        wrot[s, 0, 0], wrot[s, 0, 1], wrot[s, 0, 2],
        wrot[s, 1, 0], wrot[s, 1, 1], wrot[s, 1, 2],
        wrot[s, 2, 0], wrot[s, 2, 1], wrot[s, 2, 2],
    )  # fmt: skip


# One function per kind of shape pair, each given only the arrays it reads: `_shape_pairs`
# dispatches on the kinds in its own loop (a dispatching function of its own, with every array
# passed down, cost twice as much per pair in reference counting).


@_jit
def _segment_segment(world, a, b, out):
    pa0, pa1 = _point(world, a, P0), _point(world, a, P1)
    pb0, pb1 = _point(world, b, P0), _point(world, b, P1)
    return segment_segment(pa0, pa1, world[a, RADIUS], pb0, pb1, world[b, RADIUS], out)


@_jit
def _segment_box(world, wrot, a, b, out, ts):
    pa0, pa1 = _point(world, a, P0), _point(world, a, P1)
    pb0, hb = _point(world, b, P0), _point(world, b, HALF)
    return segment_box_flat(pa0, pa1, world[a, RADIUS], pb0, _rotation(wrot, b), hb, out, ts)


@_jit
def _segment_plane(world, a, b, out):
    pa0, pa1 = _point(world, a, P0), _point(world, a, P1)
    pb0, pb1 = _point(world, b, P0), _point(world, b, P1)
    return segment_plane(pa0, pa1, world[a, RADIUS], pb0, pb1, out)


@_jit
def _box_plane(world, wrot, a, b, out):
    ca, ha = _point(world, a, P0), _point(world, a, HALF)
    pb0, pb1 = _point(world, b, P0), _point(world, b, P1)
    return box_plane_flat(ca, _rotation(wrot, a), ha, pb0, pb1, out)


@_jit
def _box_box(world, wrot, a, b, out):
    ha, hb = world[a, HALF : HALF + 3], world[b, HALF : HALF + 3]
    return box_box(world[a, P0 : P0 + 3], wrot[a], ha, world[b, P0 : P0 + 3], wrot[b], hb, out)


@_jit
def _shape_pairs(world, wrot, pairs, slack, stop_below, dist, witness, out, ts):
    """Each shape pair k with slack[k] < 0, in order, at the placed shapes: dist[k] its signed
    distance (m); witness[k] its witness points in the order of the checked pair's names when
    `witness` has a row per pair (none are kept when it has no rows). Stops after the first pair
    closer than `stop_below` and returns its k; -1 when none is."""
    keep = witness.shape[0] > 0
    for k in range(pairs.shape[0]):
        if slack[k] >= 0.0:
            continue
        a, b = pairs[k, PAIR_A], pairs[k, PAIR_B]
        ka, kb = world[a, KIND], world[b, KIND]
        if ka == SEGMENT:
            if kb == SEGMENT:
                d = _segment_segment(world, a, b, out)
            elif kb == BOX:
                d = _segment_box(world, wrot, a, b, out, ts)
            else:
                d = _segment_plane(world, a, b, out)
        elif kb == BOX:
            d = _box_box(world, wrot, a, b, out)
        else:  # BOX, PLANE (the model never pairs two environment objects)
            d = _box_plane(world, wrot, a, b, out)
        dist[k] = d
        if keep:
            first = 3 if pairs[k, PAIR_SWAP] else 0
            for i in range(3):
                witness[k, i] = out[first + i]
                witness[k, 3 + i] = out[3 - first + i]
        if d < stop_below:
            return k
    return -1


@_jit
def _scratch(tree, shapes, pairs):
    """The work arrays of `_placed` (world, wrot, dqs, rot, trans) and of `_shape_pairs` (out (6,),
    ts (8,), one distance per shape pair)."""
    n = tree.shape[0]
    s = shapes.shape[0]
    return (
        np.empty((s, shapes.shape[1])),
        np.empty((s, 3, 3)),
        np.empty((n, 8)),
        np.empty((n, 3, 3)),
        np.empty((n, 3)),
        np.empty(6),
        np.empty(8),
        np.empty(pairs.shape[0]),
    )


@_jit
def _placed(tree, shapes, q, scratch):
    """Place the shapes at q into scratch's world rows; False if q is not finite."""
    world, wrot, dqs, rot, trans = scratch[0], scratch[1], scratch[2], scratch[3], scratch[4]
    if not _frames(tree, q, dqs, rot, trans):
        return False
    _place(shapes, rot, trans, world, wrot)
    return True


@_jit
def distances(tree, shapes, pairs, q, dist, points):
    """dist (P,): each checked pair's signed distance at q (m), the least over its shape pairs;
    points (P, 6): its witness points in the root frame. False if q is not finite."""
    scratch = _scratch(tree, shapes, pairs)
    if not _placed(tree, shapes, q, scratch):
        return False
    world, wrot, out, ts, each = scratch[0], scratch[1], scratch[5], scratch[6], scratch[7]
    witness = np.empty((pairs.shape[0], 6))
    every = np.full(pairs.shape[0], -1.0)
    _shape_pairs(world, wrot, pairs, every, -np.inf, each, witness, out, ts)
    dist[:] = np.inf
    for k in range(pairs.shape[0]):
        pid = pairs[k, PAIR_ID]
        if each[k] < dist[pid]:
            dist[pid] = each[k]
            for i in range(6):
                points[pid, i] = witness[k, i]
    return True


@_jit
def distances_batch(tree, shapes, pairs, qs, dist):
    """dist (N, P): each checked pair's signed distance for each row of qs (N, dof). False if qs
    is not finite."""
    scratch = _scratch(tree, shapes, pairs)
    world, wrot, out, ts, each = scratch[0], scratch[1], scratch[5], scratch[6], scratch[7]
    every = np.full(pairs.shape[0], -1.0)
    none = np.empty((0, 6))
    for n in range(qs.shape[0]):
        if not _placed(tree, shapes, qs[n], scratch):
            return False
        _shape_pairs(world, wrot, pairs, every, -np.inf, each, none, out, ts)
        dist[n, :] = np.inf
        for k in range(pairs.shape[0]):
            pid = pairs[k, PAIR_ID]
            dist[n, pid] = min(dist[n, pid], each[k])
    return True


@_jit
def min_distance(tree, shapes, pairs, q, stop_below, result):
    """result (2,) = [distance, pair id]: the first shape pair closer than `stop_below` (m), or,
    when none is, the closest one. -inf as `stop_below` gives the least distance. False if q is not
    finite."""
    scratch = _scratch(tree, shapes, pairs)
    if not _placed(tree, shapes, q, scratch):
        return False
    world, wrot, out, ts, each = scratch[0], scratch[1], scratch[5], scratch[6], scratch[7]
    every = np.full(pairs.shape[0], -1.0)
    first = _shape_pairs(world, wrot, pairs, every, stop_below, each, np.empty((0, 6)), out, ts)
    last = pairs.shape[0] if first < 0 else first + 1
    result[0] = np.inf
    result[1] = -1.0
    for k in range(last):
        if each[k] < result[0]:
            result[0] = each[k]
            result[1] = pairs[k, PAIR_ID]
    return True


@_jit
def _differ(bounds, k):
    """Whether row k of `bounds` differs from row k - 1."""
    for j in range(bounds.shape[1]):
        if bounds[k, j] != bounds[k - 1, j]:
            return True
    return False


@_jit
def _reach(weights, step):
    """The largest weights[i] · |step| over the rows i (m)."""
    most = 0.0
    for i in range(weights.shape[0]):
        total = 0.0
        for j in range(step.shape[0]):
            total += weights[i, j] * abs(step[j])
        most = max(most, total)
    return most


@_jit
def check_path(tree, shapes, pairs, weights, pair_weights, qs, bounds, margin, result, q_out):
    """Check the path through the rows of qs (M, dof), linear in joint space between them.

    bounds (M - 1, dof): how far each joint may move within each interval (|Δq| for a linear
    path). Each interval is cut into the fewest equal steps for which no point of any link moves
    more than margin / 2 (the displacement bound: `weights` (n_links, dof), m per rad or m per m).
    A shape pair is evaluated at a sample unless the distance it had at an earlier sample, less
    how much it can have changed since, already proves it ≥ margin (`pair_weights` (K, dof):
    the shape pairs' relative reach weights, `bodies.pair_reach_weights`).

    result (N_RESULT,): found (1.0 when some sample is closer than margin), the fraction along
    the path ((interval + step) / (M - 1)), the distance and the pair id of the first such sample,
    the samples checked and the shape pair distances evaluated; q_out (dof,): its configuration.
    False if qs is not finite.
    """
    for k in range(qs.shape[0]):
        if not all_finite(qs[k]):
            return False
    scratch = _scratch(tree, shapes, pairs)
    world, wrot, out, ts, each = scratch[0], scratch[1], scratch[5], scratch[6], scratch[7]
    n_pairs = pairs.shape[0]
    slack = np.full(n_pairs, -1.0)  # a lower bound of (distance - margin); < 0: evaluate
    change = np.empty(n_pairs)
    needed = np.empty(shapes.shape[0], dtype=np.bool_)
    none = np.empty((0, 6))
    step = np.empty(qs.shape[1])
    result[:] = 0.0
    result[R_PAIR] = -1.0
    intervals = max(qs.shape[0] - 1, 1)
    pieces = 1
    for k in range(qs.shape[0]):
        if k > 0 and (k == 1 or _differ(bounds, k - 1)):  # a trajectory's are often all equal
            reach = _reach(weights, bounds[k - 1])
            pieces = max(1, int(math.ceil(reach / (0.5 * margin) * (1.0 - 1e-12))))  # noqa: RUF046
            for p in range(n_pairs):
                total = 0.0
                for j in range(qs.shape[1]):
                    total += pair_weights[p, j] * bounds[k - 1, j]
                change[p] = total / pieces
        for i in range(1 if k > 0 else 0, pieces + 1 if k > 0 else 1):
            frac = i / pieces
            least = np.inf
            if k > 0:
                for j in range(qs.shape[1]):
                    step[j] = qs[k - 1, j] + frac * (qs[k, j] - qs[k - 1, j])
                for p in range(n_pairs):
                    slack[p] -= change[p]
                    least = min(least, slack[p])
            else:
                step[:] = qs[0]
                least = -1.0
            result[R_SAMPLES] += 1.0
            if least >= 0.0:
                continue
            _place_needed(tree, shapes, pairs, slack, step, scratch, needed)
            hit = _shape_pairs(world, wrot, pairs, slack, margin, each, none, out, ts)
            last = n_pairs if hit < 0 else hit + 1
            for p in range(last):
                if slack[p] < 0.0:  # evaluated just now
                    slack[p] = each[p] - margin
                    result[R_EVALUATED] += 1.0
            if hit >= 0:
                result[R_FOUND] = 1.0
                result[R_FRACTION] = (max(k - 1, 0) + (frac if k > 0 else 0.0)) / intervals
                result[R_DISTANCE] = each[hit]
                result[R_PAIR] = pairs[hit, PAIR_ID]
                q_out[:] = step
                return True
    return True


# The entry kernels the Python side calls, each with the one signature it is compiled for.
ENTRIES = {
    "distances": (distances, nb.boolean(_packed, _packed, _pairs, _f8_1, _f8_1, _f8_2)),
    "distances_batch": (distances_batch, nb.boolean(_packed, _packed, _pairs, _f8_2, _f8_2)),
    "min_distance": (min_distance, nb.boolean(_packed, _packed, _pairs, _f8_1, nb.float64, _f8_1)),
    "check_path": (
        check_path,
        nb.boolean(
            _packed, _packed, _pairs, _f8_2r, _f8_2r, _f8_2r, _f8_2, nb.float64, _f8_1, _f8_1
        ),
    ),
}
