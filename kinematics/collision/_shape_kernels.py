# mypy: ignore-errors
# (numba kernels are untyped Python, as the kernel modules pyproject.toml lists)
"""Shapes placed at a configuration and the signed distances of their pairs (numba), shared by the
entry kernels of `kinematics.collision._kernels`.

The placed shapes are a table in `kinematics.collision._layout`'s row layout (``world``) with
their rotations (``wrot``); every function reads it in place by row and column, never through an
array view: a view costs the reference counting of its parent, which was half of a full distance
query's time when the pair loop made one per pair. Link frames come from the tree kernel of
`kinematics._kernels`, or from `_frames_upto` for the top of the tree only.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from kinematics._kernels import apply_motion, dq_mul_into, translation_of, tree_fk
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
    PAIR_SWAP,
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
