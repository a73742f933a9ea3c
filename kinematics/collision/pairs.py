"""Which pairs a collision model checks, and why it excludes the others.

Self pairs (two links with geometry), in link order, are excluded when:
- "adjacent": the links belong to one body (fixed to each other) or to adjacent bodies (one is the
  nearest ancestor with geometry of the other; `kinematics.collision.bodies`);
- "config": the caller allows them;
- "always in contact": closer than the margin in at least `ALWAYS_FRACTION` of `SAMPLES` random
  configurations within the joint limits (a seeded generator: the same model gives the same
  answer). A pair is never excluded because sampling did not find it in contact.
Environment pairs (a link with geometry and an environment object) are excluded when:
- "fixed to the root": the link never moves relative to the root (the base standing on the
  table touches it by construction);
- "config": the caller allows them;
- "always in contact": as above (a link that only turns about a vertical axis just above the
  table, like a shoulder housing on its base, stays as close to it in every configuration).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from kinematics.collision.bodies import adjacent_bodies, bodies
from kinematics.collision.results import CheckedPair, ExcludedPair
from kinematics.tree import KinematicTree

__all__ = ["ALWAYS_FRACTION", "SAMPLES", "sample_configurations", "select_pairs"]

SAMPLES = 1000
ALWAYS_FRACTION = 0.95
CONTINUOUS_RANGE = np.pi
"""Joints without finite limits are sampled in [-π, π] (rad): a turn covers every pose."""

Array = NDArray[np.float64]
BatchDistances = Callable[[Sequence[tuple[str, str]], Array], Array]


def sample_configurations(tree: KinematicTree, count: int, seed: int) -> Array:
    """(count, dof) configurations uniform within the joint limits (seeded)."""
    lower = np.where(np.isfinite(tree.limits.lower), tree.limits.lower, -CONTINUOUS_RANGE)
    upper = np.where(np.isfinite(tree.limits.upper), tree.limits.upper, CONTINUOUS_RANGE)
    return np.random.default_rng(seed).uniform(lower, upper, size=(count, tree.dof))


def _allowed(allowed: Sequence[tuple[str, str]]) -> set[frozenset[str]]:
    return {frozenset(pair) for pair in allowed}


def _self_candidates(
    tree: KinematicTree, links: Sequence[str], allowed: set[frozenset[str]]
) -> tuple[list[tuple[str, str]], list[ExcludedPair]]:
    body = bodies(tree)
    adjacent = adjacent_bodies(tree, set(links))
    candidates: list[tuple[str, str]] = []
    excluded: list[ExcludedPair] = []
    for i, a in enumerate(links):
        for b in links[i + 1 :]:
            if body[a] == body[b]:
                excluded.append(ExcludedPair(a, b, "adjacent", "fixed to each other"))
            elif frozenset((body[a], body[b])) in adjacent:
                detail = f"adjacent bodies ({body[a]!r} and {body[b]!r})"
                excluded.append(ExcludedPair(a, b, "adjacent", detail))
            elif frozenset((a, b)) in allowed:
                excluded.append(ExcludedPair(a, b, "config", "allowed by the configuration"))
            else:
                candidates.append((a, b))
    return candidates, excluded


def _environment_candidates(
    tree: KinematicTree,
    links: Sequence[str],
    environment: Sequence[str],
    allowed: set[frozenset[str]],
) -> tuple[list[tuple[str, str]], list[ExcludedPair]]:
    body = bodies(tree)
    candidates: list[tuple[str, str]] = []
    excluded: list[ExcludedPair] = []
    for a in links:
        for b in environment:
            if body[a] == body[tree.root]:
                detail = "never moves relative to the root"
                excluded.append(ExcludedPair(a, b, "fixed to the root", detail))
            elif frozenset((a, b)) in allowed:
                excluded.append(ExcludedPair(a, b, "config", "allowed by the configuration"))
            else:
                candidates.append((a, b))
    return candidates, excluded


def select_pairs(
    tree: KinematicTree,
    links: Sequence[str],
    environment: Sequence[str],
    *,
    self_collision: bool,
    allowed: Sequence[tuple[str, str]],
    margin: float,
    batch_distances: BatchDistances,
    samples: int = SAMPLES,
    seed: int = 0,
) -> tuple[tuple[CheckedPair, ...], tuple[ExcludedPair, ...]]:
    """(checked, excluded) pairs. `links`: the links with geometry, in link order;
    `environment`: the objects' names; `batch_distances(pairs, qs)` gives (N, len(pairs))
    distances (m) for configurations qs (N, dof)."""
    allow = _allowed(allowed)
    self_candidates, excluded = _self_candidates(tree, links, allow) if self_collision else ([], [])
    env_candidates, env_excluded = _environment_candidates(tree, links, environment, allow)
    excluded += env_excluded
    candidates = self_candidates + env_candidates
    checked: list[CheckedPair] = []
    if candidates:
        qs = sample_configurations(tree, samples, seed)
        close = np.count_nonzero(batch_distances(candidates, qs) < margin, axis=0)
        for k, ((a, b), count) in enumerate(zip(candidates, close.tolist(), strict=True)):
            if count >= ALWAYS_FRACTION * samples:
                detail = f"within the margin in {count} of {samples} sampled configurations"
                excluded.append(ExcludedPair(a, b, "always in contact", detail))
            else:
                checked.append(CheckedPair(a, b, environment=k >= len(self_candidates)))
    return tuple(checked), tuple(excluded)


def check_allowed_names(
    allowed: Sequence[tuple[str, str]], links: Mapping[str, object], environment: Sequence[str]
) -> list[str]:
    """The problems of the caller's allowed pairs (names neither a link with geometry nor an
    environment object, or two environment objects), as messages."""
    problems = []
    for a, b in allowed:
        for name in (a, b):
            if name not in links and name not in environment:
                problems.append(
                    f"collision allowed [{a!r}, {b!r}]: {name!r} is neither a link with geometry "
                    f"({sorted(links)}) nor an environment object ({list(environment)})"
                )
        if a in environment and b in environment:
            problems.append(f"collision allowed [{a!r}, {b!r}]: two environment objects")
    return problems
