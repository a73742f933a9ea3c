"""The keypoints goal: its payload (valid, invalid with reasons, never raising) and its planning
and execution on the simulated UR5 of tests/armd/rig.py."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from armd.api.payloads import parse_goal
from armd.link.messages import GoalStatus, KeypointsGoal, Mode, Rejection, StatusUpdate
from armd.link.protocol import EngageEstop, MoveTo
from armd.planning.goals import KEYPOINTS_TOLERANCE, GoalPipeline, Rejected
from kinematics import KinematicTree, load_tree
from tests.armd.planning.test_goals import (  # the goal tests' planner settings and start
    Q0,
    SETTINGS,
)
from tests.armd.rig import LIMITS, ROBOTS, Rig, assert_within_limits
from tests.armd.rig import pipeline_rig as rig_with_pipeline

LINKS = ("base", "upper_arm", "forearm", "tool")  # the model's order, root first
LINK_LIST = "[base, upper_arm, forearm, tool]"
KEYPOINTS = ("upper_arm_link", "forearm_link", "wrist_2_link", "tool0")  # see test_mapping.py


def goal(payload: bytes | str | dict[str, Any]) -> object:
    if isinstance(payload, dict):
        payload = json.dumps(payload)
    if isinstance(payload, str):
        payload = payload.encode()
    return parse_goal(payload, joint_names=("elbow",), link_names=LINKS, default_link="tool")


# -- the payload -----------------------------------------------------------------------------------


def test_keypoints_goal_orders_the_points_root_first() -> None:
    parsed = goal(
        {"id": "k", "type": "keypoints", "points": {"tool": [1, 0, 0.5], "upper_arm": [0, 0, 0]}}
    )
    assert parsed == KeypointsGoal(
        "k", ("upper_arm", "tool"), ((0.0, 0.0, 0.0), (1.0, 0.0, 0.5)), speed=1.0
    )
    assert isinstance(parsed, KeypointsGoal)
    assert all(isinstance(c, float) for point in parsed.points for c in point)


def test_keypoints_goal_with_speed_and_coordinates_on_the_bound() -> None:
    parsed = goal(
        {
            "id": "k",
            "type": "keypoints",
            "points": {"base": [-100, 0, 0], "forearm": [100, 0, 0], "tool": [100, 1e-3, 0]},
            "speed": 0.25,
        }
    )
    assert isinstance(parsed, KeypointsGoal)
    assert parsed.links == ("base", "forearm", "tool")
    assert parsed.speed == 0.25


K = '"id": "k", "type": "keypoints"'
INVALID: list[tuple[str, str, str]] = [
    ("missing-points", "{" + K + "}", "points: required field is missing"),
    ("points-array", "{" + K + ', "points": [[0, 0, 0], [1, 0, 0]]}',
     "points: must be an object {link name: [x, y, z]}"),
    ("one-point", "{" + K + ', "points": {"tool": [0, 0, 0]}}',
     "points: must name at least 2 links (a segment between them)"),
    ("no-points", "{" + K + ', "points": {}}',
     "points: must name at least 2 links (a segment between them)"),
    ("unknown-link", "{" + K + ', "points": {"tool": [0, 0, 0], "hand": [1, 0, 0]}}',
     f"points.hand: unknown link; links: {LINK_LIST}"),
    ("short-point", "{" + K + ', "points": {"tool": [0, 0], "base": [1, 0, 0]}}',
     "points.tool: must be an array of 3 numbers [x, y, z]"),
    ("long-point", "{" + K + ', "points": {"tool": [0, 0, 0, 0], "base": [1, 0, 0]}}',
     "points.tool: must be an array of 3 numbers [x, y, z]"),
    ("point-object", "{" + K + ', "points": {"tool": {"x": 0}, "base": [1, 0, 0]}}',
     "points.tool: must be an array of 3 numbers [x, y, z]"),
    ("nan", "{" + K + ', "points": {"tool": [0, NaN, 0], "base": [1, 0, 0]}}',
     "points.tool[1]: nan must be a finite number"),
    ("infinity", "{" + K + ', "points": {"tool": [0, 0, 0], "base": [1e999, 0, 0]}}',
     "points.base[0]: inf must be a finite number"),
    ("string-number", "{" + K + ', "points": {"tool": ["0", 0, 0], "base": [1, 0, 0]}}',
     "points.tool[0]: '0' must be a number"),
    ("same-position", "{" + K + ', "points": {"tool": [1, 2, 3], "forearm": [1, 2, 3], '
     '"base": [0, 0, 0]}}',
     "points.forearm, points.tool: less than 1e-09 m apart, no direction between them"),
    ("speed", "{" + K + ', "points": {"tool": [0, 0, 0], "base": [1, 0, 0]}, "speed": 2}',
     "speed: 2 must be in [0.01, 1]"),
    ("huge", "{" + K + ', "points": {"tool": [0, 0, 0], "base": [1e308, 0, 0]}}',
     "points.base[0]: 1e+308 must be within ±100 m"),
    ("typo", "{" + K + ', "point": {"tool": [0, 0, 0], "base": [1, 0, 0]}}',
     "points: required field is missing; point: unknown field (did you mean 'points'?)"),
    ("unknown-type", '{"id": "k", "type": "keypoint"}',
     "type: 'keypoint' must be one of 'pose', 'joints', 'keypoints', 'gripper', 'named', "
     "'trajectory', 'stop'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("payload", "reason"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_keypoints_goals_are_rejected_naming_the_field(payload: str, reason: str) -> None:
    assert goal(payload) == Rejection("k", reason)


coordinates = st.floats(allow_nan=True, allow_infinity=True) | st.integers() | st.booleans()
near_keypoints = st.fixed_dictionaries(
    {"id": st.just("k"), "type": st.just("keypoints")},
    optional={
        "points": st.dictionaries(
            st.sampled_from([*LINKS, "x"]),
            st.lists(coordinates, max_size=4) | coordinates | st.none(),
            max_size=5,
        ),
        "speed": st.floats() | st.integers(),
    },
)


@settings(max_examples=300, deadline=None)
@given(near_keypoints)
def test_near_valid_keypoints_goals_never_raise(document: dict[str, Any]) -> None:
    parsed = goal(json.dumps(document).encode())
    assert isinstance(parsed, KeypointsGoal | Rejection)
    if isinstance(parsed, Rejection):
        assert parsed.goal_id == "k"
        assert parsed.reason
    else:
        assert len(parsed.links) >= 2
        assert all(math.isfinite(c) for point in parsed.points for c in point)
        for a, b in zip(parsed.points, parsed.points[1:], strict=False):
            assert math.dist(a, b) >= 1e-9


# -- planning and execution on the simulated arm -----------------------------------------------


async def pipeline_rig() -> tuple[Rig, GoalPipeline, list[StatusUpdate]]:
    return await rig_with_pipeline(Q0, SETTINGS)


def shape_of(tree: KinematicTree, q: np.ndarray, scales: tuple[float, ...]) -> np.ndarray:
    """The keypoints of our arm at q, each segment scaled: another arm's proportions."""
    points = np.array([tree.fk(q, link).translation for link in KEYPOINTS])
    segments = np.diff(points, axis=0) * np.array(scales)[:, None]
    start = np.array([0.5, -0.2, 0.1])
    return np.vstack((start, start + np.cumsum(segments, axis=0)))


