"""Why a goal that pre-empts a moving arm takes over where it was checked from
(`armd.link.protocol.Handover`): how far from the checked path the tool point of config/sim.yaml's
UR5 would pass if the loop started the goal from wherever the arm had got to since the sample
the daemon planned it from (`age` s earlier), as it did before the handover.

Random pre-emptions at the configured limits: a joint move from rest to a random target, taken
over at a random instant by a move to another random target; the path the loop would follow
from the later state against the checked one (the trajectory from the sample's state, and the
stretch the arm covered meanwhile), as the largest distance of its tool point from them.

    python bench/handover.py [--trials 200] [--seed 7]

Prints the median, p90 and largest distance per age (mm). With the handover the loop follows
the checked trajectory itself (tests/armd/control/test_handover.py: within 1e-9 rad).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import numpy as np  # noqa: E402

from armd.config.load import load_config  # noqa: E402
from armd.daemon.process import motion_limits  # noqa: E402
from armd.motion.trajectory import JointMotion, Setpoint  # noqa: E402

CONFIG = Path(__file__).resolve().parent.parent / "config" / "sim.yaml"
AGES_S = (0.02, 0.045, 0.1, 0.2)


def positions(motion: JointMotion, start: float, end: float, count: int) -> np.ndarray:
    return np.array([motion.sample(t).position for t in np.linspace(start, end, count)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    setup = load_config(CONFIG, calibration=False)
    tree, limits, tool = setup.tree, motion_limits(setup), setup.tool_link
    lower, upper = np.maximum(tree.limits.lower, -3.0), np.minimum(tree.limits.upper, 3.0)
    rng = np.random.default_rng(args.seed)
    distances: dict[float, list[float]] = {age: [] for age in AGES_S}
    for _ in range(args.trials):
        start = rng.uniform(lower, upper) * 0.6
        first = np.clip(start + rng.normal(0.0, 0.9, 6), lower, upper)
        second = np.clip(start + rng.normal(0.0, 0.9, 6), lower, upper)
        old = JointMotion(Setpoint.at_rest(start), first, limits)
        sampled = rng.uniform(0.05, max(0.06, old.duration - 0.05))
        state = old.sample(sampled)
        checked = JointMotion(state, second, limits)
        reference = tree.fk_batch(positions(checked, 0.0, checked.duration, 800), tool)[0]
        for age in AGES_S:
            covered = tree.fk_batch(positions(old, sampled, sampled + age, 50), tool)[0]
            both = np.vstack([reference, covered])
            taken = JointMotion(old.sample(sampled + age), second, limits)
            path = tree.fk_batch(positions(taken, 0.0, taken.duration, 300), tool)[0]
            gaps = np.linalg.norm(path[:, None, :] - both[None, :, :], axis=2).min(axis=1)
            distances[age].append(float(gaps.max()))
    print(f"{args.trials} pre-emptions of config/sim.yaml's UR5 at its limits (seed {args.seed})")
    print("tool point off the checked path (mm), by the age of the sample planned from")
    print("    age   median     p90     max")
    for age, values in distances.items():
        mm = np.array(values) * 1000.0
        median, p90 = np.median(mm), np.percentile(mm, 90)
        print(f"{age * 1000:4.0f} ms {median:8.1f} {p90:7.1f} {mm.max():7.1f}")


if __name__ == "__main__":
    main()
