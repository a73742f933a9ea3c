"""Streaming in the control loop (`armd.control.streaming` through `armd.control.motions`): the
simulated arm on a
manual clock, fed `StreamTarget`s the way the daemon sends them."""

from __future__ import annotations

import numpy as np

from armd.control.streaming import timeout_reason
from armd.link.messages import GoalStatus, Mode, StatusUpdate
from armd.link.protocol import STREAM_DISABLED, EngageEstop, Stop, StreamTarget
from tests.armd.rig import PERIOD, VELOCITY, Rig, assert_within_limits, make_rig, move

TIMEOUT_S = 0.1
NAN6 = np.full(6, np.nan)


def target(
    seq: int,
    position: list[float] | np.ndarray,
    *,
    velocity: list[float] | np.ndarray | None = None,
    session: int = 1,
    stream_id: str = "s",
    end: bool = False,
) -> StreamTarget:
    velocity = NAN6 if velocity is None else np.asarray(velocity, dtype=float)
    return StreamTarget(stream_id, session, seq, np.asarray(position, dtype=float), velocity, end)


async def streaming_rig() -> Rig:
    rig = await make_rig(stream_timeout_s=TIMEOUT_S)
    await rig.run(1)
    return rig


def statuses_of(rig: Rig, stream_id: str) -> list[tuple[GoalStatus, str | None]]:
    return [(s.status, s.reason) for s in rig.statuses if s.goal_id == stream_id]


def assert_at_rest(rig: Rig) -> None:
    assert rig.loop.commanded is not None
    np.testing.assert_allclose(rig.loop.commanded.velocity, 0.0, atol=1e-9)


async def test_a_joints_stream_is_followed_within_the_limits_and_ends_at_rest() -> None:
    rig = await streaming_rig()
    # A sine on two joints at 50 Hz messages (every 5 ticks), the other joints not named.
    for k in range(100):
        t = k * 5 * PERIOD
        position = NAN6.copy()
        position[0], position[2] = 0.4 * np.sin(2.0 * t), 0.3 * np.sin(3.0 * t)
        velocity = NAN6.copy()
        velocity[0], velocity[2] = 0.8 * np.cos(2.0 * t), 0.9 * np.cos(3.0 * t)
        rig.loop.handle(target(k, position, velocity=velocity))
        await rig.run(5)
        assert rig.loop.mode == Mode.MOVING
    assert statuses_of(rig, "s") == [(GoalStatus.ACCEPTED, None)]
    commanded = np.array([q for _, q in rig.commands[-250:]])
    t_end = 99 * 5 * PERIOD
    assert abs(commanded[-1, 0] - 0.4 * np.sin(2.0 * (t_end + 4 * PERIOD))) < 0.01  # tracking
    start = rig.commands[0][1]
    np.testing.assert_array_equal(commanded[:, 1], start[1])  # not named: kept where it was
    last = target(100, [0.2, np.nan, 0.1, np.nan, np.nan, np.nan], end=True)
    rig.loop.handle(last)
    await rig.run_until(lambda: rig.final("s") is not None)
    assert rig.final("s") == StatusUpdate("s", GoalStatus.SUCCEEDED)
    np.testing.assert_allclose(rig.loop.measured.position, [0.2, 0, 0.1, 0, 0, 0], atol=0.005)
    assert rig.loop.mode == Mode.HOLDING
    assert_at_rest(rig)
    assert_within_limits(rig)