def keypoints_goal(goal_id: str, points: np.ndarray, speed: float = 1.0) -> KeypointsGoal:
    xyz = tuple((float(x), float(y), float(z)) for x, y, z in points)
    return KeypointsGoal(goal_id, KEYPOINTS, xyz, speed)


def worst_direction_error(tree: KinematicTree, q: np.ndarray, points: np.ndarray) -> float:
    ours = np.diff([tree.fk(q, link).translation for link in KEYPOINTS], axis=0)
    theirs = np.diff(points, axis=0)
    return max(
        math.atan2(float(np.linalg.norm(np.cross(o, t))), float(np.dot(o, t)))
        for o, t in zip(ours, theirs, strict=True)
    )


def reason_of(goal: KeypointsGoal, pipeline: GoalPipeline) -> str:
    with pytest.raises(Rejected) as info:
        pipeline.plan(goal)
    return str(info.value)


async def test_keypoints_goal_plans_a_joint_target_with_the_requested_directions() -> None:
    rig, pipeline, _ = await pipeline_rig()
    tree = rig.tree
    q_shape = Q0 + np.array([0.4, 0.3, -0.5, 0.2, 0.3, 0.0])
    points = shape_of(tree, q_shape, (2.0, 0.5, 1.7))
    request = pipeline.plan(keypoints_goal("k", points, speed=0.5))
    assert isinstance(request, MoveTo)
    assert worst_direction_error(tree, request.target, points) < 1e-6
    np.testing.assert_allclose(request.target[:5], q_shape[:5], atol=1e-6)  # the near branch
    commanded = rig.loop.commanded.position  # type: ignore[union-attr]
    assert request.target[5] == commanded[5]  # undecided (and fixed): kept
    np.testing.assert_allclose(request.limits.velocity, LIMITS.velocity * 0.5)
    assert request.tolerance is None


