"""A move takes over where it was planned and checked from (`armd.link.protocol.Handover`): the
loop forecasts in each sample where a move sent now would start (`Sample.ahead`), the daemon
plans and checks the move from there, and the loop starts it at that tick, from that state, or
not at all. So the path the arm follows is the path the collision checks passed, however old the
sample was: a goal planned from a sample 40 ms old and started from wherever the arm had got to
meanwhile followed another ruckig trajectory, up to 90 mm away at the UR5's tool
(docs/collision.md, bench/handover.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from armd.config.load import ArmSetup, load_config
from armd.daemon.process import collision_guard
from armd.link.handover import Handover
from armd.link.messages import GoalStatus, JointsGoal
from armd.link.protocol import MoveTo, StreamTarget
from armd.motion.trajectory import JointMotion
from armd.planning.goals import GoalPipeline
from tests.armd.planning.test_goals import SETTINGS
from tests.armd.rig import PERIOD, Rig, make_rig, move, pipeline_rig

LEAD = 20  # ticks: the forecast's lead (the daemon's: a sample period and 0.08 s)
FIRST = [2.5, -1.0, 0.5, 0.0, 0.0, 0.0]  # about 1.5 s
SECOND = [-0.5, 0.3, 0.2, 0.0, 0.0, 0.0]
SIM = Path(__file__).resolve().parents[3] / "config" / "sim.yaml"


async def moving_rig() -> Rig:
    """A rig whose arm is 30 ticks into a move to `FIRST`."""
    rig = await make_rig(handover_ticks=LEAD)
    await rig.run(1)
    rig.loop.handle(move("first", FIRST))
    await rig.run(30)
    return rig


def forecast(rig: Rig, which: int = 0) -> Handover:
    """The latest sample's nearest forecast (`which`: a farther one)."""
    ahead = rig.samples[-1].ahead
    assert ahead, "no forecast"
    return ahead[which]


def status(rig: Rig, goal_id: str) -> GoalStatus:
    final = rig.final(goal_id)
    assert final is not None, goal_id
    return final.status


def assert_follows(rig: Rig, since: int, handover: Handover, motion: JointMotion) -> None:
    """The commands of ticks `since` + 1 on: the motion under way until the handover, then
    `motion` sampled from it (a motion started at tick k samples tick k one period in)."""
    followed = 0
    for i, (_, q) in enumerate(rig.commands[since:]):
        tick = since + 1 + i
        if tick >= handover.tick:
            expected = motion.sample((tick - handover.tick + 1) * PERIOD).position
            np.testing.assert_allclose(q, expected, rtol=0.0, atol=1e-9, err_msg=f"tick {tick}")
            followed += 1
    assert followed * PERIOD > motion.duration


@pytest.mark.parametrize("which", [0, 1, 2])
async def test_a_forecast_is_the_state_the_loop_commands_just_before_the_takeover(
    which: int,
) -> None:
    rig = await moving_rig()
    for _ in range(3):  # three points of the motion, each a forecast's lead on from the last
        assert [h.tick for h in rig.samples[-1].ahead] == [
            rig.loop.tick_count + k * LEAD for k in (1, 2, 4)
        ]
        ahead = forecast(rig, which)
        due = rig.samples[-1].t + (ahead.tick - rig.loop.tick_count) * PERIOD
        assert ahead.t == pytest.approx(due)
        await rig.run(ahead.tick - 1 - rig.loop.tick_count)
        commanded = rig.loop.commanded
        assert commanded is not None
        assert commanded.velocity.any()  # still moving: a forecast, not a rest
        assert ahead.matches(commanded)
        np.testing.assert_allclose(commanded.position, ahead.start.position, rtol=0, atol=1e-12)
        np.testing.assert_allclose(commanded.velocity, ahead.start.velocity, rtol=0, atol=1e-9)


