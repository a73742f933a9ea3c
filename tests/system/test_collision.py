"""Collision checking end to end: a real Mosquitto, ``python -m armd run`` on the simulated UR5
of config/sim.yaml standing on its table, and a test client. Goals whose path collides are
``rejected`` with a ``collision:`` reason and nothing moves; the ``model`` topic carries the
collision model; a stream pushing the tool into the table holds above it."""

from __future__ import annotations

from typing import Any

import numpy as np

from armd.config.load import ArmSetup
from tests.system.helpers import Rig
from tests.system.probe import at_rest, joint_positions, max_joint_difference


def go_ready(arm: Rig) -> dict[str, float]:
    final = arm.probe.run_goal({"id": "to-ready", "type": "named", "name": "ready"})
    assert final["status"] == "succeeded", final
    state = arm.probe.wait_state(since=arm.probe.mark(), what="a state at ready")
    return joint_positions(state)


def refused(arm: Rig, goal: dict[str, Any]) -> str:
    since = arm.probe.publish_goal(goal)
    final = arm.probe.wait_status(goal["id"], since=since)
    statuses = [s["status"] for s in arm.probe.statuses(goal["id"], since)]
    assert statuses == ["rejected"], statuses
    reason: str = final["reason"]
    return reason


def test_goals_into_the_table_or_through_the_arm_are_refused_and_nothing_moves(arm: Rig) -> None:
    before = go_ready(arm)
    below = refused(arm, {"id": "below", "type": "pose", "position": [0.4, 0.1, -0.3]})
    assert below.startswith("collision: "), below
    assert "with table" in below
    folded = refused(
        arm,
        {
            "id": "fold",
            "type": "joints",
            "positions": {"elbow_joint": 3.1, "shoulder_lift_joint": -1.0},
        },
    )
    assert folded.startswith("collision: "), folded
    assert "at the target" in folded
    linear = refused(
        arm,
        {"id": "down", "type": "pose", "position": [0.55, 0.11, -0.05], "motion": "linear"},
    )
    assert linear.startswith("collision: "), linear
    state = arm.probe.wait_state(since=arm.probe.mark(), what="a state after the refusals")
    assert at_rest(state), state
    assert max_joint_difference(joint_positions(state), before) < 1e-3


def test_a_clear_goal_near_the_table_succeeds(arm: Rig, arm_setup: ArmSetup) -> None:
    go_ready(arm)
    final = arm.probe.run_goal(
        {"id": "low", "type": "pose", "position": [0.45, 0.1, 0.1], "speed": 0.8}
    )
    assert final["status"] == "succeeded", final
    model = arm_setup.collision
    assert model is not None
    state = arm.probe.wait_state(since=arm.probe.mark(), what="a state at the low pose")
    q = arm_setup.tree.q_from_mapping(joint_positions(state))
    assert model.first_contact(q) is None
    assert float(np.min(arm_setup.tree.fk(q, "tool0").translation[2])) > 0.05
