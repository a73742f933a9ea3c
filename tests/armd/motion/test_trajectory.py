"""Trajectories: limits respected, continuity from a moving start, exact end states."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruckig import (
    ControlInterface,
    InputParameter,
    Result,
    Ruckig,
    Synchronization,
    Trajectory,
)

from armd.control.limiter import SetpointLimiter
from armd.motion.ruckig_pieces import RuckigPieces
from armd.motion.trajectory import (  # the planner's and the loop's halves of a path motion
    Hold,
    JointMotion,
    MotionLimits,
    PathMotion,
    PlanningError,
    Setpoint,
    StopMotion,
    _derivative_bounds,
    _Hermite,
    path_speed_bounds,
    plan_path,
)

DT = 0.002
LIMITS = MotionLimits(
    np.array([2.0, 1.5, 3.0]), np.array([8.0, 5.0, 10.0]), np.array([100.0, 60.0, 200.0])
)
TOL = 1e-6


def sampled(
    motion: JointMotion | StopMotion | PathMotion,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    times = np.arange(0.0, motion.duration + DT, DT)
    samples = [motion.sample(float(t)) for t in times]
    return (
        np.array([s.position for s in samples]),
        np.array([s.velocity for s in samples]),
        np.array([s.acceleration for s in samples]),
    )


def within(values: np.ndarray, bound: np.ndarray, rel: float = 1e-6) -> bool:
    return bool(np.all(np.abs(values) <= bound * (1 + rel) + TOL))


states = st.tuples(
    st.lists(st.floats(-3, 3), min_size=3, max_size=3),
    st.lists(st.floats(-1, 1), min_size=3, max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(
    start=states,
    target=st.lists(st.floats(-3, 3), min_size=3, max_size=3),
    speed=st.floats(0.1, 1.0),
)
def test_joint_motion_respects_limits_and_ends_at_rest_on_target(
    start: tuple[list[float], list[float]], target: list[float], speed: float
) -> None:
    limits = LIMITS.scaled(speed)
    velocity = np.clip(np.array(start[1]), -limits.velocity, limits.velocity)
    begin = Setpoint(np.array(start[0]), velocity, np.zeros(3))
    motion = JointMotion(begin, np.array(target), limits)
    p, v, a = sampled(motion)
    np.testing.assert_allclose(p[0], begin.position, atol=1e-9)
    np.testing.assert_allclose(v[0], begin.velocity, atol=1e-9)
    # ruckig's final state is exact to ~1e-8 (hypothesis found 8.7e-9 rad and -1.6e-9 rad/s):
    # far below an encoder count, and the loop's success tolerance is 5e-3 rad
    np.testing.assert_allclose(p[-1], target, atol=1e-7)
    np.testing.assert_allclose(v[-1], 0.0, atol=1e-7)
    assert within(v, limits.velocity)
    assert within(a, limits.acceleration)


def test_speed_scales_time_uniformly() -> None:
    start = Setpoint.at_rest(np.zeros(3))
    target = np.array([1.0, -0.5, 2.0])
    fast = JointMotion(start, target, LIMITS)
    slow = JointMotion(start, target, LIMITS.scaled(0.5))
    assert slow.duration == pytest.approx(2 * fast.duration, rel=1e-6)


def test_a_slower_goal_can_preempt_a_fast_motion() -> None:
    moving = Setpoint(np.zeros(3), np.array([2.0, -1.5, 3.0]), np.zeros(3))
    motion = JointMotion(moving, np.zeros(3), LIMITS.scaled(0.1))
    p, v, _ = sampled(motion)
    np.testing.assert_allclose(p[-1], 0.0, atol=1e-9)
    assert within(v, LIMITS.velocity)


def test_stop_brings_every_joint_to_rest_within_the_limits() -> None:
    moving = Setpoint(
        np.array([0.0, 1.0, -1.0]), np.array([2.0, -1.0, 0.5]), np.array([1.0, 0.0, -2.0])
    )
    stop = StopMotion(moving, LIMITS)
    p, v, a = sampled(stop)
    np.testing.assert_allclose(v[-1], 0.0, atol=1e-9)
    assert within(a, LIMITS.acceleration)
    np.testing.assert_allclose(stop.target, p[-1], atol=1e-9)
    # each joint stops as fast as it can: the time-optimal duration of the slowest joint
    assert stop.duration < 1.0


def test_hold_is_constant() -> None:
    hold = Hold(np.array([0.1, 0.2, 0.3]))
    assert hold.done(0.0)
    np.testing.assert_array_equal(hold.sample(5.0).position, [0.1, 0.2, 0.3])
    np.testing.assert_array_equal(hold.sample(5.0).velocity, 0.0)


def test_path_motion_follows_waypoints_within_limits() -> None:
    s = np.linspace(0.0, 1.0, 41)[:, None]
    waypoints = np.hstack((np.sin(2 * s), 0.5 * s, -1.2 * s**2))
    path = PathMotion(plan_path(waypoints, LIMITS))
    p, v, a = sampled(path)
    np.testing.assert_allclose(p[0], waypoints[0], atol=1e-12)
    np.testing.assert_allclose(p[-1], waypoints[-1], atol=1e-9)
    np.testing.assert_allclose(v[-1], 0.0, atol=1e-9)
    assert within(v, LIMITS.velocity)
    assert within(a, LIMITS.acceleration, rel=0.05)  # |q''| is bounded from samples
    for i, wp in enumerate(waypoints):  # passes through every waypoint
        assert np.min(np.linalg.norm(p - wp, axis=1)) < 0.01, i


def test_path_rate_limit_slows_the_path() -> None:
    waypoints = np.linspace([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], 11)
    free = PathMotion(plan_path(waypoints, LIMITS))
    capped = PathMotion(plan_path(waypoints, LIMITS, rate_limit=0.1))
    assert capped.duration >= 10.0 > free.duration


@pytest.mark.parametrize("speed", [0.0, -0.5, 1.5, float("nan")])
def test_speed_out_of_range_is_a_planning_error(speed: float) -> None:
    with pytest.raises(PlanningError, match="speed"):
        LIMITS.scaled(speed)


def test_bad_targets_are_planning_errors() -> None:
    start = Setpoint.at_rest(np.zeros(3))
    with pytest.raises(PlanningError, match="target"):
        JointMotion(start, np.array([0.0, np.nan, 0.0]), LIMITS)
    with pytest.raises(PlanningError, match="waypoints"):
        plan_path(np.zeros((1, 3)), LIMITS)


@settings(max_examples=80, deadline=None)
@given(
    wanted=st.lists(st.lists(st.floats(-10, 10), min_size=3, max_size=3), min_size=1, max_size=60),
    start=st.lists(st.floats(-4, 4), min_size=3, max_size=3),
)
def test_limiter_never_exceeds_position_velocity_or_acceleration(
    wanted: list[list[float]], start: list[float]
) -> None:
    lower, upper = np.array([-1.0, -2.0, -3.0]), np.array([1.0, 2.0, 3.0])
    limiter = SetpointLimiter(lower, upper, LIMITS.velocity, LIMITS.acceleration, DT)
    limiter.reset(np.array(start))
    previous, previous_v = np.array(start), np.zeros(3)
    low, high = np.minimum(lower, start), np.maximum(upper, start)
    for w in wanted:
        position, _ = limiter.apply(np.array(w), np.zeros(3))
        velocity = (position - previous) / DT
        assert np.all(position >= low - 1e-12)
        assert np.all(position <= high + 1e-12)
        assert within(velocity, LIMITS.velocity)
        inside = (previous > lower) & (previous < upper)  # braking at a bound may exceed accel
        assert within(((velocity - previous_v) / DT)[inside], LIMITS.acceleration[inside], rel=1e-6)
        # a joint outside its range only moves back toward it
        low = np.maximum(low, np.minimum(lower, position))
        high = np.minimum(high, np.maximum(upper, position))
        previous, previous_v = position, velocity


@settings(max_examples=60, deadline=None)
@given(
    wanted=st.lists(st.lists(st.floats(-10, 10), min_size=3, max_size=3), min_size=1, max_size=30),
    start=st.lists(st.floats(-4, 4), min_size=3, max_size=3),
    holds=st.integers(1, 200),
)
def test_the_limiters_holding_fast_path_equals_its_full_computation(
    wanted: list[list[float]], start: list[float], holds: int
) -> None:
    """Holding (asking for the position it last returned) skips the computation; a twin limiter
    asked for an equal copy (no fast path) must give the same commands and keep the same state."""
    lower, upper = np.array([-1.0, -2.0, -3.0]), np.array([1.0, 2.0, 3.0])
    fast, full = (
        SetpointLimiter(lower, upper, LIMITS.velocity, LIMITS.acceleration, DT) for _ in range(2)
    )
    for limiter in (fast, full):
        limiter.reset(np.array(start))
    for w in wanted:
        fast.apply(np.array(w), np.zeros(3))
        full.apply(np.array(w), np.zeros(3))
    for _ in range(holds):
        position, velocity = fast.apply(fast.position, np.zeros(3))
        expected = full.apply(full.position.copy(), np.zeros(3))
        np.testing.assert_array_equal(position, expected[0])
        np.testing.assert_array_equal(velocity, expected[1])
    for name in ("position", "velocity", "lower", "upper"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(full, name))


def test_limiter_passes_feasible_setpoints_unchanged() -> None:
    motion = JointMotion(Setpoint.at_rest(np.zeros(3)), np.array([0.9, -1.5, 2.5]), LIMITS)
    limiter = SetpointLimiter(
        -np.full(3, 3.0), np.full(3, 3.0), LIMITS.velocity, LIMITS.acceleration, DT
    )
    limiter.reset(np.zeros(3))
    for k in range(1, int(motion.duration / DT) + 2):
        s = motion.sample(k * DT)
        position, velocity = limiter.apply(s.position, s.velocity)
        np.testing.assert_allclose(position, s.position, atol=1e-12)
        np.testing.assert_allclose(velocity, s.velocity, atol=1e-12)
    assert limiter.interventions == 0


def test_path_derivative_bounds_at_once_match_the_path_sampled_point_by_point() -> None:
    rng = np.random.default_rng(3)
    waypoints = np.cumsum(rng.normal(0.0, 0.02, (40, 3)), axis=0)
    curve = _Hermite(waypoints)  # what the loop samples point by point
    samples = np.linspace(0.0, 1.0, 8 * 39 + 1)
    d1 = np.max([np.abs(curve.at(float(s))[1]) for s in samples], axis=0)
    d2 = np.max([np.abs(curve.at(float(s))[2]) for s in samples], axis=0)
    bound1, bound2 = _derivative_bounds(waypoints)  # what the planner bounds at once
    np.testing.assert_allclose(bound1, d1 * 1.05, rtol=1e-12)
    np.testing.assert_allclose(bound2, d2 * 1.05, rtol=1e-12)


def test_limits_covering_a_state_at_rest_are_the_limits_themselves() -> None:
    limits = MotionLimits(np.array([1.0, 2.0]), np.array([4.0, 8.0]), np.array([80.0, 160.0]))
    assert limits.covering(Setpoint.at_rest(np.array([0.3, -0.2]))) is limits


def test_limits_covering_a_moving_state_scale_velocity_acceleration_and_jerk_together() -> None:
    limits = MotionLimits(np.array([1.0, 2.0]), np.array([4.0, 8.0]), np.array([80.0, 160.0]))
    state = Setpoint(np.zeros(2), np.array([2.0, 1.0]), np.array([0.0, 32.0]))  # k = 2 both
    covered = limits.covering(state)
    np.testing.assert_allclose(covered.velocity, [2.0, 4.0])
    np.testing.assert_allclose(covered.acceleration, [16.0, 32.0])
    np.testing.assert_allclose(covered.jerk, [640.0, 1280.0])
    slower = Setpoint(np.zeros(2), np.array([0.5, -1.0]), np.array([-2.0, 0.0]))  # within: k = 1
    np.testing.assert_array_equal(limits.covering(slower).velocity, limits.velocity)


def _random_ruckig(rng: np.random.Generator, kind: int) -> Trajectory:
    """A random ruckig problem of 1-6 joints: kind 0 phase-, 1 time-synchronised position
    moves, 2 a velocity-interface stop (as `StopMotion`); starts at rest, within the limits, or
    beyond them (ruckig then brakes first)."""
    n = int(rng.integers(1, 7))
    velocity, acceleration = rng.uniform(0.2, 3.0, n), rng.uniform(0.5, 10.0, n)
    inp = InputParameter(n)
    inp.max_velocity, inp.max_acceleration = velocity.tolist(), acceleration.tolist()
    inp.max_jerk = rng.uniform(2.0, 100.0, n).tolist()
    inp.current_position = rng.uniform(-3.0, 3.0, n).tolist()
    scale = rng.choice([0.0, 0.5, 1.5])  # 1.5: beyond the limits
    start_velocity = rng.uniform(-1.0, 1.0, n) * velocity * scale
    inp.current_acceleration = (rng.uniform(-1.0, 1.0, n) * acceleration * scale).tolist()
    if kind == 2:
        inp.control_interface = ControlInterface.Velocity
        inp.synchronization = Synchronization.No
        start_velocity = np.clip(start_velocity, -velocity, velocity)
    else:
        inp.synchronization = Synchronization.Phase if kind == 0 else Synchronization.Time
        inp.target_position = rng.uniform(-3.0, 3.0, n).tolist()
    inp.current_velocity = start_velocity.tolist()
    inp.target_velocity = [0.0] * n
    inp.target_acceleration = [0.0] * n
    trajectory = Trajectory(n)
    assert Ruckig(n).calculate(inp, trajectory) in (Result.Working, Result.Finished)
    return trajectory


def test_ruckig_pieces_at_many_times_equal_ruckig_s_own_sampling() -> None:
    """3000 random problems (phase and time synchronisation, velocity-interface stops, with and
    without brake pre-trajectories), each at 40 random times, its ends and every piece boundary
    (where a time falls on either side of a phase): positions, velocities and accelerations
    within 1e-9 of `Trajectory.at_time`."""
    rng = np.random.default_rng(7)
    braked = 0
    worst = 0.0
    for case in range(3000):
        trajectory = _random_ruckig(rng, case % 3)
        braked += any(p.brake.duration > 0.0 for p in trajectory.profiles[0])
        pieces = RuckigPieces(trajectory)
        end = trajectory.duration
        times = np.concatenate([rng.uniform(0.0, end, 40), [0.0, end, end + 1.0], pieces.breaks()])
        states = np.stack(pieces.states(times), axis=1)  # (k, 3, n)
        expected = np.array([trajectory.at_time(min(float(t), end)) for t in times])
        worst = max(worst, float(np.abs(states - expected).max()))
    assert braked > 300  # the brake pre-trajectory was exercised
    assert worst <= 1e-9


def test_motions_sample_many_times_as_the_loop_samples_one() -> None:
    moving = Setpoint(np.array([0.0, 1.0, -1.0]), np.array([2.0, -1.0, 0.5]), np.zeros(3))
    target = np.array([1.0, -1.0, 2.0])
    for motion in (JointMotion(moving, target, LIMITS), StopMotion(moving, LIMITS)):
        times = np.linspace(-0.1, motion.duration + 0.1, 301)
        expected = np.array([motion.sample(float(t)).position for t in times])
        np.testing.assert_allclose(motion.positions(times), expected, rtol=0.0, atol=1e-12)


def test_speed_bounds_hold_the_largest_speed_of_every_piece_exactly() -> None:
    """Within each part, the bound is at least every sampled |q̇| and no more than the largest of
    them plus what sampling 2000 times per part can miss near the vertex."""
    rng = np.random.default_rng(11)
    for case in range(60):
        trajectory = _random_ruckig(rng, case % 3)
        pieces = RuckigPieces(trajectory)
        times, bounds = pieces.speed_bounds(8)
        assert times[0] == 0.0
        assert times[-1] == trajectory.duration
        assert times.shape[0] >= (9 if trajectory.duration > 0.0 else 2)
        profiles = trajectory.profiles[0]
        jerk = max(float(np.abs([*p.j, *p.brake.j]).max()) for p in profiles)
        for k in range(times.shape[0] - 1):
            dense = np.linspace(times[k], times[k + 1], 2001)
            speed = np.abs(pieces.states(dense)[1]).max(axis=0)
            step = (times[k + 1] - times[k]) / 2000
            assert np.all(bounds[k] >= speed - 1e-12)
            assert np.all(bounds[k] <= speed + jerk * step * step / 8 + 1e-12)


def test_path_speed_bounds_hold_the_largest_derivative_of_every_segment_exactly() -> None:
    """On each segment of random paths: at least every |dq/ds| of 2001 samples, and no more than
    their largest plus what the sampling can miss near the parabola's vertex."""
    rng = np.random.default_rng(13)
    for _ in range(30):
        waypoints = np.cumsum(rng.normal(0.0, 0.3, (int(rng.integers(2, 12)), 3)), axis=0)
        s, bounds = path_speed_bounds(waypoints)
        assert s.shape[0] == waypoints.shape[0]
        curve = _Hermite(waypoints)
        for k in range(s.shape[0] - 1):
            inside = np.linspace(s[k] + 1e-12, s[k + 1] - 1e-12, 2001)  # on segment k only
            _, dq, ddq = curve.many(inside)
            step = (s[k + 1] - s[k]) / 2000
            third = np.abs(np.diff(ddq, axis=0)).max(axis=0) / step  # |d³q/ds³|, constant here
            largest = np.abs(dq).max(axis=0)
            assert np.all(bounds[k] >= largest - 1e-12)
            assert np.all(bounds[k] <= largest + third * step * step / 8 + 1e-9)
