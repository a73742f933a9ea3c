"""Timing and test-case helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from kinematics import KinematicTree


def per_call_us(fn: Callable[[], object], calls: int, repeats: int) -> float:
    """Median over `repeats` batches of the mean time of one call, in µs."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


@dataclass
class IKStats:
    success_pct: float
    median_us: float
    p95_us: float
    max_jump: float = 0.0


def ik_stats(times: list[float], ok: list[bool], jumps: list[float]) -> IKStats:
    t = np.array(times) * 1e6
    return IKStats(
        100.0 * float(np.mean(ok)),
        float(np.median(t)),
        float(np.percentile(t, 95)),
        max(jumps, default=0.0),
    )


def ik_cases(
    tree: KinematicTree, n: int, seeded: bool, rng: np.random.Generator
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(q_true, seed) pairs: seed = solution + N(0, 0.05) per joint, or uniform in the limits."""
    lower, upper = tree.limits.lower, tree.limits.upper
    for _ in range(n):
        q_true = rng.uniform(lower, upper)
        seed = np.clip(q_true + rng.normal(0.0, 0.05, tree.dof), lower, upper)
        yield q_true, seed if seeded else rng.uniform(lower, upper)
