"""Moves planned between ticks (`armd.control.moves.prepare`): the tick that starts one uses the
prepared
motion only while nothing it depends on changed, and the arm moves exactly as if the move had been
planned at that tick."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from armd.control.moves import motion_for, plan_motion, prepare
from armd.link.messages import GoalStatus
from armd.link.protocol import Stop
from armd.motion.trajectory import JointMotion, PlanningError, Setpoint
from tests.armd.rig import LIMITS, make_rig, move

HELD = np.array([0.1, -0.2, 0.3, 0.0, 0.2, -0.1])
LOWER, UPPER = np.full(6, -2.0), np.full(6, 2.0)
TARGET = [0.5, -0.4, 0.8, 0.2, -0.6, 1.0]


def times(motion: JointMotion, count: int = 7) -> np.ndarray:
    return np.linspace(0.0, motion.duration, count)


def test_a_prepared_motion_is_the_one_the_tick_would_plan() -> None:
    start, command = Setpoint.at_rest(HELD), move("g", TARGET)
    prepared = prepare(command, start, (LOWER, UPPER), LIMITS)
    assert prepared is not None
    fresh = plan_motion(command, Setpoint.at_rest(HELD.copy()))
    assert isinstance(prepared.motion, JointMotion)
    assert isinstance(fresh, JointMotion)
    assert prepared.motion.duration == fresh.duration
    for t in times(fresh):
        a, b = prepared.motion.sample(t), fresh.sample(t)
        np.testing.assert_array_equal(a.position, b.position)
        np.testing.assert_array_equal(a.velocity, b.velocity)
    assert motion_for(command, Setpoint.at_rest(HELD.copy()), (LOWER, UPPER), LIMITS, prepared) is (
        prepared.motion
    )


@pytest.mark.parametrize(
    "change",
    ["another move", "moved", "one ulp away", "velocity", "acceleration", "new bounds"],
)
def test_a_prepared_motion_is_not_used_once_something_changed(change: str) -> None:
    command = move("g", TARGET)
    prepared = prepare(command, Setpoint.at_rest(HELD), (LOWER, UPPER), LIMITS)
    assert prepared is not None
    now, bounds, asked = Setpoint.at_rest(HELD.copy()), (LOWER, UPPER), command
    if change == "another move":
        asked = move("g", TARGET)  # equal, but not the command that was prepared
    elif change == "moved":
        now = Setpoint.at_rest(HELD + 0.01)
    elif change == "one ulp away":
        now = Setpoint.at_rest(np.nextafter(HELD, np.inf))
    elif change == "velocity":
        now = replace(now, velocity=np.full(6, 1e-300))
    elif change == "acceleration":
        now = replace(now, acceleration=np.full(6, -5e-324))  # a subnormal
    else:
        bounds = (LOWER.copy(), UPPER.copy())
    assert not prepared.fits(asked, now, bounds)
    used = motion_for(asked, now, bounds, LIMITS, prepared)
    assert used is not prepared.motion
    assert isinstance(used, JointMotion)
    np.testing.assert_array_equal(used.sample(0.0).position, now.position)


def test_a_move_that_cannot_be_followed_is_not_prepared_and_fails_at_the_tick() -> None:
    outside = move("g", [2.5, 0, 0, 0, 0, 0])
    assert prepare(outside, Setpoint.at_rest(HELD), (LOWER, UPPER), LIMITS) is None
    with pytest.raises(PlanningError, match="joint"):
        motion_for(outside, Setpoint.at_rest(HELD), (LOWER, UPPER), LIMITS, None)


def test_nothing_is_prepared_while_the_arm_still_moves() -> None:
    moving = Setpoint(HELD, np.full(6, 0.1), np.zeros(6))
    assert prepare(move("g", TARGET), moving, (LOWER, UPPER), LIMITS) is None


async def test_the_loop_starts_a_move_that_arrived_while_holding_from_its_prepared_motion() -> None:
    rig = await make_rig()
    await rig.run(5)
    rig.loop.handle(move("g1", TARGET))
    prepared = rig.loop.motions._prepared
    assert prepared is not None
    assert prepared.move.goal_id == "g1"
    await rig.run(1)
    assert rig.loop.motions.active is not None
    assert rig.loop.motions.active.motion is prepared.motion
    await rig.run_until(lambda: rig.final("g1") is not None)
    assert rig.final("g1").status is GoalStatus.SUCCEEDED  # type: ignore[union-attr]


async def test_a_move_replaced_before_the_tick_runs_from_its_own_plan() -> None:
    rig = await make_rig()
    await rig.run(5)
    rig.loop.handle(move("g1", TARGET))
    rig.loop.handle(Stop("s1"))  # replaces it: nothing to prepare for a stop
    await rig.run(1)
    replaced = rig.final("g1")
    assert replaced is not None
    assert replaced.status is GoalStatus.PREEMPTED
    rig.loop.handle(move("g2", [0.0, 0.1, 0.0, 0.0, 0.0, 0.0]))  # prepared afresh
    await rig.run_until(lambda: rig.final("g2") is not None)
    assert rig.final("g2").status is GoalStatus.SUCCEEDED  # type: ignore[union-attr]


async def test_a_move_that_arrives_while_moving_is_planned_at_its_tick() -> None:
    rig = await make_rig()
    await rig.run(1)
    rig.loop.handle(move("first", [1.5, 0, 0, 0, 0, 0]))
    await rig.run(30)
    rig.loop.handle(move("second", [-0.5, 0.3, 0, 0, 0, 0]))
    assert rig.loop.motions._prepared is None  # the tick plans it from the state it reaches
    await rig.run(1)
    active = rig.loop.motions.active
    assert active is not None
    assert active.goal_id == "second"
    await rig.run_until(lambda: rig.final("second") is not None)
    assert rig.final("second").status is GoalStatus.SUCCEEDED  # type: ignore[union-attr]
