"""Collision benchmark: the UR5 with its shipped geometry and table (config/collision/ur5.yaml).

    python bench/collision.py [--repeats 21]

Prints medians of
- a full distance query (every checked pair's signed distance and witness points: the kernel
  entry, forward kinematics included; target ≤ 10 µs) and the Python `first_contact` call;
- a single-target check (`first_contact` from Python, as a stream target is checked; ≤ 50 µs);
- a 4-second path check (a 4 s joint move sampled at 250 Hz, checked with `check_path`; ≤ 2 ms);
each beside coal (`pip install -e '.[bench]'`) doing the same in the same run: the same shape pairs
at the same configurations through coal's Python bindings, forward kinematics not counted for
coal, every shape pair evaluated at every sample of the path (coal has no path check of its own).
Ratios are armd / coal (< 1: armd is faster). The host's CPU steal time over the run is printed:
timings on a shared machine compare within one run, not across runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# bench/kinematics.py shares its name with the `kinematics` package: import the package with this
# folder off the path, then put the folder back for the sibling bench modules.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import numpy as np  # noqa: E402
import yaml  # noqa: E402

from kinematics import KinematicTree, load_tree  # noqa: E402
from kinematics.collision import CollisionModel, spec_from_dict  # noqa: E402

sys.path.append(str(_HERE))
from bench_common import per_call_us  # noqa: E402
from harness import CpuTimes, machine, steal_pct  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HOME = np.array([0.0, -np.pi / 2, np.pi / 2, -np.pi / 2, -np.pi / 2, 0.0])  # config/sim.yaml
READY = np.array([0.0, -1.2, 1.9, -2.27, -1.5708, 0.0])


class CoalPeer:
    """The model's shape pairs as coal objects, placed from the tree's link frames."""

    def __init__(self, tree: KinematicTree, model: CollisionModel) -> None:
        import coal  # noqa: PLC0415

        sys.path.insert(0, str(ROOT))
        from tests.kinematics.collision_peers import coal_object  # noqa: PLC0415

        self.coal, self.tree, self.model, self.make = coal, tree, model, coal_object
        env = {obj.name: obj for obj in model.spec.environment}
        self.pairs = []
        for a, b in model.pair_names:
            for sa in model.spec.links[a]:
                for sb in model.spec.links.get(b, ()) or [env[b]]:
                    self.pairs.append((a, sa, b, sb))
        self.request = coal.DistanceRequest()
        self.request.enable_signed_distance = True
        self.result = coal.DistanceResult()

    def placed(self, q: np.ndarray) -> list[tuple[object, object, object, object]]:
        frames = self.tree.fk_all(q)
        out = []
        for a, sa, b, sb in self.pairs:
            ga, ta = self.make(sa, frames[a].rotation_matrix, frames[a].translation)
            if b in frames:
                gb, tb = self.make(sb, frames[b].rotation_matrix, frames[b].translation)
            else:
                gb, tb = self.make(sb, np.eye(3), np.zeros(3))
            out.append((ga, ta, gb, tb))
        return out

    def distances(self, placed: list[tuple[object, object, object, object]]) -> float:
        least = np.inf
        for ga, ta, gb, tb in placed:
            self.result.clear()
            least = min(least, self.coal.distance(ga, ta, gb, tb, self.request, self.result))
        return least

    def first_contact(self, placed: list[tuple[object, object, object, object]]) -> bool:
        for ga, ta, gb, tb in placed:
            self.result.clear()
            if self.coal.distance(ga, ta, gb, tb, self.request, self.result) < self.model.margin:
                return True
        return False


def four_second_move(tree: KinematicTree) -> np.ndarray:
    """A 4 s joint move from `READY` past the front of the arm, smooth (cosine) in time, sampled
    at 250 Hz: (1001, dof) waypoints, as a planner hands them over."""
    target = READY + np.array([1.5, 0.4, -0.6, 0.8, 1.0, 2.0])
    s = 0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, 1001))
    return READY + s[:, None] * (target - READY)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21, help="timing batches (median)")
    args = parser.parse_args()
    print(machine())
    tree = load_tree(ROOT / "config" / "robots" / "ur5.urdf")
    data = yaml.safe_load((ROOT / "config" / "collision" / "ur5.yaml").read_text(encoding="utf-8"))
    model = CollisionModel(tree, spec_from_dict(data))
    kernels = model.kernels
    dist = np.empty(len(model.pair_names))
    points = np.empty((len(model.pair_names), 6))
    shapes, pairs = model._shapes, model._pairs  # the kernel entry, as the model calls it
    path = four_second_move(tree)
    check = model.check_path(path)
    print(
        f"UR5: {len(model.pair_names)} checked pairs ({pairs.shape[0]} shape pairs), margin "
        f"{model.margin} m; the 4 s path: {check.samples} samples, clear {check.clear}, "
        f"{check.evaluated} shape-pair distances evaluated"
    )
    before = CpuTimes.now()
    rows = [
        (
            "full distance query (kernel) µs",
            per_call_us(
                lambda: kernels.distances(tree.packed, shapes, pairs, READY, dist, points),
                2000,
                args.repeats,
            ),
            10.0,
        ),
        (
            "single-target check µs",
            per_call_us(lambda: model.first_contact(READY), 2000, args.repeats),
            50.0,
        ),
        (
            "4 s path check ms",
            per_call_us(lambda: model.check_path(path), 5, args.repeats) / 1e3,
            2.0,
        ),
    ]
    refs: list[float | None] = [None, None, None]
    try:
        peer = CoalPeer(tree, model)
    except ImportError as exc:
        print(f"coal not measured ({exc}); install the bench extra to compare.")
    else:
        placed = peer.placed(READY)
        samples = [peer.placed(q) for q in np.linspace(path[0], path[-1], check.samples)]
        refs = [
            per_call_us(lambda: peer.distances(placed), 200, args.repeats),
            per_call_us(lambda: peer.first_contact(placed), 200, args.repeats),
            per_call_us(lambda: [peer.distances(p) for p in samples], 1, max(3, args.repeats // 4))
            / 1e3,
        ]
    steal = steal_pct(before, CpuTimes.now())
    for (label, ours, target), ref in zip(rows, refs, strict=True):
        line = f"  {label:<34} armd {ours:9.3f} (target ≤ {target:g})"
        if ref is not None:
            line += f"   coal {ref:9.3f}   ratio {ours / ref:6.3f}"
        print(line)
    print(f"CPU steal during the measurements: {steal:.1f} %")


if __name__ == "__main__":
    main()
