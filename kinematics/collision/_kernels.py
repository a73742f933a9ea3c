"""Compiled collision queries (numba): place every shape at a configuration, then the signed
distance of every checked pair, the first pair closer than a bound, or a whole path.

The array layouts are `kinematics.collision._layout`'s; the shapes are placed and their pairs'
distances found by `kinematics.collision._shape_kernels`. Nothing compiles on import: each entry
kernel is compiled for the one signature of `ENTRIES` by `kinematics.collision.compiled` (or
loaded from numba's cache).

numba keys its cache of these entries on this file only, yet they hold the code of
`kinematics.collision._shape_kernels`, `_primitive_kernels`, `kinematics._kernels` and the layout
constants: `kinematics.kernel_cache` removes them when any of those changed.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from kinematics._kernels import all_finite
from kinematics.collision._layout import (
    PAIR_ID,
    R_DISTANCE,
    R_EVALUATED,
    R_FOUND,
    R_FRACTION,
    R_PAIR,
    R_SAMPLES,
)
from kinematics.collision._shape_kernels import _place_needed, _placed, _scratch, _shape_pairs

_jit = nb.njit(cache=True, nogil=True)

_packed = nb.types.Array(nb.float64, 2, "C", readonly=True)
_pairs = nb.types.Array(nb.int64, 2, "C", readonly=True)
_f8_1 = nb.types.Array(nb.float64, 1, "C")
_f8_2 = nb.types.Array(nb.float64, 2, "C")
_f8_2r = nb.types.Array(nb.float64, 2, "C", readonly=True)


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
def _interval(weights, pair_weights, bound, margin, change):
    """The fewest equal steps of an interval whose joints move at most `bound` (dof,) in which no
    point of any link moves more than margin / 2; change (K,): how much each shape pair's
    distance can change in one of them."""
    reach = _reach(weights, bound)
    pieces = max(1, int(math.ceil(reach / (0.5 * margin) * (1.0 - 1e-12))))  # noqa: RUF046
    for p in range(change.shape[0]):
        total = 0.0
        for j in range(bound.shape[0]):
            total += pair_weights[p, j] * bound[j]
        change[p] = total / pieces
    return pieces


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
    False if qs is not finite. (One loop, no call per sample that passes arrays: those calls
    cost more than the sample.)
    """
    for k in range(qs.shape[0]):
        if not all_finite(qs[k]):
            return False
    scratch = _scratch(tree, shapes, pairs)
    world, wrot, out, ts, each = scratch[0], scratch[1], scratch[5], scratch[6], scratch[7]
    slack = np.full(pairs.shape[0], -1.0)  # a lower bound of (distance - margin); < 0: evaluate
    change = np.zeros(pairs.shape[0])
    needed = np.empty(shapes.shape[0], dtype=np.bool_)
    none = np.empty((0, 6))
    result[:] = 0.0
    result[R_PAIR] = -1.0
    pieces = 1
    for k in range(qs.shape[0]):
        if k > 0 and (k == 1 or _differ(bounds, k - 1)):  # a trajectory's are often all equal
            pieces = _interval(weights, pair_weights, bounds[k - 1], margin, change)
        for i in range(1 if k > 0 else 0, pieces + 1 if k > 0 else 1):
            frac = i / pieces if k > 0 else 0.0
            least = np.inf if k > 0 else -1.0  # the start: every pair evaluated
            for j in range(qs.shape[1]):
                q_out[j] = qs[max(k - 1, 0), j] + frac * (qs[k, j] - qs[max(k - 1, 0), j])
            for p in range(pairs.shape[0]):
                slack[p] -= change[p]
                least = min(least, slack[p])
            result[R_SAMPLES] += 1.0
            if least >= 0.0:
                continue
            _place_needed(tree, shapes, pairs, slack, q_out, scratch, needed)
            hit = _shape_pairs(world, wrot, pairs, slack, margin, each, none, out, ts)
            for p in range(pairs.shape[0] if hit < 0 else hit + 1):
                if slack[p] < 0.0:  # evaluated just now
                    slack[p] = each[p] - margin
                    result[R_EVALUATED] += 1.0
            if hit >= 0:
                result[R_FOUND] = 1.0
                result[R_FRACTION] = (max(k - 1, 0) + frac) / max(qs.shape[0] - 1, 1)
                result[R_DISTANCE] = each[hit]
                result[R_PAIR] = pairs[hit, PAIR_ID]
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
