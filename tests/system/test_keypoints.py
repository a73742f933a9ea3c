"""The keypoints goal end to end: a real Mosquitto, ``python -m armd run`` on the simulated UR5 of
config/sim.yaml, and a test client sending the shape of a leader arm with other proportions."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from armd.config.load import ArmSetup
from armd.planning.goals import KEYPOINTS_TOLERANCE
from kinematics import KinematicTree
from tests.system.helpers import Rig
from tests.system.probe import at_rest, joint_positions

# The arm of config/sim.yaml starts here; the shape below is a nearby one (no branch far away).
HOME = np.array([0.0, -math.pi / 2, math.pi / 2, -math.pi / 2, -math.pi / 2, 0.0])
KEYPOINTS = ("upper_arm_link", "forearm_link", "wrist_2_link", "tool0")  # see test_mapping.py
SCALES = (1.8, 0.6, 2.5)  # the leader's segments against ours


def leader_points(tree: KinematicTree, q: np.ndarray) -> dict[str, list[float]]:
    """Our keypoints at q with every segment scaled and the whole chain moved: a leader arm."""
    points = np.array([tree.fk(q, link).translation for link in KEYPOINTS])
    segments = np.diff(points, axis=0) * np.array(SCALES)[:, None]
    start = np.array([1.0, -2.0, 0.5])
    chain = np.vstack((start, start + np.cumsum(segments, axis=0)))
    return {link: point.tolist() for link, point in zip(KEYPOINTS, chain, strict=True)}


def direction_errors(
    tree: KinematicTree, state: dict[str, Any], points: dict[str, list[float]]
) -> list[float]:
    q = tree.q_from_mapping(joint_positions(state))
    ours = np.diff([tree.fk(q, link).translation for link in KEYPOINTS], axis=0)
    theirs = np.diff([points[link] for link in KEYPOINTS], axis=0)
    return [
        math.atan2(float(np.linalg.norm(np.cross(o, t))), float(np.dot(o, t)))
        for o, t in zip(ours, theirs, strict=True)
    ]


def test_keypoints_goal_puts_the_arm_in_the_leaders_shape(arm: Rig, arm_setup: ArmSetup) -> None:
    tree = arm_setup.tree
    start = joint_positions(arm.probe.latest_state())
    q_shape = HOME + np.array([0.5, 0.3, -0.4, 0.3, 0.4, 0.0])
    points = leader_points(tree, q_shape)
    assert max(direction_errors(tree, arm.probe.latest_state(), points)) > 0.1  # it must move

    goal = {"id": "leader", "type": "keypoints", "points": points, "speed": 0.8}
    since = arm.probe.publish_goal(goal)
    arm.probe.wait_status("leader", since=since)

    assert [s["status"] for s in arm.probe.statuses("leader", since)] == ["accepted", "succeeded"]
    state = arm.probe.wait_state(since=arm.probe.mark(), what="a state after the status")
    assert at_rest(state, tolerance=0.01), state
    errors = direction_errors(tree, state, points)
    assert max(errors) <= KEYPOINTS_TOLERANCE, errors
    # wrist 3 turns the flange about its own axis: no direction decides it, it did not move
    assert abs(joint_positions(state)["wrist_3_joint"] - start["wrist_3_joint"]) < 0.005


def test_a_shape_the_arm_cannot_make_is_rejected_and_nothing_moves(
    arm: Rig, arm_setup: ArmSetup
) -> None:
    tree = arm_setup.tree
    points = leader_points(tree, HOME)
    for link in ("wrist_2_link", "tool0"):
        points[link][1] += 0.4  # the forearm out of the elbow's plane
    before = joint_positions(arm.probe.latest_state())
    since = arm.probe.publish_goal({"id": "twisted", "type": "keypoints", "points": points})
    status = arm.probe.wait_status("twisted", since=since)

    assert status["status"] == "rejected", status
    assert status["reason"].startswith(
        "points: shape not reachable within the joint limits: segment '"
    )
    assert status["reason"].endswith(" rad from the target direction (tolerance 0.05 rad)")
    state = arm.probe.wait_state(since=arm.probe.mark(), what="a state after the status")
    after = joint_positions(state)
    assert max(abs(after[name] - before[name]) for name in before) < 1e-4


def test_a_malformed_keypoints_goal_is_rejected_naming_the_field(arm: Rig) -> None:
    goal = {"id": "bad", "type": "keypoints", "points": {"tool0": [0, 0, 0], "hand": [1, 0, 0]}}
    status = arm.probe.run_goal(goal)
    assert status["status"] == "rejected", status
    assert status["reason"].startswith("points.hand: unknown link; links: [")
