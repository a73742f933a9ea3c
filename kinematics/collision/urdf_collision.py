"""The ``<collision>`` elements of a URDF file as per-link shapes (link frame).

For each top-level ``<link name>``, each ``<collision>`` child becomes one shape, its
``<origin xyz rpy>`` (default 0; rpy as in `kinematics.urdf`) applied:
- ``<cylinder radius length>``: the capsule with the cylinder's axis (its z, length L) as segment
  and its radius (it contains the cylinder; the caps add at most r at each end);
- ``<sphere radius>``: a sphere; ``<box size>``: a box (full edge lengths);
- ``<mesh filename scale>``: the bounding capsule of its vertices (`kinematics.collision.mesh_fit`),
  the file found relative to the URDF's folder, ``file://`` absolute, or ``package://NAME/rest``:
  ``package_dirs[NAME]/rest``, else in the URDF's folder or an ancestor — ``ANCESTOR/rest`` when
  the ancestor is named NAME, or ``ANCESTOR/NAME/rest``.
A mesh that cannot be found or read raises `ModelError` naming the link and the file, unless the
caller gives that link's shapes in `overrides` (its collision elements are then not read at all).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from kinematics.collision.geometry import Box, Capsule, Shape, Sphere
from kinematics.collision.mesh_fit import bounding_capsule, fit_capsules, read_mesh
from kinematics.errors import ModelError
from kinematics.pose import Pose
from kinematics.quaternion import quat_from_rpy

__all__ = ["collision_from_urdf", "collision_from_urdf_file", "resolve_mesh_path"]


def _floats(text: str, count: int, where: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split())
    except ValueError:
        values = ()
    if len(values) != count or not all(math.isfinite(v) for v in values):
        raise ModelError(f"{where}: {text!r} must be {count} finite number(s)")
    return values


def _attr(elem: ET.Element, key: str, count: int, where: str) -> tuple[float, ...]:
    text = elem.get(key)
    if text is None:
        raise ModelError(f"{where}: <{elem.tag}> needs the attribute {key!r}")
    return _floats(text, count, f"{where}: <{elem.tag} {key}>")


def _origin(collision: ET.Element, where: str) -> Pose:
    elem = collision.find("origin")
    if elem is None:
        return Pose()
    xyz = _floats(elem.get("xyz", "0 0 0"), 3, f"{where}: <origin xyz>")
    rpy = _floats(elem.get("rpy", "0 0 0"), 3, f"{where}: <origin rpy>")
    return Pose(xyz, quat_from_rpy(rpy))


def resolve_mesh_path(
    filename: str, urdf_dir: Path | None, package_dirs: Mapping[str, Path] | None = None
) -> Path | None:
    """The file a URDF mesh `filename` names (module docstring), or None if none exists."""
    candidates: list[Path] = []
    if filename.startswith("package://"):
        package, _, rest = filename[len("package://") :].partition("/")
        if package_dirs and package in package_dirs:
            candidates.append(Path(package_dirs[package]) / rest)
        if urdf_dir is not None:
            for folder in (urdf_dir, *urdf_dir.parents):
                candidates.append(
                    folder / rest if folder.name == package else folder / package / rest
                )
    elif filename.startswith("file://"):
        candidates.append(Path(filename[len("file://") :]))
    else:
        path = Path(filename)
        candidates.append(path if path.is_absolute() or urdf_dir is None else urdf_dir / path)
    return next((path for path in candidates if path.is_file()), None)


def _mesh_capsules(
    mesh: ET.Element,
    origin: Pose,
    urdf_dir: Path | None,
    package_dirs: Mapping[str, Path] | None,
    where: str,
    per_mesh: int,
) -> list[Capsule]:
    filename = mesh.get("filename", "").strip()
    if not filename:
        raise ModelError(f"{where}: <mesh> needs a non-empty attribute 'filename'")
    scale = _attr(mesh, "scale", 3, where) if mesh.get("scale") else (1.0, 1.0, 1.0)
    path = resolve_mesh_path(filename, urdf_dir, package_dirs)
    if path is None:
        raise ModelError(
            f"{where}: mesh {filename!r} not found (give the link's geometry in the collision "
            "config instead)"
        )
    try:
        vertices, faces = read_mesh(path, scale)
    except ModelError as exc:
        raise ModelError(
            f"{where}: {exc} (give the link's geometry in the collision config)"
        ) from None
    vertices = origin.transform_points(vertices)
    if per_mesh == 1:
        return [bounding_capsule(vertices)]
    return fit_capsules(vertices, faces, max_count=per_mesh)


def _shape(
    collision: ET.Element,
    urdf_dir: Path | None,
    package_dirs: Mapping[str, Path] | None,
    where: str,
    per_mesh: int,
) -> list[Shape]:
    origin = _origin(collision, where)
    geometry = collision.find("geometry")
    if geometry is None or len(geometry) != 1:
        raise ModelError(f"{where}: <geometry> must hold exactly one shape")
    elem = geometry[0]
    if elem.tag == "cylinder":
        (radius,) = _attr(elem, "radius", 1, where)
        (length,) = _attr(elem, "length", 1, where)
        ends = origin.transform_points(
            np.array([[0.0, 0.0, -0.5 * length], [0.0, 0.0, 0.5 * length]])
        )
        return [Capsule(tuple(ends[0].tolist()), tuple(ends[1].tolist()), radius)]
    if elem.tag == "sphere":
        (radius,) = _attr(elem, "radius", 1, where)
        return [Sphere(tuple(origin.translation.tolist()), radius)]
    if elem.tag == "box":
        sx, sy, sz = _attr(elem, "size", 3, where)
        center, quat = tuple(origin.translation.tolist()), tuple(origin.quaternion.tolist())
        return [Box(center, (sx, sy, sz), quat)]
    if elem.tag == "mesh":
        return list(_mesh_capsules(elem, origin, urdf_dir, package_dirs, where, per_mesh))
    raise ModelError(f"{where}: unknown geometry <{elem.tag}> (cylinder, sphere, box or mesh)")


def collision_from_urdf(
    data: str | bytes,
    *,
    urdf_dir: Path | None = None,
    package_dirs: Mapping[str, Path] | None = None,
    overrides: Mapping[str, Sequence[Shape]] | None = None,
    source: str = "",
    capsules_per_mesh: int = 1,
) -> dict[str, tuple[Shape, ...]]:
    """link name → its shapes (link frame), for the links with ``<collision>`` elements or an
    override, in file order. A mesh becomes its bounding capsule, or with `capsules_per_mesh` > 1
    up to that many (`kinematics.collision.mesh_fit.fit_capsules`). Raises `ModelError` (prefixed
    with `source`) for invalid XML, malformed elements, and meshes not found or unreadable without
    an override."""
    overrides = overrides or {}
    try:
        try:
            robot = ET.fromstring(data)
        except ET.ParseError as exc:
            raise ModelError(f"invalid XML: {exc}") from None
        shapes: dict[str, tuple[Shape, ...]] = {}
        links = robot.findall("link")
        names = {link.get("name") or f"<link> #{i + 1}" for i, link in enumerate(links)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise ModelError(f"collision overrides name links the URDF does not have: {unknown}")
        for i, link in enumerate(links):
            name = link.get("name") or f"<link> #{i + 1}"
            if name in overrides:
                shapes[name] = tuple(overrides[name])
                continue
            found = tuple(
                shape
                for k, c in enumerate(link.findall("collision"))
                for shape in _shape(
                    c,
                    urdf_dir,
                    package_dirs,
                    f"link {name!r} <collision> #{k + 1}",
                    capsules_per_mesh,
                )
            )
            if found:
                shapes[name] = found
        return shapes
    except ModelError as exc:
        raise ModelError(f"{source}: {exc}" if source else str(exc)) from None


def collision_from_urdf_file(
    path: str | Path,
    *,
    package_dirs: Mapping[str, Path] | None = None,
    overrides: Mapping[str, Sequence[Shape]] | None = None,
    capsules_per_mesh: int = 1,
) -> dict[str, tuple[Shape, ...]]:
    """`collision_from_urdf` of the file at `path`, meshes resolved against its folder."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelError(f"{path}: cannot be read ({exc.strerror})") from None
    return collision_from_urdf(
        data,
        urdf_dir=path.resolve().parent,
        package_dirs=package_dirs,
        overrides=overrides,
        source=str(path),
        capsules_per_mesh=capsules_per_mesh,
    )
