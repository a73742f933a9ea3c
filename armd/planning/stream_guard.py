"""Stream targets checked for collisions in the daemon, before they reach the loop
(docs/collision.md).

For each target of a stream the guard checks the target and the step to it from the last target
it let through (the straight joint line; sampled as `CollisionModel.check_path` requires):

- clear, and farther than `SLOWDOWN_BAND` from any contact: followed as sent;
- clear but within the band, and closer to a contact than the last followed target: the step is
  scaled by the distance left, ``(d - stop) / (band - stop)`` with ``stop`` twice the margin (as
  MoveIt Servo scales its velocity near collisions), so a stream pushing toward an obstacle slows
  down and stops short of it: the arm's lag behind its targets never reaches the margin;
- colliding: not followed. The stream *holds* at the last target it followed (the loop gets that
  target again, at rest, so the stream stays alive: no jump, no abort, no extra status), and
  moves on when a target leaves the collision. `hold` says why while it holds (`state` carries
  it as ``collision_hold``).

A target's velocity (a twist, or joint velocities) moves the loop's target on between messages
for at most the stream timeout: when that extrapolated segment is not clear, the target is sent
without its velocity. Targets whose unnamed joints are NaN (keep the loop's target) are checked
with the last followed target there. Distances are compared pair by pair: a pair that does not
come closer never slows a stream down, and a stream that starts in contact follows targets that
take no pair in contact closer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from kinematics.collision import CollisionModel

__all__ = ["SLOWDOWN_BAND", "CollisionHold", "StreamGuard"]

Array = NDArray[np.float64]
SLOWDOWN_BAND = 0.05  # m: closer than this to a contact, steps toward it are scaled down
_NOISE = 1e-7  # m: a pair "comes closer" by more than this (rounding of a motion that keeps it)


@dataclass(frozen=True, slots=True)
class CollisionHold:
    """Why a stream holds: the pair a target would bring within the margin, and its distance (m)."""

    pair: tuple[str, str]
    distance: float


class StreamGuard:
    """Filters the targets of one stream at a time (`start` at each stream's first message)."""

    def __init__(self, model: CollisionModel, lower: Array, upper: Array, timeout_s: float) -> None:
        self.model = model
        self.margin = model.margin
        # Targets slow down to a stop at twice the margin: the arm follows them with a small
        # lag and overshoot, which must not reach the margin (where the measured state faults).
        self.stop = 2.0 * self.margin
        self.band = max(SLOWDOWN_BAND, 2.0 * self.stop)
        self.lower = lower
        self.upper = upper
        self.timeout_s = timeout_s
        self.followed: Array | None = None  # the last target let through (full q)
        self.hold: CollisionHold | None = None
        self._distances = np.empty(0)  # every checked pair's distance at `followed` (m)
        self.checked = 0

    def start(self, commanded: Array) -> None:
        """A new stream, from the loop's commanded position."""
        self.followed = commanded.copy()
        self._distances = self._at(commanded)
        self.hold = None

    def _at(self, q: Array) -> Array:
        """Every checked pair's distance at `q` (m), in `pair_names` order."""
        distances: Array = self.model.distances_batch(q[None, :])[0]
        return distances

    def filter(self, position: Array, velocity: Array) -> tuple[Array, Array]:
        """The target to send for a message's (`position`, `velocity`) (NaN: keep the loop's
        target / no velocity): unchanged, scaled toward the last followed target, or that
        target itself (holding, velocity NaN). Per pair: a pair may not come closer than the
        margin (one in contact at the start: may not come closer at all); a pair coming closer
        within the band slows the step down, and stops it at `stop`."""
        assert self.followed is not None
        self.checked += 1
        previous, before = self.followed, self._distances
        wanted = np.where(np.isfinite(position), position, previous)
        after = self._at(wanted)
        closer = after < before - _NOISE
        if np.any(bad := closer & (after < self.margin)):
            return self._hold(after, bad)
        if np.all(before >= self.margin):
            step = self.model.check_path(np.vstack([previous, wanted]))
            if not step.clear:
                assert step.pair is not None
                assert step.distance is not None
                return self._hold_pair(step.pair, step.distance)
        approaching = closer & (after < self.band)
        if np.any(approaching):
            # toward a contact: the step scaled by the distance left, never closer than `stop`
            scale = float(np.min((before[approaching] - self.stop) / (self.band - self.stop)))
            if scale <= 0.0:
                return self._hold(after, approaching)
            if scale < 1.0:
                wanted = previous + scale * (wanted - previous)
                position, velocity = wanted, np.full_like(velocity, np.nan)
                scaled = self._at(wanted)
                if np.any(too_close := (scaled < before - _NOISE) & (scaled < self.stop)):
                    return self._hold(after, too_close)
                after = scaled
        if np.any(np.nan_to_num(velocity) != 0.0) and not self._glide_clear(wanted, velocity):
            velocity = np.full_like(velocity, np.nan)
        self.followed = wanted
        self._distances = after
        self.hold = None
        return position, velocity

    def _glide_clear(self, start: Array, velocity: Array) -> bool:
        """The loop's extrapolation of the target at `velocity`, for at most the timeout."""
        end = np.clip(start + np.nan_to_num(velocity) * self.timeout_s, self.lower, self.upper)
        return self.model.check_path(np.vstack([start, end])).clear

    def _hold(self, distances: Array, which: NDArray[np.bool_]) -> tuple[Array, Array]:
        """Hold, naming the closest of the pairs `which` at the target's `distances`."""
        k = int(np.flatnonzero(which)[np.argmin(distances[which])])
        return self._hold_pair(self.model.pair_names[k], float(distances[k]))

    def _hold_pair(self, pair: tuple[str, str], distance: float) -> tuple[Array, Array]:
        assert self.followed is not None
        self.hold = CollisionHold(pair, distance)
        return self.followed.copy(), np.full_like(self.followed, np.nan)
