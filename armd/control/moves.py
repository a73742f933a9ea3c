"""What the control loop makes of a motion command: `check_move` refuses one it cannot follow,
`plan_motion` turns an accepted one into the `Motion` it samples, from its commanded state (a
timed trajectory starts with an approach from it).

A move that arrives while the arm holds still is checked and planned at once, between ticks
(`prepare`): the tick that starts it only checks that the arm still holds there and the bounds
are the same (`motion_for`), so its first command does not wait for ruckig (~0.1 ms, several
times that on a cold cache) nor for the checks.

The loop checks every command it receives, whoever planned it: the daemon's goal pipeline has
checked the goal already, and a bug there (or a process speaking out of turn) must still not
reach the drives. Both raise `PlanningError`, which ends the command's goal as ``aborted``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from armd.link.messages import MAX_MOTION_DURATION_S
from armd.link.protocol import Move, MoveTo
from armd.motion.timed_trajectory import TimedTrajectory, TrajectoryMotion
from armd.motion.trajectory import (
    JointMotion,
    Motion,
    MotionLimits,
    PathMotion,
    PlanningError,
    Setpoint,
)

__all__ = [
    "Prepared",
    "check_move",
    "motion_for",
    "plan_motion",
    "prepare",
]

Array = NDArray[np.float64]
_SLACK = 1e-9  # relative: limits scaled on the daemon's side may round up by an ulp
_AT_REST = 1e-9  # rad/s: a path starts from rest
_AT_START = 1e-6  # rad: ... where the arm is


def check_move(move: Move, lower: Array, upper: Array, limits: MotionLimits) -> None:
    """Raise `PlanningError` unless `move` is one the loop can follow: finite positions of the
    right shape within [lower, upper], motion limits positive and within `limits`, tolerances
    positive."""
    n = lower.shape[0]
    if isinstance(move, MoveTo):
        _check_limits(move.limits, limits, n)
        points, what = np.asarray(move.target, dtype=float)[None, :], "target"
    elif isinstance(move.path, TimedTrajectory):
        _check_trajectory(move.path, limits, n)
        points, what = np.asarray(move.path.positions, dtype=float), "trajectory"
    else:
        points, what = np.asarray(move.path.waypoints, dtype=float), "path"
    if points.ndim != 2 or points.shape[1] != n or points.shape[0] < 1:
        raise PlanningError(f"a move needs a target or a path of {n} joint positions")
    if not np.isfinite(points).all():
        raise PlanningError(f"{what}: positions must be finite numbers")
    outside = (points < lower - _SLACK) | (points > upper + _SLACK)
    if outside.any():
        joint = int(np.nonzero(outside.any(axis=0))[0][0])
        raise PlanningError(
            f"{what}: joint {joint} position outside [{lower[joint]:g}, {upper[joint]:g}]"
        )
    tolerance = move.tolerance
    if tolerance is not None and not (tolerance.shape == (n,) and (tolerance > 0.0).all()):
        raise PlanningError(f"tolerance {tolerance.tolist()} must be {n} positive numbers")


def _check_limits(given: MotionLimits, limits: MotionLimits, n: int) -> None:
    for name in ("velocity", "acceleration", "jerk"):
        value, bound = getattr(given, name), getattr(limits, name)
        if value.shape != (n,) or not (
            (value > 0.0).all() and (value <= bound * (1.0 + _SLACK)).all()
        ):
            raise PlanningError(f"{name} limits {value.tolist()} must be in (0, {bound.tolist()}]")


def _check_trajectory(trajectory: TimedTrajectory, limits: MotionLimits, n: int) -> None:
    """The approach's limits as a `MoveTo`'s; the knots' times and derivatives (their positions
    are checked as a path's)."""
    _check_limits(trajectory.approach, limits, n)
    times = np.asarray(trajectory.times, dtype=float)
    m = times.shape[0]
    if times.ndim != 1 or m < 2 or times[0] != 0.0 or not np.all(np.diff(times) > 0.0):
        raise PlanningError("trajectory: times must start at 0 and strictly increase")
    for name in ("positions", "velocities", "accelerations"):
        values = np.asarray(getattr(trajectory, name), dtype=float)
        if values.shape != (m, n) or not np.all(np.isfinite(values)):
            raise PlanningError(f"trajectory: {name} must be {m} × {n} finite numbers")


def plan_motion(move: Move, start: Setpoint) -> Motion:
    """The motion of `move` from the commanded state `start`: microseconds (a `JointMotion` is
    one ruckig call; a `FollowPath` was time-scaled before the seam). Raises `PlanningError`."""
    motion: Motion
    if isinstance(move, MoveTo):
        motion = JointMotion(start, move.target, move.limits)
    elif isinstance(path := move.path, TimedTrajectory):
        motion = TrajectoryMotion(start, path)
    else:
        moving = (np.abs(start.velocity) > _AT_REST).any()
        if moving or np.max(np.abs(path.waypoints[0] - start.position)) > _AT_START:
            raise PlanningError("the arm moved since the path was planned; send the goal again")
        motion = PathMotion(path)
    if not motion.duration <= MAX_MOTION_DURATION_S:  # NaN too
        raise PlanningError(
            f"the motion would take {motion.duration:.6g} s (at most "
            f"{MAX_MOTION_DURATION_S:g} s); move in steps or faster"
        )
    return motion


@dataclass(frozen=True, slots=True)
class Prepared:
    """A move checked and planned between ticks from the state the arm held then."""

    move: Move
    start: Array  # the held position it starts from
    lower: Array  # the position bounds it was checked against
    upper: Array
    motion: Motion

    def fits(self, move: Move, commanded: Setpoint, bounds: tuple[Array, Array]) -> bool:
        """Whether it is still `move`'s motion from `commanded` within `bounds`."""
        return (
            move is self.move
            and bounds[0] is self.lower
            and bounds[1] is self.upper
            and _at_rest(commanded)
            and np.array_equal(commanded.position, self.start)
        )


def prepare(
    move: Move, commanded: Setpoint, bounds: tuple[Array, Array], limits: MotionLimits
) -> Prepared | None:
    """`move` checked and planned from `commanded` if the arm holds still there; None if it
    does not, or if the move cannot be followed (the tick checks it again and reports why)."""
    if not _at_rest(commanded):  # a motion just ended with the limiter still braking
        return None
    try:
        check_move(move, bounds[0], bounds[1], limits)
        motion = plan_motion(move, commanded)
    except Exception:
        return None
    return Prepared(move, commanded.position.copy(), bounds[0], bounds[1], motion)


def motion_for(
    move: Move,
    commanded: Setpoint,
    bounds: tuple[Array, Array],
    limits: MotionLimits,
    prepared: Prepared | None = None,
) -> Motion:
    """`move`'s motion from `commanded`: the `prepared` one while it fits, else checked within
    `bounds` and planned now. Raises `PlanningError`."""
    if prepared is not None and prepared.fits(move, commanded, bounds):
        return prepared.motion
    check_move(move, bounds[0], bounds[1], limits)
    return plan_motion(move, commanded)


def _at_rest(state: Setpoint) -> bool:
    return not (state.velocity.any() or state.acceleration.any())
