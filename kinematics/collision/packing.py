"""Shapes and pairs packed into the flat arrays the collision kernels read
(`kinematics.collision._layout`), without numba."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from kinematics.collision import _layout as lay
from kinematics.collision.geometry import (
    Box,
    Capsule,
    EnvironmentObject,
    KeepInBox,
    ObstacleBox,
    Plane,
    Shape,
)
from kinematics.quaternion import quat_to_matrix

__all__ = ["pack_pairs", "pack_shapes"]

Array = NDArray[np.float64]


def _row(kind: int, link: int) -> Array:
    row = np.zeros(lay.SROW)
    row[lay.KIND] = kind
    row[lay.LINK] = link
    row[lay.ROT : lay.ROT + 9] = np.eye(3).ravel()
    return row


def _box_row(
    link: int, center: Sequence[float], size: Sequence[float], quat: Sequence[float]
) -> Array:
    row = _row(lay.BOX, link)
    row[lay.P0 : lay.P0 + 3] = center
    row[lay.ROT : lay.ROT + 9] = np.asarray(quat_to_matrix(np.array(quat))).ravel()
    row[lay.HALF : lay.HALF + 3] = 0.5 * np.asarray(size)
    return row


def shape_row(shape: Shape, link: int) -> Array:
    """One link shape (link frame) as a kernel row; `link` is its row in the tree array."""
    if isinstance(shape, Box):
        return _box_row(link, shape.center, shape.size, shape.orientation)
    row = _row(lay.SEGMENT, link)
    if isinstance(shape, Capsule):
        row[lay.P0 : lay.P0 + 3] = shape.a
        row[lay.P1 : lay.P1 + 3] = shape.b
    else:
        row[lay.P0 : lay.P0 + 3] = shape.center
        row[lay.P1 : lay.P1 + 3] = shape.center
    row[lay.RADIUS] = shape.radius
    return row


def _plane_row(plane: Plane) -> Array:
    row = _row(lay.PLANE, -1)
    row[lay.P0 : lay.P0 + 3] = plane.point
    row[lay.P1 : lay.P1 + 3] = plane.normal
    return row


def environment_rows(obj: EnvironmentObject) -> list[Array]:
    """An environment object as kernel rows (root frame): a keep-in box is its six inward faces."""
    if isinstance(obj, Plane):
        return [_plane_row(obj)]
    if isinstance(obj, ObstacleBox):
        return [_box_row(-1, obj.center, obj.size, obj.orientation)]
    assert isinstance(obj, KeepInBox)
    return [_plane_row(face) for face in obj.faces()]


def pack_shapes(
    link_index: Mapping[str, int],
    links: Mapping[str, Sequence[Shape]],
    environment: Sequence[EnvironmentObject],
) -> tuple[Array, dict[str, list[int]]]:
    """(shapes (S, SROW) read-only, name → its rows): the links' shapes in link order, then the
    environment's."""
    rows: list[Array] = []
    owned: dict[str, list[int]] = {}
    for name in sorted(links, key=lambda n: link_index[n]):
        owned[name] = []
        for shape in links[name]:
            owned[name].append(len(rows))
            rows.append(shape_row(shape, link_index[name]))
    for obj in environment:
        owned[obj.name] = []
        for row in environment_rows(obj):
            owned[obj.name].append(len(rows))
            rows.append(row)
    shapes = np.array(rows, dtype=np.float64).reshape(-1, lay.SROW)
    shapes.flags.writeable = False
    return shapes, owned


def pack_pairs(
    pairs: Sequence[tuple[str, str]], owned: Mapping[str, list[int]], shapes: Array
) -> NDArray[np.int64]:
    """pairs (K, PROW) read-only: every shape pair of every named pair, its id the pair's index,
    the lower kind first (PAIR_SWAP set when that reverses the names' order)."""
    rows = []
    for pid, (a, b) in enumerate(pairs):
        for sa in owned[a]:
            for sb in owned[b]:
                swap = shapes[sa, lay.KIND] > shapes[sb, lay.KIND]
                first, second = (sb, sa) if swap else (sa, sb)
                rows.append((first, second, pid, int(swap)))
    packed = np.array(rows, dtype=np.int64).reshape(-1, lay.PROW)
    packed.flags.writeable = False
    return packed
