"""The ``collision:`` section: its geometry file and per-link shapes, the environment, allowed
pairs; malformed geometry refused at load with its path and value; the model built from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from armd.config.load import load_config
from armd.errors import ConfigError
from tests.armd.config.test_config import ur5_config, write

CONFIG = Path(__file__).resolve().parents[3] / "config"
UR5_GEOMETRY = CONFIG / "collision" / "ur5.yaml"
TABLE = {"name": "table", "type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]}


def with_collision(**section: Any) -> dict[str, Any]:
    doc = ur5_config()
    doc["collision"] = {"geometry": str(UR5_GEOMETRY), **section}
    return doc


def problems(tmp_path: Path, doc: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, doc), kernels=False)
    return str(info.value)


def test_the_geometry_file_and_the_environment_make_the_model(tmp_path: Path) -> None:
    setup = load_config(write(tmp_path, with_collision(environment=[TABLE])), kernels=False)
    model = setup.collision
    assert model is not None
    assert model.margin == pytest.approx(0.01, abs=1e-12)
    assert set(model.spec.links) >= {"upper_arm_link", "forearm_link", "wrist_3_link"}
    checked = {(p.a, p.b) for p in model.checked_pairs}
    assert ("wrist_3_link", "table") in checked
    excluded = {(p.a, p.b): p.reason for p in model.excluded_pairs}
    assert excluded[("base_link", "table")] == "fixed to the root"
    assert excluded[("upper_arm_link", "forearm_link")] == "adjacent"


def test_no_section_no_model(tmp_path: Path) -> None:
    setup = load_config(write(tmp_path, ur5_config()), kernels=False)
    assert setup.collision is None
    assert setup.collision_spec is None


def test_the_geometry_path_is_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "shapes.yaml").write_text(UR5_GEOMETRY.read_text(encoding="utf-8"))
    doc = with_collision()
    doc["collision"]["geometry"] = "shapes.yaml"
    setup = load_config(write(tmp_path, doc), kernels=False)
    assert setup.collision_spec is not None
    assert "wrist_1_link" in setup.collision_spec.links


def test_links_replace_the_file_s_shapes_of_a_link(tmp_path: Path) -> None:
    flange = [{"type": "sphere", "center": [0, 0.05, 0], "radius": 0.07}]
    setup = load_config(
        write(tmp_path, with_collision(links={"wrist_3_link": flange})), kernels=False
    )
    spec = setup.collision_spec
    assert spec is not None
    (shape,) = spec.links["wrist_3_link"]
    assert shape.radius == pytest.approx(0.07, abs=1e-12)  # type: ignore[union-attr]
    shipped = yaml.safe_load(UR5_GEOMETRY.read_text(encoding="utf-8"))
    assert len(spec.links["forearm_link"]) == len(shipped["links"]["forearm_link"])  # untouched


def test_the_file_s_margin_and_environment_hold_unless_the_section_gives_its_own(
    tmp_path: Path,
) -> None:
    spec = load_config(write(tmp_path, with_collision()), kernels=False).collision_spec
    assert spec is not None
    assert [obj.name for obj in spec.environment] == ["table"]  # the shipped file's
    wall = {"name": "wall", "type": "box", "center": [0, -0.8, 0.5], "size": [2, 0.1, 1]}
    doc = with_collision(environment=[wall], margin=0.02)
    spec = load_config(write(tmp_path, doc), kernels=False).collision_spec
    assert spec is not None
    assert [obj.name for obj in spec.environment] == ["wall"]
    assert spec.margin == pytest.approx(0.02, abs=1e-12)


def test_allowed_pairs_are_never_checked(tmp_path: Path) -> None:
    doc = with_collision(environment=[TABLE], allowed=[["wrist_3_link", "table"]])
    model = load_config(write(tmp_path, doc), kernels=False).collision
    assert model is not None
    reasons = {(p.a, p.b): p.reason for p in model.excluded_pairs}
    assert reasons[("wrist_3_link", "table")] == "config"


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (
            {"links": {"wrist_3_link": [{"type": "sphere", "center": [0, 0, 0], "radius": -0.1}]}},
            "collision.links.wrist_3_link.0: shape #1: sphere radius: -0.1 must be a finite "
            "number ≥ 0 (m)",
        ),
        (
            {"environment": [{**TABLE, "normal": [0, 0, 0]}]},
            "plane 'table' normal: [0.0, 0.0, 0.0] must be non-zero",
        ),
        (
            {"links": {"gripper_link": [{"type": "sphere", "center": [0, 0, 0], "radius": 0.1}]}},
            "collision.links.gripper_link: unknown link; model links: ",
        ),
        (
            {"allowed": [["wrist_3_link", "elbow_link"]]},
            "collision.allowed: collision allowed ['wrist_3_link', 'elbow_link']: 'elbow_link' "
            "is neither a link with geometry",
        ),
        ({"margin": -0.01}, "collision.margin: -0.01 must be >= 0"),
        ({"geometry": "nowhere.yaml"}, "nowhere.yaml: cannot read"),
        (
            {"links": {"wrist_3_link": [{"type": "cone", "radius": 0.1}]}},
            "collision.links.wrist_3_link.0: shape #1: type 'cone' must be one of",
        ),
        ({"allowed": [["wrist_3_link"]]}, "collision.allowed.0"),
    ],
    ids=[
        "negative radius",
        "zero normal",
        "unknown link",
        "allowed unknown",
        "margin",
        "no file",
        "shape type",
        "pair of one",
    ],
)
def test_malformed_geometry_is_refused_with_its_path_and_value(
    tmp_path: Path, section: dict[str, Any], expected: str
) -> None:
    message = problems(tmp_path, with_collision(**section))
    assert expected in message
    assert f": collision.{next(iter(section))}" in message


def test_a_geometry_file_naming_an_unknown_link_is_refused(tmp_path: Path) -> None:
    shapes = {"links": {"elbow": [{"type": "sphere", "center": [0, 0, 0], "radius": 0.1}]}}
    (tmp_path / "shapes.yaml").write_text(yaml.safe_dump(shapes))
    doc = with_collision()
    doc["collision"]["geometry"] = "shapes.yaml"
    message = problems(tmp_path, doc)
    assert "collision.geometry: " in message
    assert "shapes.yaml: links: elbow: unknown link" in message


@pytest.mark.parametrize("name", ["sim.yaml", "so101.yaml", "mit_arm.yaml", "cia402_arm.yaml"])
def test_the_shipped_configs_check_collisions_and_their_poses_are_clear(name: str) -> None:
    setup = load_config(CONFIG / name, kernels=False)
    model = setup.collision
    assert model is not None
    assert model.checked_pairs
    for pose, positions in setup.config.poses.items():
        q = setup.tree.q_from_mapping(dict(positions), np.zeros(setup.tree.dof))
        assert model.first_contact(q) is None, pose


def test_the_sim_arm_stands_on_a_table() -> None:
    spec = load_config(CONFIG / "sim.yaml", kernels=False).collision_spec
    assert spec is not None
    (table,) = spec.environment
    assert table.name == "table"
    assert table.normal == pytest.approx((0.0, 0.0, 1.0), abs=1e-12)  # type: ignore[union-attr]
