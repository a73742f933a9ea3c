"""Named poses: the config's ``poses`` (checked like goals) and ``named`` goals (docs/mqtt.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from armd.api.contract import goal_json
from armd.api.payloads import parse_goal
from armd.config.load import load_config
from armd.link.messages import GoalStatus, Mode, NamedGoal, Rejection
from tests.armd.config.test_config import problems_of, ur5_config, write
from tests.armd.planning.test_goals import SETTINGS
from tests.armd.rig import pipeline_rig

JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint"]
HOME = {"shoulder_pan_joint": 0.3, "elbow_joint": 1.0}


def parse(document: object) -> object:
    return parse_goal(
        json.dumps(document).encode(),
        joint_names=JOINTS,
        link_names=["tool0"],
        default_link="tool0",
    )


def test_a_named_goal_parses_and_round_trips_through_the_client_form() -> None:
    goal = parse({"id": "n1", "type": "named", "name": "home", "speed": 0.5})
    assert goal == NamedGoal("n1", "home", 0.5)
    assert parse(goal_json(goal)) == goal


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ({"id": "n", "type": "named"}, "name: required field is missing"),
        ({"id": "n", "type": "named", "name": ""}, "name: must not be empty"),
        ({"id": "n", "type": "named", "name": 3}, "name: 3 must be a string"),
        ({"id": "n", "type": "named", "name": "home", "speed": 0}, "speed: 0 must be"),
        ({"id": "n", "type": "named", "name": "home", "pose": "x"}, "pose: unknown field"),
    ],
)
def test_a_malformed_named_goal_is_rejected_naming_the_field(document: object, reason: str) -> None:
    rejection = parse(document)
    assert isinstance(rejection, Rejection)
    assert rejection.goal_id == "n"
    assert rejection.reason.startswith(reason), rejection.reason


def test_poses_load_with_the_config(tmp_path: Path) -> None:
    setup = load_config(write(tmp_path, ur5_config() | {"poses": {"home": HOME, "up": {}}}))
    assert setup.config.poses == {"home": HOME, "up": {}}


@pytest.mark.parametrize(
    ("poses", "problem"),
    [
        ({"home": {"elbw": 1.0}}, "poses.home.elbw: is not a driven joint; joints: shoulder_pan"),
        ({"home": {"elbow_joint": 7.0}}, "poses.home.elbow_joint: 7 is outside the joint's limits"),
        ({"home": {"elbow_joint": ".5"}}, "poses.home.elbow_joint:"),
        ({"home sweet": {}}, "poses.home sweet:"),
        ({"home": {"elbow_joint": float("nan")}}, "poses.home.elbow_joint:"),
    ],
)
def test_a_bad_pose_is_a_config_error_naming_it(
    tmp_path: Path, poses: dict[str, object], problem: str
) -> None:
    lines = problems_of(tmp_path, ur5_config() | {"poses": poses})
    assert any(problem in line for line in lines), lines


async def test_a_named_goal_moves_to_the_pose_and_leaves_other_joints() -> None:
    q0 = np.array([0.0, -0.5, 0.5, 0.0, 0.5, 0.0])
    settings = dataclasses.replace(SETTINGS, poses={"home": HOME}, fixed_joints=frozenset())
    rig, pipeline, _ = await pipeline_rig(q0, settings)
    await rig.run_until(lambda: rig.loop.mode == Mode.HOLDING)
    pipeline.submit(NamedGoal("n", "home", speed=1.0))
    await rig.run_until(lambda: rig.final("n") is not None)
    final = rig.final("n")
    assert final is not None
    assert final.status == GoalStatus.SUCCEEDED, final
    measured = rig.loop.measured
    assert measured is not None
    expected = q0.copy()
    expected[[0, 2]] = [0.3, 1.0]
    np.testing.assert_allclose(measured.position, expected, atol=0.01)


async def test_an_unknown_pose_is_rejected_with_the_known_ones() -> None:
    settings = dataclasses.replace(SETTINGS, poses={"home": HOME, "rest": {}})
    rig, pipeline, _ = await pipeline_rig(np.zeros(6), settings)
    await rig.run_until(lambda: rig.loop.mode == Mode.HOLDING)
    pipeline.submit(NamedGoal("n", "hom"))
    final = rig.final("n")
    assert final is not None
    assert final.status == GoalStatus.REJECTED
    assert final.reason == "name: 'hom' is not a named pose of this arm; poses: 'home', 'rest'"
