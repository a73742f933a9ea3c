"""`armd record` and `armd replay` against the daemon on the simulated UR5 and a real Mosquitto:
a recording made while goals move the arm is replayed as a ``trajectory`` goal and the arm
follows it (its measured positions compared with the recording's, time-aligned); a dry run sends
nothing. No test asserts speed."""

from __future__ import annotations

import csv
import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from armd.tools.recording import Recording, read_recording
from tests.system.helpers import Rig, armd_command
from tests.system.probe import WAIT_S, at_rest, joint_positions

JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")
# rad: measured 1.1-1.5 mrad in 8 runs (25 Hz states interpolated, the sim's lag); the replayed
# curve itself stays within 1 mrad of the recording. Until 2026-11-26 the replay's states were cut
# at its last moving one, which forced the time alignment off by up to ~40 ms: 2-32 mrad.
TRACKING = 0.008
ACCELERATION = 4.0  # rad/s²: config/sim.yaml's limit on each of JOINTS
PERIOD_S = 1 / 250  # config/sim.yaml's loop_hz
SCALE_STEP = 0.0002  # a slowed replay's stretch is searched in these steps


def armd(*args: object, timeout_s: float = 4 * WAIT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        armd_command(*args), capture_output=True, text=True, timeout=timeout_s, check=False
    )


def goal(arm: Rig, goal_id: str, speed: str, **positions: float) -> None:
    pairs = [f"{name}={value}" for name, value in positions.items()]
    done = armd("goal", "--config", arm.config, "--id", goal_id, "joints", *pairs, "--speed", speed)
    assert done.returncode == 0, done


