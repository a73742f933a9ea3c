"""Validation of ``trajectory`` goals (docs/mqtt.md): the payload model and the checks between
its fields that a model cannot say, each refusal a reason naming the field, the value and what
was expected (``points[3].t: 0.2 must be at least 0.001 s after points[2].t (0.2)``).

The shape checks are here; the joint limits, the curve between the points and the time scaling
are the planner's (`armd.planning.planner`, `armd.motion.timed_trajectory`), still before anything
moves.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Literal

from pydantic import Field, Strict

from armd.api import payload_reasons as render
from armd.api.contract import (
    MAX_JOINT_POSITION,
    MAX_MOTION_DURATION_S,
    MAX_TRAJECTORY_POINTS,
    MIN_POINT_INTERVAL_S,
)
from armd.api.payload_types import GoalId, JointValue, Name, Payload, Speed
from armd.link.messages import Rejection, TrajectoryGoal

__all__ = ["POINT_FIELDS", "TrajectoryModel", "trajectory_goal"]

PointTime = Annotated[float, Strict(), Field(ge=0.0, le=MAX_MOTION_DURATION_S, allow_inf_nan=False)]
JointRate = Annotated[  # rad/s or m/s: the same bound as positions, far beyond any joint's
    float, Strict(), Field(ge=-MAX_JOINT_POSITION, le=MAX_JOINT_POSITION, allow_inf_nan=False)
]


class _PointModel(Payload):
    t: PointTime
    positions: tuple[JointValue, ...]
    velocities: tuple[JointRate, ...] | None = None


POINT_FIELDS = tuple(_PointModel.model_fields)


class TrajectoryModel(Payload):
    id: GoalId
    type: Literal["trajectory"]
    joints: tuple[Name, ...]
    # At least 2 points is checked after the points themselves (`_points_problem`): pydantic
    # would count a point it refused as missing and add a misleading "too short".
    points: Annotated[tuple[_PointModel, ...], Field(max_length=MAX_TRAJECTORY_POINTS)]
    speed: Speed = 1.0


def trajectory_goal(
    model: TrajectoryModel, goal_id: str | None, joint_names: Collection[str]
) -> TrajectoryGoal | Rejection:
    """The goal of a validated model, or the rejection of the first inconsistency found."""
    problem = _joints_problem(model.joints, joint_names) or _points_problem(model)
    if problem is not None:
        return Rejection(goal_id, problem)
    velocities = None
    if model.points[0].velocities is not None:
        velocities = tuple(point.velocities or () for point in model.points)
    return TrajectoryGoal(
        model.id,
        model.joints,
        tuple(point.t for point in model.points),
        tuple(point.positions for point in model.points),
        velocities,
        model.speed,
    )


def _joints_problem(joints: tuple[str, ...], known: Collection[str]) -> str | None:
    if not joints:
        return "joints: must name at least one joint"
    unknown = [name for name in joints if name not in known]
    if unknown:
        shown = ", ".join(render.name(name) for name in unknown[: render.MAX_REASONS])
        return f"joints: unknown joint(s) {shown}; joints: {render.names(known)}"
    repeated = sorted({name for name in joints if joints.count(name) > 1})
    if repeated:
        return f"joints: {', '.join(render.name(n) for n in repeated)} named more than once"
    return None


def _points_problem(model: TrajectoryModel) -> str | None:
    points = model.points
    if len(points) < 2:
        return f"points: {len(points)} point(s), a trajectory needs at least 2"
    for i, point in enumerate(points):
        problem = _point_problem(model, i, point)
        if problem is not None:
            return problem
    for i in (0, len(points) - 1):
        velocities = points[i].velocities
        if velocities is not None and any(v != 0.0 for v in velocities):
            return (
                f"points[{i}].velocities: {render.show(list(velocities))} must be all 0: a "
                "trajectory starts and ends at rest"
            )
    return None


def _point_problem(model: TrajectoryModel, i: int, point: _PointModel) -> str | None:
    """What is wrong with point `i` given the joints and the other points, if anything."""
    n, previous = len(model.joints), model.points[i - 1] if i else None
    if len(point.positions) != n:
        return (
            f"points[{i}].positions: {len(point.positions)} values, expected {n} (one per "
            "joint in joints, in that order)"
        )
    if (point.velocities is not None) != (model.points[0].velocities is not None):
        return f"points[{i}].velocities: give velocities for every point or for none"
    if point.velocities is not None and len(point.velocities) != n:
        return f"points[{i}].velocities: {len(point.velocities)} values, expected {n}"
    if previous is not None and point.t < previous.t + MIN_POINT_INTERVAL_S:
        return (
            f"points[{i}].t: {point.t!r} must be at least {MIN_POINT_INTERVAL_S:g} s after "
            f"points[{i - 1}].t ({previous.t!r}): times strictly increase"
        )
    return None
