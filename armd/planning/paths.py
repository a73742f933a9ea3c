"""The goals the loop follows as a path (`FollowPath`), planned in joint space: a linear pose
goal's straight tool line, solved by IK point by point, and a trajectory goal's points, checked
against the limits and time-scaled within them (`armd.motion.timed_trajectory`).

A goal these refuse raises `PlanningError` whose message is the goal's reason;
`armd.planning.planner` turns it into a `Rejected`.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from armd.link.messages import MAX_MOTION_DURATION_S, TrajectoryGoal
from armd.link.protocol import FollowPath
from armd.motion.timed_trajectory import plan_trajectory
from armd.motion.trajectory import MotionLimits, PlanningError
from kinematics import KinematicTree, Pose, solve_ik
from kinematics.ik import IKOptions
from kinematics.quaternion import quat_conj, quat_mul, quat_to_axis_angle

__all__ = ["MAX_PATH_SAMPLES", "PATH_STEP_MAX_JOINT_CHANGE", "linear_waypoints", "trajectory_move"]

Array = NDArray[np.float64]
PATH_STEP_MAX_JOINT_CHANGE = 0.25  # rad between neighbouring samples of a linear path
MAX_PATH_SAMPLES = 4000  # IK samples of a linear path: 20 m at the default 5 mm step


def linear_waypoints(
    tree: KinematicTree,
    link: str,
    start_q: Array,
    goal_pose: Pose,
    ik: IKOptions,
    steps_m_rad: tuple[float, float],
    hold: Collection[str],
) -> tuple[list[Array], float, float]:
    """The joint waypoints of `link`'s straight line from where it is at `start_q` to
    `goal_pose`, sampled every `steps_m_rad` (m, rad), each solved from the one before; with the
    line's length (m) and turn (rad). `ik` without its "no branch jump" box decides whether the
    end is reachable."""
    start = tree.fk(start_q, link)
    options = replace(ik, max_joint_change=None)
    end = solve_ik(tree, goal_pose, start_q, link, options, hold=hold)
    if not end.success:  # checked first: a far target must not cost thousands of IK samples
        raise PlanningError(f"target unreachable within the joint limits: IK {end.message}")
    distance, angle = start.distance_to(goal_pose)
    linear_step, angular_step = steps_m_rad
    steps = max(1, math.ceil(distance / linear_step), math.ceil(angle / angular_step))
    if steps > MAX_PATH_SAMPLES:
        raise PlanningError(
            f"linear path of {distance:.3f} m needs {steps} samples (at most "
            f"{MAX_PATH_SAMPLES}; motion.linear_step is {linear_step:g} m)"
        )
    waypoints = [start_q]
    step_options = _continuity_options(ik)
    for i in range(1, steps + 1):
        pose = _interpolate(start, goal_pose, i / steps)
        result = solve_ik(tree, pose, waypoints[-1], link, step_options, hold=hold)
        if not result.success:
            where = ", ".join(f"{v:.3f}" for v in pose.translation)
            raise PlanningError(
                f"linear path infeasible at {100 * i / steps:.0f} % (position [{where}]): "
                f"{result.message}"
            )
        waypoints.append(np.array(result.q))
    return waypoints, distance, angle


def trajectory_move(
    goal: TrajectoryGoal,
    commanded: Array,
    tree: KinematicTree,
    limits: MotionLimits,
    fixed_joints: Collection[str],
    kept: frozenset[int],
) -> FollowPath:
    """Every point within the limits, then the curve through them time-scaled within the
    motion limits; the joints it does not name keep their `commanded` position (`kept`: their q
    indices, `FollowPath.kept`)."""
    fixed = sorted(set(goal.joints) & set(fixed_joints))
    if fixed:
        raise PlanningError(f"joints: {fixed} are fixed by the configuration")
    names = tree.joint_names
    columns = [names.index(joint) for joint in goal.joints]  # `armd.api.payloads` checked them
    shapes = {len(row) for row in (*goal.positions, *(goal.velocities or ()))}
    if shapes != {len(columns)} or len(goal.positions) != len(goal.times):
        raise PlanningError("points: one position (and velocity) per joint for every point")
    positions = np.tile(commanded, (len(goal.times), 1))
    positions[:, columns] = goal.positions
    velocities = None
    if goal.velocities is not None:
        velocities = np.zeros_like(positions)
        velocities[:, columns] = goal.velocities
    lower, upper = tree.limits.lower, tree.limits.upper
    outside = (positions < lower) | (positions > upper)
    if np.any(outside):
        i, q = (int(k) for k in np.argwhere(outside)[0])
        raise PlanningError(
            f"points[{i}].positions[{columns.index(q)}]: {names[q]} {positions[i, q]:.6g} "
            f"outside its limits [{lower[q]:.6g}, {upper[q]:.6g}]"
        )
    plan = plan_trajectory(
        np.array(goal.times), positions, velocities, limits, goal.speed, (lower, upper),
        tuple(names),
    )  # fmt: skip
    duration = plan.trajectory.duration
    if not duration <= MAX_MOTION_DURATION_S:
        raise PlanningError(
            f"points: the trajectory would take {duration:.6g} s at this speed within the "
            f"limits (at most {MAX_MOTION_DURATION_S:g} s)"
        )
    return FollowPath(goal.goal_id, plan.trajectory, note=plan.note(), kept=kept)


def _continuity_options(options: IKOptions) -> IKOptions:
    """Each path sample is solved from the previous one, without restarts and within a small box:
    a jump between neighbouring samples would leave the straight line."""
    return replace(options, restarts=False, max_joint_change=PATH_STEP_MAX_JOINT_CHANGE)


def _interpolate(start: Pose, end: Pose, s: float) -> Pose:
    """Straight-line position and slerp orientation at s ∈ [0, 1]."""
    position = start.translation + s * (end.translation - start.translation)
    delta = quat_mul(quat_conj(start.quaternion), end.quaternion)
    axis, angle = quat_to_axis_angle(delta)
    half = 0.5 * s * float(angle)
    partial = np.concatenate(([math.cos(half)], math.sin(half) * axis))
    return Pose(position, quat_mul(start.quaternion, partial))
