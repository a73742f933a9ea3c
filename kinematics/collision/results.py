"""The answers of a collision model's queries: values (frozen dataclasses), with their JSON forms.

Distances are signed, in m: positive apart, negative the penetration depth. Witness points are in
the root frame, m. A pair is *in contact* when its distance is below the model's margin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["CheckedPair", "DistanceReport", "ExcludedPair", "PairDistance", "PathCheck"]

Array = NDArray[np.float64]

ExclusionReason = Literal["adjacent", "always in contact", "config", "fixed to the root"]


@dataclass(frozen=True, slots=True)
class CheckedPair:
    """A pair the model checks: two links, or a link (`a`) and an environment object (`b`)."""

    a: str
    b: str
    environment: bool


@dataclass(frozen=True, slots=True)
class ExcludedPair:
    """A pair the model never checks, and why.

    reason: "adjacent" (parent and child bodies, or links fixed to each other), "always in
        contact" (within the margin in most sampled configurations), "config" (the caller's
        `allowed`), or "fixed to the root" (a link that never moves, against the environment).
    detail: the reason in words, for people.
    """

    a: str
    b: str
    reason: ExclusionReason
    detail: str

    def to_list(self) -> list[str]:
        return [self.a, self.b, self.reason]


@dataclass(frozen=True, slots=True)
class PairDistance:
    """One checked pair at one configuration: its signed distance (m) and witness points (3,)
    (root frame, m), `point_a` on `a`, `point_b` on `b`."""

    a: str
    b: str
    distance: float
    point_a: Array
    point_b: Array

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "distance": self.distance,
            "points": [self.point_a.tolist(), self.point_b.tolist()],
        }


@dataclass(frozen=True, slots=True)
class DistanceReport:
    """Every checked pair's distance at one configuration `q` (dof,)."""

    q: Array
    margin: float
    pairs: tuple[PairDistance, ...]

    @property
    def closest(self) -> PairDistance | None:
        """The pair with the least distance (None when the model checks no pair)."""
        return min(self.pairs, key=lambda p: p.distance, default=None)

    @property
    def contacts(self) -> tuple[PairDistance, ...]:
        """The pairs closer than the margin, closest first."""
        close = [p for p in self.pairs if p.distance < self.margin]
        return tuple(sorted(close, key=lambda p: p.distance))

    @property
    def collision_free(self) -> bool:
        """No pair is closer than the margin."""
        return not self.contacts

    def to_dict(self) -> dict[str, Any]:
        closest = self.closest
        return {
            "q": self.q.tolist(),
            "margin": self.margin,
            "collision_free": self.collision_free,
            "closest": None if closest is None else closest.to_dict(),
            "pairs": [pair.to_dict() for pair in self.pairs],
        }


@dataclass(frozen=True, slots=True)
class PathCheck:
    """The result of checking a path.

    clear: no sample of the path is closer than the margin.
    fraction: where the first sample closer than the margin is along the path, 0..1 (None when
        clear): for waypoints, (interval index + position within it) / number of intervals; for a
        trajectory, time / duration.
    pair, distance (m), q (dof,): that sample's pair, distance and configuration (None when clear).
    samples: configurations checked; evaluated: shape-pair distances computed (the rest were
        proved clear from an earlier sample's distance and the motion since).
    """

    clear: bool
    fraction: float | None
    pair: tuple[str, str] | None
    distance: float | None
    q: Array | None
    samples: int
    evaluated: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "clear": self.clear,
            "fraction": self.fraction,
            "pair": None if self.pair is None else list(self.pair),
            "distance": self.distance,
            "q": None if self.q is None else self.q.tolist(),
            "samples": self.samples,
        }
