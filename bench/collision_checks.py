"""What the daemon's collision checks cost, on config/sim.yaml's UR5 standing on its table:

- per goal: `CollisionGuard.check_move` of a joint move from rest (the straight joint line) of
  about 4 s, of the same move pre-empting a moving arm (ruckig's trajectory sampled in time), of
  a 4-second trajectory goal (its approach and curve), and of a linear goal's path;
- per stream message: `StreamGuard.filter` of joint targets walking at 0.5 rad/s (250 Hz), far
  from contact and inside the slow-down band near the table;
- per sample: the measured state's check (`CollisionModel.min_distance`).

    python bench/collision_checks.py [--repeats 200]

Prints medians and p99 in µs. Wall-clock on a shared machine: compare within one run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import numpy as np  # noqa: E402

from armd.config.load import load_config  # noqa: E402
from armd.daemon.process import collision_guard, motion_limits, stream_guard  # noqa: E402
from armd.link.messages import Mode  # noqa: E402
from armd.link.protocol import FollowPath, MoveTo, Sample  # noqa: E402
from armd.motion.timed_trajectory import plan_trajectory  # noqa: E402
from armd.motion.trajectory import JointMotion, Setpoint, plan_path  # noqa: E402

CONFIG = Path(__file__).resolve().parent.parent / "config" / "sim.yaml"
READY = np.array([0.0, -1.2, 1.9, -2.27, -1.5708, 0.0])


def sample_at(q: np.ndarray, velocity: np.ndarray | None = None) -> Sample:
    values = np.zeros((6, q.shape[0]))
    values[0] = values[2] = q
    if velocity is not None:
        values[1] = values[3] = velocity
    return Sample(1, 0.0, Mode.HOLDING, 0, False, False, 0, None, values)


def timed(what: str, call: Callable[[], object], repeats: int) -> None:
    call()  # warm
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    us = np.array(seconds) * 1e6
    print(f"{what:<58} median {np.median(us):9.1f} µs  p99 {np.percentile(us, 99):9.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    setup = load_config(CONFIG)
    model = setup.collision
    assert model is not None
    guard = collision_guard(setup)
    assert guard is not None
    limits = motion_limits(setup)
    print(f"{model!r}")

    # A joint move of about 4 s: the slowest joint's way at a quarter speed.
    target = READY + np.array([2.0, 0.3, -0.8, 0.6, 1.5, 2.0])
    slow = limits.scaled(0.45)
    move = MoveTo("g", target, slow)
    duration = JointMotion(Setpoint.at_rest(READY), target, slow).duration
    assert guard.check_move(move, sample_at(READY)) is None
    timed(f"goal: joint move from rest ({duration:.1f} s, straight line)",
          lambda: guard.check_move(move, sample_at(READY)), args.repeats)  # fmt: skip
    moving = np.array([0.5, 0.0, 0.0, 0.0, 0.0, 0.0])
    moving_motion = JointMotion(Setpoint(READY, moving, np.zeros(6)), target, slow)
    timed(f"goal: joint move pre-empting a moving arm ({moving_motion.duration:.1f} s, ruckig)",
          lambda: guard.check_move(move, sample_at(READY, moving)), args.repeats)  # fmt: skip

    times = np.linspace(0.0, 4.0, 9)
    positions = READY + 0.3 * np.sin(np.outer(times, np.ones(6)) * 0.8)
    plan = plan_trajectory(
        times, positions, None, limits, 1.0,
        (setup.tree.limits.lower, setup.tree.limits.upper), setup.tree.joint_names,
    )  # fmt: skip
    follow = FollowPath("t", plan.trajectory)
    timed(f"goal: trajectory of {plan.trajectory.duration:.1f} s (9 points)",
          lambda: guard.check_move(follow, sample_at(positions[0])), args.repeats)  # fmt: skip

    waypoints = np.array([READY + s * np.array([0.4, 0.2, -0.3, 0.1, 0.0, 0.0])
                          for s in np.linspace(0.0, 1.0, 80)])  # fmt: skip
    linear = FollowPath("l", plan_path(waypoints, limits, 0.5))
    timed("goal: linear path (80 waypoints)",
          lambda: guard.check_move(linear, sample_at(READY)), args.repeats)  # fmt: skip

    streams = stream_guard(setup)
    assert streams is not None
    nan = np.full(6, np.nan)
    for name, start, direction in (
        ("far from contact", READY, np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])),
        ("toward the table (slowing down)", READY, np.array([0.0, 1.0, 0.0, 0.0, 0.0, 0.0])),
    ):
        streams.start(start)
        step = direction * 0.5 / 250.0
        q = [start.copy()]

        def message(q: list[np.ndarray] = q, step: np.ndarray = step) -> None:
            q[0] = q[0] + step
            streams.filter(q[0], nan)

        timed(f"stream message: {name}", message, args.repeats * 10)
    timed("measured state (one sample)", lambda: model.min_distance(READY), args.repeats * 10)


if __name__ == "__main__":
    main()
