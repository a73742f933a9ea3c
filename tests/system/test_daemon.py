"""The daemon end to end: ``python -m armd run`` on the simulated UR5 of config/sim.yaml, a real
Mosquitto started by the test, and a test client speaking the MQTT contract of docs/mqtt.md.

The tests at the top share one daemon (their goals leave the arm at rest and do not depend on
where it is); those that kill, stop or latch the daemon start their own. Conditions are awaited
with generous timeouts; no test asserts speed."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from armd.config.load import ArmSetup
from armd.logs import WRITER_THREAD
from kinematics import Pose
from tests.system.helpers import (
    NotifyListener,
    Rig,
    armd_command,
    status_modes,
    unit_seconds,
    write_config,
)
from tests.system.probe import (
    ARM,
    WAIT_S,
    MqttProbe,
    at_rest,
    joint_positions,
    max_joint_difference,
)

# The arm of config/sim.yaml starts here (rad, q order): a well-conditioned configuration, far from
# the joint limits and the singularities, from which the pose goals below are sampled.
HOME = (0.0, -math.pi / 2, math.pi / 2, -math.pi / 2, -math.pi / 2, 0.0)
JOINT_TOLERANCE = 0.005  # rad: safety.joint_tolerance's default, the daemon's success criterion
POSE_TOLERANCE = (1e-3, 1e-2)  # m, rad: the defaults of docs/safety.md
STILL_TOLERANCE = 1e-4  # rad: "nothing moves"
SLOW = 0.1  # speed of the motions that a test interrupts: they would last several seconds


def home_goal(goal_id: str, names: tuple[str, ...]) -> dict[str, Any]:
    return {"id": goal_id, "type": "joints", "positions": dict(zip(names, HOME, strict=True))}


def go_home(probe: MqttProbe, names: tuple[str, ...], goal_id: str) -> None:
    status = probe.run_goal(home_goal(goal_id, names))
    assert status["status"] == "succeeded", status


def state_after(probe: MqttProbe, since: int) -> dict[str, Any]:
    """The first telemetry published after message `since` (e.g. a final status)."""
    return probe.wait_state(since=since, what="a state after the status")


def tcp_pose(state: Mapping[str, Any]) -> Pose:
    return Pose(state["tcp"]["position"], state["tcp"]["orientation"])


def telemetry_for(probe: MqttProbe, duration_s: float) -> list[dict[str, Any]]:
    """The states published over the next `duration_s` (by the daemon's clock)."""
    since = probe.mark()

    def spanned() -> bool:
        states = probe.states(since)
        return len(states) >= 2 and states[-1]["t"] - states[0]["t"] >= duration_s

    probe.wait_for(spanned, what=f"{duration_s:g} s of telemetry")
    return probe.states(since)


def assert_still(
    probe: MqttProbe, reference: Mapping[str, float], duration_s: float = 1.0, mode: str = "holding"
) -> None:
    """No joint moves away from `reference` during the next `duration_s` of telemetry."""
    for state in telemetry_for(probe, duration_s):
        moved = max_joint_difference(joint_positions(state), reference)
        assert moved < STILL_TOLERANCE, f"the arm moved by {moved:.6f} rad: {state}"
        assert state["mode"] == mode, state


def slow_goal(
    probe: MqttProbe, goal_id: str, joint: str = "shoulder_pan_joint"
) -> tuple[int, float]:
    """Start a slow 1.5 rad move of `joint` (away from its nearer limit) and wait until the arm
    is moving; returns (the mark before publishing, the target)."""
    current = joint_positions(probe.latest_state())[joint]
    target = current - 1.5 if current > 0 else current + 1.5
    since = probe.publish_goal(
        {"id": goal_id, "type": "joints", "positions": {joint: target}, "speed": SLOW}
    )
    accepted = probe.wait_status(goal_id, final=False, since=since)
    assert accepted["status"] == "accepted", accepted
    probe.wait_mode("moving", since=since)
    return since, target


# -- goals on the shared daemon -------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pose_goal_reaches_the_pose_within_1_mm_and_001_rad(
    arm: Rig, arm_setup: ArmSetup, seed: int
) -> None:
    tree = arm_setup.tree
    go_home(arm.probe, tree.joint_names, f"home-{seed}")
    rng = np.random.default_rng(seed)
    q = np.array(HOME) + rng.uniform(-0.4, 0.4, len(HOME))
    assert not tree.limits.check(q)
    target = tree.fk(q, arm_setup.tool_link)
    start = tcp_pose(arm.probe.latest_state())
    assert start.distance_to(target)[0] > 0.01, "a target that does not move the arm proves nothing"

    goal = {
        "id": f"pose-{seed}",
        "type": "pose",
        "position": target.translation.tolist(),
        "orientation": target.quaternion.tolist(),
    }
    since = arm.probe.publish_goal(goal)
    status = arm.probe.wait_status(goal["id"], since=since)

    assert [s["status"] for s in arm.probe.statuses(goal["id"], since)] == [
        "accepted",
        "succeeded",
    ]
    state = state_after(arm.probe, arm.probe.mark())
    distance, angle = tcp_pose(state).distance_to(target)
    assert distance <= POSE_TOLERANCE[0], (distance, status, state)
    assert angle <= POSE_TOLERANCE[1], (angle, status, state)


