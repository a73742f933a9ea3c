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

from kinematics._kernels import all_finite, translation_of, tree_fk
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
    PLANE,
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
    box_plane,
    segment_box,
    segment_plane,
    segment_segment_rows,
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
    for i in range(tree.shape[0]):
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
    return True


@_jit
def _transform_point(R, t, shapes, s, col, world):
    """world[s, col:col+3] = R shapes[s, col:col+3] + t."""
    x, y, z = shapes[s, col], shapes[s, col + 1], shapes[s, col + 2]
    for i in range(3):
        world[s, col + i] = R[i, 0] * x + R[i, 1] * y + R[i, 2] * z + t[i]


@_jit
def _place(shapes, rot, trans, world, wrot):
    """world (S, SROW) and wrot (S, 3, 3): every shape in the root frame."""
    for s in range(shapes.shape[0]):
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
            continue
        R = rot[link]
        _transform_point(R, trans[link], shapes, s, P0, world)
        if shapes[s, KIND] == SEGMENT:
            _transform_point(R, trans[link], shapes, s, P1, world)
        else:
            for i in range(3):
                world[s, HALF + i] = shapes[s, HALF + i]
                for j in range(3):
                    wrot[s, i, j] = (
                        R[i, 0] * shapes[s, ROT + j]
                        + R[i, 1] * shapes[s, ROT + 3 + j]
                        + R[i, 2] * shapes[s, ROT + 6 + j]
                    )


@_jit
def _pair_distance(world, wrot, pair, out):
    """Signed distance of the shape pair `pair` (a row of the pairs array), witnesses into out
    (6,) in the order of the checked pair's names."""
    a, b = pair[PAIR_A], pair[PAIR_B]
    ka, kb = world[a, KIND], world[b, KIND]
    if ka == SEGMENT and kb == SEGMENT:  # the common case: no array view made
        wa, wb = world[a], world[b]
        d = segment_segment_rows(wa, P0, wa, P1, wa[RADIUS], wb, P0, wb, P1, wb[RADIUS], out)
        if pair[PAIR_SWAP]:
            for i in range(3):
                out[i], out[3 + i] = out[3 + i], out[i]
        return d
    pa0, pa1 = world[a, P0 : P0 + 3], world[a, P1 : P1 + 3]
    pb0, pb1 = world[b, P0 : P0 + 3], world[b, P1 : P1 + 3]
    if ka == SEGMENT and kb == BOX:
        d = segment_box(pa0, pa1, world[a, RADIUS], pb0, wrot[b], world[b, HALF : HALF + 3], out)
    elif ka == SEGMENT and kb == PLANE:
        d = segment_plane(pa0, pa1, world[a, RADIUS], pb0, pb1, out)
    elif ka == BOX and kb == BOX:
        d = box_box(
            pa0, wrot[a], world[a, HALF : HALF + 3], pb0, wrot[b], world[b, HALF : HALF + 3], out
        )
    else:  # BOX, PLANE (the model never pairs two environment objects)
        d = box_plane(pa0, wrot[a], world[a, HALF : HALF + 3], pb0, pb1, out)
    if pair[PAIR_SWAP]:
        for i in range(3):
            out[i], out[3 + i] = out[3 + i], out[i]
    return d


@_jit
def _scratch(tree, shapes):
    """The work arrays of `_placed`: (world, wrot, dqs, rot, trans)."""
    n = tree.shape[0]
    s = shapes.shape[0]
    return (
        np.empty((s, shapes.shape[1])),
        np.empty((s, 3, 3)),
        np.empty((n, 8)),
        np.empty((n, 3, 3)),
        np.empty((n, 3)),
    )


@_jit
def _placed(tree, shapes, q, scratch):
    """Place the shapes at q into scratch's world rows; False if q is not finite."""
    world, wrot, dqs, rot, trans = scratch
    if not _frames(tree, q, dqs, rot, trans):
        return False
    _place(shapes, rot, trans, world, wrot)
    return True


@_jit
def distances(tree, shapes, pairs, q, dist, points):
    """dist (P,): each checked pair's signed distance at q (m), the least over its shape pairs;
    points (P, 6): its witness points in the root frame. False if q is not finite."""
    scratch = _scratch(tree, shapes)
    world, wrot = scratch[0], scratch[1]
    if not _placed(tree, shapes, q, scratch):
        return False
    dist[:] = np.inf
    out = np.empty(6)
    for k in range(pairs.shape[0]):
        d = _pair_distance(world, wrot, pairs[k], out)
        pid = pairs[k, PAIR_ID]
        if d < dist[pid]:
            dist[pid] = d
            points[pid] = out
    return True


