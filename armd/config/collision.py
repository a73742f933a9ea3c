"""The config's ``collision:`` section resolved into the collision model's inputs
(`kinematics.collision.CollisionSpec`), every problem reported at its path with its value.

The geometry file (``geometry:``, relative to the config's folder like ``model:``; the shipped
ones are config/collision/*.yaml) is a collision section of its own (docs/collision.md)::

    margin: 0.01
    links:                        # link: its shapes in the link's frame (m)
      upper_arm_link:
        - {type: capsule, a: [0, 0, 0], b: [0, 0, 0.425], radius: 0.06}
    allowed: [[link_a, link_b]]   # pairs the arm's own design lets touch
    environment: [...]            # e.g. the table the arm stands on

The config's section completes it: its ``links`` replace the file's shapes link by link (or add
links), its ``allowed`` pairs join the file's, and ``margin``, ``self_collision`` and
``environment``, where the section gives them, replace the file's.
Shapes and objects are parsed by `kinematics.collision.spec` (which names the field and the
value); link names and allowed pairs are checked against the model here, without the compiled
kernels, so that ``armd check`` and ``armd goal`` stay fast. The model itself (`CollisionModel`,
whose pair selection samples the kinematics) is built by `armd.config.load.ArmSetup.collision`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from armd.config.collision_schema import CollisionConfig
from armd.config.schema import Loc
from armd.errors import ConfigError
from kinematics import KinematicTree, ModelError
from kinematics.collision import CollisionSpec, EnvironmentObject, Shape, spec_from_dict
from kinematics.collision.pairs import check_allowed_names
from kinematics.collision.spec import shape_from_dict

__all__ = ["collision_spec", "read_geometry"]

_GEOMETRY_KEYS = {"margin", "self_collision", "links", "allowed", "environment"}


class _Problems:
    """Problems of the section (at paths of the config) and of the geometry file (whole lines)."""

    def __init__(self) -> None:
        self.items: list[tuple[Loc, str]] = []

    def add(self, loc: Loc, message: str) -> None:
        self.items.append((loc, message))


def read_geometry(path: Path) -> dict[str, Any]:
    """The geometry file at `path` as a mapping with ``links`` (and maybe the other keys of a
    collision section). Raises `ConfigError` naming the file."""
    from armd.config.yaml_doc import read_yaml  # noqa: PLC0415 (yaml_doc imports the schema)

    data, _ = read_yaml(path)
    unknown = sorted(set(data) - _GEOMETRY_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown keys {unknown} (allowed: {sorted(_GEOMETRY_KEYS)})")
    if not isinstance(data.get("links"), dict):
        raise ConfigError(f"{path}: links: must map link names to lists of shapes")
    return data


def _shapes(raw: object, where: str) -> tuple[Shape, ...]:
    if not isinstance(raw, list) or not raw:
        raise ModelError(f"{where}: {raw!r} must be a non-empty list of shapes")
    return tuple(shape_from_dict(item, f"{where} shape #{i + 1}") for i, item in enumerate(raw))


def _links(
    file_links: Mapping[str, Any],
    section: CollisionConfig,
    tree: KinematicTree,
    geometry: Path | None,
    problems: _Problems,
) -> dict[str, tuple[Shape, ...]]:
    known = set(tree.link_names)
    links: dict[str, tuple[Shape, ...]] = {}
    for link, raw in file_links.items():
        where = f"{geometry}: links: {link}"
        if link not in known:
            problems.add(
                ("collision", "geometry"),
                f"{where}: unknown link; model links: {', '.join(tree.link_names)}",
            )
            continue
        try:
            links[link] = _shapes(raw, where)
        except ModelError as exc:
            problems.add(("collision", "geometry"), str(exc))
    for link, raw in section.links.items():
        loc = ("collision", "links", link)
        if link not in known:
            problems.add(loc, f"unknown link; model links: {', '.join(tree.link_names)}")
            continue
        if not raw:
            problems.add(loc, "an empty list of shapes: give the link's shapes, or omit it")
            continue
        shapes: list[Shape] = []
        for i, item in enumerate(raw):
            try:
                shapes.append(shape_from_dict(item, f"shape #{i + 1}"))
            except ModelError as exc:
                problems.add((*loc, i), str(exc))
        if len(shapes) == len(raw):
            links[link] = tuple(shapes)
    return links


def _environment(
    items: list[Any], where: tuple[str, ...], problems: _Problems
) -> tuple[EnvironmentObject, ...]:
    objects: list[EnvironmentObject] = []
    for i, item in enumerate(items):
        try:
            objects += spec_from_dict({"environment": [item]}).environment
        except ModelError as exc:
            name = item.get("name") if isinstance(item, dict) else None
            message = str(exc).replace("environment #1", f"object {name!r}" if name else "object")
            problems.add((*where, i), message)
    return tuple(objects)


def collision_spec(
    section: CollisionConfig, base: Path, tree: KinematicTree
) -> tuple[CollisionSpec | None, list[tuple[Loc, str]]]:
    """The collision model's inputs of the section (its geometry file read from `base`, the
    config's folder), checked against `tree`; (None, problems) when anything is wrong."""
    problems = _Problems()
    file_links: Mapping[str, Any] = {}
    file_allowed: list[Any] = []
    data: Mapping[str, Any] = {}
    geometry = None
    if section.geometry is not None:
        geometry = base / Path(section.geometry).expanduser()
        try:
            data = read_geometry(geometry)
        except ConfigError as exc:
            problems.add(("collision", "geometry"), str(exc))
        else:
            file_links, file_allowed = data["links"], list(data.get("allowed") or [])
    links = _links(file_links, section, tree, geometry, problems)
    given = section.model_fields_set
    if "environment" in given or not isinstance(data.get("environment"), list):
        environment = _environment(section.environment, ("collision", "environment"), problems)
    else:
        where = ("collision", "geometry", f"{geometry}: environment")
        environment = _environment(data["environment"], where, problems)
    margin = section.margin if "margin" in given else data.get("margin", section.margin)
    self_collision = section.self_collision
    if "self_collision" not in given:
        self_collision = data.get("self_collision", section.self_collision)
    spec = None
    try:
        allowed = [tuple(pair) for pair in [*file_allowed, *section.allowed]]
        spec = CollisionSpec(
            links=links,
            environment=environment,
            margin=margin,
            self_collision=self_collision,
            allowed=spec_from_dict({"allowed": allowed}).allowed,
        )
    except ModelError as exc:
        problems.add(("collision",), str(exc))
    if spec is not None and not problems.items:
        names = [obj.name for obj in environment]
        for message in check_allowed_names(spec.allowed, links, names):
            problems.add(("collision", "allowed"), message)
    if problems.items:
        return None, problems.items
    return spec, []
