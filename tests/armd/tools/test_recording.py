"""Recordings (`armd.tools.recording`): the CSV rows written from ``state`` messages and read back,
gzip, refusals naming line and column; and `armd.tools.replay` making one into a goal that fits the
trajectory goal's bounds, with the error that costs measured against the daemon's curve."""

from __future__ import annotations

import dataclasses
import gzip
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from armd.api.contract import MAX_PAYLOAD_BYTES, MAX_TRAJECTORY_POINTS
from armd.config.load import ArmSetup, load_config
from armd.tools.recording import (
    Recording,
    RecordingError,
    StateWriter,
    open_text,
    read_recording,
    simplify,
    stream_path,
)
from armd.tools.replay import check_replay, replay_goal

ROOT = Path(__file__).resolve().parents[3]
JOINTS = ("a", "b")


def state(t: float, a: float, b: float, effort: bool = True) -> dict[str, Any]:
    joint_a = {"position": a, "velocity": 0.5} | ({"effort": 0.1} if effort else {})
    return {
        "t": t,
        "mode": "moving",
        "missed_ticks": 0,
        "joints": {"a": joint_a, "b": {"position": b, "velocity": -0.5}},
        "tcp": {"link": "tool0", "position": [0.1, 0.2, 0.3], "orientation": [1, 0, 0, 0]},
    }


@pytest.mark.parametrize("name", ["demo.csv", "demo.csv.gz"])
def test_states_are_written_as_rows_and_read_back(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with open_text(path, "w") as stream:
        writer = StateWriter(stream)
        assert writer.write(state(10.0, 0.0, 1.0), received=5.0)
        assert not writer.write(state(10.0, 0.0, 1.0), received=5.1)  # a duplicate delivery
        assert writer.write(state(10.04, 0.02, 0.98, effort=False), received=5.2)
    if name.endswith(".gz"):
        with gzip.open(path) as compressed:
            assert compressed.read(1) == b"t"  # really gzip
    with open_text(path, "r") as stream:
        lines = stream.read().splitlines()
    assert lines[0] == (
        "t,received,mode,missed_ticks,a.position,a.velocity,a.effort,b.position,b.velocity,"
        "b.effort,tcp.x,tcp.y,tcp.z,tcp.qw,tcp.qx,tcp.qy,tcp.qz"
    )
    assert lines[2] == "10.04,5.200000,moving,0,0.02,0.5,,0.98,-0.5,,0.1,0.2,0.3,1.0,0.0,0.0,0.0"
    recording = read_recording(path)
    assert recording.joints == JOINTS
    np.testing.assert_allclose(recording.times, [0.0, 0.04])
    np.testing.assert_allclose(recording.positions, [[0.0, 1.0], [0.02, 0.98]])
    np.testing.assert_allclose(recording.velocities, [[0.5, -0.5], [0.5, -0.5]])


def test_the_stream_file_sits_beside_the_recording() -> None:
    assert stream_path(Path("/r/demo.csv")) == Path("/r/demo.stream.jsonl")
    assert stream_path(Path("/r/demo.csv.gz")) == Path("/r/demo.stream.jsonl.gz")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "no header row with a 't' column"),
        ("t,mode\n0,holding\n1,holding\n", "no '<joint>.position' column"),
        ("t,a.position\n0,0.1\n", "1 sample(s); a replay needs at least 2"),
        ("t,a.position\n0,0.1\n1,abc\n", ":3: column a.position: 'abc' is not a finite number"),
        ("t,a.position\n0,0.1\n1,nan\n", ":3: column a.position: 'nan' is not a finite number"),
        ("t,a.position\n0,0.1\n1,0.2\n0.5,0.3\n", ":4: t does not increase"),
    ],
)
def test_unreadable_recordings_say_where(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RecordingError, match=None) as info:
        read_recording(path)
    assert expected in str(info.value)
    assert str(info.value).startswith(str(path))


def test_simplify_keeps_the_samples_the_lines_need() -> None:
    times = np.linspace(0.0, 2.0, 201)
    positions = np.stack((np.where(times < 1.0, times, 2.0 - times), np.zeros_like(times)), 1)
    kept = simplify(times, positions, 1e-3)
    assert kept.tolist() == [0, 100, 200]  # the corner and the ends
    wavy = np.stack((np.sin(3 * times), np.cos(2 * times)), 1)
    kept = simplify(times, wavy, 1e-3)
    lines = np.stack([np.interp(times, times[kept], wavy[kept, k]) for k in range(2)], 1)
    assert np.abs(lines - wavy).max() <= 1e-3
    assert len(kept) < 201 // 2


