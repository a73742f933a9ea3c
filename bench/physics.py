"""Physics benchmark: the `mujoco` driver on the SO-101 scene of config/so101_physics.yaml (the arm,
the table, the cube and the block; contacts on), while the arm runs a scripted cycle: over the
cube, around it, the gripper closing on it, lifting it, putting it back, and a sweep of the
shoulder pan into the block.

1. **Step cost** — `Physics.step(1)` timed one step at a time (no thread), over the cycle:
   median and p99 in µs, and the real-time factor it would allow unthrottled (timestep / median).
2. **Real time at 1 kHz** — the driver's own real-time thread for `--duration` s, while a
   control loop at 250 Hz (asyncio, absolute deadlines) reads the state and writes the cycle's
   targets, as armd's control process does: the real-time factor (simulated time / wall time;
   1.000 keeps up), the steps skipped (stalls longer than `max_lag_s`), the process's CPU %
   (100 % = one core), the host's steal time over the run, and the loop's read + write cost
   (median, p99 µs) beside the same loop's without the physics thread (5 s at most).

Run: ``.venv/bin/python bench/physics.py [--duration 20] [--steps 20000]`` (needs the physics
extra: ``pip install -e '.[physics]'``). Numbers depend on the machine; compare them within one
run, never in a test.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import yaml

# bench/ holds scripts named like packages (drivers.py, kinematics.py): keep it off the path while
# importing armd's packages, then put it back for the sibling bench modules.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
from drivers.base import DeviceCommand  # noqa: E402
from drivers.mujoco.driver import MujocoDriver  # noqa: E402

sys.path.append(str(_HERE))
import harness  # noqa: E402

ROOT = _HERE.parent
CONFIG = ROOT / "config" / "so101_physics.yaml"
LOOP_HZ = 250.0
SEGMENT_S = 1.0  # each move of the cycle


def _scene() -> tuple[dict[str, object], list[dict[str, float]]]:
    """The driver's params (its URDF absolute) and the cycle's poses, by device."""
    data = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    raw = dict(data["drivers"]["physics"]["params"])
    raw["urdf"] = str(ROOT / "config" / raw["urdf"])
    poses = data["poses"]
    closed = {"gripper": float(data["gripper"]["closed"])}
    cycle = [
        poses["over_cube"],
        poses["grasp_cube"],
        poses["grasp_cube"] | closed,
        poses["over_cube"] | closed,
        poses["grasp_cube"] | closed,
        poses["grasp_cube"],
        poses["over_cube"],
        poses["before_block"],
        poses["past_block"],
        poses["ready"] | {"gripper": 0.0},
    ]
    return raw, [{k: float(v) for k, v in p.items()} for p in cycle]


def _targets(start: dict[str, float], cycle: list[dict[str, float]]) -> Iterator[dict[str, float]]:
    """The cycle's targets at LOOP_HZ, forever: linear in time between poses."""
    ticks = round(SEGMENT_S * LOOP_HZ)
    here = dict(start)
    while True:
        for pose in cycle:
            there = here | pose
            for k in range(1, ticks + 1):
                s = k / ticks
                yield {n: here[n] + (there[n] - here[n]) * s for n in there}
            here = there


async def _commands(d: MujocoDriver, targets: dict[str, float]) -> None:
    await d.write({n: DeviceCommand(q) for n, q in targets.items()})


async def step_cost(raw: dict[str, object], cycle: list[dict[str, float]], steps: int) -> None:
    d = MujocoDriver(MujocoDriver.Params.model_validate(raw), realtime=False)
    per_tick = round(1.0 / LOOP_HZ / d.physics.timestep_s)
    durations: list[float] = []
    async with d:
        await d.enable()
        start = {n: s.position for n, s in (await d.read()).items()}
        targets = _targets(start, cycle)
        while len(durations) < steps:
            await _commands(d, next(targets))
            for _ in range(per_tick):
                began = time.perf_counter()
                d.physics.step(1)
                durations.append(time.perf_counter() - began)
    p50, p99 = np.percentile(durations, [50, 99]) * 1e6
    dt_us = d.physics.timestep_s * 1e6
    print(
        f"step cost ({len(durations)} steps of {dt_us:.0f} µs, contacts on): median {p50:.1f} µs, "
        f"p99 {p99:.1f} µs; unthrottled real-time factor {dt_us / p50:.1f}"
    )


async def control_loop(
    d: MujocoDriver, cycle: list[dict[str, float]], duration_s: float
) -> tuple[float, float, list[float]]:
    """A loop at LOOP_HZ on absolute deadlines that reads and writes the cycle's targets: the
    wall time, the simulated time that passed, and each read + write's duration (s)."""
    loop = asyncio.get_running_loop()
    io: list[float] = []
    start = {n: s.position for n, s in (await d.read()).items()}
    targets = _targets(start, cycle)
    sim0 = d.physics.time_s
    wall0 = deadline = loop.time()
    while loop.time() - wall0 < duration_s:
        began = time.perf_counter()
        await d.read()
        await _commands(d, next(targets))
        io.append(time.perf_counter() - began)
        deadline += 1.0 / LOOP_HZ
        await asyncio.sleep(max(0.0, deadline - loop.time()))
    return loop.time() - wall0, d.physics.time_s - sim0, io


async def real_time(
    raw: dict[str, object], cycle: list[dict[str, float]], duration_s: float
) -> None:
    idle = MujocoDriver(MujocoDriver.Params.model_validate(raw), realtime=False)
    async with idle:
        await idle.enable()
        _, _, alone = await control_loop(idle, cycle, min(duration_s, 5.0))
    d = MujocoDriver(MujocoDriver.Params.model_validate(raw))
    async with d:
        await d.enable()
        cpu0, steal0 = time.process_time(), harness.CpuTimes.now()
        wall, simulated, io = await control_loop(d, cycle, duration_s)
        cpu, steal = time.process_time() - cpu0, harness.steal_pct(steal0, harness.CpuTimes.now())
        skipped = d.skipped_steps
    p50, p99 = np.percentile(io, [50, 99]) * 1e6
    a50, a99 = np.percentile(alone, [50, 99]) * 1e6
    print(
        f"real time at {1 / d.physics.timestep_s:.0f} Hz for {wall:.1f} s: real-time factor "
        f"{simulated / wall:.3f} (+ {skipped} steps skipped); CPU {100 * cpu / wall:.0f} %; "
        f"steal {steal:.1f} %\n"
        f"the loop's read + write at {LOOP_HZ:.0f} Hz: median {p50:.1f} µs, p99 {p99:.1f} µs "
        f"(without the physics thread: median {a50:.1f} µs, p99 {a99:.1f} µs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=20.0, help="real-time run, s")
    parser.add_argument("--steps", type=int, default=20000, help="steps timed one by one")
    args = parser.parse_args()
    print(harness.machine())
    raw, cycle = _scene()
    asyncio.run(step_cost(raw, cycle, args.steps))
    asyncio.run(real_time(raw, cycle, args.duration))


if __name__ == "__main__":
    main()