def record_demo(arm: Rig, out: Path) -> np.ndarray:
    """Record two goals moving the arm (ended with Ctrl-C); returns where it started."""
    start = joint_positions(arm.probe.latest_state())
    recorder = subprocess.Popen(
        armd_command("record", "--config", arm.config, "--out", out),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert recorder.stderr is not None
        started = recorder.stderr.readline()  # once subscribed
        assert started.startswith("recording armd/ur5-sim/state to "), started
        time.sleep(0.3)  # some rest first, as in a real demonstration
        goal(arm, "demo-1", "0.4", shoulder_pan_joint=start["shoulder_pan_joint"] + 0.6,
             elbow_joint=start["elbow_joint"] - 0.4)  # fmt: skip
        goal(arm, "demo-2", "0.7", shoulder_lift_joint=start["shoulder_lift_joint"] + 0.3,
             shoulder_pan_joint=start["shoulder_pan_joint"] + 0.2)  # fmt: skip
        time.sleep(0.3)
    finally:
        recorder.send_signal(signal.SIGINT)  # Ctrl-C
        _, stderr = recorder.communicate(timeout=WAIT_S)
    assert recorder.returncode == 0, stderr
    assert stderr.splitlines()[-1].startswith("recorded "), stderr
    return np.array([start[name] for name in JOINTS])


def test_a_recording_is_replayed_and_followed(arm: Rig, tmp_path: Path) -> None:
    """Without a stall the replay follows the recording within `TRACKING`. A stall widens what
    is compared, by what the test measured: the loop's missed ticks (during the recording or the
    replay: the motion is shifted in time by as long, so a joint at the recording's peak speed
    is off by that speed × the missed time), and the largest gap between the replay's states
    (the daemon's telemetry runs at normal priority: the followed curve is interpolated across
    the gap, off by up to acceleration × gap² / 8). A tick missed while recording is in the
    recording too (the arm held its command one period longer): the curve through it may need
    more than the jerk limit, and the daemon then slows the whole replay (its accepted status
    says by how much, ``time-scaled ×1.06 ...``); the replay is compared stretched as much."""
    mark = arm.probe.mark()
    recording, followed, dry, done = record_and_replay(arm, tmp_path / "demo.csv.gz")
    states = arm.probe.states(mark)
    missed = states[-1]["missed_ticks"] - states[0]["missed_ticks"]
    stretch = slowdown(json.loads(done.stdout.splitlines()[0]).get("reason"))
    error = tracking_error(recording, followed, stretch)
    columns = [recording.joints.index(name) for name in JOINTS]
    speeds = np.abs(np.diff(recording.positions[:, columns], axis=0))
    peak_speed = float((speeds / np.diff(recording.times)[:, None]).max())
    gap_s = float(np.diff([s["t"] for s in followed]).max())
    bound = TRACKING + peak_speed * missed * PERIOD_S + ACCELERATION * gap_s**2 / 8
    if stretch != 1.0:  # the stretch is searched in steps: off by half a step at the ends
        bound += peak_speed * SCALE_STEP / 2 * float(recording.times[-1])
    seen = (error, bound, stretch, missed, peak_speed, gap_s, dry.stdout, done.stderr)
    assert error < bound, seen


def record_and_replay(
    arm: Rig, demo: Path
) -> tuple[
    Recording,
    list[dict[str, Any]],
    subprocess.CompletedProcess[str],
    subprocess.CompletedProcess[str],
]:
    """Record a demonstration into `demo`, dry-run and replay it; the recording, the replay's
    states from its first moving one on, and the two commands' results."""
    origin = record_demo(arm, demo)
    recording = read_recording(demo)  # complete: every row parses
    assert recording.times.shape[0] > 20
    header = recording.joints
    assert header == tuple(joint_positions(arm.probe.latest_state()))
    # Elsewhere first: the replay starts with an approach to the recording's first point.
    goal(arm, "away", "1", shoulder_pan_joint=float(origin[0]) - 0.3)
    arm.probe.wait_state(at_rest, what="the arm at rest")

    mark = arm.probe.mark()
    dry = armd("replay", demo, "--config", arm.config, "--dry-run", "--id", "dry")
    assert dry.returncode == 0, dry
    lines = dry.stdout.splitlines()
    assert lines[0].startswith(f"replay {demo}: {recording.times.shape[0]} samples"), lines
    assert lines[1].startswith("positions' error (simplification, rounding, spline): at most ")
    assert lines[2].startswith("accepted: "), lines
    assert lines[3].startswith("approach "), lines
    time.sleep(0.5)
    assert arm.probe.on("goal", mark) == []  # the dry run sent nothing
    assert arm.probe.statuses("dry", mark) == []

    done = armd("replay", demo, "--config", arm.config, "--id", "replay")
    assert done.returncode == 0, done
    statuses = [json.loads(line) for line in done.stdout.splitlines()]
    assert [s["status"] for s in statuses] == ["accepted", "succeeded"], done
    sent = [m.json() for m in arm.probe.on("goal", mark)]
    assert [g["type"] for g in sent] == ["trajectory"]
    assert len(sent[0]["points"]) < recording.times.shape[0]  # simplified

    # From the replay's first moving state on, the rest after it included: the recording's
    # window ends at rest too, and the replay's own end comes a variable while after the last
    # moving state (when its goal settles, on a 25 Hz grid). The states come through the broker
    # behind the command's statuses (a loaded machine holds them up): first one at rest from now
    # on, so that every state of the replay has arrived.
    arm.probe.wait_state(at_rest, what="the arm at rest after the replay")
    states = arm.probe.states(mark)
    start = next(i for i, s in enumerate(states) if s["mode"] == "moving")
    return recording, states[start:], dry, done


def slowdown(reason: str | None) -> float:
    """The factor a trajectory goal's accepted status says it was time-scaled by (1: none)."""
    found = re.match(r"time-scaled ×(\d+\.\d+) ", reason or "")
    return 1.0 if found is None else float(found.group(1))


def tracking_error(
    recording: Recording, followed: list[dict[str, Any]], stretch: float = 1.0
) -> float:
    """The largest joint distance between the recording and the replay's measured states, with
    the replay's time shifted to fit best (its approach comes first; the clocks differ) and,
    when the daemon slowed the replay by `stretch` (rounded to 2 decimals in its status), the
    recording's times stretched by the factor within ±0.005 of it that fits best (steps of
    `SCALE_STEP`: at most half a step × the window's length off at its ends)."""
    columns = [recording.joints.index(name) for name in JOINTS]
    recorded = recording.positions[:, columns]
    t = np.array([s["t"] for s in followed])
    q = np.array([[s["joints"][name]["position"] for name in JOINTS] for s in followed])
    moving = np.flatnonzero(np.any(np.abs(recorded - recorded[0]) > 1e-3, axis=1))
    window = slice(max(moving[0] - 1, 0), moving[-1] + 2)
    times = recording.times[window] - recording.times[window][0]
    wanted = recorded[window]
    scales = [1.0] if stretch == 1.0 else np.arange(stretch - 0.005, stretch + 0.0051, SCALE_STEP)
    best = np.inf
    for scale in scales:
        at = np.arange(t[0], t[-1] - scale * times[-1], 0.004)[:, None] + scale * times
        if at.size == 0:
            continue
        replayed = np.stack([np.interp(at, t, q[:, k]) for k in range(len(JOINTS))], axis=-1)
        best = min(best, float(np.abs(replayed - wanted).max(axis=(1, 2)).min()))
    return best


def test_a_dry_run_reports_a_rejection_and_sends_nothing(arm: Rig, tmp_path: Path) -> None:
    demo = tmp_path / "demo.csv"
    state = arm.probe.latest_state()
    names = list(joint_positions(state))
    with demo.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(["t"] + [f"{name}.position" for name in names])
        for i, elbow in enumerate((0.5, 3.5, 1.0)):  # 3.5: beyond the elbow's ±π
            row = [joint_positions(state)[n] if n != "elbow_joint" else elbow for n in names]
            writer.writerow([i * 0.5, *row])
    mark = arm.probe.mark()
    done = armd("replay", demo, "--config", arm.config, "--dry-run")
    assert done.returncode == 1, done
    assert done.stdout.splitlines()[-1] == (
        "rejected: points[1].positions[2]: elbow_joint 3.5 outside its limits [-3.14159, 3.14159]"
    ), done.stdout
    time.sleep(0.3)
    assert arm.probe.on("goal", mark) == []


def test_record_refuses_the_loop_rate_with_the_reason(arm: Rig, tmp_path: Path) -> None:
    done = armd("record", "--config", arm.config, "--out", tmp_path / "x.csv", "--rate", "loop")
    assert done.returncode == 2, done
    assert done.stderr.startswith(
        "armd: error: record: --rate loop: the loop's samples do not leave the daemon"
    ), done.stderr
    assert not (tmp_path / "x.csv").exists()


def test_record_for_a_duration_at_a_rate_with_the_stream_beside(arm: Rig, tmp_path: Path) -> None:
    out = tmp_path / "rated.csv"
    recorder = subprocess.Popen(
        armd_command("record", "--config", arm.config, "--out", out, "--rate", "10",
                     "--duration", "2"),
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert recorder.stderr is not None
    assert recorder.stderr.readline().startswith("recording ")
    for n in range(3):
        arm.probe.publish("stream", json.dumps({"seq": n}), qos=1)
    _, stderr = recorder.communicate(timeout=WAIT_S)
    assert recorder.returncode == 0, stderr
    recording = read_recording(out)
    rows, span = recording.times.shape[0], recording.times[-1]
    assert span >= 1.0
    assert 10 <= rows <= span * 10 + 2, recording.times  # one state per 0.1 s slot (of 25 Hz)
    lines = (tmp_path / "rated.stream.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["payload"] for line in lines] == [{"seq": n} for n in range(3)]
    assert stderr.splitlines()[-1] == f"recorded 3 stream messages to {tmp_path}/rated.stream.jsonl"


def test_record_into_a_missing_folder_fails_with_one_line(arm: Rig, tmp_path: Path) -> None:
    done = armd("record", "--config", arm.config, "--out", tmp_path / "no" / "x.csv")
    assert done.returncode == 1, done
    assert done.stderr.splitlines()[-1].startswith("armd: error: record: --out: [Errno 2]")