async def test_a_quiet_stream_times_out_and_the_arm_stops_without_a_jump() -> None:
    rig = await streaming_rig()
    # A target moving fast: the arm is at speed when the messages stop.
    for k in range(40):
        rig.loop.handle(target(k, [2.0] * 6, velocity=[VELOCITY] * 6))
        await rig.run(2)
    assert rig.loop.commanded is not None
    assert np.all(rig.loop.commanded.velocity > 0.5)
    ticks_before = rig.loop.tick_count
    await rig.run_until(lambda: rig.final("s") is not None)
    assert (rig.loop.tick_count - ticks_before) * PERIOD <= TIMEOUT_S + 3 * PERIOD
    reason = timeout_reason(TIMEOUT_S)
    assert reason == "stream timeout: no message for 0.1 s"
    assert rig.final("s") == StatusUpdate("s", GoalStatus.ABORTED, reason)
    assert rig.loop.mode == Mode.STOPPING
    await rig.run_until(lambda: rig.loop.mode == Mode.HOLDING)
    assert_at_rest(rig)
    assert_within_limits(rig)
    # The ended session's late targets are dropped; a new session starts with any seq.
    rig.loop.handle(target(1000, [0.0] * 6))
    await rig.run(5)
    assert rig.loop.mode == Mode.HOLDING
    rig.loop.handle(target(0, NAN6, session=2, stream_id="s2"))
    await rig.run(1)
    assert rig.loop.mode == Mode.MOVING
    assert statuses_of(rig, "s2") == [(GoalStatus.ACCEPTED, None)]


async def test_out_of_order_targets_are_dropped() -> None:
    rig = await streaming_rig()
    rig.loop.handle(target(10, [0.5] * 6))
    await rig.run(1)
    rig.loop.handle(target(9, [-0.5] * 6))  # older: dropped, between ticks too
    rig.loop.handle(target(11, [0.3] * 6))
    rig.loop.handle(target(10, [-0.5] * 6))
    await rig.run(1)
    active = rig.loop.motions.active
    assert active is not None
    assert active.stream is not None
    np.testing.assert_array_equal(active.stream.position, [0.3] * 6)
    assert active.stream.seq == 11


async def test_a_stream_preempts_a_running_goal_from_its_moving_state() -> None:
    rig = await streaming_rig()
    rig.loop.handle(move("g", [1.5, 1.0, -1.0, 1.0, 1.0, 1.0]))
    await rig.run(60)
    assert rig.loop.commanded is not None
    assert np.any(np.abs(rig.loop.commanded.velocity) > 0.5)
    rig.loop.handle(target(0, [0.0] * 6))
    await rig.run(1)
    assert rig.final("g") == StatusUpdate("g", GoalStatus.PREEMPTED, "preempted by s")
    assert statuses_of(rig, "s") == [(GoalStatus.ACCEPTED, None)]
    for k in range(1, 300):
        rig.loop.handle(target(k, [0.0] * 6))
        await rig.run(1)
    np.testing.assert_allclose(rig.loop.measured.position, 0.0, atol=0.005)
    assert_within_limits(rig)  # no jump at the switch: velocity and acceleration within limits


async def test_a_goal_or_a_stop_preempts_a_stream() -> None:
    rig = await streaming_rig()
    rig.loop.handle(target(0, [0.5] * 6))
    await rig.run(20)
    rig.loop.handle(move("g", [0.1] * 6))
    await rig.run(1)
    assert rig.final("s") == StatusUpdate("s", GoalStatus.PREEMPTED, "preempted by g")
    rig.loop.handle(target(1, [0.5] * 6))  # the pre-empted stream's late target: dropped
    await rig.run_until(lambda: rig.final("g") is not None)
    assert rig.final("g") == StatusUpdate("g", GoalStatus.SUCCEEDED)

    rig.loop.handle(target(0, [0.5] * 6, session=2, stream_id="s2"))
    await rig.run(20)
    rig.loop.handle(Stop("halt"))
    await rig.run_until(lambda: rig.final("halt") is not None)
    assert rig.final("s2") == StatusUpdate("s2", GoalStatus.PREEMPTED, "stop requested")
    assert rig.final("halt") == StatusUpdate("halt", GoalStatus.SUCCEEDED)
    assert_at_rest(rig)
    assert_within_limits(rig)

    # A stop goal without an id too; a stop of the daemon's own (shutdown, broker lost) aborts.
    rig.loop.handle(target(0, [0.3] * 6, session=3, stream_id="s3"))
    await rig.run(20)
    rig.loop.handle(Stop())
    await rig.run(1)
    assert rig.final("s3") == StatusUpdate("s3", GoalStatus.PREEMPTED, "stop requested")
    rig.loop.handle(target(0, [0.5] * 6, session=4, stream_id="s4"))
    await rig.run(20)
    rig.loop.handle(Stop(None, "broker connection lost"))
    await rig.run(1)
    assert rig.final("s4") == StatusUpdate("s4", GoalStatus.ABORTED, "broker connection lost")
    await rig.run_until(lambda: not rig.loop.busy)
    assert_within_limits(rig)


