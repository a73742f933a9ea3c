"""Collision benchmark: the UR5 with its shipped geometry and table (config/collision/ur5.yaml).

    python bench/collision.py [--repeats 21]

Prints medians of
- a full distance query (every checked pair's signed distance and witness points: the kernel
  entry, forward kinematics included; target ≤ 10 µs) and the Python `first_contact` call;
- a single-target check (`first_contact` from Python, as a stream target is checked; ≤ 50 µs);
- a 4-second path check (a 4 s joint move sampled at 250 Hz, checked with `check_path`; ≤ 2 ms);
- the daemon's check of a goal's path (`CollisionGuard.check_move`, config/sim.yaml's UR5 and
  table; ≤ 2 ms for 4 s): a joint move from rest (the straight joint line), the same move
  pre-empting a moving arm (ruckig's trajectory), a 4-second trajectory goal (its approach and
  quintic curve) and a linear goal (the curve through its waypoints), all clear;
each beside coal (`pip install -e '.[bench]'`) doing the same in the same run: the same shape pairs
at the same configurations through coal's Python bindings, forward kinematics not counted for
coal, every shape pair evaluated at every sample of the path (coal has no path check of its own;
for a goal, at every configuration the guard checked).
Ratios are armd / coal (< 1: armd is faster). The host's CPU steal time over the run is printed:
timings on a shared machine compare within one run, not across runs.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

# bench/kinematics.py shares its name with the `kinematics` package: import the package with this
# folder off the path, then put the folder back for the sibling bench modules.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import numpy as np  # noqa: E402
import yaml  # noqa: E402

from armd.config.load import load_config  # noqa: E402
from armd.daemon.process import collision_guard, motion_limits  # noqa: E402
from armd.link.messages import Mode  # noqa: E402
from armd.link.protocol import FollowPath, Move, MoveTo, Sample  # noqa: E402
from armd.motion.timed_trajectory import plan_trajectory  # noqa: E402
from armd.motion.trajectory import plan_path  # noqa: E402
from armd.planning.collision_guard import CollisionGuard  # noqa: E402
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


def sample_at(q: np.ndarray, velocity: np.ndarray | None = None) -> Sample:
    """The loop's sample holding at `q` (commanded = measured), moving at `velocity`."""
    values = np.zeros((6, q.shape[0]))
    values[0] = values[2] = q
    if velocity is not None:
        values[1] = values[3] = velocity
    return Sample(1, 0.0, Mode.HOLDING, 0, False, False, 0, None, values)


def goals() -> tuple[CollisionGuard, list[tuple[str, Move, Sample]]]:
    """The guard of config/sim.yaml and four clear goals: (label, move, the loop's sample)."""
    setup = load_config(ROOT / "config" / "sim.yaml")
    guard, limits = collision_guard(setup), motion_limits(setup)
    assert guard is not None
    target = READY + np.array([2.0, 0.3, -0.8, 0.6, 1.5, 2.0])
    move = MoveTo("g", target, limits.scaled(0.45))  # 3.3 s from rest
    times = np.linspace(0.0, 4.0, 9)
    wave = np.sin(0.8 * times)[:, None] * np.array([0.6, 0.2, -0.3, 0.3, 0.4, 0.8])
    bounds = (setup.tree.limits.lower, setup.tree.limits.upper)
    plan = plan_trajectory(times, READY + wave, None, limits, 1.0, bounds, setup.tree.joint_names)
    line = READY + np.linspace(0.0, 1.0, 80)[:, None] * np.array([0.4, 0.2, -0.3, 0.1, 0, 0])
    moving = np.array([0.5, 0.0, 0.0, 0.0, 0.0, 0.0])
    cases = [
        ("goal: joint move from rest ms", move, sample_at(READY)),
        ("goal: pre-empting a moving arm ms", move, sample_at(READY, moving)),
        (f"goal: {plan.trajectory.duration:g} s trajectory ms", FollowPath("t", plan.trajectory),
         sample_at(READY)),
        ("goal: linear path (80 points) ms", FollowPath("l", plan_path(line, limits, 0.5)),
         sample_at(READY)),
    ]  # fmt: skip
    for label, goal, sample in cases:
        reason = guard.check_move(goal, sample)
        if reason is not None:
            raise RuntimeError(f"{label}: refused ({reason}); the bench's goals must be clear")
    return guard, cases


