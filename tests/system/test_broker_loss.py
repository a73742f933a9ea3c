"""Broker loss: Mosquitto killed (SIGKILL) in the middle of a motion and restarted on the same port.

docs/safety.md: on broker loss, stop (or finish, by config) the current motion and refuse new goals
until reconnected; the bridge reconnects with backoff, republishes ``availability`` and the retained
``fault``, and sends after reconnection the statuses it could not deliver while the broker was away.

How the tests see what happens while the broker is away: the daemon reports its mode changes to a
test ``NOTIFY_SOCKET`` (``STATUS=mode: ...``), not over MQTT. How they make sure they miss nothing
published after the restart, whoever reconnects first: the probe keeps its session (clean session
off) on a broker that saves sessions as they change (``autosave_on_changes``), so the session
survives the SIGKILL and the broker queues the daemon's QoS 1 messages for the probe until it is
back. The test that checks retained messages uses a broker without persistence instead: after the
restart, whatever is retained there was published again by the daemon.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker import MosquittoBroker
from tests.system.helpers import (
    SIM_WATCHDOG_S,
    NotifyListener,
    Rig,
    attach_diagnostics,
    start_rig,
    status_modes,
)
from tests.system.probe import FINAL, WAIT_S, MqttProbe, at_rest, joint_positions

JOINT = "shoulder_pan_joint"
JOINT_TOLERANCE = 0.005  # rad: safety.joint_tolerance's default, the daemon's success criterion
RECONNECT = {"reconnect_min_s": 0.2, "reconnect_max_s": 1.0}  # s: a quick backoff for the test
# The broker saves its in-memory state after every change, so sessions survive a SIGKILL.
AUTOSAVE = ("autosave_interval 1", "autosave_on_changes true")


@pytest.fixture
def lossy_arm(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Rig]]:
    """``lossy_arm(broker_loss, persistent=True, env=None)``: a broker (saving its sessions when
    `persistent`) and a daemon on it; the probe keeps its session on a persistent broker."""
    rigs: list[Rig] = []
    brokers: list[MosquittoBroker] = []

    def start(
        broker_loss: str, *, persistent: bool = True, env: dict[str, str] | None = None
    ) -> Rig:
        broker = MosquittoBroker(
            tmp_path / "mosquitto",
            persistence=persistent,
            extra_config=AUTOSAVE if persistent else (),
        )
        brokers.append(broker)
        broker.start()
        rig = start_rig(
            tmp_path / "arm",
            broker,
            overrides={"broker_loss": broker_loss, "mqtt": RECONNECT},
            env=env,
            probe_options={"session": f"broker-loss-{broker.port}"} if persistent else None,
        )
        rigs.append(rig)
        attach_diagnostics(request, rig)
        return rig

    yield start
    for rig in rigs:
        rig.close()
    for broker in brokers:
        broker.stop()


@pytest.fixture
def notify(tmp_path: Path) -> Iterator[NotifyListener]:
    """A test ``NOTIFY_SOCKET``: the daemon's mode changes while the broker is away."""
    path = tmp_path / "notify.sock"
    assert len(str(path)) < 100, "AF_UNIX paths are limited to 108 bytes"
    listener = NotifyListener(path)
    yield listener
    listener.close()


def overloaded(status: dict[str, Any]) -> bool:
    """The daemon's refusal of a goal it could not plan before the moving arm's last forecast
    (docs/collision.md): on a machine this busy a user sends it again."""
    reason = status.get("reason", "")
    return status["status"] == "rejected" and reason.endswith("overloaded; send it again")


