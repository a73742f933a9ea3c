"""The collision model's inputs, pairs and answers on small trees built for each rule: validation
errors, exclusions and their reasons, the plain-dict forms, the queries' shapes and agreement."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kinematics import ConstantMotor, JointLimit, JointMotor, KinematicTree, Link, Pose
from kinematics.collision import (
    Box,
    Capsule,
    CollisionModel,
    CollisionSpec,
    KeepInBox,
    ObstacleBox,
    Plane,
    Sphere,
    spec_from_dict,
)
from kinematics.errors import KinematicsError, ModelError, UnknownNameError

LIMIT = JointLimit(-np.pi, np.pi, 1.0)


def _arm() -> KinematicTree:
    """base (root) → pan (z, 0.05 up) → upper (y, 0.1 up) → mount (fixed, 0.3 up) → lower (y)
    → tool (fixed, 0.3 up): a planar two-link arm on a turntable, with fixed joints between."""
    return KinematicTree(
        [
            Link("base", None),
            Link("pan", "base", JointMotor("revolute", (0, 0, 1), Pose((0, 0, 0.05)), LIMIT, "j1")),
            Link("upper", "pan", JointMotor("revolute", (0, 1, 0), Pose((0, 0, 0.1)), LIMIT, "j2")),
            Link("mount", "upper", ConstantMotor(Pose((0, 0, 0.3)))),
            Link("lower", "mount", JointMotor("revolute", (0, 1, 0), Pose(), LIMIT, "j3")),
            Link("tool", "lower", ConstantMotor(Pose((0, 0, 0.3)))),
        ],
        name="test-arm",
    )


UPPER = [{"type": "capsule", "a": [0, 0, 0], "b": [0, 0, 0.3], "radius": 0.03}]
LOWER = [{"type": "capsule", "a": [0, 0, 0], "b": [0, 0, 0.3], "radius": 0.025}]
TABLE = {"name": "table", "type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]}


def _data(**extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "links": {
            "base": [{"type": "sphere", "center": [0, 0, 0.02], "radius": 0.05}],
            "upper": UPPER,
            "lower": LOWER,
            "tool": [{"type": "box", "center": [0, 0, 0.02], "size": [0.04, 0.04, 0.04]}],
        },
        "environment": [TABLE],
    }
    data.update(extra)
    return data


@pytest.fixture(scope="module")
def arm() -> KinematicTree:
    return _arm()


@pytest.fixture(scope="module")
def model(arm: KinematicTree) -> CollisionModel:
    return CollisionModel.from_dict(arm, _data())


# -- inputs -----------------------------------------------------------------------------------

CAPSULE = {"type": "capsule", "a": [0, 0, 0], "b": [0, 0, 1]}


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (CAPSULE | {"radius": -0.1}, "capsule radius: -0.1 must be a finite number ≥ 0"),
        ({"type": "sphere", "center": [0, 0], "radius": 0.1}, "sphere center: [0, 0] must be 3"),
        (
            {"type": "box", "center": [0, 0, 0], "size": [0.1, 0, 0.1]},
            "box size: [0.1, 0.0, 0.1] must be > 0",
        ),
        (
            {"type": "box", "center": [0, 0, 0], "size": [1, 1, 1], "orientation": [0, 0, 0, 0]},
            "box orientation: [0, 0, 0, 0] has norm 0: cannot be normalised",
        ),
        ({"type": "cone", "radius": 0.1}, "type 'cone' must be one of"),
        (
            {"type": "sphere", "center": [0, 0, 0], "radius": 0.1, "colour": 1},
            "unknown keys ['colour']",
        ),
    ],
)
def test_bad_shapes_name_the_link_the_field_and_the_value(
    item: dict[str, Any], message: str
) -> None:
    with pytest.raises(ModelError, match="link 'upper' shape #1: ") as caught:
        spec_from_dict({"links": {"upper": [item]}})
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (
            {"name": "t", "type": "plane", "point": [0, 0, 0], "normal": [0, 0, 0]},
            "plane 't' normal: [0.0, 0.0, 0.0] must be non-zero",
        ),
        (
            {"name": "b", "type": "box", "center": [0, 0, 0], "size": [1, -1, 1]},
            "box 'b' size: [1.0, -1.0, 1.0] must be > 0",
        ),
        (
            {"type": "keep_in", "center": [0, 0, 0], "size": [1, 1, 1], "orientation": [0] * 4},
            "keep-in box 'workspace' orientation",
        ),
        ({"name": "t", "type": "plane", "point": [0, 0, 0]}, "missing ['normal']"),
    ],
)
def test_bad_environment_objects_name_the_object(item: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelError, match="environment #1") as caught:
        spec_from_dict({"environment": [item]})
    assert message in str(caught.value)


def test_bad_top_level_values() -> None:
    with pytest.raises(ModelError, match=r"collision margin: -0.01 must be ≥ 0"):
        spec_from_dict({"margin": -0.01})
    with pytest.raises(ModelError, match=r"unknown keys \['marign'\]"):
        spec_from_dict({"marign": 0.01})
    with pytest.raises(ModelError, match="self_collision: 'yes' must be true or false"):
        spec_from_dict({"self_collision": "yes"})
    with pytest.raises(ModelError, match=r"allowed #1: \['upper'\] must be \[name, name\]"):
        spec_from_dict({"allowed": [["upper"]]})
    with pytest.raises(ModelError, match="environment object 'table': duplicate name"):
        spec_from_dict({"environment": [TABLE, TABLE]})


def test_unknown_links_and_allowed_names_are_refused(arm: KinematicTree) -> None:
    with pytest.raises(UnknownNameError, match="collision links: unknown link 'elbow'"):
        CollisionModel.from_dict(arm, {"links": {"elbow": UPPER}})
    with pytest.raises(ModelError, match="'shelf' is neither a link with geometry"):
        CollisionModel.from_dict(arm, _data(allowed=[["upper", "shelf"]]))


def test_values_are_normalised_and_frozen() -> None:
    plane = Plane("t", (0, 0, 0), (0, 0, 2))
    assert plane.normal == (0.0, 0.0, 1.0)
    box = Box((0, 0, 0), (1, 1, 1), (2, 0, 0, 0))
    assert box.orientation == (1.0, 0.0, 0.0, 0.0)
    with pytest.raises(AttributeError):
        box.size = (2, 2, 2)  # type: ignore[misc]


# -- pairs ------------------------------------------------------------------------------------


def _reasons(model: CollisionModel) -> dict[frozenset[str], str]:
    return {frozenset((p.a, p.b)): p.reason for p in model.excluded_pairs}


def test_adjacent_bodies_skip_links_without_geometry_and_merge_fixed_links(
    model: CollisionModel,
) -> None:
    reasons = _reasons(model)
    # pan has no geometry: upper's nearest ancestor with geometry is the base
    assert reasons[frozenset(("base", "upper"))] == "adjacent"
    # mount has no geometry and is fixed to upper: lower is adjacent to upper
    assert reasons[frozenset(("upper", "lower"))] == "adjacent"
    # tool is fixed to lower: one body, adjacent to upper's
    assert reasons[frozenset(("lower", "tool"))] == "adjacent"
    assert reasons[frozenset(("upper", "tool"))] == "adjacent"
    # the base never moves: not checked against the table
    assert reasons[frozenset(("base", "table"))] == "fixed to the root"
    assert set(model.pair_names) == {
        ("base", "lower"),
        ("base", "tool"),
        ("upper", "table"),
        ("lower", "table"),
        ("tool", "table"),
    }


def test_always_in_contact_and_config_exclusions(arm: KinematicTree) -> None:
    """With geometry on the turntable, base and upper are no longer adjacent; the upper link's
    lower end turns about the shoulder inside the base's sphere in every configuration."""
    data = _data(allowed=[["tool", "table"]])
    data["links"]["base"] = [{"type": "sphere", "center": [0, 0, 0.1], "radius": 0.1}]
    data["links"]["pan"] = [{"type": "sphere", "center": [0, 0, 0], "radius": 0.01}]
    model = CollisionModel.from_dict(arm, data)
    reasons = _reasons(model)
    assert reasons[frozenset(("tool", "table"))] == "config"
    assert reasons[frozenset(("base", "upper"))] == "always in contact"
    (always,) = [p for p in model.excluded_pairs if p.reason == "always in contact"]
    assert always.detail == "within the margin in 1000 of 1000 sampled configurations"


