"""URDF loading: the Panda and UR5 models, every supported element, and every error path."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from kinematics import JointLimit, JointMotor, KinematicTree, ModelError, Pose, load_tree
from kinematics.models.urdf import tree_from_urdf

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
TOL = 1e-12


def robot(body: str, name: str = "r") -> str:
    return f'<?xml version="1.0"?>\n<robot name="{name}">\n{body}\n</robot>\n'


def links(*names: str) -> str:
    return "\n".join(f'<link name="{n}"/>' for n in names)


def joint(name: str, kind: str, parent: str, child: str, inner: str = "") -> str:
    return (
        f'<joint name="{name}" type="{kind}"><parent link="{parent}"/>'
        f'<child link="{child}"/>{inner}</joint>'
    )


LIMIT = '<limit lower="-1" upper="1" effort="10" velocity="2"/>'


def motor(tree: KinematicTree, link: str) -> JointMotor:
    m = tree.link(link).motor
    assert isinstance(m, JointMotor)
    return m


# -- the robots -----------------------------------------------------------------------------------


def test_panda_loads_as_one_tree_with_the_hand(panda: KinematicTree) -> None:
    assert panda.name == "panda"
    assert panda.root == "panda_link0"
    assert len(panda.links) == 13
    assert panda.dof == 8
    assert panda.joint_names == (
        "panda_joint1",
        "panda_joint2",
        "panda_joint3",
        "panda_joint4",
        "panda_joint5",
        "panda_joint6",
        "panda_joint7",
        "panda_finger_joint1",
    )
    assert panda.leaves == ("panda_hand_tcp", "panda_leftfinger", "panda_rightfinger")
    assert panda.link("panda_link1").joint_name == "panda_joint1"
    assert panda.link("panda_hand").parent == "panda_link8"


def test_panda_limits_and_mimic(panda: KinematicTree) -> None:
    assert panda.limits["panda_joint4"] == JointLimit(-3.0718, -0.0698, 2.175)
    assert panda.limits["panda_joint6"] == JointLimit(-0.0175, 3.7525, 2.61)
    assert panda.limits["panda_finger_joint1"] == JointLimit(0.0, 0.04, 0.2)
    right = motor(panda, "panda_rightfinger")
    assert right.kind == "prismatic"
    assert right.joint_name == "panda_finger_joint2"
    assert right.axis == (0.0, -1.0, 0.0)
    assert right.mimic is not None
    assert (right.mimic.joint, right.mimic.multiplier, right.mimic.offset) == (
        "panda_finger_joint1",
        1.0,
        0.0,
    )
    joint2 = motor(panda, "panda_link2")
    expected = Pose.from_axis_angle([0, 0, 0], [1, 0, 0], -math.pi / 2)
    assert joint2.origin.is_close(expected, position_tol=0.0, rotation_tol=TOL)


def test_ur5_root_is_world_and_transmissions_are_not_joints(ur5: KinematicTree) -> None:
    assert ur5.name == "ur5"
    assert ur5.root == "world"
    assert len(ur5.links) == 11
    assert ur5.joint_names == (
        "shoulder_pan_joint",
        "shoulder_lift_joint",
        "elbow_joint",
        "wrist_1_joint",
        "wrist_2_joint",
        "wrist_3_joint",
    )
    assert ur5.link("base_link").parent == "world"
    assert ur5.limits["elbow_joint"] == JointLimit(-3.14159265359, 3.14159265359, 3.15)


# -- elements ---------------------------------------------------------------------------------


def test_defaults_continuous_and_prismatic_joints() -> None:
    tree = tree_from_urdf(
        robot(
            links("base", "a", "b", "c", "d")
            + joint("spin", "continuous", "base", "a")  # no axis, no origin, no limit
            + joint(
                "slide",
                "prismatic",
                "a",
                "b",
                '<origin xyz="0 0 0.5"/><axis xyz="0 0 3"/>'
                '<limit effort="1" velocity="0.1" upper="0.2"/>',
            )
            + joint("wheel", "continuous", "b", "c", '<limit effort="1" velocity="4"/>')
            + joint("tip", "fixed", "c", "d", '<origin rpy="0 0 1.5707963267948966"/>')
        )
    )
    assert tree.joint_names == ("spin", "slide", "wheel")
    spin = motor(tree, "a")
    assert (spin.kind, spin.axis) == ("revolute", (1.0, 0.0, 0.0))
    assert spin.origin.is_close(Pose(), position_tol=0.0, rotation_tol=0.0)
    assert tree.limits["spin"] == JointLimit()
    assert tree.limits["spin"].is_continuous
    slide = motor(tree, "b")
    assert (slide.kind, slide.axis) == ("prismatic", (0.0, 0.0, 1.0))
    assert tree.limits["slide"] == JointLimit(0.0, 0.2, 0.1)  # lower defaults to 0
    assert tree.limits["wheel"] == JointLimit(velocity=4.0)
    pose = tree.fk([0.0, 0.2, 0.0], "d")
    np.testing.assert_allclose(pose.translation, [0.0, 0.0, 0.7], atol=TOL, rtol=0)
    expected = Pose.from_axis_angle([0, 0, 0.7], [0, 0, 1], math.pi / 2)
    assert pose.is_close(expected, position_tol=TOL, rotation_tol=1e-9)


def test_siblings_follow_the_joint_order_and_nested_joints_are_ignored() -> None:
    tree = tree_from_urdf(
        robot(
            links("c2", "c1", "base")
            + joint("j2", "revolute", "base", "c2", LIMIT)
            + joint("j1", "revolute", "base", "c1", LIMIT)
            + '<transmission name="t"><joint name="j1"><hardwareInterface>x</hardwareInterface>'
            '</joint></transmission><gazebo reference="c1"><link name="ghost"/></gazebo>'
        )
    )
    assert tree.link_names == ("base", "c2", "c1")
    assert tree.joint_names == ("j2", "j1")


def test_mimic_multiplier_and_offset() -> None:
    tree = tree_from_urdf(
        robot(
            links("base", "a", "b")
            + joint("lead", "revolute", "base", "a", LIMIT)
            + joint(
                "follow",
                "revolute",
                "base",
                "b",
                LIMIT + '<mimic joint="lead" multiplier="-2" offset="0.25"/>',
            )
        )
    )
    assert tree.dof == 1
    q = [0.3]
    expected = Pose.from_axis_angle([0, 0, 0], [1, 0, 0], -2 * 0.3 + 0.25)
    assert tree.fk(q, "b").is_close(expected, position_tol=TOL, rotation_tol=1e-9)


# -- errors ---------------------------------------------------------------------------------------

BASE = links("base", "a")
ERRORS = [
    (
        "floating",
        robot(BASE + joint("free", "floating", "base", "a")),
        "joint 'free': type 'floating' is not supported (supported: fixed, revolute, continuous, "
        "prismatic)",
    ),
    (
        "planar",
        robot(BASE + joint("flat", "planar", "base", "a", LIMIT)),
        "joint 'flat': type 'planar' is not supported (supported: fixed, revolute, continuous, "
        "prismatic)",
    ),
    (
        "unknown type",
        robot(BASE + joint("j", "ball", "base", "a")),
        "joint 'j': unknown type 'ball' (supported: fixed, revolute, continuous, prismatic)",
    ),
    (
        "revolute without limit",
        robot(BASE + joint("j", "revolute", "base", "a")),
        "joint 'j': a revolute joint needs a <limit> element (URDF requires one)",
    ),
    (
        "prismatic without limit",
        robot(BASE + joint("j", "prismatic", "base", "a")),
        "joint 'j': a prismatic joint needs a <limit> element (URDF requires one)",
    ),
    (
        "limit without velocity",
        robot(
            BASE + joint("j", "revolute", "base", "a", '<limit lower="-1" upper="1" effort="1"/>')
        ),
        "joint 'j': <limit> needs the attribute 'velocity'",
    ),
    (
        "zero velocity",
        robot(BASE + joint("j", "revolute", "base", "a", '<limit effort="1" velocity="0"/>')),
        "joint 'j': <limit velocity>: 0.0 must be > 0",
    ),
    (
        "lower above upper",
        robot(
            BASE + joint("j", "revolute", "base", "a", '<limit lower="1" upper="-1" velocity="1"/>')
        ),
        "joint 'j': <limit>: lower 1.0 must be <= upper -1.0",
    ),
    (
        "bad limit number",
        robot(BASE + joint("j", "revolute", "base", "a", '<limit lower="abc" velocity="1"/>')),
        "joint 'j': <limit lower>: 'abc' must be a finite number",
    ),
    (
        "NaN limit",
        robot(BASE + joint("j", "revolute", "base", "a", '<limit upper="nan" velocity="1"/>')),
        "joint 'j': <limit upper>: 'nan' must be a finite number",
    ),
    (
        "NaN origin",
        robot(BASE + joint("j", "fixed", "base", "a", '<origin xyz="0 nan 0"/>')),
        "joint 'j': <origin xyz>: '0 nan 0' must be 3 finite numbers",
    ),
    (
        "short rpy",
        robot(BASE + joint("j", "fixed", "base", "a", '<origin rpy="0 1"/>')),
        "joint 'j': <origin rpy>: '0 1' must be 3 finite numbers",
    ),
    (
        "zero axis",
        robot(BASE + joint("j", "revolute", "base", "a", LIMIT + '<axis xyz="0 0 0"/>')),
        "joint 'j': <axis xyz>: '0 0 0' must be non-zero",
    ),
    (
        "joint without name",
        robot(BASE + '<joint type="fixed"><parent link="base"/><child link="a"/></joint>'),
        "<joint> #1: <joint> needs a non-empty attribute 'name'",
    ),
    (
        "joint without type",
        robot(BASE + '<joint name="j"><parent link="base"/><child link="a"/></joint>'),
        "joint 'j': <joint> needs a non-empty attribute 'type'",
    ),
    (
        "joint without parent",
        robot(BASE + '<joint name="j" type="fixed"><child link="a"/></joint>'),
        "joint 'j': missing <parent link=...>",
    ),
    (
        "child without link",
        robot(BASE + '<joint name="j" type="fixed"><parent link="base"/><child/></joint>'),
        "joint 'j': <child> needs a non-empty attribute 'link'",
    ),
    (
        "unknown child",
        robot(BASE + joint("j", "fixed", "base", "ghost")),
        "joint 'j': <child link>: 'ghost' is not a <link> of the robot",
    ),
    (
        "unknown parent",
        robot(BASE + joint("j", "fixed", "ghost", "a")),
        "joint 'j': <parent link>: 'ghost' is not a <link> of the robot",
    ),
    (
        "two parents",
        robot(
            links("base", "a", "b")
            + joint("j1", "fixed", "base", "a")
            + joint("j2", "fixed", "b", "a")
            + joint("j3", "fixed", "base", "b")
        ),
        "link 'a': the child of both joint 'j1' and joint 'j2'",
    ),
    (
        "several roots",
        robot(links("a", "b", "c") + joint("j", "fixed", "a", "b")),
        "robot 'r': needs exactly one root link (one that is no joint's child), several: "
        "['a', 'c']",
    ),
    (
        "no root",
        robot(links("a", "b") + joint("j1", "fixed", "a", "b") + joint("j2", "fixed", "b", "a")),
        "robot 'r': needs exactly one root link (one that is no joint's child), every link is a "
        "joint's child (a cycle)",
    ),
    (
        "cycle beside the root",
        robot(
            links("base", "b", "c")
            + joint("j1", "fixed", "b", "c")
            + joint("j2", "fixed", "c", "b")
        ),
        "links ['b', 'c']: not connected to the root (their parents form a cycle)",
    ),
    ("no links", robot(""), "robot 'r': has no <link>"),
    (
        "duplicate link",
        robot(links("base", "a", "a") + joint("j", "fixed", "base", "a")),
        "link 'a': duplicate <link name>",
    ),
    (
        "duplicate joint",
        robot(
            links("base", "a", "b")
            + joint("j", "fixed", "base", "a")
            + joint("j", "fixed", "base", "b")
        ),
        "joint 'j': duplicate <joint name>",
    ),
    ("link without name", robot("<link/>"), "<link> #1: <link> needs a non-empty attribute 'name'"),
    (
        "mimic of an unknown joint",
        robot(BASE + joint("j", "revolute", "base", "a", LIMIT + '<mimic joint="ghost"/>')),
        "joint 'j': <mimic joint>: 'ghost' is not a joint of the robot",
    ),
    (
        "mimic of a fixed joint",
        robot(
            links("base", "a", "b")
            + joint("f", "fixed", "base", "a")
            + joint("j", "revolute", "a", "b", LIMIT + '<mimic joint="f"/>')
        ),
        "joint 'j': <mimic joint>: 'f' must be a movable joint that is not itself a mimic joint",
    ),
    (
        "mimic of a mimic",
        robot(
            links("base", "a", "b", "c")
            + joint("j1", "revolute", "base", "a", LIMIT)
            + joint("j2", "revolute", "a", "b", LIMIT + '<mimic joint="j1"/>')
            + joint("j3", "revolute", "b", "c", LIMIT + '<mimic joint="j2"/>')
        ),
        "joint 'j3': <mimic joint>: 'j2' must be a movable joint that is not itself a mimic joint",
    ),
    (
        "mimic without joint",
        robot(BASE + joint("j", "revolute", "base", "a", LIMIT + '<mimic multiplier="2"/>')),
        "joint 'j': <mimic> needs a non-empty attribute 'joint'",
    ),
    (
        "mimic on a fixed joint",
        robot(
            links("base", "a", "b")
            + joint("j1", "revolute", "base", "a", LIMIT)
            + joint("f", "fixed", "a", "b", '<mimic joint="j1"/>')
        ),
        "joint 'f': <mimic> on a fixed joint",
    ),
    (
        "bad mimic multiplier",
        robot(
            links("base", "a", "b")
            + joint("j1", "revolute", "base", "a", LIMIT)
            + joint("j2", "revolute", "a", "b", LIMIT + '<mimic joint="j1" multiplier="x"/>')
        ),
        "joint 'j2': <mimic multiplier>: 'x' must be a finite number",
    ),
    (
        "not a robot",
        '<model name="m"><link name="a"/></model>',
        "the root element is <model>, expected <robot>",
    ),
    (
        "robot without name",
        "<robot><link name='a'/></robot>",
        "robot: <robot> needs a non-empty attribute 'name'",
    ),
    (
        "broken XML",
        '<robot name="r">\n  <link name="a">\n</robot>\n',
        "invalid XML at line 3, column 3: mismatched tag",
    ),
    ("empty file", "", "invalid XML at line 1, column 1: no element found"),
]


@pytest.mark.parametrize(("text", "message"), [pytest.param(t, m, id=i) for i, t, m in ERRORS])
def test_model_errors_name_the_joint_or_link_and_the_attribute(text: str, message: str) -> None:
    with pytest.raises(ModelError) as excinfo:
        tree_from_urdf(text)
    assert str(excinfo.value) == message


def test_file_errors_are_prefixed_with_the_path(tmp_path: Path) -> None:
    path = tmp_path / "arm.urdf"
    path.write_text(robot(BASE + joint("free", "floating", "base", "a")))
    with pytest.raises(ModelError) as excinfo:
        load_tree(path)
    assert str(excinfo.value).startswith(f"{path}: joint 'free': type 'floating' is not supported")


def test_utf8_declared_encoding_loads(tmp_path: Path) -> None:
    path = tmp_path / "arm.urdf"
    path.write_bytes(
        ('<?xml version="1.0" encoding="utf-8"?>' + robot(links("bäse")).split("?>", 1)[1]).encode()
    )
    assert load_tree(path).root == "bäse"