def start_moving(probe: MqttProbe, prefix: str, distance: float, speed: float) -> list[str]:
    """Publish a few goals that preempt one another, the last a motion of `JOINT` by `distance`
    (away from its nearer limit) at `speed`, and wait until it is accepted. Returns the ids."""
    current = joint_positions(probe.latest_state())[JOINT]
    sign = -1.0 if current > 0 else 1.0
    ids = [f"{prefix}-{i}" for i in range(6)]
    for i, goal_id in enumerate(ids[:-1]):
        step = 0.1 * (i + 1)
        probe.publish_goal({"id": goal_id, "type": "joints", "positions": {JOINT: current + step}})
    last = {
        "id": ids[-1],
        "type": "joints",
        "positions": {JOINT: current + sign * distance},
        "speed": speed,
    }
    for _ in range(3):  # a goal that pre-empts a moving arm too late is refused: sent again
        since = probe.publish_goal(last)
        status = probe.wait_status(ids[-1], final=False, since=since)
        if not overloaded(status):
            break
    assert status["status"] == "accepted", status
    # The loop starts the motion where it was planned from (with a collision model, a little
    # ahead of a moving arm): once it has, every goal before it has its final status, and two
    # states published after that come from ticks after the motion started.
    final_statuses(probe, ids[:-1])
    started = probe.mark()
    probe.wait_for(lambda: len(probe.on("state", started)) >= 2, what="the motion under way")
    assert probe.latest_state()["mode"] == "moving", probe.latest_state()
    # A slow goal starts gently (jerk scales with speed³): wait until the joint has clearly left.
    probe.wait_for(
        lambda: abs(joint_positions(probe.latest_state())[JOINT] - current) > 0.02,
        what="the joint clearly moving",
    )
    return ids


