"""The leader's mappings (`armd.tools.leader`): the ``leader:`` section's checks, each naming the
option
and its line, and the stream messages each mapping makes of a leader reading, checked against
the follower's kinematics."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from armd.cli.main import main
from armd.config.load import load_config
from armd.errors import ConfigError
from armd.planning.planner import KEYPOINTS_TOLERANCE
from armd.tools.leader import LeaderSetup, StreamMapper, leader_setup
from kinematics import KinematicTree
from tests.system.helpers import ROOT, write_leader_config

UR5 = ROOT / "config" / "robots" / "ur5.urdf"
HOME = np.array([0.0, -math.pi / 2, math.pi / 2, -math.pi / 2, -math.pi / 2, 0.0])
UR5_JOINTS = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)


def setup_with(tmp_path: Path, leader: dict[str, Any] | None, follower: str = "ur5-sim") -> Any:
    """The leader setup of config/sim_leader.yaml with its leader: section replaced."""
    config, _ = write_leader_config(tmp_path, 1883, {"leader": None})
    if leader is not None:
        document = yaml.safe_load(config.read_text(encoding="utf-8"))
        document["leader"] = leader
        config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return leader_setup(load_config(config), follower)


def problems(tmp_path: Path, leader: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as error:
        setup_with(tmp_path, leader)
    return str(error.value)


# -- the leader: section ---------------------------------------------------------------------


def test_the_shipped_leader_configs_are_valid() -> None:
    sim = leader_setup(load_config(ROOT / "config" / "sim_leader.yaml"), "ur5-sim")
    assert [link.follower for link in sim.joints] == list(UR5_JOINTS)
    assert (sim.rate_hz, sim.mapping) == (100.0, "joint")
    so101 = leader_setup(load_config(ROOT / "config" / "so101_leader.yaml"), "so101")
    assert [d.type_name for d in so101.arm.drivers.values()] == ["feetech"]
    assert [link.follower for link in so101.joints][-1] == "gripper"  # the gripper follows
    assert so101.follower_tree is not None
    assert so101.joints[-1].upper == so101.follower_tree.limits["gripper"].upper


def test_a_config_without_a_leader_section_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"leader.yaml: no leader: section"):
        setup_with(tmp_path, None)


def test_every_problem_of_the_leader_section_is_reported_at_once(tmp_path: Path) -> None:
    text = problems(
        tmp_path,
        {
            "mapping": "cartesian",
            "follower_model": str(UR5),
            "joints": {
                "elbow": {},  # not a leader joint
                "wrist_1_joint": {"follower": "gripper"},  # not a follower joint
                "wrist_2_joint": {"follower": "wrist_3_joint"},
                "wrist_3_joint": {},  # wrist_3_joint driven twice
            },
            "cartesian": {"link": "hand", "follower_link": "flange"},
        },
    )
    lines = text.splitlines()
    assert len(lines) == 5, text
    assert (
        "leader.joints.elbow: not a driven joint of the leader; joints: shoulder_pan_joint" in text
    )
    assert "leader.joints.wrist_1_joint: unknown joint 'gripper' of" in text
    assert "follower joint 'wrist_3_joint' is driven by 'wrist_2_joint' too" in text
    assert "leader.cartesian.link: unknown link 'hand'" in text
    assert "leader.cartesian.follower_link: unknown link 'flange'" in text
    assert all(line.startswith(f"{tmp_path / 'leader.yaml'}:") for line in lines)


@pytest.mark.parametrize(
    ("leader", "expected"),
    [
        ({"mapping": "joint"}, "mapping 'joint' needs joints"),
        ({"mapping": "shape", "shape": {"links": {"a": "b", "c": "d"}}}, "needs shape.links and"),
        ({"mapping": "teleport", "joints": {"elbow_joint": {}}}, "leader.mapping: 'teleport'"),
        ({"rate_hz": 2000.0, "joints": {"elbow_joint": {}}}, "leader.rate_hz: 2000"),
        ({"joints": {"elbow_joint": {"scale": 0.0}}}, "leader.joints.elbow_joint.scale: 0"),
        ({"joints": {"elbow_joint": {"sign": 2}}}, "leader.joints.elbow_joint.sign"),
        ({"cartesian": {"offset": [0.0, 1.0]}, "mapping": "cartesian"}, "cartesian.offset"),
        ({"joints": {"elbow_joint": {"sclae": 2.0}}}, "did you mean 'scale'?"),
        ({"follower_model": "missing.urdf", "joints": {"elbow_joint": {}}}, "missing.urdf"),
    ],
)
def test_invalid_options_name_the_option(
    tmp_path: Path, leader: dict[str, Any], expected: str
) -> None:
    assert expected in problems(tmp_path, leader)


def test_shape_links_must_exist_and_lie_on_one_follower_chain(tmp_path: Path) -> None:
    text = problems(
        tmp_path,
        {
            "mapping": "shape",
            "follower_model": str(UR5),
            "shape": {"links": {"upper_arm_link": "forearm_link", "tool0": "upper_arm_link"}},
        },
    )
    assert "leader.shape.links: follower links: links[1]: 'upper_arm_link' is not a" in text
    text = problems(
        tmp_path,
        {
            "mapping": "shape",
            "follower_model": str(UR5),
            "shape": {"links": {"elbow": "forearm_link", "tool0": "wrist"}},
        },
    )
    assert "leader unknown link 'elbow'" in text
    assert "follower unknown link 'wrist'" in text


# -- the messages -----------------------------------------------------------------------------


def test_joint_mapping_scales_signs_offsets_and_clamps_to_the_follower(tmp_path: Path) -> None:
    setup = setup_with(
        tmp_path,
        {
            "follower_model": str(UR5),
            "joints": {
                "shoulder_pan_joint": {"scale": 2.0, "sign": -1, "offset": 0.5},
                "elbow_joint": {"follower": "wrist_3_joint"},
                "wrist_1_joint": {"scale": 10.0},  # beyond the follower's limit: clamped
            },
        },
    )
    q = HOME + np.array([0.2, 0.0, 0.1, -0.3, 0.0, 0.0])
    (body,) = StreamMapper(setup).bodies(q, 0.0)
    assert body["type"] == "joints"
    positions = body["positions"]
    assert positions.keys() == {"shoulder_pan_joint", "wrist_3_joint", "wrist_1_joint"}
    assert positions["shoulder_pan_joint"] == pytest.approx(0.5 - 2.0 * 0.2)
    assert positions["wrist_3_joint"] == pytest.approx(q[2])
    lower = setup.follower_tree.limits["wrist_1_joint"].lower  # not -18.7 rad
    assert positions["wrist_1_joint"] == lower == pytest.approx(-2 * math.pi)


def test_cartesian_mapping_streams_the_scaled_tool_pose_and_the_gripper(tmp_path: Path) -> None:
    setup: LeaderSetup = setup_with(
        tmp_path,
        {
            "mapping": "cartesian",
            "joints": {"wrist_3_joint": {"follower": "gripper", "scale": 0.5}},
            "cartesian": {"scale": 0.5, "offset": [0.1, -0.2, 0.3], "follower_link": "jaw"},
        },
    )
    q = HOME + np.array([0.3, 0.2, -0.4, 0.1, 0.2, 0.6])
    pose, gripper = StreamMapper(setup).bodies(q, 0.0)
    tool = setup.arm.tree.fk(q, "tool0")
    assert (pose["type"], pose["link"]) == ("pose", "jaw")
    assert pose["position"] == pytest.approx(
        (np.array([0.1, -0.2, 0.3]) + 0.5 * tool.translation).tolist()
    )
    assert pose["orientation"] == pytest.approx(tool.quaternion.tolist())
    assert gripper == {
        "type": "joints",
        "positions": {"gripper": pytest.approx(0.3)},
        "velocities": {"gripper": 0.0},  # a first reading: no motion known yet
    }

    no_orientation = setup_with(
        tmp_path, {"mapping": "cartesian", "cartesian": {"orientation": False}}
    )
    (pose,) = StreamMapper(no_orientation).bodies(q, 0.0)
    assert pose.keys() == {"type", "position"}  # the follower's tool_link, position only


def test_shape_mapping_puts_the_follower_in_the_leaders_shape(tmp_path: Path) -> None:
    """The leader's chain directions, mapped onto the follower's model and seeded from the
    previous target, give joints that align the follower's segments with them."""
    links = {"upper_arm_link": "upper_arm_link", "forearm_link": "forearm_link", "tool0": "tool0"}
    setup: LeaderSetup = setup_with(
        tmp_path,
        {
            "mapping": "shape",
            "follower_model": str(UR5),
            "shape": {"links": links},
            "joints": {"wrist_3_joint": {}},
        },
    )
    mapper = StreamMapper(setup)
    assert mapper.needs_seed
    mapper.seed(dict(zip(UR5_JOINTS, HOME.tolist(), strict=True)) | {"unknown_joint": 1.0})
    assert not mapper.needs_seed
    follower: KinematicTree = setup.follower_tree  # type: ignore[assignment]
    for step in range(1, 6):  # a motion, each reading seeded from the previous target
        q = HOME + step * np.array([0.08, 0.05, -0.06, 0.04, 0.0, 0.1])
        (body,) = mapper.bodies(q, step * 0.01)
        positions = body["positions"]
        assert positions["wrist_3_joint"] == pytest.approx(q[5])  # mapped beside the shape
        target = follower.q_from_mapping(positions, HOME)
        for a, b in (("upper_arm_link", "forearm_link"), ("forearm_link", "tool0")):
            ours = follower.fk(target, b).translation - follower.fk(target, a).translation
            theirs = setup.arm.tree.fk(q, b).translation - setup.arm.tree.fk(q, a).translation
            cosine = ours @ theirs / np.linalg.norm(ours) / np.linalg.norm(theirs)
            assert math.acos(min(1.0, cosine)) < KEYPOINTS_TOLERANCE
        assert not follower.limits.check(target)


