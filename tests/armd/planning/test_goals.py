"""The goal pipeline: planning, rejections with reasons, newest-wins, linear paths."""

from __future__ import annotations

import numpy as np
import pytest

from armd.link.messages import GoalStatus, JointsGoal, PoseGoal, StatusUpdate, StopGoal
from armd.link.protocol import FollowPath, MoveTo, Stop
from armd.planning.goals import GoalPipeline, PlanSettings, Rejected
from kinematics.ik import IKOptions
from tests.armd.rig import LIMITS, Rig
from tests.armd.rig import pipeline_rig as rig_with_pipeline

SETTINGS = PlanSettings(
    ik=IKOptions(max_joint_change=1.0, time_budget_s=0.05),
    linear_step=0.005,
    angular_step=0.05,
    max_linear_speed=0.25,
    max_angular_speed=1.0,
    pose_tolerance=(1e-3, 1e-2),
    fixed_joints=frozenset({"wrist_3_joint"}),
)
Q0 = np.array([0.0, -1.2, 1.4, -1.5, -1.57, 0.0])


async def pipeline_rig() -> tuple[Rig, GoalPipeline, list[StatusUpdate]]:
    return await rig_with_pipeline(Q0, SETTINGS)


def reason_of(goal: PoseGoal | JointsGoal, pipeline: GoalPipeline) -> str:
    with pytest.raises(Rejected) as info:
        pipeline.plan(goal)
    return str(info.value)


async def test_joints_goal_plans_a_joint_target_keeping_unnamed_joints() -> None:
    rig, pipeline, _ = await pipeline_rig()
    request = pipeline.plan(JointsGoal("j", {"elbow_joint": 1.0}, speed=0.5))
    assert isinstance(request, MoveTo)
    assert request.tolerance is None  # the loop's joint tolerance
    expected = rig.loop.commanded.position.copy()  # type: ignore[union-attr]
    expected[2] = 1.0
    np.testing.assert_allclose(request.target, expected, atol=1e-12)
    np.testing.assert_allclose(request.limits.velocity, LIMITS.velocity * 0.5)


async def test_joints_out_of_limits_and_fixed_joints_are_rejected_with_reasons() -> None:
    _, pipeline, _ = await pipeline_rig()
    assert reason_of(JointsGoal("j", {"elbow_joint": 3.5}), pipeline) == (
        "joint 'elbow_joint': 3.5 outside [-3, 3]"
    )
    assert "fixed" in reason_of(JointsGoal("j", {"wrist_3_joint": 0.1}), pipeline)


async def test_pose_goal_is_solved_from_the_measured_state() -> None:
    rig, pipeline, _ = await pipeline_rig()
    q_target = Q0 + np.array([0.3, 0.2, -0.2, 0.1, 0.2, 0.0])
    target = rig.tree.fk(q_target, "tool0")
    goal = PoseGoal("p", tuple(target.translation), tuple(target.quaternion))  # type: ignore[arg-type]
    request = pipeline.plan(goal)
    assert isinstance(request, MoveTo)
    reached = rig.tree.fk(request.target, "tool0")
    distance, angle = reached.distance_to(target)
    assert distance < 1e-5
    assert angle < 1e-4
    assert np.max(np.abs(request.target - Q0)) <= 1.0
    # Success needs the tool within the pose tolerance: joints within a tolerance that keeps it
    # there whatever the joints' errors (first order), checked here against the FK.
    assert request.tolerance is not None
    rng = np.random.default_rng(0)
    for _ in range(200):
        error = rng.choice([-1.0, 1.0], size=6) * request.tolerance
        off, turned = rig.tree.fk(request.target + error, "tool0").distance_to(reached)
        assert off <= 1e-3 * 1.01
        assert turned <= 1e-2 * 1.01


async def test_unreachable_pose_is_rejected() -> None:
    _, pipeline, _ = await pipeline_rig()
    reason = reason_of(PoseGoal("p", (3.0, 0.0, 0.5)), pipeline)
    assert reason.startswith("target unreachable within the joint limits")
    assert "position error" in reason


async def test_pose_that_needs_a_branch_jump_is_rejected_with_that_reason() -> None:
    rig, pipeline, _ = await pipeline_rig()
    far = Q0.copy()
    far[0] += 2.5  # the same arm shape, turned far around the base
    target = rig.tree.fk(far, "tool0")
    reason = reason_of(
        PoseGoal("p", tuple(target.translation), tuple(target.quaternion)),  # type: ignore[arg-type]
        pipeline,
    )
    assert "no branch jumps" in reason


async def test_linear_goal_samples_a_straight_tool_path() -> None:
    rig, pipeline, _ = await pipeline_rig()
    start = rig.tree.fk(rig.loop.commanded.position, "tool0")  # type: ignore[union-attr]
    end = start.translation + np.array([0.0, 0.1, -0.05])
    request = pipeline.plan(PoseGoal("l", tuple(end), motion="linear"))  # type: ignore[arg-type]
    assert isinstance(request, FollowPath)
    waypoints = request.path.waypoints
    np.testing.assert_array_equal(waypoints[0], rig.loop.commanded.position)  # type: ignore[union-attr]
    direction = (end - start.translation) / np.linalg.norm(end - start.translation)
    for q in waypoints:
        pose = rig.tree.fk(q, "tool0")
        offset = pose.translation - start.translation
        off_line = offset - np.dot(offset, direction) * direction
        assert np.linalg.norm(off_line) < 1e-4
        _, angle = pose.distance_to(start)
        assert angle < 1e-3  # orientation kept for a position-only linear goal
    # planned before the seam: the Cartesian speed limit bounds the path rate
    assert request.path.s_velocity <= 0.25 / np.linalg.norm(end - start.translation) * (1 + 1e-12)