def final_statuses(probe: MqttProbe, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Wait until every goal of `ids` has a final status; return the last one of each (a status
    in flight when the broker died may arrive twice: at least once, never contradicting)."""

    def all_final() -> dict[str, dict[str, Any]] | None:
        found: dict[str, list[dict[str, Any]]] = {}
        for message in probe.on("goal/status"):
            status = message.json()
            if status.get("id") in ids and status["status"] in FINAL:
                found.setdefault(status["id"], []).append(status)
        if found.keys() != set(ids):
            return None
        for goal_id, statuses in found.items():
            assert all(s == statuses[0] for s in statuses), (goal_id, statuses)
        return {goal_id: statuses[-1] for goal_id, statuses in found.items()}

    return probe.wait_for(all_final, what=f"a final status for each of {ids}")


def live(probe: MqttProbe, topic: str, since: int) -> list[str]:
    """Payloads on `topic` after `since` that the daemon published then (a retained message the
    broker replays to a new subscription carries the retain flag instead)."""
    return [m.text for m in probe.on(topic, since) if not m.retain]


def kill_broker(rig: Rig, notify: NotifyListener) -> int:
    """SIGKILL the broker; returns how many notify fields came before (those after it tell what
    happened while the broker was away)."""
    assert status_modes(notify.fields())[-1] == "moving", notify.fields()
    before = len(notify.fields())
    rig.broker.kill()
    return before


def assert_reconnected(rig: Rig, since: int) -> None:
    """The daemon is back: ``online`` and the fault state published again, goals served."""
    probe = rig.probe
    probe.wait_for(lambda: "online" in live(probe, "availability", since), what="online again")
    probe.wait_for(lambda: live(probe, "fault", since), what="the fault state published again")
    assert live(probe, "fault", since)[-1] == "", "no fault is active: the retained one is cleared"
    output = rig.daemon.output()
    assert "lost the connection to MQTT broker" in output, output
    assert output.count("MQTT: online at") >= 2, output

    state = probe.wait_state(what="telemetry after reconnection")
    target = joint_positions(state)[JOINT] + (0.2 if joint_positions(state)[JOINT] < 0 else -0.2)
    again = probe.run_goal({"id": "after", "type": "joints", "positions": {JOINT: target}})
    assert again["status"] == "succeeded", again
    assert rig.daemon.running


def test_stop_aborts_the_motion_and_reports_it_after_reconnection(
    notify: NotifyListener, lossy_arm: Callable[..., Rig]
) -> None:
    rig = lossy_arm("stop", env={"NOTIFY_SOCKET": str(notify.path)})
    probe = rig.probe
    start = joint_positions(probe.latest_state())[JOINT]
    ids = start_moving(probe, "stop", distance=1.5, speed=0.1)  # about 5 s
    target = start + (1.5 if start <= 0 else -1.5)

    before = kill_broker(rig, notify)
    since = probe.mark()
    # While the broker is away the motion is stopped (not finished) and the arm holds.
    notify.wait_for(lambda f: "holding" in status_modes(f[before:]), "STATUS=mode: holding")
    assert "stopping" in status_modes(notify.fields()[before:]), notify.fields()
    assert rig.daemon.running, rig.daemon.output()
    rig.broker.start()

    statuses = final_statuses(probe, ids)
    aborted = statuses[ids[-1]]
    assert aborted["status"] == "aborted", aborted
    assert "broker" in aborted["reason"], aborted
    earlier = [statuses[i] for i in ids[:-1]]
    assert all(s["status"] == "preempted" or overloaded(s) for s in earlier), statuses
    assert probe.statuses(ids[-1], since), "the abort was sent after reconnection"

    state = probe.wait_state(at_rest, what="the arm at rest after reconnection")
    stopped_at = joint_positions(state)[JOINT]
    assert abs(stopped_at - target) > 0.1, f"it did not stop: at {stopped_at}, target {target}"
    assert abs(stopped_at - start) > 0.01, "it had started moving before the broker died"
    assert_reconnected(rig, since)


def test_finish_completes_the_motion_and_reports_it_after_reconnection(
    notify: NotifyListener, lossy_arm: Callable[..., Rig]
) -> None:
    rig = lossy_arm("finish", env={"NOTIFY_SOCKET": str(notify.path)})
    probe = rig.probe
    start = joint_positions(probe.latest_state())[JOINT]
    ids = start_moving(probe, "finish", distance=1.0, speed=0.25)  # about 2 s
    target = start + (1.0 if start <= 0 else -1.0)

    before = kill_broker(rig, notify)
    since = probe.mark()
    # The motion runs to its end while the broker is away.
    notify.wait_for(lambda f: "holding" in status_modes(f[before:]), "STATUS=mode: holding")
    assert "stopping" not in status_modes(notify.fields()[before:]), notify.fields()
    rig.broker.start()

    statuses = final_statuses(probe, ids)
    assert statuses[ids[-1]]["status"] == "succeeded", statuses
    assert any(s["status"] == "succeeded" for s in probe.statuses(ids[-1], since)), (
        "the success was sent after reconnection"
    )
    earlier = [statuses[i] for i in ids[:-1]]
    assert all(s["status"] == "preempted" or overloaded(s) for s in earlier), statuses
    state = probe.wait_state(at_rest, what="the arm at rest after reconnection")
    assert abs(joint_positions(state)[JOINT] - target) <= JOINT_TOLERANCE, (state, target)
    assert_reconnected(rig, since)


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {WAIT_S:g} s waiting for {what}"
        time.sleep(0.05)


def retained(broker: MosquittoBroker, topic: str) -> str:
    """The retained payload of ``armd/<arm>/<topic>`` as a client connecting now sees it."""
    probe = MqttProbe(broker.host, broker.port)
    try:
        message = probe.wait_for(
            lambda: next((m for m in probe.on(topic) if m.retain), None),
            what=f"a retained message on {topic}",
        )
        return message.text
    finally:
        probe.close()


def test_availability_fault_and_model_are_retained_again_after_a_broker_restart(
    lossy_arm: Callable[..., Rig],
) -> None:
    rig = lossy_arm("stop", persistent=False)
    probe = rig.probe
    # A stall of the control loop longer than the devices' watchdog latches a device fault.
    since = probe.mark()
    os.kill(rig.daemon.control_pid, signal.SIGSTOP)
    time.sleep(2 * SIM_WATCHDOG_S)
    os.kill(rig.daemon.control_pid, signal.SIGCONT)
    fault = probe.wait_for(
        lambda: next((m.text for m in probe.on("fault", since) if m.text), None),
        what="a fault",
    )
    assert retained(rig.broker, "fault") == fault
    model = retained(rig.broker, "model")

    rig.broker.kill()
    rig.broker.start()  # empty: nothing is retained unless the daemon publishes it again
    # "online at" is logged once availability and fault are published (and acknowledged).
    wait_until(lambda: rig.daemon.output().count("MQTT: online at") >= 2, "the daemon online again")
    assert retained(rig.broker, "availability") == "online"
    assert retained(rig.broker, "fault") == fault
    assert json.loads(fault)["joint"], fault
    assert retained(rig.broker, "model") == model

    # Still latched; a reset clears it, and the retained message with it.
    probe.wait_state(what="telemetry: the probe is back too")
    since = probe.mark()
    probe.publish("estop", json.dumps({"reset": True}))
    probe.wait_state(lambda s: s["mode"] == "holding", since=since, what="holding after reset")
    probe.wait_for(lambda: "" in [m.text for m in probe.on("fault", since)], what="fault cleared")
    current = joint_positions(probe.latest_state())[JOINT]
    goal = {"id": "after-reset", "type": "joints", "positions": {JOINT: current + 0.2}}
    assert probe.run_goal(goal)["status"] == "succeeded"
    assert rig.daemon.running