@_jit
def distances_batch(tree, shapes, pairs, qs, dist):
    """dist (N, P): each checked pair's signed distance for each row of qs (N, dof). False if qs
    is not finite."""
    scratch = _scratch(tree, shapes)
    world, wrot = scratch[0], scratch[1]
    out = np.empty(6)
    for n in range(qs.shape[0]):
        if not _placed(tree, shapes, qs[n], scratch):
            return False
        dist[n, :] = np.inf
        for k in range(pairs.shape[0]):
            d = _pair_distance(world, wrot, pairs[k], out)
            pid = pairs[k, PAIR_ID]
            dist[n, pid] = min(dist[n, pid], d)
    return True


@_jit
def min_distance(tree, shapes, pairs, q, stop_below, result):
    """result (2,) = [distance, pair id]: the first shape pair closer than `stop_below` (m), or,
    when none is, the closest one. -inf as `stop_below` gives the least distance. False if q is not
    finite."""
    scratch = _scratch(tree, shapes)
    world, wrot = scratch[0], scratch[1]
    if not _placed(tree, shapes, q, scratch):
        return False
    out = np.empty(6)
    result[0] = np.inf
    result[1] = -1.0
    for k in range(pairs.shape[0]):
        d = _pair_distance(world, wrot, pairs[k], out)
        if d < result[0]:
            result[0] = d
            result[1] = pairs[k, PAIR_ID]
            if d < stop_below:
                break
    return True


@_jit
def _link_steps(shapes, weights, step, moved):
    """moved (S,): a bound on how far any point of each shape moves (m) for joint changes of at
    most |step| (dof,); 0 for the environment."""
    for s in range(shapes.shape[0]):
        link = int(shapes[s, LINK])
        total = 0.0
        if link >= 0:
            for j in range(step.shape[0]):
                total += weights[link, j] * abs(step[j])
        moved[s] = total


@_jit
def check_path(tree, shapes, pairs, weights, qs, bounds, margin, result, q_out):
    """Check the path through the rows of qs (M, dof), linear in joint space between them.

    bounds (M - 1, dof): how far each joint may move within each interval (|Δq| for a linear
    path). Each interval is cut into the fewest equal steps for which no point of any link moves
    more than margin / 2 (the displacement bound: `weights` (n_links, dof), m per rad or m per m).
    A shape pair is evaluated at a sample unless the distance it had at an earlier sample, less
    what the two shapes can have moved since, already proves it ≥ margin.

    result (N_RESULT,): found (1.0 when some sample is closer than margin), the fraction along
    the path ((interval + step) / (M - 1)), the distance and the pair id of the first such sample,
    the samples checked and the shape pair distances evaluated; q_out (dof,): its configuration.
    False if qs is not finite.
    """
    for k in range(qs.shape[0]):
        if not all_finite(qs[k]):
            return False
    scratch = _scratch(tree, shapes)
    world, wrot = scratch[0], scratch[1]
    n_pairs = pairs.shape[0]
    slack = np.full(n_pairs, -1.0)  # a lower bound of (distance - margin); < 0: evaluate
    moved = np.empty(shapes.shape[0])
    out = np.empty(6)
    step = np.empty(qs.shape[1])
    result[:] = 0.0
    result[R_PAIR] = -1.0
    intervals = max(qs.shape[0] - 1, 1)
    for k in range(qs.shape[0]):
        pieces = 1
        if k > 0:
            _link_steps(shapes, weights, bounds[k - 1], moved)
            pieces = max(1, int(math.ceil(np.max(moved) / (0.5 * margin) * (1.0 - 1e-12))))  # noqa: RUF046
            moved /= pieces
        for i in range(1 if k > 0 else 0, pieces + 1 if k > 0 else 1):
            frac = i / pieces
            if k > 0:
                for j in range(qs.shape[1]):
                    step[j] = qs[k - 1, j] + frac * (qs[k, j] - qs[k - 1, j])
                for p in range(n_pairs):
                    slack[p] -= moved[pairs[p, PAIR_A]] + moved[pairs[p, PAIR_B]]
            else:
                step[:] = qs[0]
            result[R_SAMPLES] += 1.0
            if np.min(slack) >= 0.0:
                continue
            _placed(tree, shapes, step, scratch)
            for p in range(n_pairs):
                if slack[p] >= 0.0:
                    continue
                d = _pair_distance(world, wrot, pairs[p], out)
                result[R_EVALUATED] += 1.0
                slack[p] = d - margin
                if d < margin:
                    result[R_FOUND] = 1.0
                    result[R_FRACTION] = (max(k - 1, 0) + (frac if k > 0 else 0.0)) / intervals
                    result[R_DISTANCE] = d
                    result[R_PAIR] = pairs[p, PAIR_ID]
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
        nb.boolean(_packed, _packed, _pairs, _f8_2r, _f8_2, _f8_2, nb.float64, _f8_1, _f8_1),
    ),
}
