"""Pick, then move, on the real daemon through MQTT: config/sim.yaml with wrist_3 as a stand-in
gripper (open at 0, closed at 1) whose simulated device's end stop at 0.5 is the object between
the fingers. The gripper closes on it and holds it through joints, pose and trajectory goals, a
stream, the e-stop and its reset, each of which succeeds; a named pose that names the gripper
opens it; closed again and opened from the command line (`armd goal gripper`)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.system.helpers import Rig, armd_command
from tests.system.probe import WAIT_S, MqttProbe, at_rest, contract_violations, joint_positions

GRIP = 0.2  # the close goals' effort: of max_effort 1, in the simulated device's effort
OBJECT = 0.5  # the end stop: where the gripper meets the object
HELD = r"held: wrist_3_joint effort 0\.\d+ at 0\.5\d*"
OVERRIDES = {
    "gripper": {"joint": "wrist_3_joint", "open": 0.0, "closed": 1.0},
    "drivers": {
        "sim": {
            "params": {"devices": {"wrist3": {"end_stops": [-0.2, OBJECT], "torque_limit": 0.3}}}
        }
    },
}


def armd(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        armd_command(*args), capture_output=True, text=True, timeout=2 * WAIT_S, check=False
    )


def succeeds(probe: MqttProbe, goal: dict[str, Any]) -> dict[str, Any]:
    final = probe.run_goal(goal)
    assert final["status"] == "succeeded", final
    return final


def gripper(state: dict[str, Any]) -> dict[str, float]:
    return dict(state["joints"]["wrist_3_joint"])


def assert_holds(probe: MqttProbe) -> None:
    """At rest, the gripper on the object, still pushing at the grip (its command unchanged)."""
    state = probe.wait_state(at_rest, what="the arm at rest, holding")
    assert gripper(state)["position"] == pytest.approx(OBJECT, abs=0.01), state
    assert abs(gripper(state)["effort"]) >= GRIP, state
    assert not [m for m in probe.on("fault") if m.text], probe.summary()


def close(probe: MqttProbe, goal_id: str) -> None:
    final = succeeds(probe, {"id": goal_id, "type": "gripper", "position": "close", "effort": GRIP})
    assert re.fullmatch(HELD, final["reason"]), final
    assert_holds(probe)


def test_a_held_object_stays_held_through_goals_streams_and_the_estop(
    start_arm: Callable[..., Rig],
) -> None:
    rig = start_arm(overrides=OVERRIDES)
    probe, config = rig.probe, rig.config
    close(probe, "pick")

    succeeds(probe, {"id": "move", "type": "joints", "positions": {"elbow_joint": 1.0}})
    assert joint_positions(probe.latest_state())["elbow_joint"] == pytest.approx(1.0, abs=0.005)
    assert_holds(probe)

    tcp = probe.latest_state()["tcp"]["position"]
    succeeds(probe, {"id": "pose", "type": "pose", "position": [tcp[0] + 0.03, tcp[1], tcp[2]]})
    assert_holds(probe)

    elbow = joint_positions(probe.latest_state())["elbow_joint"]
    points = [{"t": 0.0, "positions": [elbow]}, {"t": 1.0, "positions": [elbow + 0.2]}]
    succeeds(
        probe, {"id": "path", "type": "trajectory", "joints": ["elbow_joint"], "points": points}
    )
    assert_holds(probe)

    since = probe.mark()
    stream = {"id": "s", "type": "joints", "positions": {"elbow_joint": elbow}}
    probe.publish("stream", json.dumps(stream | {"seq": 1}), qos=0)
    probe.publish("stream", json.dumps({"id": "s", "seq": 2, "type": "end"}), qos=0)
    final = probe.wait_status("s", since=since)
    assert final["status"] == "succeeded", final
    assert_holds(probe)

    probe.publish("estop", json.dumps({"engage": True}))
    probe.wait_mode("estop")
    stopped = probe.wait_state(lambda s: at_rest(s, mode="estop"), what="the arm at rest, estop")
    assert abs(gripper(stopped)["effort"]) >= GRIP  # still pushing: the e-stop holds it too
    probe.publish("estop", json.dumps({"reset": True}))
    probe.wait_mode("holding")
    assert_holds(probe)  # the reset did not drop it
    succeeds(probe, {"id": "after-reset", "type": "joints", "positions": {"elbow_joint": 0.8}})
    assert_holds(probe)

    # config/sim.yaml's `ready` names wrist_3_joint (0): the pose wins, the gripper opens.
    succeeds(probe, {"id": "ready", "type": "named", "name": "ready"})
    released = probe.wait_state(at_rest, what="the arm at rest")
    assert gripper(released)["position"] == pytest.approx(0.0, abs=0.005)
    assert abs(gripper(released)["effort"]) < GRIP / 2

    # Again from the command line: `armd goal gripper`.
    closed = armd(
        "goal", "--config", config, "--id", "cli-close", "gripper", "close", "--effort", f"{GRIP}"
    )
    assert closed.returncode == 0, closed
    assert re.fullmatch(HELD, json.loads(closed.stdout.splitlines()[-1])["reason"]), closed
    assert_holds(probe)
    opened_by_cli = armd("goal", "--config", config, "--id", "cli-open", "gripper", "open")
    assert opened_by_cli.returncode == 0, opened_by_cli
    opened = probe.wait_state(at_rest, what="the arm at rest")
    assert gripper(opened)["position"] == pytest.approx(0.0, abs=0.005)
    assert abs(gripper(opened)["effort"]) < GRIP / 2

    assert contract_violations([m.json() for m in probe.on("goal/status")]) == []
