"""Collision checking end to end: a real Mosquitto, ``python -m armd run`` on the simulated UR5
of config/sim.yaml standing on its table, and a test client. Goals whose path collides are
``rejected`` with a ``collision:`` reason and nothing moves; the ``model`` topic carries the
collision model; a stream pushing the tool into the table holds above it."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from armd.config.load import ArmSetup
from armd.control.streaming import timeout_reason
from tests.realtime import held_long_enough
from tests.system.helpers import Rig, armd_command
from tests.system.probe import (
    LOOP_PERIOD_S,
    at_rest,
    joint_positions,
    max_joint_difference,
    stream_held_s,
)
from tests.system.test_broker_loss import retained

STREAM_HZ = 100.0
STREAM_TIMEOUT_S = 2.0
ATTEMPTS = 3


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


def test_a_measured_state_in_collision_latches_a_fault_and_only_a_way_out_is_allowed(
    start_arm: Callable[..., Rig],
) -> None:
    """The simulated arm starts with its upper arm level and its forearm hanging through the
    table: the daemon latches ``collision`` naming the pair; after a reset, a goal deeper into
    the table is refused and one out of it succeeds."""
    shoulder = {"initial_position": 0.1 * 4.0}  # q = 0.1 rad through the gear ratio of 4
    overrides = {"drivers": {"sim": {"params": {"devices": {"shoulder": shoulder}}}}}
    rig = start_arm(overrides=overrides)
    probe = rig.probe
    fault = probe.wait_for(
        lambda: next((m.json() for m in probe.on("fault") if m.text), None),
        what="the collision fault",
    )
    assert fault["code"] == "collision", fault
    assert "with table" in fault["message"], fault
    since = probe.mark()
    probe.publish("estop", json.dumps({"reset": True}))
    probe.wait_state(lambda s: s["mode"] == "holding", since=since, what="holding after reset")
    deeper = refused(
        rig, {"id": "deeper", "type": "joints", "positions": {"shoulder_lift_joint": 0.3}}
    )
    assert deeper.startswith("collision: the arm is in collision"), deeper
    out = probe.run_goal(
        {"id": "out", "type": "joints", "positions": {"shoulder_lift_joint": -1.2}}
    )
    assert out["status"] == "succeeded", out
    state = probe.wait_state(since=probe.mark(), what="a state after the way out")
    assert state["mode"] == "holding", state


def test_the_model_topic_carries_the_collision_model(arm: Rig, arm_setup: ArmSetup) -> None:
    document = json.loads(retained(arm.broker, "model"))
    model = arm_setup.collision
    assert model is not None
    assert document["collision"] == json.loads(json.dumps(model.to_dict()))
    collision = document["collision"]
    assert collision["margin"] == pytest.approx(0.01, abs=1e-12)
    assert collision["environment"][0]["name"] == "table"
    allowed = {(a, b): why for a, b, why in collision["allowed"]}
    assert allowed[("base_link", "table")] == "fixed to the root"
    assert allowed[("upper_arm_link", "forearm_link")] == "adjacent"
    checked = {(p.a, p.b) for p in model.checked_pairs}
    assert not checked & set(allowed)


def test_a_stream_pushing_the_tool_into_the_table_holds_above_it(
    start_arm: Callable[..., Rig], arm_setup: ArmSetup
) -> None:
    """Pose targets going down through the table at 100 Hz: the arm slows down and stops above
    it, ``state`` says the stream holds, and after ``end`` the stream succeeds at rest. (A stream
    timeout of 2 s: this test's publisher may be held up on a busy machine; where a hold-up that
    long was measured, the timeout is the documented answer and the stream is sent again.)"""
    arm = start_arm(overrides={"stream": {"timeout_s": STREAM_TIMEOUT_S}})
    for attempt in range(ATTEMPTS):
        stream_id = f"down-{attempt}"
        go_ready(arm)
        state = arm.probe.latest_state()
        x, y, z = state["tcp"]["position"]
        orientation = state["tcp"]["orientation"]
        topic = arm.probe.prefix + "stream"
        since = arm.probe.mark()
        sent: list[float] = []
        for k in range(250):  # 2.5 s down to 0.25 m below the table, then 0.5 s there
            depth = z - (z + 0.25) * min(k / 200.0, 1.0)
            message = {
                "id": stream_id,
                "seq": k + 1,
                "type": "pose",
                "position": [x, y, depth],
                "orientation": orientation,
            }
            arm.probe.client.publish(topic, json.dumps(message), qos=0)
            sent.append(time.monotonic())
            time.sleep(1 / STREAM_HZ)
        end = {"id": stream_id, "seq": 251, "type": "end"}
        arm.probe.client.publish(topic, json.dumps(end))
        sent.append(time.monotonic())
        final = arm.probe.wait_status(stream_id, since=since)
        held = stream_held_s(arm.probe, since, sent, STREAM_HZ)
        timed_out = final.get("reason") == timeout_reason(STREAM_TIMEOUT_S)
        if not (timed_out and held_long_enough(held, STREAM_TIMEOUT_S, LOOP_PERIOD_S)):
            break
    assert final["status"] == "succeeded", (final, f"held up {held:.3f} s")
    assert [s["status"] for s in arm.probe.statuses(stream_id, since)] == ["accepted", "succeeded"]
    states = arm.probe.states(since)
    holds = [s["collision_hold"] for s in states if "collision_hold" in s]
    assert holds, "no state said the stream held"
    assert "table" in holds[-1]["pair"], holds[-1]
    model = arm_setup.collision
    assert model is not None
    for seen in states:
        q = arm_setup.tree.q_from_mapping(joint_positions(seen))
        assert model.first_contact(q) is None, seen
    last = arm.probe.wait_state(since=arm.probe.mark(), what="a state after the stream")
    assert at_rest(last), last
    assert last["tcp"]["position"][2] > 0.0, last


def test_armd_collision_reads_the_measured_state(arm: Rig, arm_setup: ArmSetup) -> None:
    go_ready(arm)
    done = subprocess.run(
        armd_command("collision", "--config", arm.config, "--measured", "--json"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    ready = arm_setup.config.poses["ready"]
    for joint, value in ready.items():
        assert document["q"][joint] == pytest.approx(value, abs=0.01)
    model = arm_setup.collision
    assert model is not None
    assert len(document["pairs"]) == len(model.checked_pairs)
