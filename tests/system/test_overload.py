"""Overload: a client floods the goal topic with thousands of valid goals, as fast as it can
publish them (QoS 1). docs/mqtt.md: the newest goal wins, every goal still gets a status, nothing a
client sends moves the arm outside its limits, and the daemon stays up.

Commands are not visible over MQTT: the test checks the measured joints in the telemetry (never
outside the limits) and that the arm never faulted. Nothing here asserts speed; the daemon's
loop-timing line (logged at shutdown) is part of every failure message, for diagnosis.
"""

from __future__ import annotations

import json
import re
import signal
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from armd.config.load import load_config
from tests.broker import MosquittoBroker
from tests.system.helpers import Rig, attach_diagnostics, start_rig
from tests.system.probe import ARM, FINAL, WAIT_S, MqttProbe, at_rest, joint_positions

FLOOD = 5000  # goals
# Two targets near the elbow's upper limit (pi) and the wrist's (2 pi), and speeds that change
# from goal to goal: each goal preempts a motion planned with other limits.
TARGETS = (
    {"elbow_joint": 3.0, "wrist_3_joint": 6.1, "shoulder_pan_joint": -0.4},
    {"elbow_joint": 2.6, "wrist_3_joint": 5.7, "shoulder_pan_joint": 0.4},
)
SPEEDS = (1.0, 0.7, 0.2)
OUTCOMES = {"preempted", "succeeded"}  # a goal of the flood is one or the other, never refused
JOINT_TOLERANCE = 0.005  # rad: the daemon's success criterion (safety.joint_tolerance)
LIMIT_TOLERANCE = 1e-3  # rad: measured positions may pass a limit by an encoder count or so
FLOOD_WAIT_S = 6 * WAIT_S  # generous: thousands of goals and statuses on a busy machine


@pytest.fixture
def flooded(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    """A daemon on a broker that queues up to 100,000 QoS 1 messages per client (Mosquitto's
    default of 1000 would drop part of the flood before it reaches the daemon or the probe).
    Without collision checking: the flood's folded targets, pre-empting each other at three
    speeds, overshoot into the arm's own geometry (the collision fuzz, test_collision_fuzz.py,
    floods a checked arm)."""
    with MosquittoBroker(
        tmp_path / "mosquitto", extra_config=["max_queued_messages 100000"]
    ) as broker:
        rig = start_rig(tmp_path / "arm", broker, overrides={"collision": None})
        attach_diagnostics(request, rig)
        try:
            yield rig
        finally:
            rig.close()


def flood_goals(rig: Rig, count: int) -> list[tuple[str, dict[str, float]]]:
    """Publish `count` goals back to back from a client of their own (QoS 1, up to 1000 in
    flight) and wait until the broker has acknowledged the last one; return (id, target)."""
    prefix = f"flood-{uuid.uuid4().hex[:6]}"
    goals = [(f"{prefix}-{i}", TARGETS[i % 2], SPEEDS[i % 3]) for i in range(count)]
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"{prefix}-publisher")
    client.max_inflight_messages_set(1000)
    client.connect(rig.broker.host, rig.broker.port)
    client.loop_start()
    try:
        infos = [
            client.publish(
                f"armd/{ARM}/goal",
                json.dumps({"id": goal_id, "type": "joints", "positions": target, "speed": speed}),
                qos=1,
            )
            for goal_id, target, speed in goals
        ]
        for info in infos:
            info.wait_for_publish(FLOOD_WAIT_S)
            assert info.is_published(), "the broker did not acknowledge every goal"
    finally:
        client.disconnect()
        client.loop_stop()
    return [(goal_id, target) for goal_id, target, _ in goals]