def test_a_pair_is_never_excluded_for_lack_of_contact(arm: KinematicTree) -> None:
    """A pair that sampling never finds in contact stays checked (a small far sphere)."""
    data = _data()
    data["links"]["base"] = [{"type": "sphere", "center": [5, 5, 0], "radius": 0.01}]
    model = CollisionModel.from_dict(arm, data)
    assert ("base", "tool") in model.pair_names


def test_self_collision_off_checks_only_the_environment(arm: KinematicTree) -> None:
    model = CollisionModel.from_dict(arm, _data(self_collision=False))
    assert model.checked_pairs
    assert all(pair.environment for pair in model.checked_pairs)


def test_exclusions_are_deterministic(arm: KinematicTree) -> None:
    first = CollisionModel.from_dict(arm, _data())
    second = CollisionModel.from_dict(arm, _data())
    assert first.excluded_pairs == second.excluded_pairs
    assert first.checked_pairs == second.checked_pairs


# -- answers ----------------------------------------------------------------------------------


def test_distances_agree_across_queries(model: CollisionModel, arm: KinematicTree) -> None:
    rng = np.random.default_rng(5)
    qs = rng.uniform(-np.pi, np.pi, (50, arm.dof))
    batch = model.distances_batch(qs)
    for q, row in zip(qs, batch, strict=True):
        report = model.distances(q)
        assert [p.distance for p in report.pairs] == pytest.approx(row.tolist(), abs=1e-12)
        least, pair = model.min_distance(q)
        assert least == pytest.approx(row.min(), abs=1e-12)
        assert pair == model.pair_names[int(np.argmin(row))]
        contact = model.first_contact(q)
        assert (contact is None) == bool(np.all(row >= model.margin))
        if contact is not None:
            assert contact[2] < model.margin
            assert (contact[0], contact[1]) in model.pair_names
        assert report.collision_free == (contact is None)