def test_linear_pose_goal_keeps_the_tool_on_the_straight_line(
    arm: Rig, arm_setup: ArmSetup
) -> None:
    go_home(arm.probe, arm_setup.tree.joint_names, "home-linear")
    start = tcp_pose(arm.probe.latest_state())
    end = start.translation + np.array([0.10, 0.05, -0.08])  # 14 cm through the workspace
    goal = {
        "id": "linear",
        "type": "pose",
        "position": end.tolist(),
        "motion": "linear",
        "speed": 0.5,
    }
    since = arm.probe.publish_goal(goal)
    status = arm.probe.wait_status("linear", since=since)
    assert status["status"] == "succeeded", status

    # Every tool position sampled while moving lies near the segment start -> end, and the
    # orientation (not given: kept) stays the start's.
    direction = (end - start.translation) / np.linalg.norm(end - start.translation)
    length = float(np.linalg.norm(end - start.translation))
    moving = [s for s in arm.probe.states(since) if s["mode"] == "moving"]
    progress = []
    for state in moving:
        pose = tcp_pose(state)
        offset = pose.translation - start.translation
        along = float(offset @ direction)
        off_line = float(np.linalg.norm(offset - along * direction))
        # the simulated drives lag along the path, not across it (measured: ~0.1 mm)
        assert off_line < 2e-3, f"{off_line * 1e3:.2f} mm off the line at {along:.3f} m"
        assert -2e-3 < along < length + 2e-3, along
        assert start.distance_to(pose)[1] < 0.01, state
        progress.append(along / length)
    assert sum(0.1 < p < 0.9 for p in progress) >= 3, f"too few samples mid-path: {progress}"
    final = tcp_pose(state_after(arm.probe, arm.probe.mark()))
    assert final.distance_to(Pose(end, start.quaternion)) <= POSE_TOLERANCE


def test_joint_goal_reaches_the_positions(arm: Rig, arm_setup: ArmSetup) -> None:
    names = arm_setup.tree.joint_names
    offsets = (0.3, -0.2, 0.25, 0.2, -0.3, 0.5)
    positions = {name: h + d for name, h, d in zip(names, HOME, offsets, strict=True)}
    goal = {"id": "joints", "type": "joints", "positions": positions, "speed": 0.8}
    since = arm.probe.publish_goal(goal)
    arm.probe.wait_status("joints", since=since)

    assert [s["status"] for s in arm.probe.statuses("joints", since)] == ["accepted", "succeeded"]
    state = state_after(arm.probe, arm.probe.mark())
    assert max_joint_difference(joint_positions(state), positions) <= JOINT_TOLERANCE, state
    assert at_rest(state, tolerance=0.01), state
    # each joint's commanded position beside its measured one: at rest, the target
    commands = {name: joint["command"] for name, joint in state["joints"].items()}
    assert max_joint_difference(commands, positions) <= 1e-9, state


def scheduling_policies(pid: int) -> dict[int, tuple[str, int]]:
    """{thread id: (name, scheduling policy)} of a process's threads
    (``/proc/<pid>/task/*/stat``: the comm, field 41)."""
    policies = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        stat = (task / "stat").read_text(encoding="ascii")
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": field 3 onwards
        policies[int(task.name)] = (name, int(fields[41 - 3]))
    return policies


