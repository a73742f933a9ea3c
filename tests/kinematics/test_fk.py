"""Forward kinematics against an independent computation with 4×4 homogeneous matrices, written
here straight from the model files (URDF XML and .kinematic.json), at random configurations."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kinematics import KinematicTree, Pose, load_tree

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
DATA = Path(__file__).resolve().parent / "data"
POSITION_TOL = 1e-9  # m
ROTATION_TOL = 1e-9  # rad
CONFIGURATIONS = 150

Matrix = Any  # (4, 4) float arrays


# -- the independent reference ------------------------------------------------------------------


def translation(xyz: list[float]) -> Matrix:
    m = np.eye(4)
    m[:3, 3] = xyz
    return m


def rodrigues(axis: list[float], angle: float) -> Matrix:
    """4×4 rotation by `angle` about `axis`: R = I + sin θ K + (1 - cos θ) K²."""
    u = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    K = np.array([[0.0, -u[2], u[1]], [u[2], 0.0, -u[0]], [-u[1], u[0], 0.0]])
    m = np.eye(4)
    m[:3, :3] = np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * K @ K
    return m


def rpy_matrix(roll: float, pitch: float, yaw: float) -> Matrix:
    """URDF fixed-axis rpy: Rz(yaw) Ry(pitch) Rx(roll)."""
    return rodrigues([0, 0, 1], yaw) @ rodrigues([0, 1, 0], pitch) @ rodrigues([1, 0, 0], roll)


@dataclass
class RefJoint:
    """How a child link hangs from its parent: ``parent_from_child = origin @ motion(value)``."""

    parent: str | None
    kind: str = "fixed"  # fixed, revolute, prismatic
    origin: Matrix = field(default_factory=lambda: np.eye(4))
    axis: list[float] = field(default_factory=lambda: [1.0, 0.0, 0.0])
    name: str = ""
    mimic: tuple[str, float, float] | None = None


def numbers(elem: ET.Element | None, key: str, default: str) -> list[float]:
    text = default if elem is None else elem.get(key, default)
    return [float(v) for v in text.split()]


def parse_urdf(path: Path) -> dict[str, RefJoint]:
    robot = ET.parse(path).getroot()
    joints: dict[str, RefJoint] = {}
    for joint in robot.findall("joint"):
        origin = joint.find("origin")
        mimic = joint.find("mimic")
        kind = joint.get("type", "")
        joints[joint.find("child").get("link", "")] = RefJoint(  # type: ignore[union-attr]
            parent=joint.find("parent").get("link"),  # type: ignore[union-attr]
            kind="revolute" if kind == "continuous" else kind,
            origin=translation(numbers(origin, "xyz", "0 0 0"))
            @ rpy_matrix(*numbers(origin, "rpy", "0 0 0")),
            axis=numbers(joint.find("axis"), "xyz", "1 0 0"),
            name=joint.get("name", ""),
            mimic=None
            if mimic is None
            else (
                mimic.get("joint", ""),
                float(mimic.get("multiplier", 1)),
                float(mimic.get("offset", 0)),
            ),
        )
    return joints


def json_pose(pose: dict[str, Any]) -> Matrix:
    rotation = pose["rotation"]
    angle = rotation.get("angle_radians", math.radians(rotation.get("angle_degrees", 0.0)))
    return translation(pose["translation"]) @ rodrigues(rotation["axis"], angle)


def parse_kinematic_json(path: Path) -> dict[str, RefJoint]:
    joints: dict[str, RefJoint] = {}
    for link in json.loads(path.read_text())["links"]:
        motor, props = link["motor"], link["motor"]["properties"]
        mimic = props.get("mimic")
        joints[link["name"]] = RefJoint(
            parent=link.get("parent"),
            kind="fixed" if motor["type"] == "constant" else motor["type"],
            origin=json_pose(props["pose"]) if "pose" in props else np.eye(4),
            axis=props.get("axis", [1, 0, 0]),
            name=props.get("joint", link["name"]),
            mimic=None
            if mimic is None
            else (mimic["joint"], mimic.get("multiplier", 1.0), mimic.get("offset", 0.0)),
        )
    return joints


def reference_fk(joints: dict[str, RefJoint], values: dict[str, float], link: str) -> Matrix:
    """root_from_link by walking up to the root with 4×4 matrices."""
    m = np.eye(4)
    while link in joints:
        joint = joints[link]
        if joint.kind == "fixed":
            motion = np.eye(4)
        else:
            if joint.mimic is None:
                value = values[joint.name]
            else:
                value = joint.mimic[1] * values[joint.mimic[0]] + joint.mimic[2]
            if joint.kind == "revolute":
                motion = rodrigues(joint.axis, value)
            else:
                motion = translation(
                    list(value * np.asarray(joint.axis) / np.linalg.norm(joint.axis))
                )
        m = joint.origin @ motion @ m
        if joint.parent is None:
            break
        link = joint.parent
    return m


def rotation_angle(a: Matrix, b: Matrix) -> float:
    """The angle of a⁻¹ b (rad), accurate for small angles."""
    d = a[:3, :3].T @ b[:3, :3]
    s = 0.5 * np.linalg.norm([d[2, 1] - d[1, 2], d[0, 2] - d[2, 0], d[1, 0] - d[0, 1]])
    return math.atan2(s, 0.5 * (np.trace(d) - 1.0))


def assert_pose_matches(pose: Pose, expected: Matrix, what: str) -> None:
    position_error = float(np.linalg.norm(pose.translation - expected[:3, 3]))
    angle = rotation_angle(expected, pose.matrix)
    assert position_error <= POSITION_TOL, f"{what}: position off by {position_error} m"
    assert angle <= ROTATION_TOL, f"{what}: rotation off by {angle} rad"


def random_configurations(tree: KinematicTree, count: int, seed: int) -> np.ndarray:
    """Uniform within the limits (continuous joints in [-π, π]), plus both limit corners."""
    lower = np.where(np.isfinite(tree.limits.lower), tree.limits.lower, -math.pi)
    upper = np.where(np.isfinite(tree.limits.upper), tree.limits.upper, math.pi)
    qs = np.random.default_rng(seed).uniform(lower, upper, size=(count, tree.dof))
    return np.vstack((qs, lower, upper))


# -- the models ---------------------------------------------------------------------------------

PANDA_JOINTS = (*(f"panda_joint{i}" for i in range(1, 8)), "panda_finger_joint1")
UR5_JOINTS = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)
SLIDER_JOINTS = ("turntable", "slide", "elbow")

CASES = [
    pytest.param(
        ROBOTS / "panda.urdf",
        parse_urdf,
        PANDA_JOINTS,
        ["panda_link8", "panda_hand_tcp", "panda_leftfinger", "panda_rightfinger", "panda_link4"],
        id="panda",
    ),
    pytest.param(
        ROBOTS / "ur5.urdf", parse_urdf, UR5_JOINTS, ["tool0", "ee_link", "base"], id="ur5"
    ),
    pytest.param(
        DATA / "slider_mimic.kinematic.json",
        parse_kinematic_json,
        SLIDER_JOINTS,
        ["tip", "wrist", "carriage"],
        id="slider-mimic",
    ),
]


@pytest.mark.parametrize(("path", "parse", "joint_names", "links"), CASES)
def test_fk_matches_homogeneous_matrices(
    path: Path,
    parse: Callable[[Path], dict[str, RefJoint]],
    joint_names: tuple[str, ...],
    links: list[str],
) -> None:
    tree = load_tree(path)
    assert tree.joint_names == joint_names
    reference = parse(path)
    for i, q in enumerate(random_configurations(tree, CONFIGURATIONS, seed=7)):
        values = dict(zip(joint_names, q, strict=True))
        for link in links:
            assert_pose_matches(
                tree.fk(q, link),
                reference_fk(reference, values, link),
                f"{link} at q #{i} = {q.tolist()}",
            )


@pytest.mark.parametrize(("path", "parse", "joint_names", "links"), CASES)
def test_fk_all_batch_and_dual_quaternion_agree_with_fk(
    path: Path,
    parse: Callable[[Path], dict[str, RefJoint]],
    joint_names: tuple[str, ...],
    links: list[str],
) -> None:
    tree = load_tree(path)
    qs = random_configurations(tree, 20, seed=11)
    for link in links:
        translations, quaternions = tree.fk_batch(qs, link)
        dual_quaternions = tree.fk_dual_quaternion(qs, link)
        assert translations.shape == (len(qs), 3)
        assert quaternions.shape == (len(qs), 4)
        assert dual_quaternions.shape == (len(qs), 8)
        for i, q in enumerate(qs):
            pose = tree.fk(q, link)
            np.testing.assert_allclose(translations[i], pose.translation, atol=1e-12, rtol=0)
            np.testing.assert_allclose(quaternions[i], pose.quaternion, atol=1e-12, rtol=0)
            single = tree.fk_dual_quaternion(q, link)
            assert single.shape == (8,)
            np.testing.assert_allclose(single, dual_quaternions[i], atol=1e-12, rtol=0)
            assert Pose.from_dual_quaternion(single).is_close(
                pose, position_tol=1e-12, rotation_tol=1e-9
            )
    for q in qs[:5]:
        poses = tree.fk_all(q)
        assert tuple(poses) == tree.link_names
        for link, pose in poses.items():
            assert pose.is_close(tree.fk(q, link), position_tol=1e-12, rotation_tol=1e-9)


def test_panda_at_zero_matches_the_published_flange_pose() -> None:
    # With q = 0 the Panda's flange (link8) sits at x = 0.088, z = 0.333 + 0.316 + 0.384 - 0.107,
    # pointing down (a half turn about x).
    tree = load_tree(ROBOTS / "panda.urdf")
    pose = tree.fk(np.zeros(tree.dof), "panda_link8")
    expected = translation([0.088, 0.0, 0.926]) @ rodrigues([1, 0, 0], math.pi)
    assert_pose_matches(pose, expected, "panda_link8 at q = 0")


def test_fingers_mirror_each_other() -> None:
    tree = load_tree(ROBOTS / "panda.urdf")
    q = np.zeros(tree.dof)
    q[-1] = 0.03
    hand = tree.fk(q, "panda_hand")
    left = hand.inverse() @ tree.fk(q, "panda_leftfinger")
    right = hand.inverse() @ tree.fk(q, "panda_rightfinger")
    np.testing.assert_allclose(left.translation, [0.0, 0.03, 0.0584], atol=1e-12, rtol=0)
    np.testing.assert_allclose(right.translation, [0.0, -0.03, 0.0584], atol=1e-12, rtol=0)
