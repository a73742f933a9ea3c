"""The control loop on the simulated arm, tick by tick on a manual clock (no wall-clock timing)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from armd.link.messages import MAX_MOTION_DURATION_S, Fault, GoalStatus, Mode, StatusUpdate
from armd.link.protocol import EngageEstop, FollowPath, LatchFault, Move, Reset, Stop
from armd.motion.trajectory import MotionLimits, TimedPath, plan_path
from tests.armd.rig import LIMITS, assert_within_limits, make_rig, move


async def test_starts_inactive_then_holds_the_measured_position() -> None:
    q0 = np.array([0.3, -1.0, 1.2, -0.5, 0.7, 0.2])
    rig = await make_rig(q0)
    assert rig.loop.mode == Mode.INACTIVE
    await rig.run(1)
    assert rig.loop.mode == Mode.HOLDING
    assert rig.loop.commanded is not None
    np.testing.assert_allclose(rig.loop.commanded.position, q0, atol=1e-3)  # encoder resolution
    np.testing.assert_allclose(rig.commands[0][1], rig.loop.measured.position, atol=1e-12)
    await rig.run(50)
    np.testing.assert_allclose(rig.loop.measured.position, q0, atol=1e-3)


async def test_joint_move_succeeds_within_limits_and_samples_follow() -> None:
    rig = await make_rig()
    await rig.run(1)
    target = [0.5, -0.4, 0.8, 0.2, -0.6, 1.0]
    rig.loop.handle(move("g1", target))
    await rig.run_until(lambda: rig.final("g1") is not None)
    assert rig.final("g1") == StatusUpdate("g1", GoalStatus.SUCCEEDED)
    np.testing.assert_allclose(rig.loop.measured.position, target, atol=0.005)
    assert rig.loop.mode == Mode.HOLDING
    assert_within_limits(rig)
    assert rig.loop.limiter.interventions == 0
    last = rig.samples[-1]
    assert len(rig.samples) == rig.loop.tick_count  # one per tick
    assert last.mode == Mode.HOLDING
    assert last.taken == 1
    assert not last.busy
    np.testing.assert_array_equal(last.measured_position, rig.loop.measured.position)  # type: ignore[union-attr]
    np.testing.assert_array_equal(last.commanded_position, rig.loop.commanded.position)  # type: ignore[union-attr]


async def test_samples_come_at_their_rate_and_at_once_when_the_state_changes() -> None:
    rig = await make_rig(sample_every=10)
    await rig.run(30)
    assert [s.tick for s in rig.samples] == [1, 10, 20, 30]  # 1: the mode became holding
    rig.loop.handle(move("g", [0.3, 0, 0, 0, 0, 0]))
    await rig.run(1)
    taken = rig.samples[-1]
    assert (taken.tick, taken.taken, taken.mode, taken.busy) == (31, 1, Mode.MOVING, True)
    await rig.run_until(lambda: rig.final("g") is not None)
    done = rig.samples[-1]
    assert done.tick == rig.loop.tick_count  # sent at once: the motion ended
    assert (done.mode, done.busy, done.moving) == (Mode.HOLDING, False, False)


async def test_a_new_goal_preempts_the_active_one_smoothly() -> None:
    rig = await make_rig()
    await rig.run(1)
    rig.loop.handle(move("first", [1.5, 0, 0, 0, 0, 0]))
    await rig.run(60)
    assert rig.loop.mode == Mode.MOVING
    rig.loop.handle(move("second", [-0.5, 0.3, 0, 0, 0, 0]))
    await rig.run_until(lambda: rig.final("second") is not None)
    assert rig.final("first") == StatusUpdate("first", GoalStatus.PREEMPTED, "preempted by second")
    assert rig.final("second").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    assert_within_limits(rig)


async def test_stop_aborts_the_motion_and_comes_to_rest() -> None:
    rig = await make_rig()
    await rig.run(1)
    rig.loop.handle(move("g", [2.5, 0, 0, 0, 0, 0]))
    await rig.run(100)
    rig.loop.handle(Stop("halt"))
    await rig.run_until(lambda: rig.final("halt") is not None)
    assert rig.final("g") == StatusUpdate("g", GoalStatus.ABORTED, "stop requested")
    assert rig.final("halt") == StatusUpdate("halt", GoalStatus.SUCCEEDED)
    assert rig.loop.mode == Mode.HOLDING
    assert not rig.loop.moving
    stopped_at = rig.loop.commanded.position.copy()  # type: ignore[union-attr]
    await rig.run(50)
    np.testing.assert_allclose(rig.loop.commanded.position, stopped_at, atol=1e-12)  # type: ignore[union-attr]
    assert stopped_at[0] < 2.5
    assert_within_limits(rig)


async def test_estop_latches_until_reset() -> None:
    rig = await make_rig()
    await rig.run(1)
    rig.loop.handle(move("g", [2.0, 0, 0, 0, 0, 0]))
    await rig.run(60)
    rig.loop.handle(EngageEstop())
    await rig.run(200)
    assert rig.loop.mode == Mode.ESTOP
    assert rig.final("g") == StatusUpdate("g", GoalStatus.ABORTED, "e-stop engaged")
    rig.loop.handle(move("refused", [0, 0, 0, 0, 0, 0]))
    await rig.run(2)
    assert rig.final("refused") == StatusUpdate(
        "refused", GoalStatus.ABORTED, "arm is estop: reset first"
    )
    rig.loop.handle(Reset())
    await rig.run(2)
    assert rig.loop.mode == Mode.HOLDING
    rig.loop.handle(move("after", [0.2, 0, 0, 0, 0, 0]))
    await rig.run_until(lambda: rig.final("after") is not None)
    assert rig.final("after").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    assert_within_limits(rig)


async def test_device_fault_stops_latches_and_reset_restarts_from_measured() -> None:
    rig = await make_rig()
    await rig.run(1)
    rig.loop.handle(move("g", [1.0, 0, 0, 0, 0, 0]))
    await rig.run(40)
    rig.driver.motor("m2").faults.fault_code = 0x1
    await rig.run(100)
    assert rig.loop.mode == Mode.FAULT
    fault = rig.faults[-1]
    assert fault is not None
    assert fault.code == "device_fault"
    assert fault.joint == "elbow_joint"
    assert rig.final("g").status == GoalStatus.ABORTED  # type: ignore[union-attr]
    await rig.run(100)
    assert rig.loop.mode == Mode.FAULT  # latched: nothing clears it but a reset
    rig.loop.handle(
        Reset()
    )  # clears the drive's latched fault, re-enables from the measured position
    await rig.run(5)
    assert rig.loop.mode == Mode.HOLDING
    assert rig.driver.motor("m2").faults.fault_code == 0
    assert rig.faults[-1] is None
    np.testing.assert_allclose(
        rig.loop.commanded.position,
        rig.loop.measured.position,
        atol=1e-3,  # type: ignore[union-attr]
    )
    assert_within_limits(rig)


async def test_stale_feedback_holds_then_faults() -> None:
    rig = await make_rig()
    await rig.run(1)
    rig.loop.handle(move("g", [1.0, 0, 0, 0, 0, 0]))
    await rig.run(40)
    rig.driver.link("m4").drop_probability = 1.0
    await rig.run(20)  # 80 ms > stale_hold_s
    assert rig.loop.mode in (Mode.STOPPING, Mode.HOLDING)
    assert rig.final("g").status == GoalStatus.ABORTED  # type: ignore[union-attr]
    assert "stale feedback" in (rig.final("g").reason or "")  # type: ignore[union-attr]
    await rig.run(60)  # past stale_fault_s
    assert rig.loop.mode == Mode.FAULT
    assert rig.faults[-1].code == "stale_feedback"  # type: ignore[union-attr]
    assert rig.faults[-1].joint == "wrist_2_joint"  # type: ignore[union-attr]
    rig.loop.handle(
        Reset()
    )  # waits for the stop to end, then is refused: the feedback is still missing
    await rig.run_until(lambda: not rig.loop.moving)
    await rig.run(5)
    assert rig.loop.mode == Mode.FAULT
    rig.driver.link("m4").drop_probability = 0.0
    await rig.run(5)
    assert rig.loop.mode == Mode.FAULT  # feedback back, but the fault stays latched
    rig.loop.handle(Reset())
    await rig.run(2)
    assert rig.loop.mode == Mode.HOLDING
    assert rig.faults[-1] is None
    assert_within_limits(rig)


async def test_following_error_faults_a_stuck_joint() -> None:
    rig = await make_rig()
    await rig.run(1)
    rig.driver.motor("m0").faults.stuck = True
    rig.loop.handle(move("g", [2.0, 0, 0, 0, 0, 0]))
    await rig.run_until(lambda: rig.loop.mode == Mode.FAULT, limit_s=5.0)
    assert rig.faults[-1].code == "following_error"  # type: ignore[union-attr]
    assert rig.faults[-1].joint == "shoulder_pan_joint"  # type: ignore[union-attr]
    assert_within_limits(rig)


async def test_disable_on_fault_turns_the_drives_off_after_the_stop() -> None:
    rig = await make_rig(disable_on_fault=True)
    await rig.run(1)
    rig.loop.handle(EngageEstop())
    await rig.run(50)
    assert rig.loop.mode == Mode.ESTOP
    assert not rig.driver.motor("m0").enabled
    rig.loop.handle(Reset())
    await rig.run(3)
    assert rig.loop.mode == Mode.HOLDING
    assert rig.driver.motor("m0").enabled


actions = st.lists(
    st.one_of(
        st.tuples(
            st.just("move"),
            st.lists(st.floats(-3.5, 3.5), min_size=6, max_size=6),
            st.floats(0.05, 1.0),
        ),
        st.tuples(st.just("stop")),
        st.tuples(st.just("estop")),
        st.tuples(st.just("reset")),
        st.tuples(st.just("wait"), st.integers(1, 80)),
    ),
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=actions)
async def test_no_sequence_of_requests_commands_outside_the_limits(script: list[tuple]) -> None:  # type: ignore[type-arg]
    rig = await make_rig()
    await rig.run(1)
    for i, action in enumerate(script):
        if action[0] == "move":
            rig.loop.handle(move(f"g{i}", list(action[1]), action[2]))
        elif action[0] == "stop":
            rig.loop.handle(Stop(f"s{i}"))
        elif action[0] == "estop":
            rig.loop.handle(EngageEstop())
        elif action[0] == "reset":
            rig.loop.handle(Reset())
        else:
            await rig.run(action[1])
        await rig.run(3)
    await rig.run(20)
    assert_within_limits(rig)
    assert not any(math.isnan(x) for x in rig.commands[-1][1])


async def test_a_lost_bus_faults_then_reconnects_and_needs_a_reset() -> None:
    rig = await make_rig()
    await rig.run(1)
    rig.loop.handle(move("g", [1.0, 0, 0, 0, 0, 0]))
    await rig.run(40)
    rig.driver.link("m1").disconnected = True
    await rig.run_until(lambda: rig.loop.mode == Mode.FAULT, limit_s=2.0)
    assert rig.final("g").status == GoalStatus.ABORTED  # type: ignore[union-attr]
    assert rig.faults[-1].code in ("stale_feedback", "driver_lost")  # type: ignore[union-attr]
    assert rig.loop.hardware.failed
    await rig.run_until(lambda: not rig.loop.moving)  # the stop runs out on the commanded side
    assert await rig.loop.hardware.reconnect() == []  # still unplugged
    rig.loop.handle(Reset())
    await rig.run(5)
    assert rig.loop.mode == Mode.FAULT  # refused: the bus is not back
    rig.driver.link("m1").disconnected = False
    assert await rig.loop.hardware.reconnect() == ["sim"]
    await rig.run(5)
    assert rig.loop.mode == Mode.FAULT  # back, but latched
    rig.loop.handle(Reset())
    await rig.run(5)
    assert rig.loop.mode == Mode.HOLDING
    np.testing.assert_allclose(
        rig.loop.commanded.position,  # type: ignore[union-attr]
        rig.loop.measured.position,  # type: ignore[union-attr]
        atol=1e-3,
    )
    rig.loop.handle(move("after", [0.0, 0, 0, 0, 0, 0]))
    await rig.run_until(lambda: rig.final("after") is not None)
    assert rig.final("after").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    assert_within_limits(rig)


async def test_a_joint_found_outside_its_limits_faults_and_may_only_come_back() -> None:
    q0 = np.array([3.05, 0, 0, 0, 0, 0])  # limits are ±3, tolerance 0.02
    rig = await make_rig(q0)
    await rig.run(3)
    assert rig.loop.mode == Mode.FAULT  # never enabled outside the limits
    assert rig.loop.commanded is None
    assert rig.faults[-1].code == "limit_exceeded"  # type: ignore[union-attr]
    assert rig.faults[-1].joint == "shoulder_pan_joint"  # type: ignore[union-attr]
    rig.loop.handle(Reset())
    await rig.run(3)
    assert rig.loop.mode == Mode.HOLDING  # enabled where it is, outside the limits
    outward = move("out", [3.2, 0, 0, 0, 0, 0])
    rig.loop.handle(outward)
    await rig.run(100)
    assert rig.loop.commanded.position[0] <= 3.05 + 1e-3  # type: ignore[union-attr]
    rig.loop.handle(move("in", [2.5, 0, 0, 0, 0, 0]))
    await rig.run_until(lambda: rig.final("in") is not None)
    assert rig.final("in").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    rig.loop.handle(move("out-again", [2.9, 0, 0, 0, 0, 0]))
    await rig.run_until(lambda: rig.final("out-again") is not None)
    assert rig.final("out-again").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    positions = np.array([q for _, q in rig.commands])[:, 0]
    assert positions.max() <= 3.05 + 1e-3  # never further out than where it was found


# -- requests the loop cannot follow, and bugs: a goal's end, never the loop's (issue 10) ---------


def unfollowable_requests(start: np.ndarray) -> list[tuple[str, Move, str]]:
    """(id, request, a fragment of the reason) for requests the loop must refuse."""
    base = move("x", [0.2] * 6)
    assert base.target is not None
    tiny = LIMITS.scaled(1.0)
    subnormal = MotionLimits(LIMITS.velocity * 5e-324, LIMITS.acceleration * 0.0, LIMITS.jerk)
    return [
        ("nan", replace(base, goal_id="nan", target=np.full(6, np.nan)), "finite"),
        ("outside", replace(base, goal_id="outside", target=np.full(6, 3.5)), "outside"),
        ("shape", replace(base, goal_id="shape", target=np.zeros(5)), "6 joint positions"),
        ("zero-limits", replace(base, goal_id="zero-limits", limits=subnormal), "limits"),
        ("fast", replace(base, goal_id="fast", limits=MotionLimits(
            tiny.velocity * 2, tiny.acceleration, tiny.jerk)), "velocity limits"),
        ("tiny-speed", replace(base, goal_id="tiny-speed", limits=LIMITS.scaled(1e-6)),
         "no trajectory"),
        ("short-path", FollowPath("short-path", TimedPath(start[None, :], 1.0, 1.0, 1.0)),
         "2 finite waypoints"),
        ("inf-path", FollowPath("inf-path", TimedPath(np.full((3, 6), np.inf), 1.0, 1.0, 1.0)),
         "finite"),
        ("zero-rate", FollowPath("zero-rate", TimedPath(np.array([start] * 3), 0.0, 1.0, 1.0)),
         "time scaling"),
        ("tolerance", replace(base, goal_id="tolerance", tolerance=np.zeros(6)), "tolerance"),
    ]  # fmt: skip


async def test_requests_the_loop_cannot_follow_are_aborted_and_nothing_moves() -> None:
    rig = await make_rig()
    await rig.run(1)
    start = rig.loop.commanded.position.copy()  # type: ignore[union-attr]
    for goal_id, request, fragment in unfollowable_requests(start):
        rig.loop.handle(request)
        await rig.run(2)
        final = rig.final(goal_id)
        assert final is not None, goal_id
        assert final.status is GoalStatus.ABORTED, final
        assert fragment in (final.reason or ""), final
    assert rig.loop.mode == Mode.HOLDING
    assert rig.loop.fault is None
    np.testing.assert_allclose(rig.loop.commanded.position, start, atol=1e-12)  # type: ignore[union-attr]
    rig.loop.handle(move("after", [0.1] * 6))
    await rig.run_until(lambda: rig.final("after") is not None)
    assert rig.final("after") == StatusUpdate("after", GoalStatus.SUCCEEDED)


async def test_a_motion_longer_than_the_maximum_is_aborted() -> None:
    rig = await make_rig()
    await rig.run(1)
    start = rig.loop.commanded.position  # type: ignore[union-attr]
    path = np.linspace(start, start + 0.5, 20)
    rig.loop.handle(FollowPath("crawl", plan_path(path, LIMITS, rate_limit=1e-4)))
    await rig.run(2)
    final = rig.final("crawl")
    assert final is not None
    assert final.status is GoalStatus.ABORTED
    assert f"at most {MAX_MOTION_DURATION_S:g} s" in (final.reason or "")


async def test_a_tick_that_raises_latches_a_fault_and_the_loop_carries_on() -> None:
    rig = await make_rig()
    await rig.run(1)
    rig.loop.handle(move("moving", [1.0] * 6))
    await rig.run(20)

    def broken(*args: object) -> None:
        raise ZeroDivisionError("a bug")

    rig.loop.limiter.apply = broken  # type: ignore[method-assign]
    await rig.loop.run(until=lambda: rig.loop.tick_count > 30)
    assert rig.loop.fault is not None
    assert rig.loop.fault.code == "internal_error"
    assert "ZeroDivisionError: a bug" in rig.loop.fault.message
    assert rig.final("moving") is not None
    assert rig.final("moving").status is GoalStatus.ABORTED  # type: ignore[union-attr]


async def test_a_fault_the_daemon_latches_stops_the_motion_until_reset() -> None:
    """`LatchFault` (the daemon's measured-state collision check): a controlled stop, the goal
    aborted with the fault, published, latched until a reset; a second one while latched is
    ignored."""
    rig = await make_rig()
    await rig.run(1)
    rig.loop.handle(move("g", [2.0, 0, 0, 0, 0, 0]))
    await rig.run(60)
    fault = Fault("collision", "measured state in collision: a with b at 0.0010 m")
    rig.loop.handle(LatchFault(fault))
    await rig.run(1)
    rig.loop.handle(LatchFault(Fault("collision", "another")))  # latched already: ignored
    await rig.run(200)
    assert rig.loop.mode == Mode.FAULT
    assert rig.faults == [fault]
    final = rig.final("g")
    assert final is not None
    assert final.status == GoalStatus.ABORTED
    assert final.reason == f"fault: {fault.message}"
    assert not rig.loop.moving
    rig.loop.handle(Reset())
    await rig.run(2)
    assert rig.loop.mode == Mode.HOLDING
    assert rig.faults == [fault, None]
    assert_within_limits(rig)