class StatusTally:
    """The ``goal/status`` messages after `since`, tallied per goal id as they arrive (the flood
    brings tens of thousands of messages: each is parsed once)."""

    def __init__(self, probe: MqttProbe, since: int) -> None:
        self.probe = probe
        self.cursor = since
        self.by_id: defaultdict[str, list[str]] = defaultdict(list)
        self.reasons: dict[str, str] = {}

    def update(self) -> None:
        messages = self.probe.messages[self.cursor :]
        self.cursor += len(messages)
        for message in messages:
            if message.topic == "goal/status":
                status = message.json()
                self.by_id[str(status.get("id"))].append(status["status"])
                if "reason" in status:
                    self.reasons[str(status.get("id"))] = status["reason"]

    def finals(self, goal_id: str) -> list[str]:
        return [s for s in self.by_id.get(goal_id, []) if s in FINAL]

    def wait_all_final(self, ids: list[str]) -> None:
        missing = list(ids)

        def done() -> bool:
            nonlocal missing
            self.update()
            missing = [goal_id for goal_id in missing if not self.finals(goal_id)]
            return not missing

        self.probe.wait_for(done, FLOOD_WAIT_S, f"a final status for every goal ({FLOOD})")


def loop_timing(output: str) -> str:
    """The daemon's last loop-timing line (diagnostics only: nothing asserts speed)."""
    lines = re.findall(r"loop timing: .*", output)
    return lines[-1] if lines else "(no loop-timing line)"


def test_flood_of_goals_newest_wins_every_goal_answered_limits_kept(flooded: Rig) -> None:
    rig, probe = flooded, flooded.probe
    setup = load_config(rig.config)
    names, limits = setup.tree.joint_names, setup.tree.limits
    since = probe.mark()

    goals = flood_goals(rig, FLOOD)
    ids = [goal_id for goal_id, _ in goals]
    newest, target = goals[-1]
    tally = StatusTally(probe, since)
    tally.wait_all_final(ids)
    state = probe.wait_state(at_rest, what="the arm at rest after the flood")
    tally.update()  # anything that arrived meanwhile, a duplicate status included
    assert rig.daemon.running, rig.daemon.output()

    rig.daemon.signal(signal.SIGTERM)
    exit_code = rig.daemon.wait()
    timing = f"\n(daemon {loop_timing(rig.daemon.output())})"
    assert exit_code == 0, rig.daemon.output()

    # Every goal: exactly one final status; the newest succeeded, the others were preempted.
    finals = {goal_id: tally.finals(goal_id) for goal_id in ids}
    repeated = {goal_id: f for goal_id, f in finals.items() if len(f) != 1}
    assert not repeated, f"goals without exactly one final status: {list(repeated.items())[:5]}"
    outcome = Counter(f[0] for f in finals.values())
    assert finals[newest] == ["succeeded"], (finals[newest], tally.reasons.get(newest), timing)
    others = Counter(f[0] for goal_id, f in finals.items() if goal_id != newest)
    odd = {g: tally.reasons.get(g) for g, f in finals.items() if f[0] not in OUTCOMES}
    assert set(others) <= OUTCOMES, (outcome, list(odd.items())[:5], timing)
    assert others["preempted"] > FLOOD // 2, (outcome, timing)
    assert not [s for s in tally.by_id if s not in ids], "statuses for goals nobody sent"

    # The arm is where the newest goal sent it.
    measured = joint_positions(state)
    wrong = {name: (measured[name], value) for name, value in target.items()}
    assert all(abs(m - t) <= JOINT_TOLERANCE for m, t in wrong.values()), (wrong, timing)

    # Never outside the limits, never a fault.
    states = probe.states(since)
    assert len(states) > 10, "too little telemetry to judge"
    lower = np.array(limits.lower) - LIMIT_TOLERANCE
    upper = np.array(limits.upper) + LIMIT_TOLERANCE
    for s in states:
        q = np.array([s["joints"][name]["position"] for name in names])
        outside = [
            n for n, v, lo, hi in zip(names, q, lower, upper, strict=True) if not lo <= v <= hi
        ]
        assert not outside, (f"outside the limits: {outside}", s, timing)
        assert s["mode"] != "fault", (s, timing)
    faults = [m.text for m in probe.on("fault", since) if m.text]
    assert not faults, (faults, timing)
    assert any(s["mode"] == "moving" for s in states), timing
