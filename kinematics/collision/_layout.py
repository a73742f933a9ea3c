"""The array layouts the collision kernels share with their Python callers, without numba.

Every primitive is one row of a float64 array with `SROW` columns. The same layout holds a shape in
its link's frame (the model's `shapes` array) and placed in the root frame (the kernels' scratch)::

    KIND    SEGMENT (a capsule, or a sphere: a segment of zero length), BOX or PLANE
    LINK    row of the link in the tree array (`KinematicTree.links` order); -1: the environment,
            already in the root frame
    RADIUS  m (segments)
    P0      3 columns: segment start, box centre, or a point of the plane (m)
    P1      3 columns: segment end, or the plane's unit normal (towards the free side)
    ROT     9 columns: the box's rotation matrix, row-major (frame of the shape -> its link's frame)
    HALF    3 columns: the box's half-sizes (m)

A *pair* row (int64, `PROW` columns) names two shape rows (PAIR_A, PAIR_B: the lower `KIND`
first), the id of the checked pair (a link pair, or a link and an environment object) they belong
to, and PAIR_SWAP: 1 when PAIR_A's shape belongs to the checked pair's second name (the witness
points are then swapped back). A checked pair's distance is the least over its shape pairs.

The kernels read these names as compile-time constants: numba alone does not see a change here;
`kinematics.kernel_cache` does, and has the kernels that read them compiled again.
"""

from __future__ import annotations

SEGMENT, BOX, PLANE = 0, 1, 2
KIND, LINK, RADIUS, P0, P1, ROT, HALF = 0, 1, 2, 3, 6, 9, 18
SROW = 21

PAIR_A, PAIR_B, PAIR_ID, PAIR_SWAP = 0, 1, 2, 3
PROW = 4

# `check_path`'s result vector
R_FOUND, R_FRACTION, R_DISTANCE, R_PAIR, R_SAMPLES, R_EVALUATED = range(6)
N_RESULT = 6
