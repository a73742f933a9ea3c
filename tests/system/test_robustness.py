"""Nothing a client sends takes armd down (issue 10), end to end on the real daemon: the e-stop
fails safe, every goal ends with its statuses in the contract's order even when the daemon stops
or its control process dies, fixed joints work on a model without acceleration limits, and missed
ticks are visible while they happen. Each test starts its own broker and daemon."""

from __future__ import annotations

import json
import math
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from tests.system.helpers import Rig
from tests.system.probe import WAIT_S, MqttProbe, at_rest, contract_violations, joint_positions

SLOW = 0.1


def start_moving(probe: MqttProbe, goal_id: str) -> int:
    """Start a slow 1.5 rad move of the base joint; returns the mark before the goal."""
    current = joint_positions(probe.latest_state())["shoulder_pan_joint"]
    target = current - 1.5 if current > 0 else current + 1.5
    since = probe.publish_goal(
        {
            "id": goal_id,
            "type": "joints",
            "positions": {"shoulder_pan_joint": target},
            "speed": SLOW,
        }
    )
    assert probe.wait_status(goal_id, final=False, since=since)["status"] == "accepted"
    probe.wait_mode("moving", since=since)
    return since


def all_statuses(probe: MqttProbe, since: int = 0) -> list[dict[str, Any]]:
    return [m.json() for m in probe.on("goal/status", since)]


def test_any_estop_payload_but_a_reset_engages_the_estop(start_arm: Callable[..., Rig]) -> None:
    """Issue 10, item 6: ``STOP``, an empty payload and ``{"engage": "yes"}`` used to be rejected
    while the arm kept moving."""
    rig = start_arm()
    probe = rig.probe
    for n, payload in enumerate([b"STOP", b"", b'{"engage": "yes"}', b'{"reset": false}']):
        goal_id = f"moving-{n}"
        since = start_moving(probe, goal_id)
        probe.publish("estop", payload)
        aborted = probe.wait_status(goal_id, since=since)
        assert aborted["status"] == "aborted", aborted
        assert "e-stop" in aborted["reason"], aborted
        report = probe.wait_status(None, since=since)
        assert report["status"] == "rejected", report
        assert report["reason"].startswith("estop: "), report
        assert report["reason"].endswith("the e-stop is engaged (fail-safe)"), report
        probe.wait_state(lambda s: at_rest(s, mode="estop"), what="at rest in mode estop")
        reset = probe.publish("estop", json.dumps({"reset": True}))  # only this releases it
        probe.wait_mode("holding", since=reset)
    assert contract_violations(all_statuses(probe)) == []


def test_the_goal_in_flight_is_aborted_when_the_control_process_dies(
    start_arm: Callable[..., Rig],
) -> None:
    """Issue 10, item 5: its final status, then ``offline``; the daemon exits 1 (systemd restarts
    it)."""
    rig = start_arm()
    probe = rig.probe
    since = start_moving(probe, "in-flight")
    os.kill(rig.daemon.control_pid, signal.SIGKILL)
    assert rig.daemon.wait() == 1, rig.daemon.output()

    status = probe.wait_status("in-flight", since=since)
    assert status["status"] == "aborted", status
    assert "control process ended unexpectedly" in status["reason"], status
    probe.wait_availability("offline", since=since)
    messages = probe.messages[since:]
    final_at = next(i for i, m in enumerate(messages) if m.topic == "goal/status" and
                    m.json()["id"] == "in-flight" and m.json()["status"] == "aborted")  # fmt: skip
    offline_at = max(i for i, m in enumerate(messages) if m.topic == "availability")
    assert final_at < offline_at, "the status must come before offline"
    assert contract_violations(all_statuses(probe)) == []


def test_a_flood_of_goals_then_sigterm_every_goal_ends_before_offline(
    start_arm: Callable[..., Rig],
) -> None:
    """Issue 10, item 5: of 300 goals published 50 ms before SIGTERM, about 100 got no status."""
    rig = start_arm()
    probe = rig.probe
    since = probe.mark()
    ids = [f"flood-{n}" for n in range(300)]
    for n, goal_id in enumerate(ids):
        position = 0.3 * math.sin(n)
        goal = {"id": goal_id, "type": "joints", "positions": {"wrist_3_joint": position}}
        probe.client.publish(f"{probe.prefix}goal", json.dumps(goal), qos=1)
    time.sleep(0.05)
    rig.daemon.signal(signal.SIGTERM)
    assert rig.daemon.wait() == 0, rig.daemon.output()
    probe.wait_availability("offline", since=since)

    statuses = all_statuses(probe, since)
    answered = {s["id"] for s in statuses}
    # Every goal the daemon received got a first status and, when accepted, a final one; those
    # the broker still held at the daemon's UNSUBACK were never delivered to it.
    assert contract_violations(statuses) == []
    received = [goal_id for goal_id in ids if goal_id in answered]
    assert received, "no goal reached the daemon"
    assert received == ids[: len(received)], "goals are delivered in order: no gap"
    offline_at = max(i for i, m in enumerate(probe.messages) if m.topic == "availability")
    last_status_at = max(i for i, m in enumerate(probe.messages) if m.topic == "goal/status")
    assert last_status_at < offline_at


def test_fixed_joints_on_a_model_without_acceleration_limits(
    start_arm: Callable[..., Rig],
) -> None:
    """Issue 10, item 7: the UR5 gives no acceleration limits; with wrist_1 fixed (its only limits
    the model's), every joints goal was rejected with "nan outside [...]"."""
    fixed = -math.pi / 2
    overrides = {
        "joints": {"wrist_1_joint": None},
        "fixed_joints": {"wrist_1_joint": fixed},
        "drivers": {"sim": {"params": {"devices": {"wrist1": None}}}},
        "poses": None,  # they name wrist_1_joint, fixed here
    }
    rig = start_arm(overrides=overrides)
    probe = rig.probe
    joints = probe.run_goal({"id": "j", "type": "joints", "positions": {"elbow_joint": 1.2}})
    assert joints["status"] == "succeeded", joints
    pose = probe.run_goal({"id": "p", "type": "pose", "position": [0.3, 0.25, 0.35]})
    assert pose["status"] in ("succeeded", "rejected"), pose
    state = probe.wait_state(at_rest, what="the arm at rest")
    assert joint_positions(state)["wrist_1_joint"] == fixed
    assert contract_violations(all_statuses(probe)) == []


def test_missed_ticks_are_visible_while_they_happen(start_arm: Callable[..., Rig]) -> None:
    """A warning with the count and the worst lateness, and ``missed_ticks`` in ``state``. The
    control process is stopped for 0.3 s: about 75 ticks at 250 Hz."""
    rig = start_arm()
    probe = rig.probe
    pid = rig.daemon.control_pid
    os.kill(pid, signal.SIGSTOP)
    time.sleep(0.3)
    os.kill(pid, signal.SIGCONT)
    state = probe.wait_state(lambda s: s["missed_ticks"] >= 50, what="missed ticks in state")
    assert isinstance(state["missed_ticks"], int)
    deadline = time.monotonic() + WAIT_S
    while "missed" not in rig.daemon.output() and time.monotonic() < deadline:
        time.sleep(0.1)
    warnings = [line for line in rig.daemon.output().splitlines() if "missed" in line]
    assert warnings, rig.daemon.output()
    assert "worst lateness" in warnings[0], warnings