async def test_linear_goal_out_of_reach_is_rejected_before_moving() -> None:
    rig, pipeline, _ = await pipeline_rig()
    start = rig.tree.fk(rig.loop.commanded.position, "tool0")  # type: ignore[union-attr]
    end = start.translation + np.array([2.0, 0.0, 0.0])
    reason = reason_of(PoseGoal("l", tuple(end), motion="linear"), pipeline)  # type: ignore[arg-type]
    assert reason.startswith("target unreachable within the joint limits: IK did not converge")


async def test_linear_goal_blocked_on_the_way_is_rejected_before_moving() -> None:
    """The end is reachable, the straight line to it is not (it passes through the base)."""
    rig, pipeline, _ = await pipeline_rig()
    start = rig.tree.fk(rig.loop.commanded.position, "tool0")  # type: ignore[union-attr]
    end = start.translation * np.array([-1.0, -1.0, 1.0])
    reason = reason_of(PoseGoal("l", tuple(end), motion="linear"), pipeline)  # type: ignore[arg-type]
    assert reason.startswith("linear path infeasible at ")


def _nearby_pose_goal(rig: Rig, goal_id: str, dx: float) -> PoseGoal:
    start = rig.tree.fk(rig.loop.commanded.position, "tool0")  # type: ignore[union-attr]
    return PoseGoal(goal_id, tuple(start.translation + np.array([dx, 0.0, 0.0])))  # type: ignore[arg-type]


async def test_joints_goals_are_planned_at_once_and_the_newest_wins_in_the_loop() -> None:
    rig, pipeline, statuses = await pipeline_rig()
    pipeline.submit(JointsGoal("a", {"elbow_joint": 1.0}))
    pipeline.submit(JointsGoal("b", {"elbow_joint": 1.2}))
    assert statuses == [
        StatusUpdate("a", GoalStatus.ACCEPTED),
        StatusUpdate("b", GoalStatus.ACCEPTED),
    ]
    assert pipeline._pending is None  # nothing waits for the planning task
    await rig.run_until(lambda: rig.final("b") is not None)
    assert rig.final("a").status == GoalStatus.PREEMPTED  # type: ignore[union-attr]
    assert rig.final("b").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]


async def test_newest_pose_goal_wins_before_planning_and_every_goal_gets_a_status() -> None:
    rig, pipeline, statuses = await pipeline_rig()
    pipeline.submit(_nearby_pose_goal(rig, "a", 0.01))
    pipeline.submit(_nearby_pose_goal(rig, "b", 0.02))
    assert statuses == [
        StatusUpdate("a", GoalStatus.ACCEPTED),
        StatusUpdate("a", GoalStatus.PREEMPTED, "superseded by b before it was planned"),
    ]
    goal = pipeline._pending
    assert isinstance(goal, PoseGoal)
    await pipeline._handle(goal)
    assert statuses[-1] == StatusUpdate("b", GoalStatus.ACCEPTED)
    await rig.run_until(lambda: rig.final("b") is not None)
    assert rig.final("b").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]


async def test_stop_goes_straight_to_the_loop() -> None:
    rig, pipeline, statuses = await pipeline_rig()
    pipeline.submit(_nearby_pose_goal(rig, "a", 0.01))
    pipeline.submit(StopGoal("s"))
    assert statuses == [
        StatusUpdate("a", GoalStatus.ACCEPTED),
        StatusUpdate("a", GoalStatus.PREEMPTED, "superseded by s before it was planned"),
    ]
    assert isinstance(rig.loop.motions.pending, Stop)
    await rig.run(3)
    assert statuses[2:] == [
        StatusUpdate("s", GoalStatus.ACCEPTED),
        StatusUpdate("s", GoalStatus.SUCCEEDED),
    ]


async def test_goals_are_refused_while_the_broker_is_away() -> None:
    _, pipeline, _ = await pipeline_rig()
    pipeline.accepting = False
    assert "broker" in reason_of(JointsGoal("j", {"elbow_joint": 1.0}), pipeline)


async def test_a_request_reaches_the_loop_as_planned() -> None:
    rig, pipeline, statuses = await pipeline_rig()
    pipeline.submit(JointsGoal("x", {"shoulder_pan_joint": 0.4}))
    assert statuses == [StatusUpdate("x", GoalStatus.ACCEPTED)]
    assert isinstance(rig.loop.motions.pending, MoveTo)
    await rig.run_until(lambda: rig.final("x") is not None)
    assert rig.final("x").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    assert abs(rig.loop.measured.position[0] - 0.4) < 0.005  # type: ignore[union-attr]