def checked_configurations(guard: CollisionGuard, goal: Move, sample: Sample) -> np.ndarray:
    """Every configuration the guard's path checks evaluate for `goal` (for coal to do the same
    work): recorded from the model's path check as the guard calls it."""
    model, seen = guard.model, []
    check = model._check
    model._check = lambda qs, bounds: (seen.append(qs.copy()), check(qs, bounds))[1]  # type: ignore[method-assign]
    try:
        guard.check_move(goal, sample)
    finally:
        del model._check
    return np.concatenate(seen)


Row = tuple[str, float, float, float | None]  # label, armd, target, coal (None: not measured)


def peer_of(tree: KinematicTree, model: CollisionModel) -> CoalPeer | None:
    try:
        return CoalPeer(tree, model)
    except ImportError as exc:
        print(f"coal not measured ({exc}); install the bench extra to compare.")
        return None


def model_rows(tree: KinematicTree, model: CollisionModel, repeats: int) -> list[Row]:
    """The full distance query, a single target's check and the 4 s path, beside coal."""
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
    ours = [
        per_call_us(
            lambda: kernels.distances(tree.packed, shapes, pairs, READY, dist, points),
            2000,
            repeats,
        ),
        per_call_us(lambda: model.first_contact(READY), 2000, repeats),
        per_call_us(lambda: model.check_path(path), 5, repeats) / 1e3,
    ]
    refs: list[float | None] = [None, None, None]
    peer = peer_of(tree, model)
    if peer is not None:
        placed = peer.placed(READY)
        samples = [peer.placed(q) for q in np.linspace(path[0], path[-1], check.samples)]
        refs = [
            per_call_us(lambda: peer.distances(placed), 200, repeats),
            per_call_us(lambda: peer.first_contact(placed), 200, repeats),
            per_call_us(lambda: [peer.distances(p) for p in samples], 1, max(3, repeats // 4))
            / 1e3,
        ]
    labels = ("full distance query (kernel) µs", "single-target check µs", "4 s path check ms")
    return list(zip(labels, ours, (10.0, 50.0, 2.0), refs, strict=True))


def goal_rows(repeats: int) -> list[Row]:
    """Each goal's check by the daemon's guard, beside coal at the configurations it checked."""
    guard, cases = goals()
    peer = peer_of(guard.model.tree, guard.model)
    rows: list[Row] = []
    for label, goal, sample in cases:
        ours = per_call_us(partial(guard.check_move, goal, sample), 5, repeats) / 1e3
        ref = None
        if peer is not None:
            placed = [peer.placed(q) for q in checked_configurations(guard, goal, sample)]
            ref = per_call_us(partial(all_distances, peer, placed), 1, 3) / 1e3
        rows.append((label, ours, 2.0, ref))
    return rows


def all_distances(peer: CoalPeer, placed: list[list[tuple[object, ...]]]) -> None:
    for shapes in placed:
        peer.distances(shapes)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21, help="timing batches (median)")
    args = parser.parse_args()
    print(machine())
    tree = load_tree(ROOT / "config" / "robots" / "ur5.urdf")
    data = yaml.safe_load((ROOT / "config" / "collision" / "ur5.yaml").read_text(encoding="utf-8"))
    model = CollisionModel(tree, spec_from_dict(data))
    before = CpuTimes.now()
    rows = model_rows(tree, model, args.repeats) + goal_rows(args.repeats)
    steal = steal_pct(before, CpuTimes.now())
    for label, ours, target, ref in rows:
        line = f"  {label:<36} armd {ours:9.3f} (target ≤ {target:g})"
        if ref is not None:
            line += f"   coal {ref:9.3f}   ratio {ours / ref:6.3f}"
        print(line)
    print(f"CPU steal during the measurements: {steal:.1f} %")


if __name__ == "__main__":
    main()
