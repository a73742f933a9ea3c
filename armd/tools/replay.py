"""`armd replay`'s work without I/O: a recording (`armd.tools.recording`) made into a ``trajectory``
goal that fits the goal's bounds, and the daemon's own checks of that goal run here.

- `replay_goal` keeps the fewest samples from which the daemon's curve stays within a tolerance
  of the recorded positions (`simplify`, then points added where the curve strays), raising the
  tolerance (doubling, then bisecting) to the smallest that fits `MAX_TRAJECTORY_POINTS` and
  `MAX_PAYLOAD_BYTES`; values are rounded to 0.1 ms and 1e-5 rad (m), far below any drive's
  resolution. Velocities are not sent: the daemon's spline derives them from the positions.
- `check_replay` is what the daemon does with the payload, by the same code: `parse_goal` (with
  the daemon's joint names), the `Planner` (limits, the curve between points, time scaling,
  duration, collisions along the whole path), then the loop's `check_move` and `plan_motion`
  from the arm's current position (the approach to the first point). It also measures the
  positions' error of the whole chain — simplification, rounding, spline — against the
  recording, at the recorded times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from armd.api.contract import (
    MAX_PAYLOAD_BYTES,
    MAX_TRAJECTORY_POINTS,
    MIN_POINT_INTERVAL_S,
    encode,
    goal_json,
)
from armd.api.payloads import parse_goal
from armd.config.load import ArmSetup
from armd.control.moves import check_move, plan_motion
from armd.daemon.process import collision_guard, goal_joint_names, motion_limits, plan_settings
from armd.link.messages import Mode, Rejection, TrajectoryGoal
from armd.link.protocol import FollowPath, Sample
from armd.motion.timed_trajectory import QuinticCurve, TimedTrajectory
from armd.motion.trajectory import PlanningError, Setpoint
from armd.planning.planner import Planner, Rejected
from armd.tools.recording import Recording, RecordingError, simplify

__all__ = ["Checked", "ReplayGoal", "check_replay", "replay_goal"]

Array = NDArray[np.float64]
TIME_DECIMALS, POSITION_DECIMALS = 4, 5
FIT_STEPS = 6  # bisections of the tolerance between a fit and a misfit: within 12 % of the best


@dataclass(frozen=True, slots=True)
class ReplayGoal:
    """The goal made of a recording, its JSON payload, and what was recorded of its joints."""

    goal: TrajectoryGoal
    payload: bytes
    tolerance: float  # the simplification's, rad (m)
    times: Array  # the recording's, s from its first sample
    positions: Array  # (samples, joints of the goal)


@dataclass(frozen=True, slots=True)
class Checked:
    """`check_replay`'s verdict: `reason` None when the daemon would accept the goal."""

    reason: str | None
    note: str | None = None  # the accepted status's reason (time scaling)
    approach_s: float = 0.0
    duration_s: float = 0.0  # approach included
    error: float = 0.0  # the largest position error against the recording, rad (m)
    error_joint: str = ""


def replay_goal(
    recording: Recording, setup: ArmSetup, goal_id: str, speed: float, tolerance: float
) -> ReplayGoal:
    """The ``trajectory`` goal replaying `recording` on `setup`'s arm (every recorded joint it
    may move). Raises `RecordingError` when none of its joints is one of the arm's."""
    allowed = goal_joint_names(setup)
    columns = [i for i, joint in enumerate(recording.joints) if joint in allowed]
    unknown = [j for j in recording.joints if j not in setup.tree.joint_names]
    if not columns or unknown:
        raise RecordingError(
            f"the recording's joints {list(recording.joints)} are not this arm's "
            f"({list(allowed)}): was it recorded with another config?"
        )
    joints = tuple(recording.joints[i] for i in columns)
    times, positions = _distinct_times(recording.times, recording.positions[:, columns])

    def fitted(tolerance: float) -> ReplayGoal | None:
        kept = _refined(times, positions, simplify(times, positions, tolerance), tolerance)
        goal = TrajectoryGoal(
            goal_id,
            joints,
            tuple(round(float(t), TIME_DECIMALS) for t in times[kept]),
            tuple(tuple(np.round(row, POSITION_DECIMALS).tolist()) for row in positions[kept]),
            None,
            speed,
        )
        payload = encode(goal_json(goal))
        if len(kept) > MAX_TRAJECTORY_POINTS or len(payload) > MAX_PAYLOAD_BYTES:
            return None
        return ReplayGoal(goal, payload, tolerance, times, positions)

    found = fitted(tolerance)
    if found is not None:
        return found
    low, high = tolerance, 2.0 * tolerance  # doubling, then bisection (in log) between them
    while (found := fitted(high)) is None:
        low, high = high, 2.0 * high
    for _ in range(FIT_STEPS):
        middle = math.sqrt(low * high)
        better = fitted(middle)
        if better is None:
            low = middle
        else:
            found, high = better, middle
    return found