@pytest.fixture(scope="module")
def sim() -> ArmSetup:
    """config/sim.yaml without its table and collision geometry: the busy recordings below sweep
    the whole workspace (`test_a_replay_into_the_table_is_refused` keeps them)."""
    setup = load_config(ROOT / "config" / "sim.yaml", kernels=False)
    return dataclasses.replace(setup, collision_spec=None)


def test_a_replay_into_the_table_is_refused_by_the_daemon_s_checks() -> None:
    setup = load_config(ROOT / "config" / "sim.yaml", kernels=False)
    times = np.linspace(0.0, 4.0, 41)
    start = np.array([0.0, -1.2, 1.9, -2.27, -1.5708, 0.0])
    positions = np.tile(start, (times.shape[0], 1))
    positions[:, 1] += 1.5 * np.sin(np.pi * times / times[-1]) ** 2  # the upper arm down, back
    recording = Recording(setup.tree.joint_names, times, positions, np.zeros_like(positions))
    checked = check_replay(replay_goal(recording, setup, "dip", 1.0, 1e-3), setup, start)
    assert checked.reason is not None
    assert checked.reason.startswith("collision: "), checked
    assert " with table at " in checked.reason


def long_recording(setup: ArmSetup, seconds: float, hz: float = 25.0) -> Recording:
    """A smooth, busy recording of every joint of the sim arm (within its limits), from rest to
    rest."""
    times = np.arange(0.0, seconds, 1.0 / hz)
    names = setup.tree.joint_names
    phases = np.arange(len(names))[None, :]
    envelope = np.sin(np.pi * times / times[-1])[:, None] ** 2
    positions = 0.8 * envelope * np.sin(0.7 * times[:, None] * (1 + 0.3 * phases) + phases)
    positions += np.array([0.0, -1.57, 1.57, -1.57, -1.57, 0.0])
    return Recording(tuple(names), times, positions, np.zeros_like(positions))


def test_a_long_recording_is_simplified_to_fit_and_the_error_is_measured(sim: ArmSetup) -> None:
    recording = long_recording(sim, 240.0)  # 4 busy minutes at 25 Hz: 6000 samples
    replay = replay_goal(recording, sim, "r1", 1.0, 1e-3)
    assert len(replay.goal.times) <= MAX_TRAJECTORY_POINTS
    assert len(replay.payload) <= MAX_PAYLOAD_BYTES
    assert replay.tolerance > 1e-3  # it had to give way to fit
    checked = check_replay(replay, sim, None)
    assert checked.reason is None, checked
    assert checked.approach_s == 0.0  # planned from the first point
    assert 0.0 < checked.error <= replay.tolerance + 1e-5  # and the rounding
    assert checked.duration_s >= recording.times[-1]


def test_a_short_recording_keeps_its_tolerance_and_its_timing(sim: ArmSetup) -> None:
    recording = long_recording(sim, 8.0)
    replay = replay_goal(recording, sim, "r2", 0.5, 1e-3)
    assert replay.tolerance == 1e-3
    assert len(replay.goal.times) < len(recording.times)
    checked = check_replay(replay, sim, np.array([0.3, -1.2, 1.0, -1.5, -1.5, 0.0]))
    assert checked.reason is None, checked
    assert checked.note is None  # 0.5 × a slow recording: no further slow-down
    assert checked.error <= 1e-3 + 1e-5  # rounding to 1e-5 rad on top
    assert checked.approach_s > 0.0
    assert checked.duration_s == pytest.approx(checked.approach_s + 2 * recording.times[-1])


def test_a_recording_of_another_arm_is_refused(sim: ArmSetup) -> None:
    other = Recording(("j1", "j2"), np.array([0.0, 1.0]), np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(RecordingError, match="not this arm's"):
        replay_goal(other, sim, "r3", 1.0, 1e-3)


def test_a_recording_too_fast_for_the_limits_is_time_scaled(sim: ArmSetup) -> None:
    recording = long_recording(sim, 8.0)
    fast = Recording(
        recording.joints, recording.times / 6.0, recording.positions, recording.velocities
    )
    checked = check_replay(replay_goal(fast, sim, "r4", 1.0, 1e-3), sim, None)
    assert checked.reason is None, checked
    assert checked.note is not None
    assert checked.note.startswith("time-scaled ×")
    assert math.isclose(
        checked.duration_s,
        float(checked.note.split("×")[1].split()[0]) * fast.times[-1],
        rel_tol=0.01,
    )
