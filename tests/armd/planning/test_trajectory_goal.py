"""The ``trajectory`` goal: payload validation (each refusal a clear reason), the limit checks and
time scaling before any motion, and the in-process loop following it: within the limits, through
every point, and started without a jump (also from a moving arm)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from armd.api.contract import MAX_TRAJECTORY_POINTS, encode, goal_json
from armd.api.payloads import MAX_PAYLOAD_BYTES, parse_goal
from armd.link.messages import GoalStatus, JointsGoal, Rejection, TrajectoryGoal
from armd.link.protocol import FollowPath
from armd.motion.timed_trajectory import QuinticCurve, TimedTrajectory, plan_trajectory
from armd.motion.trajectory import MotionLimits
from armd.planning.goals import GoalPipeline, Rejected
from tests.armd.planning.test_goals import (  # the goal tests' planner settings and start
    Q0,
    SETTINGS,
)
from tests.armd.rig import (
    ACCELERATION,
    JERK,
    LIMITS,
    PERIOD,
    VELOCITY,
    Rig,
    assert_within_limits,
    make_rig,
)
from tests.armd.rig import pipeline_rig as rig_with_pipeline

JOINTS = ("shoulder_pan_joint", "elbow_joint")
NAMES = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint")


def parse(document: dict[str, Any] | bytes) -> TrajectoryGoal | Rejection:
    payload = document if isinstance(document, bytes) else json.dumps(document).encode()
    goal = parse_goal(
        payload, joint_names=NAMES, link_names=("base", "tool0"), default_link="tool0"
    )
    assert isinstance(goal, TrajectoryGoal | Rejection)
    return goal


def trajectory(points: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": "t1", "type": "trajectory", "joints": list(JOINTS), "points": points} | extra


def reason(document: dict[str, Any] | bytes) -> str:
    result = parse(document)
    assert isinstance(result, Rejection), result
    assert result.goal_id == "t1"
    return result.reason


GOOD = [{"t": 0.0, "positions": [0.0, 1.4]}, {"t": 1.0, "positions": [0.3, 1.2]}]


# -- payloads -------------------------------------------------------------------------------------


def test_a_trajectory_payload_round_trips_through_the_contract() -> None:
    points = [p | {"velocities": [0.0, 0.0]} for p in GOOD]
    goal = parse(trajectory(points, speed=0.5))
    assert goal == TrajectoryGoal(
        "t1", JOINTS, (0.0, 1.0), ((0.0, 1.4), (0.3, 1.2)), ((0.0, 0.0), (0.0, 0.0)), 0.5
    )
    assert parse(encode(goal_json(goal))) == goal


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        (
            [GOOD[0], {"t": 0.0, "positions": [0.3, 1.2]}],
            "points[1].t: 0.0 must be at least 0.001 s after points[0].t (0.0): times strictly "
            "increase",
        ),
        (
            [GOOD[0], {"t": 2.0, "positions": [0.1, 1.4]}, {"t": 1.5, "positions": [0.3, 1.2]}],
            "points[2].t: 1.5 must be at least 0.001 s after points[1].t (2.0): times strictly "
            "increase",
        ),
        (
            [GOOD[0], {"t": -1.0, "positions": [0.3, 1.2]}],
            "points[1].t: -1.0 must be in [0, 3600] s",
        ),
        ([GOOD[0], {"t": 1.0, "positions": [0.3]}], "points[1].positions: 1 values, expected 2"),
        (
            [GOOD[0], {"t": 1.0, "positions": [0.3, 2000.0]}],
            "points[1].positions[1]: 2000.0 must be within ±1000 (rad or m)",
        ),
        (
            [GOOD[0], {"t": 1.0, "positions": [0.3, 1.2], "velocity": [0, 0]}],
            "points[1].velocity: unknown field (did you mean 'velocities'?)",
        ),
        ([GOOD[0]], "points: 1 point(s), a trajectory needs at least 2"),
        (
            [GOOD[0] | {"velocities": [0.0, 0.0]}, GOOD[1]],
            "points[1].velocities: give velocities for every point or for none",
        ),
        (
            [GOOD[0] | {"velocities": [0.0, 0.5]}, GOOD[1] | {"velocities": [0.0, 0.0]}],
            "points[0].velocities: [0.0, 0.5] must be all 0: a trajectory starts and ends at rest",
        ),
        ([3, GOOD[1]], 'points[0]: must be an object {"t", "positions", "velocities"?}'),
        ([GOOD[0], {"t": "1", "positions": [0.3, 1.2]}], "points[1].t: '1' must be a number"),
    ],
)
def test_malformed_points_are_rejected_naming_the_field(points: list[Any], expected: str) -> None:
    assert reason(trajectory(points)).startswith(expected)


def test_nan_and_infinity_are_rejected() -> None:
    text = json.dumps(trajectory(GOOD)).replace("1.0,", "NaN,").replace("0.3", "Infinity")
    assert reason(text.encode()) == (
        "points[1].t: nan must be a finite number; points[1].positions[0]: inf must be a finite "
        "number"
    )


def test_unknown_and_repeated_joints_are_rejected() -> None:
    assert reason(trajectory(GOOD, joints=["elbow_joint", "elbo"])) == (
        f"joints: unknown joint(s) elbo; joints: [{', '.join(NAMES)}]"
    )
    assert reason(trajectory(GOOD, joints=["elbow_joint", "elbow_joint"])) == (
        "joints: elbow_joint named more than once"
    )
    assert reason(trajectory(GOOD, joints=[])) == "joints: must name at least one joint"
    assert (
        reason(trajectory(GOOD, joints="elbow_joint")) == "joints: must be an array of joint names"
    )


def test_too_many_points_are_rejected_and_the_bound_fits_the_payload_limit() -> None:
    points = [{"t": i * 0.01, "positions": [0.0, 1.4]} for i in range(MAX_TRAJECTORY_POINTS + 1)]
    assert reason(trajectory(points)) == (
        f"points: {MAX_TRAJECTORY_POINTS + 1} points, at most {MAX_TRAJECTORY_POINTS} "
        "(simplify the trajectory: `armd replay` does)"
    )
    # What docs/mqtt.md promises: ~800 points of 6 joints at 5 decimals fit in 64 KiB.
    six = [
        {"t": round(i * 0.04, 4), "positions": [round(-1.23456 + i * 1e-5, 5)] * 6}
        for i in range(800)
    ]
    assert len(encode({"id": "t1", "type": "trajectory", "joints": ["j"] * 6, "points": six})) < (
        MAX_PAYLOAD_BYTES
    )


# -- planning -------------------------------------------------------------------------------------


async def pipeline_rig() -> tuple[Rig, GoalPipeline]:
    rig, pipeline, _ = await rig_with_pipeline(Q0, SETTINGS)
    return rig, pipeline


def goal(times: list[float], positions: list[list[float]], **extra: Any) -> TrajectoryGoal:
    return TrajectoryGoal(
        extra.pop("goal_id", "t1"),
        extra.pop("joints", JOINTS),
        tuple(times),
        tuple(tuple(p) for p in positions),
        **extra,
    )


def rejection(pipeline: GoalPipeline, trajectory_goal: TrajectoryGoal) -> str:
    with pytest.raises(Rejected) as info:
        pipeline.plan(trajectory_goal)
    return str(info.value)


async def test_points_outside_the_limits_are_rejected_before_any_motion() -> None:
    rig, pipeline = await pipeline_rig()
    bad = goal([0.0, 1.0, 2.0], [[0.0, 1.4], [0.5, 2.9], [0.2, 3.2]])
    assert rejection(pipeline, bad) == (
        "points[2].positions[1]: elbow_joint 3.2 outside its limits [-3, 3]"
    )
    fixed = goal([0.0, 1.0], [[0.0], [0.1]], joints=("wrist_3_joint",))
    assert rejection(pipeline, fixed) == (
        "joints: ['wrist_3_joint'] are fixed by the configuration"
    )
    assert rig.loop.motions.pending is None
    assert not rig.loop.moving


async def test_a_curve_that_leaves_the_limits_between_points_is_rejected() -> None:
    _, pipeline = await pipeline_rig()
    # Fast up to the limit and back: the smooth curve overshoots 3 rad between the points.
    overshoot = goal([0.0, 1.0, 1.1, 2.0], [[0.0, 1.4], [0.0, 2.99], [0.0, 2.99], [0.0, 1.4]])
    assert rejection(pipeline, overshoot).startswith(
        "points[1]..points[2]: the curve between them takes elbow_joint to 3.0"
    )


async def test_a_trajectory_longer_than_an_hour_is_rejected() -> None:
    _, pipeline = await pipeline_rig()
    slow = goal([0.0, 3000.0], [[0.0, 1.4], [0.1, 1.4]], speed=0.5)
    assert rejection(pipeline, slow).startswith(
        "points: the trajectory would take 6000 s at this speed within the limits"
    )


def test_the_curve_passes_every_point_with_continuous_acceleration_within_the_limits() -> None:
    rng = np.random.default_rng(7)
    times = np.cumsum(rng.uniform(0.05, 0.4, 30)) - 0.05
    positions = np.cumsum(rng.normal(0.0, 0.2, (30, 3)), axis=0)
    limits = MotionLimits(np.full(3, 1.0), np.full(3, 4.0), np.full(3, 40.0))
    bounds = (np.full(3, -100.0), np.full(3, 100.0))
    plan = plan_trajectory(times, positions, None, limits, 1.0, bounds, ("a", "b", "c"))
    assert plan.slowdown > 1.0
    assert plan.note() is not None
    knots = plan.trajectory
    np.testing.assert_allclose(knots.times, (times - times[0]) * plan.slowdown)
    curve = QuinticCurve(knots.times, knots.positions, knots.velocities, knots.accelerations)
    for t, q in zip(knots.times, knots.positions, strict=True):
        np.testing.assert_allclose(curve.at(t)[0], q, atol=1e-9)
        before, after = curve.at(t - 1e-7), curve.at(t + 1e-7)
        np.testing.assert_allclose(before[2], after[2], atol=1e-3)  # C²: no acceleration jump
    _, dq, ddq, dddq = curve.dense()
    assert np.abs(dq).max() <= 1.0
    assert np.abs(ddq).max() <= 4.0
    assert np.abs(dddq).max() <= 40.0


# -- the loop follows it --------------------------------------------------------------------------


async def follow(rig: Rig, pipeline: GoalPipeline, trajectory_goal: TrajectoryGoal) -> None:
    pipeline.submit(trajectory_goal)
    await pipeline.plan_pending()
    await rig.run_until(lambda: rig.final(trajectory_goal.goal_id) is not None, limit_s=60.0)


def velocities(rig: Rig, start: int = 0) -> np.ndarray:
    commands = np.array([q for _, q in rig.commands[start:]])
    return np.diff(commands, axis=0) / PERIOD


async def test_a_too_fast_trajectory_is_slowed_and_followed_within_the_limits() -> None:
    rig, pipeline = await pipeline_rig()
    # 1.5 rad in 0.3 s and back: several times the velocity limit.
    fast = goal([0.0, 0.3, 0.6], [[0.0, 1.4], [1.5, 0.4], [0.0, 1.4]])
    interventions = rig.loop.limiter.interventions
    await follow(rig, pipeline, fast)
    accepted = next(s for s in rig.statuses if s.status is GoalStatus.ACCEPTED)
    assert accepted.reason is not None
    assert accepted.reason.startswith("time-scaled ×")
    assert accepted.reason.endswith("to stay within the velocity limit of shoulder_pan_joint")
    factor = float(accepted.reason.split("×")[1].split()[0])
    assert factor > 1.5
    assert rig.final("t1").status is GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    assert_within_limits(rig)  # position, velocity, acceleration of every command
    assert rig.loop.limiter.interventions == interventions  # planned within: nothing clipped
    jerk = np.diff(velocities(rig), n=2, axis=0) / PERIOD**2
    assert np.abs(jerk).max() <= JERK * 1.01
    # It went through the middle point and took the scaled time.
    commands = np.array([q for _, q in rig.commands])
    assert np.abs(commands[:, 0] - 1.5).min() < 1e-3
    moving = np.nonzero(np.any(np.abs(velocities(rig)) > 1e-9, axis=1))[0]
    assert (moving[-1] - moving[0]) * PERIOD == pytest.approx(0.6 * factor, abs=0.05)


async def test_a_slow_trajectory_keeps_its_timing() -> None:
    rig, pipeline = await pipeline_rig()
    times = [0.0, 0.5, 1.0, 1.5, 2.0]
    pan = [0.0, 0.1, 0.25, 0.35, 0.4]
    slow = goal(times, [[p, 1.4] for p in pan], goal_id="s")
    await follow(rig, pipeline, slow)
    assert rig.statuses[0].reason is None  # accepted as it is
    assert rig.final("s").status is GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    commands = np.array([q for _, q in rig.commands])
    start = int(np.nonzero(np.abs(np.diff(commands[:, 0])) > 1e-12)[0][0])
    for t, p in zip(times, pan, strict=True):
        tick = start + round(t / PERIOD)
        assert commands[tick, 0] == pytest.approx(p, abs=2e-3)


async def test_a_trajectory_starts_from_a_moving_arm_without_a_jump() -> None:
    rig, pipeline = await pipeline_rig()
    pipeline.submit(JointsGoal("j", {"shoulder_pan_joint": -1.0, "elbow_joint": 0.8}))
    await rig.run(60)  # moving fast toward it
    assert np.abs(rig.loop.commanded.velocity).max() > 0.5  # type: ignore[union-attr]
    before = len(rig.commands)
    away = goal([0.0, 1.0, 2.0], [[0.5, 1.6], [0.8, 1.2], [0.6, 1.4]])
    await follow(rig, pipeline, away)
    assert rig.final("j").status is GoalStatus.PREEMPTED  # type: ignore[union-attr]
    assert rig.final("t1").status is GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    assert_within_limits(rig)  # across the switch: no velocity or acceleration jump
    v = velocities(rig, before - 2)
    assert np.abs(np.diff(v, axis=0)).max() <= ACCELERATION * PERIOD * (1 + 1e-6)
    assert np.abs(v).max() <= VELOCITY + 1e-9


async def test_the_loop_refuses_a_malformed_trajectory_command() -> None:
    rig = await make_rig(Q0)
    await rig.run(1)
    n = rig.tree.dof
    knots = TimedTrajectory(
        np.array([0.0, 1.0]),
        np.array([Q0, Q0]),
        np.full((2, n), np.nan),
        np.zeros((2, n)),
        LIMITS,
    )
    rig.loop.handle(FollowPath("bad", knots))
    await rig.run(2)
    assert rig.statuses[-1].status is GoalStatus.ABORTED
    assert rig.statuses[-1].reason == "trajectory: velocities must be 2 × 6 finite numbers"
    assert not rig.loop.moving


def test_given_velocities_are_followed_at_the_points() -> None:
    times = np.array([0.0, 1.0, 2.0, 3.0])
    positions = np.array([[0.0], [0.5], [1.2], [1.4]])
    velocities = np.array([[0.0], [0.6], [0.5], [0.0]])
    limits = MotionLimits(np.full(1, 2.0), np.full(1, 8.0), np.full(1, 160.0))
    bounds = (np.full(1, -3.0), np.full(1, 3.0))
    plan = plan_trajectory(times, positions, velocities, limits, 0.5, bounds, ("a",))
    assert plan.slowdown == 1.0  # speed 0.5 is slow enough: twice as long, nothing more
    knots = plan.trajectory
    curve = QuinticCurve(knots.times, knots.positions, knots.velocities, knots.accelerations)
    for t, q, v in zip(times * 2.0, positions, velocities, strict=True):
        at = curve.at(float(t))
        np.testing.assert_allclose(at[0], q, atol=1e-12)
        np.testing.assert_allclose(at[1], v / 2.0, atol=1e-12)  # time twice as slow