def test_the_control_loop_runs_in_a_real_time_process_of_its_own(arm: Rig) -> None:
    if os.geteuid() != 0:
        pytest.skip("SCHED_FIFO needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO here")
    control = arm.daemon.control_pid
    cmdline = Path(f"/proc/{control}/cmdline").read_bytes().split(b"\0")
    assert b"armd.control.process" in cmdline, cmdline
    threads = scheduling_policies(control)
    # the loop's thread and any bus reader are real-time; only the log writer is not (it may
    # wait on the journal, and must never hold up a tick: armd.logs)
    others = [name for name, policy in threads.values() if policy != os.SCHED_FIFO]
    assert others == [WRITER_THREAD], threads
    assert threads[control][1] == os.SCHED_FIFO
    daemon = scheduling_policies(arm.daemon.pid)
    assert {policy for _, policy in daemon.values()} == {os.SCHED_OTHER}  # MQTT, planning
    assert "control process: real-time priority 50 (SCHED_FIFO)" in arm.daemon.output()
    # Its mappings are locked (VmLck counts their size) as they are touched (MCL_ONFAULT): what
    # was not resident was not faulted in to lock it.
    assert "control process: memory locked (mlockall, on fault)" in arm.daemon.output()
    locked, resident = status_kib(control, "VmLck"), status_kib(control, "VmRSS")
    assert locked >= status_kib(control, "VmSize") - 1024, locked
    assert resident < locked / 1.5, (resident, locked)
    assert status_kib(arm.daemon.pid, "VmLck") == 0


