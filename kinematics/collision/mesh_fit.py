"""Meshes as capsules: read a mesh file's vertices and fit the capsule that contains them.

Reading uses trimesh (imported only when a mesh is read): STL, OBJ, PLY, OFF, glTF, and COLLADA
(.dae) when pycollada is installed. Fitting needs only numpy.

The fitted capsule contains every vertex, hence the mesh's convex hull: its radius is the largest
distance of a vertex to its segment. The axis is chosen among the vertices' principal axes and the
frame's axes, the one giving the smallest capsule volume; the segment's ends are pulled in as far
as the end caps still cover every vertex.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics.collision.geometry import Capsule
from kinematics.errors import ModelError

__all__ = ["bounding_capsule", "read_mesh_vertices"]

Array = NDArray[np.float64]

_CIRCLE_ITERATIONS = 200  # Bădoiu–Clarkson: the enclosing circle within ~1/sqrt(n) of the least


def read_mesh_vertices(path: Path, scale: ArrayLike = (1.0, 1.0, 1.0)) -> Array:
    """The vertices (n, 3) of the mesh file at `path` (in its own units, times `scale` per axis).
    Raises `ModelError` when the file cannot be read or holds no vertex."""
    try:
        import trimesh  # noqa: PLC0415 (only programs that read meshes need it)
    except ImportError as exc:
        raise ModelError(f"mesh {str(path)!r}: reading meshes needs trimesh ({exc})") from None
    try:
        mesh = trimesh.load(str(path), force="mesh", process=False)
        vertices = np.asarray(getattr(mesh, "vertices", None), dtype=np.float64)
    except Exception as exc:  # trimesh raises many types (ValueError, KeyError, OSError, ...)
        raise ModelError(
            f"mesh {str(path)!r}: cannot be read ({type(exc).__name__}: {exc})"
        ) from None
    if vertices.ndim != 2 or vertices.shape[0] == 0 or vertices.shape[1] != 3:
        raise ModelError(f"mesh {str(path)!r}: holds no vertices")
    return vertices * np.asarray(scale, dtype=np.float64)


def _segment_distances(points: Array, a: Array, b: Array) -> Array:
    d = b - a
    length2 = float(d @ d)
    t = np.zeros(len(points)) if length2 == 0.0 else np.clip((points - a) @ d / length2, 0.0, 1.0)
    return np.asarray(np.linalg.norm(points - (a + t[:, None] * d), axis=1))


def _enclosing_circle_center(points2: Array) -> Array:
    """An approximate centre of the least circle around 2-D points."""
    c = points2.mean(axis=0)
    for i in range(1, _CIRCLE_ITERATIONS + 1):
        far = points2[np.argmax(np.sum((points2 - c) ** 2, axis=1))]
        c = c + (far - c) / (i + 1)
    return np.asarray(c)


def _capsule_along(points: Array, axis: Array) -> tuple[Array, Array, float]:
    u = axis / np.linalg.norm(axis)
    helper = np.eye(3)[int(np.argmin(np.abs(u)))]
    e1 = np.cross(u, helper)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(u, e1)
    flat = np.stack((points @ e1, points @ e2), axis=1)
    c2 = _enclosing_circle_center(flat)
    rho = np.linalg.norm(flat - c2, axis=1)
    r = float(rho.max())
    z = points @ u
    reach = np.sqrt(np.maximum(r * r - rho * rho, 0.0))
    z0, z1 = float(np.min(z + reach)), float(np.max(z - reach))
    if z0 > z1:
        z0 = z1 = 0.5 * (z0 + z1)
    base = c2[0] * e1 + c2[1] * e2
    a, b = base + z0 * u, base + z1 * u
    return a, b, float(_segment_distances(points, a, b).max())


def bounding_capsule(vertices: ArrayLike) -> Capsule:
    """The fitted capsule (module docstring) that contains every vertex (n, 3)."""
    points = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    if points.shape[0] == 0 or not np.all(np.isfinite(points)):
        raise ModelError("a bounding capsule needs at least one vertex, all finite")
    centred = points - points.mean(axis=0)
    _, _, principal = np.linalg.svd(centred, full_matrices=False)
    best: tuple[float, Array, Array, float] | None = None
    for axis in (*principal, *np.eye(3)):
        a, b, r = _capsule_along(points, axis)
        volume = np.pi * r * r * float(np.linalg.norm(b - a)) + 4.0 / 3.0 * np.pi * r**3
        if best is None or volume < best[0]:
            best = (volume, a, b, r)
    assert best is not None
    _, a, b, r = best
    return Capsule(tuple(a.tolist()), tuple(b.tolist()), r)
