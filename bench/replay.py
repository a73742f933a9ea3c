"""Trajectory goal and replay benchmark: what a ``trajectory`` goal costs before the seam and in
a tick, and how long a recording fits one goal at which error.

    python bench/replay.py [--repeats 5]

1. Planning (`armd.motion.timed_trajectory.plan_trajectory`, in the daemon's planning thread before
the
   goal is accepted) for 100 and 1000 points of 6 joints, and one tick's sample of the motion
   the loop follows, beside a linear goal's `PathMotion` of as many waypoints.
2. `armd.tools.replay.replay_goal` + `check_replay` on the simulated UR5 (config/sim.yaml) for
   recordings of 8 s to 4 min at 25 Hz with every joint moving all the time (the tests'
   `long_recording`): points, payload bytes, the tolerance it took to fit the goal's bounds, the
   largest position error against the recording, and the time it took.

Timings are wall-clock on a shared machine: compare rows of one run, not numbers across runs.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

# This folder holds scripts named like the packages (kinematics.py): import the packages with it
# off the path, then put it back for the sibling bench modules.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import numpy as np  # noqa: E402

from armd.config.load import load_config  # noqa: E402
from armd.motion.timed_trajectory import TrajectoryMotion, plan_trajectory  # noqa: E402
from armd.motion.trajectory import MotionLimits, PathMotion, Setpoint, plan_path  # noqa: E402
from armd.tools.recording import Recording  # noqa: E402
from armd.tools.replay import check_replay, replay_goal  # noqa: E402

sys.path.append(str(_HERE))
from bench_common import per_call_us  # noqa: E402

ROOT = _HERE.parent
DOF = 6
LIMITS = MotionLimits(np.full(DOF, 3.0), np.full(DOF, 8.0), np.full(DOF, 160.0))
BOUNDS = (np.full(DOF, -7.0), np.full(DOF, 7.0))


def busy(times: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """Every joint moving all the time, from rest to rest (0.8 rad around `offset`)."""
    phases = np.arange(DOF)[None, :]
    envelope = np.sin(np.pi * times / times[-1])[:, None] ** 2
    return offset + 0.8 * envelope * np.sin(0.7 * times[:, None] * (1 + 0.3 * phases) + phases)


def planning(repeats: int) -> None:
    print("points  plan (ms)  trajectory sample (µs)  linear path sample (µs)")
    for points in (100, 1000):
        plan_ms, sample_us, path_us = _costs(points, repeats)
        print(f"{points:6d}  {plan_ms:9.1f}  {sample_us:22.1f}  {path_us:23.1f}")


def _costs(points: int, repeats: int) -> tuple[float, float, float]:
    """Planning (ms), and one tick's sample (µs) of the trajectory and of a linear path."""
    times = np.arange(points) * 0.04
    positions = busy(times, np.zeros(DOF))
    names = tuple(f"j{i}" for i in range(DOF))

    def plan() -> object:
        return plan_trajectory(times, positions, None, LIMITS, 1.0, BOUNDS, names)

    trajectory = plan_trajectory(times, positions, None, LIMITS, 1.0, BOUNDS, names)
    motion = TrajectoryMotion(Setpoint.at_rest(positions[0]), trajectory.trajectory)
    path = PathMotion(plan_path(positions, LIMITS))
    ticks = np.linspace(motion.approach_s, motion.duration, 1000).tolist()
    path_ticks = np.linspace(0.0, path.duration, 1000).tolist()
    return (
        1e-3 * per_call_us(plan, 1, repeats),
        per_call_us(lambda: [motion.sample(t) for t in ticks], 1, repeats) / 1000,
        per_call_us(lambda: [path.sample(t) for t in path_ticks], 1, repeats) / 1000,
    )


def fitting() -> None:
    setup = load_config(ROOT / "config" / "sim.yaml", kernels=False)
    offset = np.array([0.0, -1.57, 1.57, -1.57, -1.57, 0.0])
    print("\nrecording  samples  points  bytes  tolerance (rad)  largest error (rad)  time (s)")
    for seconds in (8, 30, 60, 120, 240):
        times = np.arange(0.0, seconds, 1 / 25)
        positions = busy(times, offset)
        recording = Recording(
            tuple(setup.tree.joint_names), times, positions, np.zeros_like(positions)
        )
        start = time.perf_counter()
        replay = replay_goal(recording, setup, "bench", 1.0, 1e-3)
        checked = check_replay(replay, setup, None)
        took = time.perf_counter() - start
        assert checked.reason is None, checked.reason
        print(
            f"{seconds:7d} s  {len(times):7d}  {len(replay.goal.times):6d}  "
            f"{len(replay.payload):5d}  {replay.tolerance:15.4f}  {checked.error:19.4f}  "
            f"{took:8.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, {DOF} joints")
    planning(args.repeats)
    fitting()


if __name__ == "__main__":
    main()
