"""Goals checked for collisions before anything moves (`armd.planning.collision_guard`), on the
simulated UR5 standing on its table (config/sim.yaml): the whole path the loop will follow, the
pose goal's IK preferring a clear solution, a start in contact allowing only a way out. The
distances are checked against coal, an independent implementation, where they are asserted."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from armd.config.load import ArmSetup, load_config
from armd.daemon.process import collision_guard, motion_limits, plan_settings
from armd.link.messages import (
    JointsGoal,
    KeypointsGoal,
    Mode,
    NamedGoal,
    PoseGoal,
    TrajectoryGoal,
)
from armd.link.protocol import MoveTo, Sample
from armd.planning.planner import Planned, Planner, Rejected
from kinematics import solve_ik

SIM = Path(__file__).resolve().parents[3] / "config" / "sim.yaml"
Array = NDArray[np.float64]


@cache
def setup() -> ArmSetup:
    return load_config(SIM, kernels=False)


@cache
def planner() -> Planner:
    s = setup()
    return Planner(s.tree, s.tool_link, motion_limits(s), plan_settings(s), collision_guard(s))


def ready() -> Array:
    s = setup()
    return s.tree.q_from_mapping(dict(s.config.poses["ready"]), np.zeros(6))


def sample_at(q: Array, velocity: Array | None = None, acceleration: Array | None = None) -> Sample:
    values = np.zeros((6, 6))
    values[0] = values[2] = q
    if velocity is not None:
        values[1] = values[3] = velocity
    if acceleration is not None:
        values[4] = acceleration
    return Sample(1, 0.0, Mode.HOLDING, 0, False, False, 0, None, values)


def reason(goal: Planned, start: Array | None = None, velocity: Array | None = None) -> str:
    with pytest.raises(Rejected) as info:
        planner().plan(goal, sample_at(ready() if start is None else start, velocity))
    return str(info.value)


def test_a_pose_below_the_table_is_refused_as_a_collision() -> None:
    why = reason(PoseGoal("p", (0.4, 0.1, -0.3)))
    assert why.startswith("collision: ")
    assert "with table at the target" in why


def test_folding_the_forearm_through_the_upper_arm_is_refused() -> None:
    why = reason(JointsGoal("j", {"elbow_joint": 3.1, "shoulder_lift_joint": -1.0}))
    assert why.startswith("collision: ")
    assert why.endswith("m inside the margin)")
    assert "at the target" in why


def test_a_named_pose_or_keypoints_into_the_table_are_refused() -> None:
    low = ready()
    low[1] = 0.3  # the upper arm points down through the table
    why = reason(JointsGoal("j", {"shoulder_lift_joint": 0.3}))
    assert why.startswith("collision: upper_arm_link with table at the target")
    s = setup()
    links = ("base_link", "forearm_link", "wrist_1_link")
    points = tuple(tuple(s.tree.fk(low, link).translation.tolist()) for link in links)
    goal = KeypointsGoal("k", links, points)  # type: ignore[arg-type]
    assert reason(goal).startswith("collision: ")
    assert reason(NamedGoal("n", "nowhere")).startswith("name: ")  # not a collision


def test_clear_goals_are_planned_as_before() -> None:
    move = planner().plan(PoseGoal("p", (0.4, 0.2, 0.4)), sample_at(ready()))
    assert isinstance(move, MoveTo)
    move = planner().plan(NamedGoal("n", "home"), sample_at(ready()))
    assert isinstance(move, MoveTo)


def test_a_trajectory_dipping_into_the_table_is_refused_where_it_collides() -> None:
    names = setup().tree.joint_names
    low = ready()
    low[1] = 0.3
    goal = TrajectoryGoal("t", names, (0.0, 2.0, 4.0), (tuple(ready()), tuple(low), tuple(ready())))
    why = reason(goal)
    assert why.startswith("collision: ")
    assert " with table at " in why
    assert "% of the path" in why
    percent = float(why.split(" at ")[1].split(" %")[0])
    assert 5.0 < percent < 95.0


def test_a_linear_move_down_through_the_table_is_refused() -> None:
    s = setup()
    tool = s.tree.fk(ready(), s.tool_link)
    position = (float(tool.translation[0]), float(tool.translation[1]), -0.05)
    why = reason(PoseGoal("l", position, motion="linear"))
    assert why.startswith("collision: ")
    assert "table" in why


def test_a_low_pose_goal_is_planned_to_a_clear_solution() -> None:
    """A target 0.1 m above the table is reached without touching it."""
    s = setup()
    seed = ready()
    seed[1], seed[2] = 0.15, -1.2  # the shoulder forward and low, the elbow folded up
    target = s.tree.fk(seed, s.tool_link).translation
    model = s.collision
    assert model is not None
    start = ready()
    move = planner().plan(PoseGoal("p", tuple(target.tolist())), sample_at(start))  # type: ignore[arg-type]
    assert isinstance(move, MoveTo)
    assert model.first_contact(move.target) is None
    reached = s.tree.fk(move.target, s.tool_link).translation
    np.testing.assert_allclose(reached, target, atol=1e-4)


def test_a_pose_whose_seeded_solution_collides_is_planned_to_a_clear_one() -> None:
    """From this start the seeded IK's solution for the low target collides (checked here);
    the planner's restarts within the no-jump box find one whose path is clear."""
    s = setup()
    guard = planner().guard
    assert guard is not None
    model = s.collision
    assert model is not None
    start = np.array([0.209, -1.616, 1.691, -1.791, -1.581, 0.099])
    target = np.array([0.283, 0.356, 0.034])
    seeded = solve_ik(s.tree, target, start, s.tool_link, plan_settings(s).ik)
    assert seeded.success
    first = MoveTo("p", np.array(seeded.q), motion_limits(s))
    assert guard.check_move(first, sample_at(start)) is not None  # the seeded one collides
    move = planner().plan(PoseGoal("p", (0.283, 0.356, 0.034)), sample_at(start))
    assert isinstance(move, MoveTo)
    assert guard.check_move(move, sample_at(start)) is None
    assert np.max(np.abs(move.target - start)) <= 1.0  # within the no-jump box
    np.testing.assert_allclose(s.tree.fk(move.target, s.tool_link).translation, target, atol=1e-4)


