"""`armd goal`, `armd estop` and `armd watch` against the daemon on the simulated UR5 and a real
Mosquitto (the test client of the rig watches alongside). No test asserts speed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from armd.cli.common import EXIT_READER_LEFT
from tests.armd.cli.test_main import run_reader_gone, run_reader_leaving
from tests.armd.terminal import CTRL_C, Terminal
from tests.system.helpers import Rig, armd_command
from tests.system.probe import WAIT_S, at_rest, joint_positions

ROOT = Path(__file__).resolve().parents[2]
LEADER = ROOT / "config" / "chains" / "ur5_leader.json"
UPTIME = r"up \d+ (s|min \d\d s|h \d\d min)"
AGE = r"state \d+\.\d s old( \(no newer state\))?"
HEADER = re.compile(
    rf"arm ur5-sim  availability online  mode holding  {UPTIME}  {AGE}  missed ticks \d+"
)
WAVE = ROOT / "docs" / "examples" / "wave.csv"


def armd(*args: object, timeout_s: float = 2 * WAIT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        armd_command(*args), capture_output=True, text=True, timeout=timeout_s, check=False
    )


def assert_one_line_error(done: subprocess.CompletedProcess[str], code: int, start: str) -> None:
    assert done.returncode == code, done
    assert done.stderr.startswith(f"armd: error: {start}"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_estop_engage_and_reset_wait_for_the_mode(arm: Rig) -> None:
    engaged = armd("estop", "--config", arm.config, "engage")
    assert (engaged.returncode, engaged.stdout) == (0, "e-stop engaged: mode estop\n"), engaged
    assert arm.probe.latest_state()["mode"] == "estop"
    refused = armd("goal", "--config", arm.config, "--id", "in-estop", "joints", "elbow_joint=1")
    assert refused.returncode == 1, refused
    reset = armd("estop", "--config", arm.config, "reset")
    assert (reset.returncode, reset.stdout) == (0, "e-stop reset: mode holding\n"), reset


def test_keypoints_goal_from_a_chain_file(arm: Rig) -> None:
    done = armd("goal", "--config", arm.config, "--id", "cli-keypoints", "keypoints", LEADER)
    assert done.returncode == 0, done
    statuses = [json.loads(line) for line in done.stdout.splitlines()]
    assert [s["status"] for s in statuses] == ["accepted", "succeeded"], done.stdout
    recorded = json.loads(LEADER.read_text(encoding="utf-8"))["joints"]
    reached = joint_positions(arm.probe.latest_state())
    for name in ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint"):
        assert abs(reached[name] - recorded[name]) < 0.01, (name, reached)


def test_named_goal_moves_to_the_configs_pose_and_an_unknown_name_is_refused(arm: Rig) -> None:
    done = armd("goal", "--config", arm.config, "--id", "cli-named", "named", "ready")
    assert done.returncode == 0, done
    reached = joint_positions(arm.probe.latest_state())
    assert reached["elbow_joint"] == pytest.approx(1.9, abs=0.01), reached
    refused = armd("goal", "--config", arm.config, "--id", "cli-unnamed", "named", "hom")
    assert refused.returncode == 1, refused
    assert "'hom' is not a named pose of this arm; poses: 'home', 'ready'" in refused.stdout


def test_trajectory_goal_from_a_csv_file_and_from_points(arm: Rig) -> None:
    """docs/examples/wave.csv (docs/mqtt.md's command line), then the same kind of goal with its
    points given as --point."""
    done = armd("goal", "--config", arm.config, "--id", "cli-wave", "trajectory", WAVE)
    assert done.returncode == 0, done
    statuses = [json.loads(line) for line in done.stdout.splitlines()]
    assert [s["status"] for s in statuses] == ["accepted", "succeeded"], done.stdout
    reached = settled(arm)  # the last point: 0.2, 1.2
    assert reached["shoulder_pan_joint"] == pytest.approx(0.2, abs=0.005), reached
    assert reached["elbow_joint"] == pytest.approx(1.2, abs=0.005), reached
    done = armd(
        "goal", "--config", arm.config, "--id", "cli-points", "trajectory",
        "--point", "t=0", "elbow_joint=1.3", "--point", "t=1", "elbow_joint=1.5", "--speed", "0.5",
    )  # fmt: skip
    assert done.returncode == 0, done
    reached = settled(arm)
    assert reached["elbow_joint"] == pytest.approx(1.5, abs=0.005), reached


def settled(arm: Rig) -> dict[str, float]:
    """The joints of the first state at rest published after now: the state the test's client
    already has may be older than the goal's success (the two topics race to it)."""
    since = arm.probe.mark()
    return joint_positions(arm.probe.wait_state(at_rest, since=since, what="the arm at rest"))


def test_gripper_goal_on_an_arm_without_a_gripper_is_rejected_by_the_daemon(arm: Rig) -> None:
    done = armd("goal", "--config", arm.config, "--id", "cli-gripper", "gripper", "close")
    assert done.returncode == 1, done
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "id": "cli-gripper",
        "status": "rejected",
        "reason": "type: 'gripper': this arm has no gripper (config: gripper)",
    }


def test_goal_shows_its_progress_while_it_waits(arm: Rig) -> None:
    target = joint_positions(arm.probe.latest_state())["shoulder_pan_joint"] + 1.0
    done = armd(
        "goal", "--config", arm.config, "--id", "cli-slow",
        "joints", f"shoulder_pan_joint={target}", "--speed", "0.3",
    )  # fmt: skip
    assert done.returncode == 0, done
    progress = done.stderr.splitlines()
    assert progress, "no progress line"  # plain lines (stderr is not a terminal), one a second
    assert all(line.startswith("goal cli-slow: ") for line in progress), progress
    left = [float(line.split(", ")[1].split()[0]) for line in progress if "to go" in line]
    assert left, progress
    assert left == sorted(left, reverse=True), left  # the distance shrinks
    assert all(0.0 <= v <= 1.0 + 1e-6 for v in left), left