def test_velocities_are_estimated_from_the_readings_within_the_follower_limits(
    tmp_path: Path,
) -> None:
    setup: LeaderSetup = setup_with(
        tmp_path,
        {
            "follower_model": str(UR5),
            "joints": {
                "shoulder_pan_joint": {"scale": 2.0},
                "elbow_joint": {"scale": 8.0, "offset": -4 * math.pi},
            },
        },
    )
    mapper = StreamMapper(setup)
    period, speed = 0.004, 0.5  # rad/s at the leader: 1 and 4 rad/s at the follower
    bodies = []
    for k in range(100):  # 0.4 s: 20 time constants of the estimate's low-pass
        q = HOME + np.array([speed * k * period, 0.0, speed * k * period, 0.0, 0.0, 0.0])
        (body,) = mapper.bodies(q, 10.0 + k * period)
        bodies.append(body)
    assert bodies[0]["velocities"] == {"shoulder_pan_joint": 0.0, "elbow_joint": 0.0}
    v = bodies[-1]["velocities"]
    assert v["shoulder_pan_joint"] == pytest.approx(1.0, rel=1e-6)
    limit = setup.follower_tree.limits["elbow_joint"].velocity  # the UR5's: 3.15 rad/s
    assert v["elbow_joint"] == limit
    rising = [b["velocities"]["shoulder_pan_joint"] for b in bodies[:10]]
    assert rising == sorted(rising)  # low-passed: no step from 0 to 1 rad/s
    (still,) = mapper.bodies(q, 10.0 + 100 * period)  # the leader stopped: back toward 0
    assert still["velocities"]["shoulder_pan_joint"] < v["shoulder_pan_joint"]

    quiet = setup_with(tmp_path, {"velocities": False, "joints": {"elbow_joint": {}}})
    (body,) = StreamMapper(quiet).bodies(HOME, 0.0)
    assert body.keys() == {"type", "positions"}


def test_armd_check_reports_the_leader_sections_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    problems(
        tmp_path, {"joints": {"elbow_joint": {"follower": "nope"}}, "follower_model": str(UR5)}
    )
    assert main(["check", "--config", str(tmp_path / "leader.yaml")]) == 1
    err = capsys.readouterr().err
    assert "leader.joints.elbow_joint: unknown joint 'nope' of ur5" in err
