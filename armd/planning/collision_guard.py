"""Every motion checked against the collision model before it reaches the loop (docs/collision.md).

`CollisionGuard.check_move` checks the path the loop will follow for a planned command, from the
commanded state of a sample, as the loop will plan it; the goal pipeline passes the state where
the move takes over a moving arm (`Sample.at_handover`), the one the loop starts it from
(`armd.link.protocol.Handover`):

- a `MoveTo` from rest is a straight line in joint space (`armd.motion.trajectory.JointMotion`
  synchronises the joints by phase: every joint covers the same fraction of its way at every
  instant), checked as such; from a moving state the same ruckig trajectory is planned here from
  the sample's commanded state and checked sampled in time;
- a `FollowPath` with a `TimedPath` (a linear goal) is the loop's curve through its waypoints,
  sampled along its parameter; one with a `TimedTrajectory` is its approach (a `MoveTo`'s motion
  to the first point) followed by its curve, sampled in time.

Sampling follows `CollisionModel.check_trajectory`: no point of a link moves more than half the
margin between samples. A segment bounds its joints' speeds piece by piece (its own bounds:
ruckig's constant-jerk phases and the linear goal's cubic segments exactly, the quintic by its
Bernstein coefficients; in time, at most the joints' velocity limits), so a slow stretch takes
fewer samples than a fast one.

A refusal is a reason starting with ``collision:`` that names the pair and where:
``collision: wrist_3_link with table at 43 % of the path (0.004 m inside the margin)``; the
target is checked first (``... at the target``).

A start already in contact (the arm was moved there by hand, or the geometry changed) allows only
motions out of it: every pair in contact at the start must end farther apart than it began and
never get closer on the way, and every other pair must stay clear.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from armd.link.protocol import Move, MoveTo, Sample
from armd.motion.timed_trajectory import QuinticCurve, TimedTrajectory
from armd.motion.trajectory import (
    JointMotion,
    MotionLimits,
    Setpoint,
    path_positions,
    path_speed_bounds,
)
from kinematics.collision import CollisionModel, PathCheck

__all__ = ["CollisionGuard", "contact_reason"]

Array = NDArray[np.float64]
Positions = Callable[[Array], Array]  # times (k,) → configurations (k, n)
_ESCAPE_SLACK = 1e-6  # m: a pair in contact at the start may not get closer than this on the way
# A timed segment's speed bounds hold over at least this many equal parts of it (cut further where
# its polynomial pieces change): each part is sampled at its own largest speed.
_SPEED_PIECES = 32


def contact_reason(a: str, b: str, distance: float, margin: float, where: str) -> str:
    """``collision: a with b <where> (d m inside the margin)``."""
    return f"collision: {a} with {b} {where} ({margin - distance:.4f} m inside the margin)"


class _Segment:
    """A piece of a motion: positions over [0, duration] s, and bounds of the joints' speeds
    (rad/s, m/s): `velocity` (m, n) within each piece between the m + 1 `breaks` (0 to
    duration)."""

    def __init__(self, positions: Positions, breaks: Array, velocity: Array) -> None:
        self.positions = positions
        self.duration = float(breaks[-1])
        self.breaks = breaks
        self.velocity = velocity

    @classmethod
    def uniform(cls, positions: Positions, duration: float, velocity: Array) -> _Segment:
        """A segment whose joint speeds stay within `velocity` (n,) throughout."""
        return cls(positions, np.array([0.0, duration]), velocity[None, :])


class CollisionGuard:
    """Checks planned motions of one arm against its collision `model`."""

    def __init__(self, model: CollisionModel, velocity: Array) -> None:
        """`velocity`: the joints' velocity limits (rad/s or m/s, q order), within which the loop's
        limiter keeps every motion: they cap the speed bounds of the segments sampled in time."""
        self.model = model
        self.margin = model.margin
        self.velocity = np.asarray(velocity, dtype=float)

    # -- configurations -------------------------------------------------------------------------

    def target_reason(self, q: Array) -> str | None:
        """Why the configuration `q` is refused (None: clear)."""
        contact = self.model.first_contact(q)
        if contact is None:
            return None
        return contact_reason(*contact, self.margin, "at the target")

    # -- motions --------------------------------------------------------------------------------

    def check_move(self, move: Move, sample: Sample) -> str | None:
        """Why the loop must not be given `move` from `sample`'s commanded state (None: clear)."""
        commanded = sample.commanded_position
        assert commanded is not None
        start = Setpoint(commanded, sample.commanded_velocity, sample.values[4].copy())
        segments = self._segments(move, start)
        start_contact = self.model.first_contact(commanded)
        if start_contact is not None:
            return self._escape(commanded, segments)
        target = segments[-1].positions(np.array([segments[-1].duration]))[0]
        reason = self.target_reason(target)
        if reason is not None:
            return reason
        total = sum(s.duration for s in segments) or 1.0
        elapsed = 0.0
        for segment in segments:
            if not segment.velocity.any():  # it holds where the last one ended, checked already
                elapsed += segment.duration
                continue
            check = self._check(segment)
            if not check.clear:
                assert check.fraction is not None
                fraction = (elapsed + check.fraction * segment.duration) / total
                return self._path_reason(check, fraction)
            elapsed += segment.duration
        return None

    def _segments(self, move: Move, start: Setpoint) -> list[_Segment]:
        if isinstance(move, MoveTo):
            return [self._joint_motion(start, move.target, move.limits)]
        path = move.path
        if isinstance(path, TimedTrajectory):
            curve = QuinticCurve(path.times, path.positions, path.velocities, path.accelerations)
            return [
                self._joint_motion(start, path.positions[0], path.approach),
                self._timed(curve.positions_at, *curve.speed_bounds(_SPEED_PIECES)),
            ]
        waypoints = path.waypoints  # checked along s ∈ [0, 1], |dq/ds| bounded per segment
        return [_Segment(lambda s: path_positions(waypoints, s), *path_speed_bounds(waypoints))]

    def _joint_motion(self, start: Setpoint, target: Array, limits: MotionLimits) -> _Segment:
        """The loop's `JointMotion` from `start`: a straight line from rest (phase
        synchronisation), else ruckig's trajectory sampled in time."""
        if not (start.velocity.any() or start.acceleration.any()):
            origin = start.position.copy()
            delta = target - origin
            return _Segment.uniform(lambda s: origin + np.outer(s, delta), 1.0, np.abs(delta))
        motion = JointMotion(start, target, limits)
        return self._timed(motion.positions, *motion.speed_bounds(_SPEED_PIECES))

    def _timed(self, positions: Positions, breaks: Array, velocity: Array) -> _Segment:
        """A segment sampled in time at its own speeds, which the loop's limiter keeps within
        the joints' velocity limits."""
        return _Segment(positions, breaks, np.minimum(velocity, self.velocity))

    def _check(self, segment: _Segment) -> PathCheck:
        return self.model.check_trajectory(
            segment.positions, segment.duration, segment.velocity, segment.breaks
        )

    def _path_reason(self, check: PathCheck, fraction: float) -> str:
        assert check.pair is not None
        assert check.distance is not None
        where = "at the target" if fraction >= 1.0 else f"at {100.0 * fraction:.0f} % of the path"
        return contact_reason(*check.pair, check.distance, self.margin, where)

    # -- a start in contact ---------------------------------------------------------------------

    def _samples(self, segment: _Segment) -> Array:
        """Configurations along `segment`, as densely as `check_trajectory` samples it."""
        times = self.model.sample_times(segment.duration, segment.velocity, segment.breaks)
        return np.asarray(segment.positions(times))

    def _escape(self, start: Array, segments: list[_Segment]) -> str | None:
        """A motion from a start in contact: allowed only out of the contact (module docstring)."""
        qs = np.concatenate([self._samples(s) for s in segments])
        distances = self.model.distances_batch(np.vstack([start, qs]))
        names = self.model.pair_names
        first = distances[0]
        touching = first < self.margin
        for k in np.flatnonzero(touching):
            a, b = names[k]
            deeper = distances[:, k] < first[k] - _ESCAPE_SLACK
            if np.any(deeper) or not distances[-1, k] > first[k] + _ESCAPE_SLACK:
                return (
                    f"collision: the arm is in collision ({a} with {b}, "
                    f"{self.margin - first[k]:.4f} m inside the margin): only a motion out of "
                    "it is allowed"
                )
        others = distances[:, ~touching]
        bad = np.argwhere(others < self.margin)
        if bad.size:
            row, column = (int(v) for v in bad[0])
            a, b = [names[k] for k in np.flatnonzero(~touching)][column]
            fraction = row / max(distances.shape[0] - 1, 1)
            where = (
                "at the target"
                if row == distances.shape[0] - 1
                else (f"at {100.0 * fraction:.0f} % of the path")
            )
            return contact_reason(a, b, float(others[row, column]), self.margin, where)
        return None
