"""Chain-mapping benchmark: `kinematics.mapping.map_chain` on the UR5 (6 joints) and the Panda
(7 joints), and the one-pair closed forms.

    python bench/mapping.py [--cases 500] [--repeats 31]

Targets are our own keypoints at random in-limit configurations with every segment scaled by a
random factor in [0.3, 3] (a leader arm with other proportions). Two seeds: near the solution
(N(0, 0.05) rad per joint: the daemon's case, the arm already close to the shape) and uniform in
the limits (far: the walk often backtracks out of a branch). Prints median and p95 per mapping and
the share mapped within 1e-6 rad. Timings are wall-clock on a shared machine: compare rows of one
run, not absolute numbers across runs.
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

from kinematics import KinematicTree, load_tree  # noqa: E402
from kinematics.mapping import map_chain, rotation_about_axis, rotation_family  # noqa: E402

sys.path.append(str(_HERE))
from bench_common import per_call_us  # noqa: E402

ROBOTS = _HERE.parent / "config" / "robots"
ARMS = {
    "UR5": ("ur5.urdf", ("upper_arm_link", "forearm_link", "wrist_2_link", "tool0")),
    "Panda": (
        "panda.urdf",
        ("panda_link2", "panda_link3", "panda_link4", "panda_link6", "panda_link8"),
    ),
}


def cases(
    tree: KinematicTree, links: tuple[str, ...], n: int, near: bool, rng: np.random.Generator
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(targets (k, 3), seed) pairs."""
    lower, upper = tree.limits.lower, tree.limits.upper
    found = []
    for _ in range(n):
        q = rng.uniform(lower, upper)
        points = np.array([tree.fk(q, link).translation for link in links])
        segments = np.diff(points, axis=0) * rng.uniform(0.3, 3.0, (len(links) - 1, 1))
        targets = np.vstack((points[0], points[0] + np.cumsum(segments, axis=0)))
        if near:
            seed = np.clip(q + rng.normal(0.0, 0.05, tree.dof), lower, upper)
        else:
            seed = rng.uniform(lower, upper)
        found.append((targets, seed))
    return found


def bench_arm(name: str, args: argparse.Namespace) -> None:
    filename, links = ARMS[name]
    tree = load_tree(ROBOTS / filename)
    moving = sum(tree.chain(links[-1]).moving)
    print(f"\n{name} ({filename}, {len(links)} keypoints {' → '.join(links)}, {moving} joints)")
    for near in (True, False):
        rng = np.random.default_rng(1 if near else 2)
        times, ok = [], []
        for targets, seed in cases(tree, links, args.cases, near, rng):
            start = time.perf_counter()
            result = map_chain(tree, links, targets, seed)
            times.append(time.perf_counter() - start)
            ok.append(result.success)
        t = np.array(times) * 1e6
        label = "seed near the shape" if near else "random seed"
        print(
            f"  {label:<22} median {np.median(t):8.1f} µs   p95 {np.percentile(t, 95):8.1f} µs"
            f"   mapped {100.0 * np.mean(ok):5.1f} %"
        )


def bench_pair(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(3)
    a, b, u = rng.normal(size=(3, 3))
    family = rotation_family(a, b)
    print("\none vector pair")
    rows = [
        ("rotation_family(a, b)", lambda: rotation_family(a, b)),
        ("family.quaternion(φ)", lambda: family.quaternion(0.7)),
        ("rotation_about_axis(a, b, u)", lambda: rotation_about_axis(a, b, u)),
    ]
    for label, fn in rows:
        print(f"  {label:<30} {per_call_us(fn, 2000, args.repeats):8.2f} µs/call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=500, help="mappings per arm and seed kind")
    parser.add_argument("--repeats", type=int, default=31, help="batches for the pair timings")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    for name in ARMS:
        bench_arm(name, args)
    bench_pair(args)


if __name__ == "__main__":
    main()