async def test_an_estop_aborts_a_stream_and_later_streams_wait_for_a_reset() -> None:
    rig = await streaming_rig()
    rig.loop.handle(target(0, [0.5] * 6))
    await rig.run(20)
    rig.loop.handle(EngageEstop())
    await rig.run(1)
    assert rig.final("s") == StatusUpdate("s", GoalStatus.ABORTED, "e-stop engaged")
    await rig.run(100)
    rig.loop.handle(target(0, [0.5] * 6, session=2, stream_id="s2"))
    await rig.run(1)
    assert rig.final("s2") == StatusUpdate("s2", GoalStatus.ABORTED, "arm is estop: reset first")
    assert_within_limits(rig)


async def test_targets_beyond_the_limits_are_clamped_and_never_followed_out() -> None:
    rig = await streaming_rig()
    upper = np.array(rig.tree.limits.upper)
    for k in range(600):
        rig.loop.handle(target(k, [1e308, -1e9, 3.5, 2.0, 0.0, 0.0], velocity=[1e308] * 6))
        await rig.run(1)
    commanded = rig.loop.commanded
    assert commanded is not None
    assert commanded.position[0] == upper[0]  # at the bound, at rest there
    assert rig.loop.limiter.interventions == 0  # the filter itself stays inside
    assert_within_limits(rig)
    active = rig.loop.motions.active
    assert active is not None
    assert active.stream is not None
    assert active.stream.clamped == 600


async def test_streams_are_refused_unless_enabled() -> None:
    rig = await make_rig()
    await rig.run(1)
    rig.loop.handle(target(0, [0.5] * 6))
    await rig.run(3)
    assert statuses_of(rig, "s") == [(GoalStatus.REJECTED, STREAM_DISABLED)]
    assert rig.loop.mode == Mode.HOLDING
    assert STREAM_DISABLED == "stream: streaming is not enabled in the config (stream.enabled)"


async def test_targets_after_the_end_are_dropped_and_the_stream_settles() -> None:
    # Found by the property test: a moving target after `end` kept the stream going for ever
    # (an ended stream has no timeout).
    rig = await streaming_rig()
    rig.loop.handle(target(0, [0.2] * 6))
    await rig.run(5)
    rig.loop.handle(target(1, NAN6, end=True))
    rig.loop.handle(target(2, [0.0] * 6, velocity=[1.3] * 6))
    await rig.run_until(lambda: rig.final("s") is not None)
    assert rig.final("s") == StatusUpdate("s", GoalStatus.SUCCEEDED)
    np.testing.assert_allclose(rig.loop.measured.position, 0.2, atol=0.005)
    assert_at_rest(rig)
    # The same, a tick apart.
    rig.loop.handle(target(0, [0.4] * 6, session=2))
    await rig.run(5)
    rig.loop.handle(target(1, NAN6, session=2, end=True))
    await rig.run(1)
    rig.loop.handle(target(2, [0.0] * 6, velocity=[1.3] * 6, session=2))
    await rig.run_until(lambda: len([u for u in rig.statuses if u.status.is_final]) == 2)
    assert rig.statuses[-1] == StatusUpdate("s", GoalStatus.SUCCEEDED)
    np.testing.assert_allclose(rig.loop.measured.position, 0.4, atol=0.005)