def test_a_known_configuration(model: CollisionModel, arm: KinematicTree) -> None:
    """Arm straight up: the tool's box bottom is 0.05 + 0.1 + 0.3 + 0.3 m up."""
    report = model.distances(np.zeros(arm.dof))
    by_pair = {(p.a, p.b): p for p in report.pairs}
    tool = by_pair[("tool", "table")]
    assert tool.distance == pytest.approx(0.75, abs=1e-12)
    assert tool.point_b == pytest.approx([tool.point_a[0], tool.point_a[1], 0.0], abs=1e-12)
    # upper arm pointing down from the shoulder (0.15 m up): 0.3 + 0.03 - 0.15 m into the table
    down = model.distances([0.0, np.pi, 0.0])
    assert not down.collision_free
    distances = {(p.a, p.b): p.distance for p in down.pairs}
    assert distances[("upper", "table")] == pytest.approx(-0.18, abs=1e-12)


def test_non_finite_configurations_are_refused(model: CollisionModel) -> None:
    with pytest.raises(KinematicsError, match="finite"):
        model.distances([0.0, np.nan, 0.0])
    with pytest.raises(KinematicsError, match="finite"):
        model.check_path([[0.0, 0.0, 0.0], [0.0, np.inf, 0.0]])


def test_to_dict_has_the_model_topic_shape(model: CollisionModel) -> None:
    data = model.to_dict()
    assert set(data) == {"margin", "self_collision", "links", "environment", "allowed"}
    assert data["links"]["upper"] == [
        {"type": "capsule", "a": [0.0, 0.0, 0.0], "b": [0.0, 0.0, 0.3], "radius": 0.03}
    ]
    assert data["links"]["tool"][0]["orientation"] == [1.0, 0.0, 0.0, 0.0]
    assert data["environment"] == [
        {"name": "table", "type": "plane", "point": [0.0, 0.0, 0.0], "normal": [0.0, 0.0, 1.0]}
    ]
    assert ["upper", "lower", "adjacent"] in data["allowed"]
    again = spec_from_dict({k: v for k, v in data.items() if k != "allowed"})
    assert again.links == model.spec.links


def test_keep_in_and_keep_out_boxes() -> None:
    """A sphere of 0.1 m sliding along x in a 2 m workspace with a 0.1 m thick post at x = 0.5:
    the workspace distance is the clearance to its nearest face, negative outside."""
    limit = JointLimit(-2.0, 2.0, 1.0)
    tree = KinematicTree(
        [
            Link("base", None),
            Link("slider", "base", JointMotor("prismatic", (1, 0, 0), Pose(), limit, "x")),
        ]
    )
    spec = CollisionSpec(
        links={"slider": (Sphere((0, 0, 0), 0.1),)},
        environment=(
            KeepInBox((0, 0, 0), (2, 2, 2)),
            ObstacleBox("post", (0.5, 0, 0), (0.1, 2, 2)),
        ),
    )
    model = CollisionModel(tree, spec)
    for x, inside, post in [
        (0.0, 0.9, 0.35),
        (0.8, 0.1, 0.15),
        (1.05, -0.15, 0.4),
        (0.5, 0.4, -0.15),
    ]:
        distances = {(p.a, p.b): p.distance for p in model.distances([x]).pairs}
        assert distances[("slider", "workspace")] == pytest.approx(inside, abs=1e-12)
        assert distances[("slider", "post")] == pytest.approx(post, abs=1e-12)


def test_capsule_roundtrip() -> None:
    spec = spec_from_dict({"links": {"a": [CAPSULE | {"radius": 0.1}]}})
    assert spec.links["a"] == (Capsule((0, 0, 0), (0, 0, 1), 0.1),)