def test_a_start_in_contact_allows_only_a_way_out() -> None:
    s = setup()
    model = s.collision
    assert model is not None
    start = ready()
    start[1] = 0.05  # the upper arm touches the table (it is 0.03 m above it at 0)
    contact = model.first_contact(start)
    assert contact is not None
    assert contact[:2] == ("upper_arm_link", "table")
    out = planner().plan(JointsGoal("up", {"shoulder_lift_joint": -1.0}), sample_at(start))
    assert isinstance(out, MoveTo)
    deeper = reason(JointsGoal("down", {"shoulder_lift_joint": 0.2}), start)
    assert deeper.startswith("collision: the arm is in collision (upper_arm_link with table")
    sideways = reason(JointsGoal("pan", {"shoulder_pan_joint": 1.0}), start)
    assert "only a motion out of it is allowed" in sideways


def test_a_move_while_moving_checks_ruckig_s_trajectory_from_the_commanded_state() -> None:
    """From a moving state the loop's motion is not the straight line: the shoulder swinging
    down fast overshoots a target just below it, and the wrist reaches the table on the way,
    though the start, the target and the line between them are clear."""
    s = setup()
    model = s.collision
    assert model is not None
    start = ready()
    start[1], start[2], start[3] = -0.4, 0.3, -2.2
    velocity = np.array([0.0, 2.5, 0.0, 0.0, 0.0, 0.0])
    goal = JointsGoal("j", {"shoulder_lift_joint": -0.15})
    target = s.tree.q_from_mapping(dict(goal.positions), start)
    assert model.first_contact(start) is None
    assert model.first_contact(target) is None
    assert model.check_path([start, target]).clear
    why = reason(goal, start, velocity)
    assert why.startswith("collision: ")
    assert "with table at " in why
    assert "% of the path" in why
    at_rest = planner().plan(goal, sample_at(start))
    assert isinstance(at_rest, MoveTo)