async def test_keypoints_goal_moves_the_arm_into_the_shape() -> None:
    rig, pipeline, statuses = await pipeline_rig()
    tree = rig.tree
    points = shape_of(tree, Q0 + np.array([-0.5, 0.4, 0.3, -0.3, 0.5, 0.0]), (0.4, 2.5, 1.0))
    goal = keypoints_goal("k", points)
    pipeline.submit(goal)
    await pipeline._handle(goal)
    assert statuses == [StatusUpdate("k", GoalStatus.ACCEPTED)]
    await rig.run_until(lambda: rig.final("k") is not None)
    assert rig.final("k").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    measured = rig.loop.measured.position  # type: ignore[union-attr]
    assert worst_direction_error(tree, measured, points) < KEYPOINTS_TOLERANCE
    assert_within_limits(rig)


async def test_a_shape_our_elbow_cannot_make_is_rejected() -> None:
    rig, pipeline, _ = await pipeline_rig()
    points = shape_of(rig.tree, Q0, (1.0, 1.0, 1.0))
    points[2:] += (
        0.3
        * np.cross(points[2] - points[1], points[1] - points[0])
        / np.linalg.norm(np.cross(points[2] - points[1], points[1] - points[0]))
    )  # the forearm out of the elbow's plane
    reason = reason_of(keypoints_goal("k", points), pipeline)
    assert reason.startswith("points: shape not reachable within the joint limits: segment ")
    assert "'forearm_link' -> 'wrist_2_link'" in reason
    assert "(tolerance 0.05 rad)" in reason


async def test_a_shape_outside_the_joint_limits_is_rejected() -> None:
    """The rig's limits are ±3 rad: a shoulder lift of +3.1 rad (or −3.18) is out of reach, and
    the other (pan, lift) pair that points the upper arm the same way turns the elbow's plane
    away from the forearm's target."""
    _, pipeline, _ = await pipeline_rig()
    q_shape = np.array([0.0, 3.1, 0.0, 0.0, 0.0, 0.0])
    points = shape_of(load_tree(ROBOTS / "ur5.urdf"), q_shape, (1.0, 1.0, 1.0))
    reason = reason_of(keypoints_goal("k", points), pipeline)
    assert reason.startswith("points: shape not reachable within the joint limits")


async def test_links_off_one_chain_are_rejected() -> None:
    _, pipeline, _ = await pipeline_rig()
    goal = KeypointsGoal("k", ("tool0", "ee_link"), ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0)))
    assert reason_of(goal, pipeline) == (
        "points: links[1]: 'ee_link' is not a descendant of 'tool0'; the links must follow one "
        "chain from the root"
    )


async def test_coinciding_links_are_rejected() -> None:
    _, pipeline, _ = await pipeline_rig()
    goal = KeypointsGoal("k", ("world", "base_link"), ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0)))
    assert reason_of(goal, pipeline).startswith(
        "points: links 'world' and 'base_link': their origins are 0 m apart"
    )


async def test_keypoints_goal_is_refused_in_fault_or_estop() -> None:
    rig, pipeline, _ = await pipeline_rig()
    rig.loop.handle(EngageEstop())
    await rig.run_until(lambda: rig.loop.mode is Mode.ESTOP)
    points = shape_of(rig.tree, Q0, (1.0, 1.0, 1.0))
    assert reason_of(keypoints_goal("k", points), pipeline) == "arm is estop: reset first"
