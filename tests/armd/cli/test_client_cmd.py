"""`armd goal` and `armd watch`: payloads from the command line (every goal type of the API's
contract, the gripper and trajectory goals checked as the daemon parses them), the distance a
goal has left, the plain view of a state; and `armd goal gripper` and `armd goal trajectory` as a
user runs them, on a real Mosquitto with a test client in the daemon's place."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from armd.api.contract import GOAL_TYPES, encode
from armd.api.payloads import parse_goal
from armd.cli.client.client_cmd import goal_payload
from armd.cli.client.goal_progress import distance_to_target
from armd.cli.client.watch_view import View, plain_state
from armd.cli.common import UsageError
from armd.cli.main import build_parser, main
from armd.config.load import ArmSetup, load_config
from armd.config.schema import GripperConfig
from armd.link.messages import GripperGoal, TrajectoryGoal
from tests.broker import MosquittoBroker
from tests.system.helpers import write_config
from tests.system.probe import WAIT_S, MqttProbe

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


def test_distance_to_a_gripper_goal_is_the_grippers(setup: ArmSetup) -> None:
    with_gripper = dataclasses.replace(
        setup,
        config=setup.config.model_copy(
            update={"gripper": GripperConfig(joint="wrist_3_joint", open=0.0, closed=1.0)}
        ),
    )
    payload = {"type": "gripper", "position": 0.0}  # closed: wrist_3_joint at 1.0
    left = distance_to_target(payload, state([0, 0, 0, 0, 0, 0.25]), with_gripper)
    assert left == "0.7500 rad to go (gripper)"
    assert distance_to_target(payload, state([0] * 6), setup) is None  # no gripper configured


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


# -- every goal type; the gripper and trajectory goals ---------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_the_goal_command_offers_every_goal_type_of_the_contract() -> None:
    goal = _subparsers(build_parser("goal"))["goal"]
    assert sorted(_subparsers(goal)) == sorted(GOAL_TYPES)


def gripper_args(position: str, effort: float | None = None, speed: float = 1.0) -> Any:
    return argparse.Namespace(kind="gripper", position=position, effort=effort, speed=speed)


def trajectory_args(
    file: Path | None = None, points: list[list[str]] | None = None, speed: float = 1.0
) -> Any:
    return argparse.Namespace(kind="trajectory", file=file, point=points, speed=speed)


def test_gripper_payloads(setup: ArmSetup) -> None:
    assert goal_payload(gripper_args("close", 0.3), "g", setup) == {
        "id": "g", "type": "gripper", "position": 0.0, "effort": 0.3, "speed": 1.0,
    }  # fmt: skip
    assert goal_payload(gripper_args("open"), "g", setup)["position"] == 1.0
    assert goal_payload(gripper_args("0.25", speed=0.5), "g", setup) == {
        "id": "g", "type": "gripper", "position": 0.25, "speed": 0.5,
    }  # fmt: skip


GRIPPER_ERRORS = [
    (gripper_args("half"),
     "gripper: position: 'half' must be open, close or an opening in [0, 1]"),
    (gripper_args("2"),
     'gripper: position: 2.0 must be an opening in [0, 1] (0 closed, 1 open), "open" or "close"'),
    (gripper_args("nan"), "gripper: values must be finite numbers"),
    (gripper_args("close", effort=1.5),
     "gripper: effort: 1.5 must be in [0, 1] (of the gripper's max_effort) or absent"),
    (gripper_args("close", speed=0), "gripper: speed: 0 must be in [0.01, 1]"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "message"), GRIPPER_ERRORS)
def test_a_wrong_gripper_argument_is_a_usage_error_naming_it(
    setup: ArmSetup, args: Any, message: str
) -> None:
    with pytest.raises(UsageError) as info:
        goal_payload(args, "g", setup)
    assert str(info.value) == message


def test_trajectory_payload_from_points(setup: ArmSetup) -> None:
    points = [["t=0", "elbow_joint=1.4", "shoulder_pan_joint=0"],
              ["t=1.5", "shoulder_pan_joint=0.6", "elbow_joint=1.0"]]  # fmt: skip
    assert goal_payload(trajectory_args(points=points, speed=0.8), "t", setup) == {
        "id": "t",
        "type": "trajectory",
        "joints": ["elbow_joint", "shoulder_pan_joint"],
        "points": [{"t": 0.0, "positions": [1.4, 0.0]}, {"t": 1.5, "positions": [1.0, 0.6]}],
        "speed": 0.8,
    }


def test_trajectory_payload_from_a_json_or_csv_file(setup: ArmSetup, tmp_path: Path) -> None:
    fields = {
        "joints": ["shoulder_pan_joint", "elbow_joint"],
        "points": [
            {"t": 0, "positions": [0.0, 1.4], "velocities": [0.0, 0.0]},
            {"t": 1.5, "positions": [0.6, 1.0], "velocities": [0.1, 0.0]},
            {"t": 3, "positions": [0.2, 1.2], "velocities": [0.0, 0.0]},
        ],
    }
    as_json = tmp_path / "wave.json"
    as_json.write_text(json.dumps(fields), encoding="utf-8")
    from_json = goal_payload(trajectory_args(as_json), "t", setup)
    assert from_json["joints"] == fields["joints"]
    assert from_json["points"][1] == {"t": 1.5, "positions": [0.6, 1.0], "velocities": [0.1, 0.0]}
    as_csv = tmp_path / "wave.csv"
    as_csv.write_text(
        "t, shoulder_pan_joint, elbow_joint\n0, 0.0, 1.4\n\n1.5, 0.6, 1.0\n3, 0.2, 1.2\n",
        encoding="utf-8",
    )
    from_csv = goal_payload(trajectory_args(as_csv), "t", setup)
    assert from_csv["joints"] == fields["joints"]
    assert [p["positions"] for p in from_csv["points"]] == [[0.0, 1.4], [0.6, 1.0], [0.2, 1.2]]
    assert [p["t"] for p in from_csv["points"]] == [0.0, 1.5, 3.0]


ONE_OF = (
    "trajectory: give the points either in a FILE (.json or .csv) or as --point t=S NAME=VALUE "
    "..., one of them"
)
TRAJECTORY_ERRORS = [
    (None, None, ONE_OF),
    ("wave.csv", [["t=0", "elbow_joint=1"]], ONE_OF),
    (None, [["elbow_joint=1"]],
     "trajectory: --point 1: t=S is missing: each point starts with its time"),
    (None, [["t=0", "elbow_joint=1"], ["t=1"]],
     "trajectory: --point 2: no joint: expected NAME=VALUE after t=1"),
    (None, [["t=0", "elbow_joint=1"], ["t=1", "wrist_1_joint=0"]],
     "trajectory: --point 2: names wrist_1_joint; every point names the first one's joints: "
     "elbow_joint"),
    (None, [["t=zero", "elbow_joint=1"]], "trajectory: --point 1: t: 'zero' must be a number (s)"),
    (None, [["t=0", "elbow_joint=one"]],
     "trajectory: --point 1: elbow_joint: 'one' must be a number (rad or m)"),
    (None, [["t=0", "elbow_joint"]], "trajectory: --point 1: 'elbow_joint': expected NAME=VALUE"),
    (None, [["t=0", "elbow_joint=1", "elbow_joint=2"]],
     "trajectory: --point 1: elbow_joint: given twice"),
    (None, [["t=0", "elbow_joint=1"], ["t=0", "elbow_joint=2"]],
     "trajectory: points[1].t: 0.0 must be at least 0.001 s after points[0].t (0.0): times "
     "strictly increase"),
    (None, [["t=0", "elbo=1"], ["t=1", "elbo=2"]],
     "trajectory: joints: unknown joint(s) elbo; joints: [shoulder_pan_joint, "
     "shoulder_lift_joint, elbow_joint, wrist_1_joint, wrist_2_joint, wrist_3_joint]"),
    ("wave.txt", None, "trajectory: {dir}/wave.txt: expected a .json or .csv file"),
    ("missing.csv", None,
     "trajectory: {dir}/missing.csv: [Errno 2] No such file or directory: '{dir}/missing.csv'"),
    ("bad-header.csv", None,
     "trajectory: {dir}/bad-header.csv:1: the header must be t,NAME,...; it is time,elbow_joint"),
    ("bad-row.csv", None, "trajectory: {dir}/bad-row.csv:3: 1 values; the header names 2"),
    ("bad-number.csv", None,
     "trajectory: {dir}/bad-number.csv:2: elbow_joint: 'x' must be a number (rad or m)"),
    ("empty.csv", None,
     "trajectory: {dir}/empty.csv: empty; expected a header t,NAME,... and rows"),
    ("not.json", None, "trajectory: {dir}/not.json:1: not JSON: Expecting value"),
    ("extra.json", None,
     "trajectory: {dir}/extra.json: unknown field 'speed'; the file has the goal's joints and "
     "points"),
    ("no-points.json", None,
     "trajectory: {dir}/no-points.json: 'points' is missing; the file has the goal's joints and "
     "points"),
    ("list.json", None,
     'trajectory: {dir}/list.json: expected an object {{"joints": ..., "points": ...}}'),
]  # fmt: skip
FILES = {
    "wave.csv": "t,elbow_joint\n0,1\n1,2\n",
    "wave.txt": "t,elbow_joint\n",
    "bad-header.csv": "time,elbow_joint\n0,1\n",
    "bad-row.csv": "t,elbow_joint\n0,1\n1\n",
    "bad-number.csv": "t,elbow_joint\n0,x\n",
    "not.json": "t,elbow_joint",
    "extra.json": '{"joints": ["elbow_joint"], "points": [], "speed": 0.5}',
    "no-points.json": '{"joints": ["elbow_joint"]}',
    "empty.csv": "\n\n",
    "list.json": "[]",
}


@pytest.mark.parametrize(("file", "points", "message"), TRAJECTORY_ERRORS)
def test_a_wrong_trajectory_argument_is_a_usage_error_naming_it(
    setup: ArmSetup, tmp_path: Path, file: str | None, points: list[list[str]] | None, message: str
) -> None:
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    path = None if file is None else tmp_path / file
    with pytest.raises(UsageError) as info:
        goal_payload(trajectory_args(path, points), "t", setup)
    assert str(info.value) == message.format(dir=tmp_path)


# -- as a user runs them, on a real broker ---------------------------------------------------------


@pytest.fixture
def arm(mosquitto: MosquittoBroker) -> Iterator[MqttProbe]:
    """A test client in the daemon's place: the arm online (retained), its topics watched."""
    probe = MqttProbe(mosquitto.host, mosquitto.port, "ur5-sim")
    probe.client.publish("armd/ur5-sim/availability", "online", qos=1, retain=True)
    yield probe
    probe.close()