def status_kib(pid: int, field: str) -> int:
    """A "kB" field of /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.mark.parametrize(
    ("goal", "reason"),
    [
        pytest.param(
            {"type": "pose", "position": [5.0, 5.0, 5.0]},
            re.compile(r"unreachable"),
            id="pose-out-of-reach",
        ),
        pytest.param(
            {"type": "pose", "position": [0.1, 0.1, 0.3], "orientation": [1.0, 0.0, 0.0, 0.0]},
            # the solutions it has (beyond the no-jump box) fold the wrist into the forearm: the
            # collision is the reason when every solution found collides
            re.compile(r"unreachable|reachable only|^collision: "),
            id="pose-inside-the-base",
        ),
        pytest.param(
            {"type": "joints", "positions": {"shoulder_pan_joint": 0.2, "elbow_joint": 4.0}},
            re.compile(r"joint 'elbow_joint': 4 outside \[-3\.14159, 3\.14159\]"),
            id="joint-beyond-its-limit",
        ),
    ],
)
def test_infeasible_goal_is_rejected_and_nothing_moves(
    arm: Rig, goal: dict[str, Any], reason: re.Pattern[str], request: pytest.FixtureRequest
) -> None:
    goal_id = f"infeasible-{request.node.callspec.id}"
    before = joint_positions(arm.probe.latest_state())
    since = arm.probe.publish_goal({"id": goal_id, **goal})
    status = arm.probe.wait_status(goal_id, since=since)

    assert status["status"] == "rejected", status
    assert reason.search(status["reason"]), status
    assert_still(arm.probe, before)
    assert [s["status"] for s in arm.probe.statuses(goal_id, since)] == ["rejected"]


def test_new_goal_preempts_the_moving_one(arm: Rig) -> None:
    since, _ = slow_goal(arm.probe, "first")
    current = joint_positions(arm.probe.latest_state())["shoulder_pan_joint"]
    second = {
        "id": "second",
        "type": "joints",
        "positions": {"shoulder_pan_joint": current},  # where the arm is now: turn back
    }
    arm.probe.publish_goal(second)

    first = arm.probe.wait_status("first", since=since)
    assert first["status"] == "preempted", first
    assert "second" in first["reason"], first
    assert arm.probe.wait_status("second", since=since)["status"] == "succeeded"
    state = state_after(arm.probe, arm.probe.mark())
    assert abs(joint_positions(state)["shoulder_pan_joint"] - current) <= JOINT_TOLERANCE


def test_stop_goal_ends_the_motion_and_holds(arm: Rig) -> None:
    since, target = slow_goal(arm.probe, "to-be-stopped")
    arm.probe.publish_goal({"id": "stop", "type": "stop"})

    moving = arm.probe.wait_status("to-be-stopped", since=since)
    assert moving["status"] == "aborted", moving
    assert moving.get("reason"), moving
    assert arm.probe.wait_status("stop", since=since)["status"] == "succeeded"
    state = arm.probe.wait_state(at_rest, what="the arm at rest after the stop")
    assert abs(joint_positions(state)["shoulder_pan_joint"] - target) > 0.1, "it did not stop"
    assert_still(arm.probe, joint_positions(state), duration_s=0.5)


NOT_JSON = '{"id": "broken", "type": "pose", "position": [0.4, 0.1'

MALFORMED = [
    # (payload as sent, the id the status carries, a regex the reason must match)
    pytest.param(NOT_JSON, None, r"not valid JSON", id="not-json"),
    pytest.param("[1, 2, 3]", None, r"JSON object", id="not-an-object"),
    pytest.param('{"id": "m-position", "type": "pose"}', "m-position",
                 r"^position: required field is missing", id="missing-position"),
    pytest.param('{"id": "m-type", "position": [0.4, 0.1, 0.4]}', "m-type",
                 r"^type: required field is missing", id="missing-type"),
    pytest.param('{"type": "joints", "positions": {"elbow_joint": 1.0}}', None,
                 r"^id: required field is missing", id="missing-id"),
    pytest.param('{"id": "m-nan", "type": "pose", "position": [NaN, 0, 0]}', "m-nan",
                 r"^position\[0\]: nan must be a finite number", id="nan"),
    pytest.param('{"id": "m-inf", "type": "joints", "positions": {"elbow_joint": Infinity}}',
                 "m-inf", r"^positions\.elbow_joint: inf must be a finite number", id="infinity"),
    pytest.param('{"id": "m-joint", "type": "joints", "positions": {"elbo_joint": 0.1}}',
                 "m-joint", r"^positions\.elbo_joint: unknown joint", id="unknown-joint"),
    pytest.param('{"id": "m-link", "type": "pose", "position": [0.4, 0.1, 0.4], '
                 '"link": "gripper"}', "m-link", r"^link: 'gripper' unknown link",
                 id="unknown-link"),
    pytest.param('{"id": "m-speed", "type": "joints", "positions": {"elbow_joint": 1.0}, '
                 '"speed": 2}', "m-speed", r"^speed: 2 must be in \[0.01, 1\]", id="bad-speed"),
    # Issue 10, items 1-3: these took the daemon down.
    pytest.param('{"id": "a1", "type": "joints", "positions": {"shoulder_pan_joint": 0.5}, '
                 '"speed": 5e-324}', "a1", r"^speed: 5e-324 must be in \[0.01, 1\]",
                 id="subnormal-speed"),
    pytest.param('{"id": "b3", "type": "joints", "positions": {"shoulder_pan_joint": -0.3}, '
                 '"speed": 1e-12}', "b3", r"^speed: 1e-12 must be in \[0.01, 1\]",
                 id="tiny-speed"),
    pytest.param('{"id": "c1", "type": "pose", "position": [1e308, 0.1, 0.4], '
                 '"motion": "linear"}', "c1", r"^position\[0\]: 1e\+308 must be within ±100 m",
                 id="huge-position"),
    pytest.param('{"id": "m-typo", "type": "pose", "postion": [0.4, 0.1, 0.4]}', "m-typo",
                 r"postion: unknown field", id="misspelt-field"),
    pytest.param('{"id": "m-quat", "type": "pose", "position": [0.4, 0.1, 0.4], '
                 '"orientation": [0, 0, 0, 0]}', "m-quat", r"^orientation: .*non-zero",
                 id="zero-quaternion"),
]  # fmt: skip


@pytest.mark.parametrize(("payload", "goal_id", "reason"), MALFORMED)
def test_malformed_goal_is_rejected_with_a_reason_naming_the_field(
    arm: Rig, payload: str, goal_id: str | None, reason: str
) -> None:
    before = joint_positions(arm.probe.latest_state())
    since = arm.probe.publish_goal(payload)
    status = arm.probe.wait_status(goal_id, since=since)

    assert status["status"] == "rejected", status
    assert re.search(reason, status["reason"]), status
    # The daemon lives on, unmoved, and still serves goals.
    assert arm.daemon.running
    assert arm.probe.run_goal({"id": "still-there", "type": "stop"})["status"] == "succeeded"
    state = arm.probe.latest_state()
    assert state["mode"] == "holding"
    assert max_joint_difference(joint_positions(state), before) < STILL_TOLERANCE


def test_goal_command_exits_0_on_success_and_1_on_rejection(arm: Rig) -> None:
    current = joint_positions(arm.probe.latest_state())["wrist_3_joint"]
    target = current - 0.5 if current > 0 else current + 0.5
    ok = subprocess.run(
        armd_command(
            "goal", "--config", arm.config, "--id", "cli-ok",
            "joints", f"wrist_3_joint={target}",
        ),
        capture_output=True, text=True, timeout=2 * WAIT_S, check=False,
    )  # fmt: skip
    assert ok.returncode == 0, ok
    printed = [json.loads(line) for line in ok.stdout.splitlines()]
    assert [s["status"] for s in printed] == ["accepted", "succeeded"], ok.stdout
    assert all(s["id"] == "cli-ok" for s in printed)

    refused = subprocess.run(
        armd_command(
            "goal", "--config", arm.config, "--id", "cli-far", "pose", "--position", "5", "5", "5"
        ),
        capture_output=True, text=True, timeout=2 * WAIT_S, check=False,
    )  # fmt: skip
    assert refused.returncode == 1, refused
    printed = [json.loads(line) for line in refused.stdout.splitlines()]
    assert len(printed) == 1, refused.stdout
    assert printed[0]["status"] == "rejected", refused.stdout
    assert printed[0]["id"] == "cli-far"
    assert "unreachable" in printed[0]["reason"]


def test_second_daemon_on_the_same_lock_refuses_to_start_before_opening_a_bus(
    arm: Rig, tmp_path: Path
) -> None:
    # A config whose wrist is on a serial port that does not exist: opening that bus would fail
    # with a message naming the port. With the lock held, the message names the lock instead.
    port = tmp_path / "no-such-port"
    dynamixel = {"port": str(port), "devices": {"wrist3": {"id": 1}}}
    servos = {
        "drivers": {
            "sim": {"params": {"devices": {"wrist3": None}}},
            "servos": {"type": "dynamixel", "params": dynamixel},
        },
        "joints": {"wrist_3_joint": {"driver": "servos", "device": "wrist3"}},
    }

    def run(directory: Path, lock_file: Path) -> subprocess.CompletedProcess[str]:
        config = write_config(directory, arm.broker.port, {**servos, "lock_file": str(lock_file)})
        return subprocess.run(
            armd_command("run", "--config", config),
            capture_output=True, text=True, timeout=2 * WAIT_S, check=False,
        )  # fmt: skip

    alone = run(tmp_path / "alone", tmp_path / "alone.lock")
    assert alone.returncode != 0, alone
    assert str(port) in alone.stderr, alone.stderr

    since = arm.probe.mark()
    shared_lock = Path(_lock_file(arm.config))
    second = run(tmp_path / "second", shared_lock)
    assert second.returncode == 1, second
    assert f"lock {shared_lock} held by pid {arm.daemon.pid}" in second.stderr, second.stderr
    assert str(port) not in second.stderr + second.stdout, "it opened the bus before the lock"
    # The first daemon never noticed: the second never reached the broker with their client id.
    assert arm.broker.log().count(" as armd-ur5-sim ") == 1, arm.broker.log()
    assert arm.daemon.running
    arm.probe.wait_state(since=since)
    assert all(m.text == "online" for m in arm.probe.on("availability", since))


def _lock_file(config: Path) -> str:
    return str(yaml.safe_load(config.read_text(encoding="utf-8"))["lock_file"])


# -- tests with a daemon of their own -------------------------------------------------------------


def test_estop_latches_until_reset(start_arm: Callable[..., Rig]) -> None:
    rig = start_arm()
    probe = rig.probe
    since, _ = slow_goal(probe, "moving")

    probe.publish("estop", json.dumps({"engage": True}))
    aborted = probe.wait_status("moving", since=since)
    assert aborted["status"] == "aborted", aborted
    assert "e-stop" in aborted["reason"], aborted
    stopped = probe.wait_state(
        lambda s: at_rest(s, mode="estop"),
        what="the arm at rest in mode estop",
    )

    # Latched: goals are rejected and nothing moves, until the reset.
    probe.run_goal({"id": "refused", "type": "joints", "positions": {"elbow_joint": 1.0}})
    assert probe.statuses("refused") == [
        {"id": "refused", "status": "rejected", "reason": "arm is estop: reset first"}
    ]
    assert_still(probe, joint_positions(stopped), mode="estop")

    probe.publish("estop", json.dumps({"reset": True}))
    probe.wait_mode("holding")
    again = probe.run_goal({"id": "again", "type": "joints", "positions": {"elbow_joint": 1.0}})
    assert again["status"] == "succeeded", again


def test_availability_turns_offline_when_the_daemon_is_killed(
    start_arm: Callable[..., Rig],
) -> None:
    rig = start_arm()
    since = rig.probe.mark()
    rig.daemon.signal(signal.SIGKILL)
    assert rig.daemon.wait() == -signal.SIGKILL

    rig.probe.wait_availability("offline", since=since)  # the Last Will
    # ... retained: a dashboard that connects later sees it too.
    late = MqttProbe(rig.broker.host, rig.broker.port, ARM)
    try:
        late.wait_for(lambda: late.availability() == "offline", what="retained offline")
        assert late.on("availability")[-1].retain
    finally:
        late.close()


def test_sigterm_mid_motion_stops_the_arm_and_exits_0(start_arm: Callable[..., Rig]) -> None:
    rig = start_arm()
    since, _ = slow_goal(rig.probe, "interrupted")

    rig.daemon.signal(signal.SIGTERM)
    assert rig.daemon.wait(timeout_s=unit_seconds("TimeoutStopSec")) == 0, rig.daemon.output()

    status = rig.probe.wait_status("interrupted", since=since)
    assert status["status"] == "aborted", status
    assert "stopping" in status["reason"], status
    rig.probe.wait_availability("offline", since=since)
    assert rig.probe.on("availability")[-1].text == "offline"
    assert "Traceback" not in rig.daemon.output()


def test_systemd_notifications(start_arm: Callable[..., Rig], tmp_path: Path) -> None:
    socket_path = tmp_path / "notify.sock"
    assert len(str(socket_path)) < 100, "AF_UNIX paths are limited to 108 bytes"
    listener = NotifyListener(socket_path)
    try:
        # systemd sets WATCHDOG_PID to the service's main pid: the shell's pid, which `exec`
        # hands on to the daemon.
        rig = start_arm(
            env={"NOTIFY_SOCKET": str(socket_path), "WATCHDOG_USEC": "200000"},
            wrapper=["sh", "-c", 'WATCHDOG_PID=$$ exec "$0" "$@"'],
        )
        listener.wait_for(lambda f: f.count("WATCHDOG=1") >= 5, "repeated WATCHDOG=1")
        fields = listener.fields()
        assert fields.count("READY=1") == 1, fields
        assert fields.index("READY=1") < fields.index("WATCHDOG=1"), fields
        assert "holding" in status_modes(fields), fields

        since = rig.probe.publish_goal(
            {"id": "notified", "type": "joints", "positions": {"wrist_3_joint": 0.5}}
        )
        assert rig.probe.wait_status("notified", since=since)["status"] == "succeeded"
        listener.wait_for(lambda f: "moving" in status_modes(f), "STATUS=mode: moving")

        rig.daemon.signal(signal.SIGTERM)
        assert rig.daemon.wait() == 0, rig.daemon.output()
        fields = listener.fields()
        assert "STOPPING=1" in fields, fields
        assert fields.index("STOPPING=1") > fields.index("READY=1")
    finally:
        listener.close()


def test_a_payload_is_taken_and_a_bad_one_rejected_changing_nothing(arm: Rig) -> None:
    """The ``payload`` topic reaches the daemon's dynamics (its journal says so); a bad load is
    answered on ``goal/status`` and the arm carries on."""
    arm.probe.publish("payload", '{"mass": 1.5, "com": [0, 0, 0.05]}')
    arm.probe.wait_for(
        lambda: "payload: 1.5 kg at tool0" in arm.daemon.output(), what="the payload logged"
    )
    since = arm.probe.publish("payload", '{"mass": 1.5, "inertia": [1, 0, 0, 0.1, 0, 0.1]}')
    status = arm.probe.wait_status(None, since=since)
    assert status["status"] == "rejected", status
    assert status["reason"].startswith("payload: inertia [1.0, 0.0, 0.0, 0.1, 0.0, 0.1]"), status
    assert arm.daemon.output().count(" kg at tool0") == 1  # the bad one was not taken
    assert arm.probe.run_goal({"id": "after-payload", "type": "stop"})["status"] == "succeeded"
    arm.probe.publish("payload", '{"mass": 0}')  # the shared arm as it was
    arm.probe.wait_for(lambda: "payload: 0 kg at tool0" in arm.daemon.output(), what="no load")