async def test_a_move_takes_over_at_its_tick_along_the_motion_planned_from_its_start() -> None:
    rig = await moving_rig()
    ahead = forecast(rig)
    second = replace(move("second", SECOND), handover=ahead)
    since = len(rig.commands)
    assert since == rig.loop.tick_count
    rig.loop.handle(second)
    await rig.run(LEAD // 2)
    assert rig.final("first") is None  # the motion under way goes on until the handover
    await rig.run_until(lambda: rig.final("second") is not None)
    assert status(rig, "first") is GoalStatus.PREEMPTED
    assert status(rig, "second") is GoalStatus.SUCCEEDED
    assert_follows(rig, since, ahead, JointMotion(ahead.start, second.target, second.limits))


async def test_a_move_whose_start_the_arm_has_left_is_not_started_and_the_motion_goes_on() -> None:
    rig = await moving_rig()
    ahead = forecast(rig)
    await rig.run(ahead.tick + 4 - rig.loop.tick_count)  # the next tick is 5 past its handover
    rig.loop.handle(replace(move("late", SECOND), handover=ahead))
    await rig.run(1)
    late = rig.final("late")
    assert late is not None
    assert late.status is GoalStatus.ABORTED
    assert late.reason is not None
    assert "moved on" in late.reason
    assert "5 ticks after its handover" in late.reason
    await rig.run_until(lambda: rig.final("first") is not None)
    assert status(rig, "first") is GoalStatus.SUCCEEDED
    np.testing.assert_allclose(rig.commands[-1][1], FIRST, atol=1e-9)


async def test_a_move_planned_at_rest_starts_whenever_it_arrives_while_the_arm_holds_there() -> (
    None
):
    rig = await make_rig(handover_ticks=LEAD)
    await rig.run(5)
    assert len(rig.samples[-1].ahead) == 1
    ahead = forecast(rig)
    assert ahead.tick == rig.loop.tick_count + 1
    assert ahead.at_rest
    await rig.run(50)
    rig.loop.handle(replace(move("g", SECOND), handover=ahead))
    await rig.run_until(lambda: rig.final("g") is not None)
    assert status(rig, "g") is GoalStatus.SUCCEEDED


async def test_no_forecast_while_a_move_waits_for_its_handover_or_a_stream_is_under_way() -> None:
    rig = await make_rig(handover_ticks=LEAD, stream_timeout_s=0.5)
    await rig.run(1)
    rig.loop.handle(move("first", FIRST))
    await rig.run(30)
    rig.loop.handle(replace(move("second", SECOND), handover=forecast(rig)))
    await rig.run(1)
    assert rig.samples[-1].ahead == ()  # where it starts is known, not where it will be
    await rig.run(LEAD)
    assert rig.samples[-1].ahead  # it took over: its own motion's forecasts
    position = np.array(SECOND)
    rig.loop.handle(StreamTarget("s", 1, 1, position, np.full(6, np.nan), False))
    await rig.run(1)
    assert rig.samples[-1].streaming
    assert rig.samples[-1].ahead == ()
    assert status(rig, "second") is GoalStatus.PREEMPTED


@cache
def sim() -> ArmSetup:
    return load_config(SIM, kernels=False)


async def guarded_rig() -> tuple[Rig, GoalPipeline]:
    """A goal pipeline with the simulated UR5's collision checks (its table) in front of a rig
    whose arm moves from the configuration's ready pose."""
    setup = sim()
    ready = setup.tree.q_from_mapping(dict(setup.config.poses["ready"]), np.zeros(6))
    rig, pipeline, _ = await pipeline_rig(
        ready, SETTINGS, handover_ticks=LEAD, guard=collision_guard(setup)
    )
    pipeline.submit(JointsGoal("first", {"shoulder_pan_joint": 1.2, "elbow_joint": 1.0}))
    await rig.run(30)
    return rig, pipeline


async def test_a_goal_pre_empting_a_moving_arm_follows_the_path_its_check_passed() -> None:
    rig, pipeline = await guarded_rig()
    sample = rig.samples[-1]
    since = len(rig.commands)
    pipeline.submit(JointsGoal("second", {"shoulder_pan_joint": -0.6, "wrist_1_joint": -1.0}))
    sent = rig.loop.motions.pending
    assert isinstance(sent, MoveTo)
    assert sent.goal_id == "second"
    assert sent.handover is not None
    ahead = forecast(rig)
    assert sent.handover.tick == ahead.tick
    assert ahead.matches(sent.handover.start)
    guard = pipeline.planner.guard
    assert guard is not None
    assert guard.check_move(sent, sample.at_handover(ahead)) is None  # what the pipeline checked
    await rig.run_until(lambda: rig.final("second") is not None)
    assert status(rig, "second") is GoalStatus.SUCCEEDED
    assert_follows(rig, since, ahead, JointMotion(ahead.start, sent.target, sent.limits))


async def test_goals_sent_back_to_back_wait_for_a_forecast_instead_of_missing_their_start() -> None:
    rig, pipeline = await guarded_rig()
    pipeline.submit(JointsGoal("second", {"shoulder_pan_joint": -0.6}))
    pipeline.submit(JointsGoal("third", {"shoulder_pan_joint": 0.4, "wrist_1_joint": -1.0}))
    assert rig.port is not None
    assert not rig.port.caught_up  # the second is on its way: the third waits to be planned
    planning = asyncio.ensure_future(pipeline.plan_pending())
    # The loop ticks while the third waits; once a sample forecasts its start, the clock stops
    # (this rig's ticks run as fast as they can: they would outrun the planning thread).
    while not (rig.port.caught_up and rig.samples[-1].ahead):
        await rig.run(1)
        await asyncio.sleep(0)
        assert not planning.done()
    await planning
    await rig.run_until(lambda: rig.final("third") is not None)
    assert status(rig, "third") is GoalStatus.SUCCEEDED
    assert status(rig, "second") is GoalStatus.PREEMPTED
    assert status(rig, "first") is GoalStatus.PREEMPTED


async def test_a_goal_planned_too_late_for_a_forecast_takes_the_next_one() -> None:
    rig, pipeline = await guarded_rig()
    ahead = rig.samples[-1].ahead
    rig.clock.advance(LEAD * PERIOD)  # the daemon reads the sample a forecast's lead late
    pipeline.submit(JointsGoal("second", {"shoulder_pan_joint": -0.6}))
    sent = rig.loop.motions.pending
    assert isinstance(sent, MoveTo)
    assert sent.handover is not None
    assert sent.handover.tick == ahead[1].tick  # the nearest one it can still make
    assert ahead[1].matches(sent.handover.start)


async def test_a_goal_planned_too_late_for_every_forecast_is_rejected() -> None:
    rig, pipeline = await guarded_rig()
    rig.clock.advance(4 * LEAD * PERIOD)  # the daemon reads the sample too late for them all
    pipeline.submit(JointsGoal("second", {"shoulder_pan_joint": -0.6}))
    second = rig.final("second")
    assert second is not None
    assert second.status is GoalStatus.REJECTED
    assert second.reason is not None
    assert "overloaded" in second.reason
    assert rig.loop.motions.pending is None  # nothing was sent
