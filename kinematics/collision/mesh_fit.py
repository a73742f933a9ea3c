"""Meshes as capsules: read a mesh file's vertices and fit the capsule that contains them.

Reading uses trimesh (imported only when a mesh is read): STL, OBJ, PLY, OFF, glTF, and COLLADA
(.dae) when pycollada is installed. Fitting needs only numpy.

The fitted capsule contains every vertex, hence the mesh's convex hull: its radius is the largest
distance of a vertex to its segment. The axis is chosen among the vertices' principal axes and the
frame's axes, the one giving the smallest capsule volume; the segment's ends are pulled in as far
as the end caps still cover every vertex.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics.collision.geometry import Capsule
from kinematics.errors import ModelError

__all__ = [
    "bounding_capsule",
    "fit_capsules",
    "fit_radii",
    "read_mesh",
    "read_mesh_vertices",
    "subdivide",
]

Array = NDArray[np.float64]

_CIRCLE_ITERATIONS = 100  # Bădoiu–Clarkson: the enclosing circle within ~1/sqrt(n) of the least


def read_mesh_vertices(path: Path, scale: ArrayLike = (1.0, 1.0, 1.0)) -> Array:
    """The vertices (n, 3) of the mesh file at `path` (in its own units, times `scale` per axis).
    Raises `ModelError` when the file cannot be read or holds no vertex."""
    return read_mesh(path, scale)[0]


def read_mesh(path: Path, scale: ArrayLike = (1.0, 1.0, 1.0)) -> tuple[Array, NDArray[np.int64]]:
    """(vertices (n, 3) times `scale`, triangles (m, 3) of vertex indices) of the mesh file."""
    try:
        import trimesh  # noqa: PLC0415 (only programs that read meshes need it)
    except ImportError as exc:
        raise ModelError(f"mesh {str(path)!r}: reading meshes needs trimesh ({exc})") from None
    try:
        mesh = trimesh.load(str(path), force="mesh", process=False)
        vertices = np.asarray(getattr(mesh, "vertices", None), dtype=np.float64)
        faces = np.asarray(getattr(mesh, "faces", np.zeros((0, 3))), dtype=np.int64).reshape(-1, 3)
    except Exception as exc:  # trimesh raises many types (ValueError, KeyError, OSError, ...)
        raise ModelError(
            f"mesh {str(path)!r}: cannot be read ({type(exc).__name__}: {exc})"
        ) from None
    if vertices.ndim != 2 or vertices.shape[0] == 0 or vertices.shape[1] != 3:
        raise ModelError(f"mesh {str(path)!r}: holds no vertices")
    return vertices * np.asarray(scale, dtype=np.float64), faces


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


def subdivide(
    vertices: ArrayLike, faces: ArrayLike, max_edge: float
) -> tuple[Array, NDArray[np.int64]]:
    """The same surface with every triangle's edges at most `max_edge` (m): triangles are halved
    across their longest edge until none is longer."""
    v = [np.asarray(vertices, dtype=np.float64).reshape(-1, 3)]
    count = v[0].shape[0]
    todo = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    done = []
    while todo.size:
        pts = np.concatenate(v) if len(v) > 1 else v[0]
        v = [pts]
        tri = pts[todo]
        lengths = np.linalg.norm(tri - np.roll(tri, -1, axis=1), axis=2)  # edge k: k -> k+1
        long = lengths.max(axis=1) > max_edge
        done.append(todo[~long])
        todo, lengths = todo[long], lengths[long]
        if not todo.size:
            break
        k = np.argmax(lengths, axis=1)
        rows = np.arange(len(todo))
        a, b, c = todo[rows, k], todo[rows, (k + 1) % 3], todo[rows, (k + 2) % 3]
        mids = np.arange(count, count + len(todo))
        v.append(0.5 * (pts[a] + pts[b]))
        count += len(todo)
        todo = np.concatenate((np.stack((a, mids, c), 1), np.stack((mids, b, c), 1)))
    return np.concatenate(v), np.concatenate(done) if done else np.zeros((0, 3), np.int64)


def _volume(capsules: list[Capsule]) -> float:
    return sum(
        np.pi * c.radius**2 * float(np.linalg.norm(np.subtract(c.b, c.a)))
        + 4.0 / 3.0 * np.pi * c.radius**3
        for c in capsules
    )


def _pieces(points: Array, faces: NDArray[np.int64], z: Array, cuts: list[float]) -> list[Capsule]:
    """One bounding capsule per slab between `cuts` along z, each holding every triangle with a
    vertex in its slab (so every triangle lies wholly inside some capsule)."""
    bounds = [-np.inf, *cuts, np.inf]
    fitted = []
    for lo, hi in itertools.pairwise(bounds):
        inside = (z >= lo) & (z <= hi)
        touching = faces[np.any(inside[faces], axis=1)]
        chunk = points[np.unique(np.concatenate((touching.ravel(), np.flatnonzero(inside))))]
        if chunk.size:
            fitted.append(bounding_capsule(chunk))
    return fitted


def fit_capsules(
    vertices: ArrayLike, faces: ArrayLike, max_count: int = 3, max_edge: float = 0.02
) -> list[Capsule]:
    """Up to `max_count` capsules whose union contains the mesh's surface: the triangles are
    subdivided to edges ≤ `max_edge` (m), then cut into slabs along the principal axis, each
    slab's triangles in one bounding capsule. The cuts are searched on a 10 % grid; more capsules
    are kept only while they cut the total volume by at least a fifth."""
    points, tris = subdivide(vertices, faces, max_edge)
    axis = np.linalg.svd(points - points.mean(axis=0), full_matrices=False)[2][0]
    z = points @ axis
    grid = [float(v) for v in np.linspace(z.min(), z.max(), 11)[1:-1]]
    best = [bounding_capsule(points)]
    for count in range(2, max_count + 1):
        options = [
            _pieces(points, tris, z, list(cuts)) for cuts in itertools.combinations(grid, count - 1)
        ]
        candidate = min(options, key=_volume)
        if _volume(candidate) > 0.8 * _volume(best):
            break
        best = candidate
    return best


def fit_radii(
    vertices: ArrayLike,
    faces: ArrayLike,
    segments: list[tuple[ArrayLike, ArrayLike]],
    max_edge: float = 0.02,
) -> list[Capsule]:
    """Capsules on given segments (a, b) whose union contains the mesh's surface: each triangle
    (subdivided to edges ≤ `max_edge`, m) goes to the segment its farthest vertex is nearest to,
    and each radius is the largest such distance. A segment that receives no triangle gets none."""
    points, tris = subdivide(vertices, faces, max_edge)
    ends = [(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)) for a, b in segments]
    dist = np.stack([_segment_distances(points, a, b)[tris].max(axis=1) for a, b in ends])
    owner = np.argmin(dist, axis=0)
    capsules = []
    for k, (a, b) in enumerate(ends):
        mine = dist[k, owner == k]
        if mine.size:
            capsules.append(Capsule(tuple(a.tolist()), tuple(b.tolist()), float(mine.max())))
    return capsules