def _refined(
    times: Array, positions: Array, kept: NDArray[np.intp], tolerance: float
) -> NDArray[np.intp]:
    """`kept` and more samples until the daemon's curve through them (not the straight lines
    `simplify` measures) stays within `tolerance` of every sample: between each two kept
    samples, the worst one beyond it is added, until none is (or the bound is exceeded, and
    the caller doubles the tolerance)."""
    while len(kept) <= MAX_TRAJECTORY_POINTS:
        curve = QuinticCurve.through(times[kept], positions[kept], None)
        error = np.abs(curve.positions_at(times) - positions).max(axis=1)
        segment = np.searchsorted(kept, np.arange(times.shape[0]), side="right")
        worst: dict[int, int] = {}
        for i in np.flatnonzero(error > tolerance):
            s = int(segment[i])
            if s not in worst or error[i] > error[worst[s]]:
                worst[s] = int(i)
        if not worst:
            break
        kept = np.union1d(kept, np.array(list(worst.values()), dtype=np.intp))
    return kept


def _distinct_times(times: Array, positions: Array) -> tuple[Array, Array]:
    """Samples at least `MIN_POINT_INTERVAL_S` after the one kept before them (the goal's rule;
    telemetry is far slower, so this only drops duplicates)."""
    keep = [0]
    for i in range(1, times.shape[0]):
        if times[i] >= times[keep[-1]] + MIN_POINT_INTERVAL_S:
            keep.append(i)
    return times[keep], positions[keep]


def check_replay(replay: ReplayGoal, setup: ArmSetup, current: Array | None) -> Checked:
    """What the daemon would answer to `replay.payload` with the arm at rest at `current` (q
    order; None: unknown, planned as if the arm were at the first point, without an approach)."""
    goal = parse_goal(
        replay.payload,
        joint_names=goal_joint_names(setup),
        link_names=setup.tree.link_names,
        default_link=setup.tool_link,
    )
    if isinstance(goal, Rejection):
        return Checked(goal.reason)
    assert isinstance(goal, TrajectoryGoal)
    tree = setup.tree
    if current is None:
        current = tree.limits.clamp(np.zeros(tree.dof))
        for joint, q in zip(replay.goal.joints, replay.goal.positions[0], strict=True):
            current[tree.joint_names.index(joint)] = q
        for joint, q in setup.fixed_joints.items():
            current[tree.joint_names.index(joint)] = q
    limits = motion_limits(setup)
    try:
        planner = Planner(
            tree, setup.tool_link, limits, plan_settings(setup), collision_guard(setup)
        )
        request = planner.plan(goal, _at_rest(current))
        check_move(request, tree.limits.lower, tree.limits.upper, limits)
        motion = plan_motion(request, Setpoint.at_rest(current))
    except (Rejected, PlanningError) as exc:
        return Checked(str(exc))
    assert isinstance(request, FollowPath)
    assert isinstance(request.path, TimedTrajectory)
    approach_s = motion.duration - request.path.duration
    error, joint = _error(replay, request.path, setup)
    return Checked(None, request.note, approach_s, motion.duration, error, joint)


def _at_rest(q: Array) -> Sample:
    """A loop sample with the arm measured and commanded at rest at `q`."""
    values = np.zeros((6, q.shape[0]))
    values[0] = values[2] = q
    return Sample(0, 0.0, Mode.HOLDING, 0, False, False, 0, None, values)


def _error(replay: ReplayGoal, trajectory: TimedTrajectory, setup: ArmSetup) -> tuple[float, str]:
    """The largest distance between the curve the loop will follow and the recorded positions
    of the goal's joints at the recorded times (scaled like the trajectory), and its joint."""
    goal = replay.goal
    curve = QuinticCurve(
        trajectory.times, trajectory.positions, trajectory.velocities, trajectory.accelerations
    )
    scale = trajectory.duration / (goal.times[-1] - goal.times[0])
    columns = [setup.tree.joint_names.index(joint) for joint in goal.joints]
    followed = curve.positions_at((replay.times - goal.times[0]) * scale)[:, columns]
    error = np.abs(followed - replay.positions)
    worst = int(np.argmax(error.max(axis=0)))
    return float(error.max()), goal.joints[worst]