def run_goal(
    config: Path, arm: MqttProbe, *args: str
) -> tuple[subprocess.CompletedProcess[str], Any]:
    """``armd goal --config CONFIG --id cli ARGS``; the goal it publishes is parsed as the daemon
    parses it and answered ``accepted``, then ``succeeded``. Returns the run and the parsed goal."""
    command = [sys.executable, "-m", "armd", "goal", "--config", str(config), "--id", "cli", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        arm.wait_for(lambda: arm.on("goal"), WAIT_S, "the goal")
        setup = load_config(config, kernels=False)
        goal = parse_goal(
            arm.on("goal")[0].payload,
            joint_names=setup.tree.joint_names,
            link_names=setup.tree.link_names,
            default_link=setup.tool_link,
        )
        for status in ("accepted", "succeeded"):
            arm.publish("goal/status", encode({"id": "cli", "status": status}))
        out, err = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return subprocess.CompletedProcess(command, process.returncode, out, err), goal


def test_goal_gripper_sends_the_gripper_goal(
    tmp_path: Path, mosquitto: MosquittoBroker, arm: MqttProbe
) -> None:
    config = write_config(tmp_path, mosquitto.port)
    done, goal = run_goal(config, arm, "gripper", "close", "--effort", "0.3", "--speed", "0.5")
    assert done.returncode == 0, done
    assert goal == GripperGoal("cli", opening=0.0, effort=0.3, speed=0.5)
    statuses = [json.loads(line)["status"] for line in done.stdout.splitlines()]
    assert statuses == ["accepted", "succeeded"]


def test_goal_trajectory_sends_the_points_of_a_file(
    tmp_path: Path, mosquitto: MosquittoBroker, arm: MqttProbe
) -> None:
    config = write_config(tmp_path, mosquitto.port)
    points = tmp_path / "wave.csv"
    points.write_text("t,shoulder_pan_joint,elbow_joint\n0,0,1.4\n1.5,0.6,1.0\n", encoding="utf-8")
    done, goal = run_goal(config, arm, "trajectory", str(points))
    assert done.returncode == 0, done
    assert goal == TrajectoryGoal(
        "cli", ("shoulder_pan_joint", "elbow_joint"), (0.0, 1.5), ((0.0, 1.4), (0.6, 1.0))
    )


def test_a_wrong_trajectory_is_one_line_and_nothing_is_sent(
    tmp_path: Path, mosquitto: MosquittoBroker, arm: MqttProbe
) -> None:
    config = write_config(tmp_path, mosquitto.port)
    argv = ["trajectory", "--point", "t=1", "elbow_joint=1", "--point", "t=0", "elbow_joint=2"]
    done = subprocess.run(
        [sys.executable, "-m", "armd", "goal", "--config", str(config), *argv],
        capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "armd: error: goal trajectory: points[1].t: 0.0 must be at least 0.001 s after "
        "points[0].t (1.0): times strictly increase\n"
    )
    assert arm.on("goal") == []
