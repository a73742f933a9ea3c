"""Kinematics benchmark: FK, Jacobian, batched FK and IK on the Panda and the UR5.

    python bench/kinematics.py [--targets 1000] [--repeats 31]

Prints medians (and p95 for IK) per call. Where Pinocchio (`pip install -e '.[bench]'`) is
installed it is measured in the same run on the same configurations, and the ratio armd/Pinocchio
is printed (< 1 means armd is faster). Timings are wall-clock on a shared machine: compare ratios
from one run, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

# This script shares its name with the `kinematics` package: import the package with this folder
# off the path, then put the folder back for the sibling bench modules.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import numpy as np  # noqa: E402

from kinematics import KinematicTree, load_tree, solve_ik  # noqa: E402
from kinematics.ik import IKOptions  # noqa: E402

sys.path.append(str(_HERE))
from bench_common import IKStats, ik_cases, ik_stats, per_call_us  # noqa: E402

ROBOTS = Path(__file__).resolve().parent.parent / "config" / "robots"
ARMS = {"Panda": ("panda.urdf", "panda_link8"), "UR5": ("ur5.urdf", "tool0")}
POSITION_OK, ROTATION_OK = 1e-4, 1e-3


def bench_armd_ik(tree: KinematicTree, link: str, n: int, seeded: bool) -> IKStats:
    rng = np.random.default_rng(1 if seeded else 2)
    options = IKOptions(time_budget_s=0.05)
    times, ok, jumps = [], [], []
    for q_true, seed in ik_cases(tree, n, seeded, rng):
        target = tree.fk(q_true, link)
        start = time.perf_counter()
        result = solve_ik(tree, target, seed, link, options)
        times.append(time.perf_counter() - start)
        distance, angle = tree.fk(result.q, link).distance_to(target)  # checked independently
        ok.append(distance < POSITION_OK and angle < ROTATION_OK and tree.limits.within(result.q))
        if seeded:
            jumps.append(float(np.max(np.abs(result.q - seed))))
    return ik_stats(times, ok, jumps)


def bench_arm(name: str, args: argparse.Namespace, pin_bench: object | None) -> None:
    filename, link = ARMS[name]
    tree = load_tree(ROBOTS / filename)
    rng = np.random.default_rng(0)
    q = rng.uniform(tree.limits.lower, tree.limits.upper)
    qs = rng.uniform(tree.limits.lower, tree.limits.upper, size=(1000, tree.dof))
    rows: list[tuple[str, float, float | None]] = []
    rows.append(("FK µs/call", per_call_us(lambda: tree.fk(q, link), 2000, args.repeats), None))
    rows.append(
        ("Jacobian µs/call", per_call_us(lambda: tree.jacobian(q, link), 2000, args.repeats), None)
    )
    rows.append(
        (
            "batched FK µs/config (N=1000)",
            per_call_us(lambda: tree.fk_batch(qs, link), 20, args.repeats) / len(qs),
            None,
        )
    )
    if pin_bench is not None:
        reference = pin_bench.measure(ROBOTS / filename, link, tree, q, qs, args)  # type: ignore[attr-defined]
        rows = [(label, ours, reference.get(label)) for label, ours, _ in rows]
    print(f"\n{name} ({filename}, {tree.root} → {link}, dof {tree.dof})")
    for label, ours, ref in rows:
        line = f"  {label:<32} armd {ours:9.3f}"
        if ref is not None:
            line += f"   pinocchio {ref:9.3f}   ratio {ours / ref:6.2f}"
        print(line)
    for seeded in (True, False):
        stats = bench_armd_ik(tree, link, args.targets, seeded)
        kind = "seeded (solution + N(0, 0.05))" if seeded else "random seed"
        line = (
            f"  IK {kind:<29} armd {stats.success_pct:6.1f} %  median {stats.median_us:7.1f} µs"
            f"  p95 {stats.p95_us:7.1f} µs"
        )
        if seeded:
            line += f"  max joint change {stats.max_jump:.3f} rad"
        print(line)
        if pin_bench is not None:
            ref = pin_bench.ik(ROBOTS / filename, link, tree, args.targets, seeded)  # type: ignore[attr-defined]
            print(
                f"  {'':<32} pinocchio DLS {ref.success_pct:6.1f} %  median {ref.median_us:7.1f} µs"
                f"   ratio {stats.median_us / ref.median_us:6.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000, help="IK targets per case")
    parser.add_argument("--repeats", type=int, default=31, help="timing batches (median)")
    args = parser.parse_args()
    try:
        import bench_pinocchio as pin_bench  # noqa: PLC0415
    except ImportError as exc:
        print(f"Pinocchio not measured ({exc}); install the bench extra to compare.")
        pin_bench = None
    print(
        f"armd kinematics benchmark — {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )
    print(
        f"IK success: position error < {POSITION_OK} m and rotation error < {ROTATION_OK} rad, "
        "within limits, checked with FK"
    )
    for name in ARMS:
        bench_arm(name, args, pin_bench)


if __name__ == "__main__":
    main()