def test_goal_names_the_joint_whose_value_is_not_a_number(arm: Rig) -> None:
    done = armd("goal", "--config", arm.config, "joints", "elbow_joint=abc")
    assert_one_line_error(done, 2, "goal joints: elbow_joint: 'abc' must be a number (rad or m)")


def test_watch_once_shows_joints_against_their_limits(arm: Rig) -> None:
    done = armd("watch", "--config", arm.config, "--once")
    assert done.returncode == 0, done
    lines = done.stdout.splitlines()
    assert HEADER.fullmatch(lines[0]), lines
    assert "  elbow_joint          " in "\n".join(lines)
    assert any("rad in [-3.1416, +3.1416]" in line for line in lines), lines
    assert any(line.startswith("  tcp tool0  position ") for line in lines), lines
    assert lines[-1] == "  fault none"


def test_state_carries_the_daemons_uptime_on_the_clock_of_t(arm: Rig) -> None:
    """``uptime`` is the time since the daemon started, on the clock of ``t`` (the robot
    computer's monotonic clock, the test's own here): ``t - uptime`` is when it started."""
    probe = arm.probe
    since = probe.mark()
    states = probe.wait_for(lambda: probe.states(since)[2:] and probe.states(since), what="states")
    assert all(state["uptime"] >= 0.0 for state in states), states
    started = [state["t"] - state["uptime"] for state in states]
    assert max(started) - min(started) < 1e-6, started
    assert started[0] < time.monotonic()


def test_watch_on_a_terminal_shows_the_state_age_grow_when_the_daemon_stops(
    start_arm: pytest.FixtureRequest,
) -> None:
    rig: Rig = start_arm()  # type: ignore[operator]
    terminal = Terminal(armd_command("watch", "--config", rig.config), cwd=ROOT)
    try:
        terminal.expect(rf"availability online  mode holding  {UPTIME}  {AGE}")
        assert rig.daemon.stop() == 0
        terminal.expect(r"availability offline")
        terminal.expect(r"state \d+\.\d s old \(no newer state\)")  # redrawn without a message
        terminal.type(CTRL_C)
        assert terminal.wait() == 130
    finally:
        terminal.close()


def test_watch_prints_plain_lines_when_piped_and_ends_on_ctrl_c(arm: Rig) -> None:
    watcher = subprocess.Popen(
        armd_command("watch", "--config", arm.config, "--interval", "0.2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while not any(line.startswith("  tcp ") for line in seen):
            assert time.monotonic() < deadline, seen
            seen.append(watcher.stdout.readline().rstrip("\n"))
        assert "availability online" in seen
        arm.probe.run_goal({"id": "seen-by-watch", "type": "stop"})
        while "goal seen-by-watch succeeded" not in seen:
            assert time.monotonic() < deadline, seen
            seen.append(watcher.stdout.readline().rstrip("\n"))
    finally:
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=WAIT_S)
    assert watcher.returncode == 130, err
    assert "Traceback" not in err


def test_goal_to_an_offline_arm_fails_at_once(start_arm: pytest.FixtureRequest) -> None:
    rig: Rig = start_arm()  # type: ignore[operator]
    assert rig.daemon.stop() == 0
    started = time.monotonic()
    done = armd("goal", "--config", rig.config, "--timeout", "60", "joints", "elbow_joint=1")
    assert_one_line_error(done, 1, "arm 'ur5-sim' is offline (armd/ur5-sim/availability)")
    assert time.monotonic() - started < 30.0  # far from the 60 s timeout, whatever the machine

    other = Path(rig.config).with_name("other.yaml")
    other.write_text(
        Path(rig.config).read_text(encoding="utf-8").replace("name: ur5-sim", "name: other"),
        encoding="utf-8",
    )
    never = armd("estop", "--config", other, "engage")
    assert_one_line_error(never, 1, "arm 'other' has never been online on this broker")


@pytest.mark.parametrize("buffering", ["buffered", "unbuffered"])
def test_watch_and_goal_whose_reader_leaves_end_quietly(arm: Rig, buffering: str) -> None:
    """`armd watch --once | true`, `armd watch | head -1`, `armd goal ... | head -1`: 141 (the
    reader left), nothing on stderr but the goal's own progress lines."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if buffering == "unbuffered":
        env["PYTHONUNBUFFERED"] = "1"
    once = run_reader_gone(["watch", "--config", arm.config, "--once"], env)
    assert once == (EXIT_READER_LEFT, "")
    code, read, err = run_reader_leaving(
        ["watch", "--config", arm.config, "--interval", "0.1"], env
    )
    assert read.startswith(b"availability online\n") or read.startswith(b"arm ur5-sim"), read
    assert (code, err) == (EXIT_READER_LEFT, "")
    start = joint_positions(arm.probe.latest_state())["shoulder_pan_joint"]
    goal = ["goal", "--config", arm.config, "--id", f"cli-pipe-{buffering}", "joints"]
    # slow (seconds): its final status comes well after the reader has left
    target = [f"shoulder_pan_joint={start + 0.3}", "--speed", "0.2"]
    code, read, err = run_reader_leaving([*goal, *target], env)
    assert read.startswith(b'{"id": "cli-pipe-'), read  # its accepted status
    assert code == EXIT_READER_LEFT, err
    assert all(line.startswith("goal cli-pipe-") for line in err.splitlines()), err
    arm.probe.wait_status(f"cli-pipe-{buffering}")
