"""The pieces of `armd goal` and `armd watch` that need no broker: payloads from the command
line, the distance a goal has left, and the plain view of a state."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest

from armd.cli.client.client_cmd import goal_payload
from armd.cli.client.goal_progress import distance_to_target
from armd.cli.client.watch_view import View, plain_state
from armd.cli.common import UsageError
from armd.cli.main import main
from armd.config.load import ArmSetup, load_config

ROOT = Path(__file__).resolve().parents[3]
LEADER = ROOT / "config" / "chains" / "ur5_leader.json"
JOINTS = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)


@pytest.fixture(scope="module")
def setup() -> ArmSetup:
    return load_config(ROOT / "config" / "sim.yaml", kernels=False)


def state(positions: list[float], **extra: object) -> dict[str, object]:
    return {
        "t": 12.5,
        "mode": "moving",
        "joints": {
            n: {"position": p, "velocity": 0.1} for n, p in zip(JOINTS, positions, strict=True)
        },
        "tcp": {"link": "tool0", "position": [0.4, 0.2, 0.4], "orientation": [0, 0, 1, 0]},
        **extra,
    }


def test_joints_payload_names_the_joint_whose_value_is_wrong(setup: ArmSetup) -> None:
    args = argparse.Namespace(kind="joints", positions=["elbow_joint=1.5", "wrist_1_joint=abc"])
    with pytest.raises(UsageError, match=r"^joints: wrist_1_joint: 'abc' must be a number"):
        goal_payload(args, "g", setup)
    args.positions = ["elbow_joint=nan"]
    with pytest.raises(UsageError, match=r"^joints: elbow_joint: 'nan' must be finite"):
        goal_payload(args, "g", setup)
    args.positions, args.speed = ["elbow_joint=1.5"], 0.5
    assert goal_payload(args, "g", setup) == {
        "id": "g", "type": "joints", "positions": {"elbow_joint": 1.5}, "speed": 0.5,
    }  # fmt: skip


def test_keypoints_payload_from_a_chain_file(setup: ArmSetup, tmp_path: Path) -> None:
    args = argparse.Namespace(kind="keypoints", chain=LEADER, speed=1.0)
    payload = goal_payload(args, "k", setup)
    assert list(payload["points"]) == ["upper_arm_link", "forearm_link", "wrist_2_link", "tool0"]
    args.chain = tmp_path / "missing.json"
    with pytest.raises(UsageError, match=r"^keypoints: .*missing.json"):
        goal_payload(args, "k", setup)


def test_distance_to_a_joints_goal_is_the_largest_joint_distance(setup: ArmSetup) -> None:
    payload = {"type": "joints", "positions": {"elbow_joint": 1.0, "wrist_1_joint": -1.0}}
    left = distance_to_target(payload, state([0, 0, 0.5, -0.8, 0, 0]), setup)
    assert left == "0.5000 rad to go (largest joint)"


def test_distance_to_a_pose_goal_is_the_tcps(setup: ArmSetup) -> None:
    payload = {"type": "pose", "position": [0.4, 0.2, 0.7], "orientation": [0, 0, 1, 0]}
    assert distance_to_target(payload, state([0] * 6), setup) == "0.3000 m to go, 0.000 rad"
    other_link = {**payload, "link": "wrist_3_link"}
    assert distance_to_target(other_link, state([0] * 6), setup) is None
    assert distance_to_target({"type": "stop"}, state([0] * 6), setup) is None


def test_plain_view_shows_joints_against_limits_and_missed_ticks(setup: ArmSetup) -> None:
    view = View(setup, availability="online", state=state([0, 0, math.pi - 0.01, 0, 0, 0]))
    lines = plain_state(view)
    assert lines[0] == "arm ur5-sim  availability online  mode moving"  # never its t
    elbow = next(line for line in lines if "elbow_joint" in line)
    assert "+3.1316 rad in [-3.1416, +3.1416]" in elbow
    assert elbow.endswith("AT LIMIT")
    assert lines[-2].startswith("  tcp tool0  position +0.4000 +0.2000 +0.4000 m")
    assert lines[-1] == "  fault none"
    view.fault = {"code": "stale_feedback", "message": "no reading for 0.3 s", "joint": "elbow"}
    assert plain_state(view)[-1] == ("  fault stale_feedback: no reading for 0.3 s (joint elbow)")
    view.state = state([0] * 6, missed_ticks=3)
    assert plain_state(view)[0].endswith("missed ticks 3")


@pytest.mark.parametrize("timeout", ["0", "-1", "nan"])
def test_goal_timeout_must_be_positive(timeout: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["goal", "--config", str(ROOT / "config" / "sim.yaml"), "--timeout", timeout, "stop"]
    assert main(argv) == 2
    assert (
        capsys.readouterr().err
        == f"armd: error: goal: --timeout: {float(timeout)} must be > 0 seconds\n"
    )
