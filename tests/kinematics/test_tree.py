"""`KinematicTree` construction: validation, link and joint order, immutability, queries."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kinematics import (
    ConstantMotor,
    JointLimit,
    JointMotor,
    KinematicsError,
    KinematicTree,
    Link,
    Mimic,
    ModelError,
    Pose,
    UnknownNameError,
)

TOL = 1e-12


def revolute(axis: tuple[float, float, float] = (0.0, 0.0, 1.0), **kwargs: object) -> JointMotor:
    return JointMotor("revolute", axis, **kwargs)  # type: ignore[arg-type]


def branching_links() -> list[Link]:
    """base → a (revolute) → b (prismatic) → tip; base → c (revolute 'cj') → d (mimic of a);
    given children-first to exercise the ordering."""
    return [
        Link("tip", "b", ConstantMotor(Pose([0.0, 0.0, 0.1]))),
        Link("d", "c", revolute(mimic=Mimic("a", -2.0, 0.5))),
        Link("b", "a", JointMotor("prismatic", (1.0, 0.0, 0.0), limits=JointLimit(0.0, 0.3))),
        Link("a", "base", revolute(origin=Pose([0.0, 0.0, 0.2]), limits=JointLimit(-1.0, 1.0))),
        Link("c", "base", revolute((0.0, 1.0, 0.0), joint_name="cj")),
        Link("base", None),
    ]


@pytest.fixture
def tree() -> KinematicTree:
    return KinematicTree(branching_links(), name="branching")


def test_links_are_in_depth_first_order_from_the_root(tree: KinematicTree) -> None:
    assert tree.root == "base"
    assert tree.link_names == ("base", "a", "b", "tip", "c", "d")
    assert tree.leaves == ("tip", "d")
    assert tree.name == "branching"
    assert repr(tree) == "KinematicTree(name='branching', links=6, dof=3)"


def test_joint_order_is_the_non_mimic_joints_in_link_order(tree: KinematicTree) -> None:
    assert tree.joint_names == ("a", "b", "cj")
    assert tree.dof == 3
    assert tree.link("c").joint_name == "cj"
    assert tree.link("d").joint_name == "d"
    assert tree.link("tip").joint_name is None
    np.testing.assert_array_equal(tree.limits.lower, [-1.0, 0.0, -np.inf])
    np.testing.assert_array_equal(tree.limits.upper, [1.0, 0.3, np.inf])


def test_axes_are_normalised() -> None:
    motor = JointMotor("prismatic", (0.0, 3.0, 4.0))
    assert motor.axis == pytest.approx((0.0, 0.6, 0.8), abs=TOL)


def test_tree_is_immutable(tree: KinematicTree) -> None:
    chain = tree.chain("tip")
    with pytest.raises(ValueError, match="read-only"):
        chain.packed[0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        tree.limits.upper[0] = 9.0
    assert isinstance(tree.links, tuple)
    with pytest.raises(AttributeError):
        tree.links[0].name = "x"  # type: ignore[misc]


def test_chains_mark_the_joints_that_move_the_link(tree: KinematicTree) -> None:
    np.testing.assert_array_equal(tree.chain("tip").moving, [True, True, False])
    np.testing.assert_array_equal(tree.chain("d").moving, [True, False, True])  # d mimics a
    np.testing.assert_array_equal(tree.chain("base").moving, [False, False, False])


def test_unknown_names_are_errors(tree: KinematicTree) -> None:
    with pytest.raises(UnknownNameError, match="unknown link 'nope'"):
        tree.link("nope")
    with pytest.raises(UnknownNameError, match="unknown link 'nope'"):
        tree.fk(np.zeros(3), "nope")
    with pytest.raises(UnknownNameError, match="unknown link 'nope'"):
        tree.chain("nope")
    with pytest.raises(UnknownNameError, match="unknown joint 'd'"):
        tree.q_from_mapping({"d": 1.0})  # a mimic joint is not part of q


def test_default_link_needs_a_serial_chain(tree: KinematicTree) -> None:
    with pytest.raises(KinematicsError, match=r"the tree branches \(leaves \['tip', 'd'\]\)"):
        tree.default_link()
    serial = KinematicTree([Link("base", None), Link("a", "base", revolute())])
    assert serial.default_link() == "a"
    assert serial.fk([0.5]).is_close(serial.fk([0.5], "a"), position_tol=TOL, rotation_tol=TOL)


def test_joint_vectors_are_validated(tree: KinematicTree) -> None:
    with pytest.raises(KinematicsError, match=r"shape \(dof,\) with dof=3, got \(2,\)"):
        tree.fk([0.0, 0.0], "tip")
    with pytest.raises(KinematicsError, match=r"shape \(N, dof\) with dof=3, got \(3,\)"):
        tree.fk_batch([0.0, 0.0, 0.0], "tip")
    with pytest.raises(KinematicsError, match="joint vector must be finite"):
        tree.fk([0.0, math.nan, 0.0], "tip")
    with pytest.raises(KinematicsError, match="joint vector must be finite"):
        tree.jacobian([math.inf, 0.0, 0.0], "tip")
    with pytest.raises(KinematicsError, match="joint vector must be finite"):
        tree.fk_all([0.0, 0.0, math.nan])
    with pytest.raises(KinematicsError, match="joint vector must be finite"):
        tree.fk_batch([[0.0, 0.0, 0.0], [0.0, math.nan, 0.0]], "tip")


def test_q_from_mapping(tree: KinematicTree) -> None:
    np.testing.assert_array_equal(tree.q_from_mapping({"cj": 0.5}), [0.0, 0.0, 0.5])
    np.testing.assert_array_equal(
        tree.q_from_mapping({"b": 0.1}, base=[1.0, 2.0, 3.0]), [1.0, 0.1, 3.0]
    )


def test_fk_of_a_hand_computed_configuration(tree: KinematicTree) -> None:
    # a: 0.2 up then rotate 90° about z; b: slide 0.3 along a's x (now the root's y); tip: +0.1 z.
    pose = tree.fk([math.pi / 2, 0.3, 0.0], "tip")
    np.testing.assert_allclose(pose.translation, [0.0, 0.3, 0.3], atol=TOL, rtol=0)
    np.testing.assert_allclose(
        pose.rotation_matrix, [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=TOL, rtol=0
    )
    # d mimics a: value = -2 * 0.25 + 0.5 = 0, so d has c's pose (c itself turned about y).
    q = [0.25, 0.0, 0.7]
    assert tree.fk(q, "d").is_close(tree.fk(q, "c"), position_tol=TOL, rotation_tol=1e-9)
    expected_c = Pose.from_axis_angle([0.0, 0.0, 0.0], [0.0, 1.0, 0.0], 0.7)
    assert tree.fk(q, "c").is_close(expected_c, position_tol=TOL, rotation_tol=1e-9)


def test_root_motor_is_applied() -> None:
    offset = Pose.from_axis_angle([1.0, 2.0, 3.0], [0.0, 0.0, 1.0], 0.5)
    tree = KinematicTree([Link("base", None, ConstantMotor(offset)), Link("a", "base", revolute())])
    assert tree.fk([0.0], "base").is_close(offset, position_tol=TOL, rotation_tol=1e-9)
    assert tree.fk([0.0], "a").is_close(offset, position_tol=TOL, rotation_tol=1e-9)


def test_with_limits_returns_a_new_tree(tree: KinematicTree) -> None:
    tighter = tree.with_limits({"cj": JointLimit(-0.5, 0.5, 1.0)})
    assert tighter.limits["cj"] == JointLimit(-0.5, 0.5, 1.0)
    assert tree.limits["cj"] == JointLimit()
    assert tighter.joint_names == tree.joint_names
    assert tighter.name == tree.name
    q = [0.3, 0.1, 0.2]
    assert tighter.fk(q, "d").is_close(tree.fk(q, "d"), position_tol=TOL, rotation_tol=TOL)
    with pytest.raises(UnknownNameError, match=r"unknown joints \['zz'\]"):
        tree.with_limits({"zz": JointLimit()})


@pytest.mark.parametrize(
    ("links", "match"),
    [
        ([Link("base", None), Link("a", "base"), Link("a", "base")], "link 'a': duplicate name"),
        ([Link("base", None), Link("a", "ghost")], "link 'a': key 'parent': unknown link 'ghost'"),
        (
            [Link("base", None), Link("a", "b"), Link("b", "a")],
            r"links \['a', 'b'\]: not connected to the root \(their parents form a cycle\)",
        ),
        ([Link("base", None), Link("a", "a")], r"links \['a'\]: not connected to the root"),
        ([Link("base", None), Link("other", None)], r"exactly one root.*\['base', 'other'\]"),
        ([Link("a", "b"), Link("b", "a")], r"exactly one root link .*got \[\]"),
        ([], r"exactly one root link .*got \[\]"),
        (
            [
                Link("base", None),
                Link("a", "base", revolute(joint_name="j")),
                Link("b", "a", revolute(joint_name="j")),
            ],
            "link 'b': duplicate joint name 'j'",
        ),
        (
            [Link("base", None), Link("a", "base", revolute(mimic=Mimic("ghost")))],
            "link 'a': key 'mimic': 'ghost' is not an independent joint",
        ),
        (
            [
                Link("base", None),
                Link("a", "base", revolute()),
                Link("b", "a", revolute(mimic=Mimic("a"))),
                Link("c", "b", revolute(mimic=Mimic("b"))),
            ],
            "link 'c': key 'mimic': 'b' is not an independent joint",
        ),
    ],
)
def test_invalid_trees_are_model_errors(links: list[Link], match: str) -> None:
    with pytest.raises(ModelError, match=match):
        KinematicTree(links)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Link("", None), "link name '' must be a non-empty string"),
        (lambda: Link("a", ""), "link 'a': parent '' must be a link name"),
        (lambda: revolute((0.0, 0.0, 0.0)), r"axis \[0.0, 0.0, 0.0\] must be non-zero"),
        (lambda: revolute((0.0, math.nan, 1.0)), "must be 3 finite numbers"),
        (lambda: JointMotor("helical", (0.0, 0.0, 1.0)), "'helical' must be 'revolute' or"),  # type: ignore[arg-type]
        (lambda: Mimic("a", math.inf), "mimic of 'a': multiplier and offset must be finite"),
    ],
)
def test_invalid_parts_are_model_errors(build: object, match: str) -> None:
    with pytest.raises(ModelError, match=match):
        build()  # type: ignore[operator]
