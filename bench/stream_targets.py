"""What one stream message costs, on config/sim.yaml's UR5: in the daemon, turning a ``pose``
message into a joint target (the seeded IK, no restarts) and a ``twist`` into joint velocities
(damped least squares, with the singularity and limit scaling); in the control loop, the
follower's step per tick (one ruckig update from the commanded state).

    python bench/stream_targets.py [--messages 5000]

Prints the median and p99 per message (per tick) in µs and as a share of the 4 ms tick at
250 Hz. The pose targets walk a 10 cm circle at 250 Hz (1.3 mm per message, 0.31 m/s): each IK
is seeded from the previous solution, as in a stream. Wall-clock on a shared machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

# bench/ holds scripts named like packages (drivers.py, kinematics.py) that armd imports: import
# them with this folder off the path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import numpy as np  # noqa: E402

from armd.config.load import load_config  # noqa: E402
from armd.control.streaming import StreamFollower  # noqa: E402
from armd.daemon.process import plan_settings  # noqa: E402
from armd.link.messages import StreamPose, StreamTwist  # noqa: E402
from armd.link.protocol import StreamTarget  # noqa: E402
from armd.motion.trajectory import MotionLimits, Setpoint  # noqa: E402
from armd.planning.stream_cartesian import CartesianStream  # noqa: E402

CONFIG = Path(__file__).resolve().parent.parent / "config" / "sim.yaml"
TICK_S = 0.004
Q0 = np.array([0.0, -1.2, 1.4, -1.6, -1.5, 0.3])


def report(what: str, seconds: list[float]) -> None:
    us = np.array(seconds) * 1e6
    median, p99 = float(np.median(us)), float(np.percentile(us, 99))
    print(
        f"{what:<34} median {median:8.1f} µs  p99 {p99:8.1f} µs  "
        f"({100 * median * 1e-6 / TICK_S:.1f} % / {100 * p99 * 1e-6 / TICK_S:.1f} % of a 4 ms tick)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    n = parser.parse_args().messages
    setup = load_config(CONFIG)
    tree, link = setup.tree, setup.tool_link
    limits = tree.limits
    cartesian = CartesianStream(
        tree,
        dataclasses.replace(plan_settings(setup).ik, restarts=False),
        np.ones(tree.dof),
        np.array(limits.lower),
        np.array(limits.upper),
    )
    start = tree.fk(Q0, link)
    w, i, j, k_ = (float(v) for v in start.quaternion)
    orientation = (w, i, j, k_)
    q, converged, poses = Q0.copy(), 0, []
    for k in range(n):
        angle = 2.0 * math.pi * k / 500  # a 10 cm circle in 2 s at 250 Hz
        offset = 0.05 * np.array([math.cos(angle) - 1.0, math.sin(angle), 0.0])
        x, y, z = (float(v) for v in start.translation + offset)
        message = StreamPose("b", k, (x, y, z), orientation, link)
        t0 = time.perf_counter()
        q = cartesian.pose(message, q)
        poses.append(time.perf_counter() - t0)
        reached = tree.fk(q, link).translation
        converged += bool(np.linalg.norm(reached - start.translation - offset) < 1e-4)
    report("pose → joints (seeded IK)", poses)
    print(f"{'':<34} {100 * converged / n:.1f} % within 0.1 mm of the target")

    twists = []
    for k in range(n):
        twist = StreamTwist("b", k, (0.05, 0.0, 0.02), (0.0, 0.0, 0.2), "tool" if k % 2 else "root")
        t0 = time.perf_counter()
        cartesian.twist(twist, Q0, link)
        twists.append(time.perf_counter() - t0)
    report("twist → joint velocities (DLS)", twists)

    motion = MotionLimits(np.array(limits.velocity), np.array(limits.acceleration), setup.jerk)
    first = StreamTarget("b", 1, 0, Q0 + 0.5, np.full(tree.dof, np.nan))
    commanded = Setpoint.at_rest(Q0)
    follower = StreamFollower(
        first,
        commanded,
        0,
        joint_names=tuple(tree.joint_names),
        bounds=(np.array(limits.lower), np.array(limits.upper)),
        limits=motion,
        period_s=TICK_S,
        timeout_ticks=25,
    )
    steps = []
    for tick in range(1, n + 1):
        if tick % 4 == 0:  # a new target every 4 ticks, moving
            target = Q0 + 0.5 * math.sin(tick * TICK_S)
            velocity = np.full(tree.dof, 0.5 * math.cos(tick * TICK_S))
            follower.take(StreamTarget("b", 1, tick, target, velocity), tick)
        t0 = time.perf_counter()
        commanded = follower.step(commanded, tick)
        steps.append(time.perf_counter() - t0)
    report("follower step in the loop (ruckig)", steps)


if __name__ == "__main__":
    main()
