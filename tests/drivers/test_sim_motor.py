"""The simulated motor: convergence without overshoot or limit cycle, limits never exceeded,
quantisation, noise, determinism, and the injected faults. All on a manual clock."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drivers.errors import DriverConfigError
from drivers.sim.driver import ManualClock
from drivers.sim.motor import LinkFaults, MotorParams, SimulatedMotor

STEP_S = MotorParams().step_s
COUNT = MotorParams().resolution
# Limits are checked per control tick; this absorbs float rounding only.
LIMIT_TOLERANCE = 1e-9


def enabled_motor(clock: ManualClock, **params: float) -> SimulatedMotor:
    motor = SimulatedMotor(MotorParams(**params), clock)  # type: ignore[arg-type]
    motor.enable()
    return motor


def trace(
    motor: SimulatedMotor, clock: ManualClock, duration_s: float
) -> list[tuple[float, float]]:
    """(position, velocity) of the shaft after every control tick for `duration_s`."""
    out = []
    for _ in range(round(duration_s / motor.params.step_s)):
        clock.advance(motor.params.step_s)
        motor.advance()
        out.append((motor.position, motor.velocity))
    return out


def test_enabled_motor_holds_its_position(clock: ManualClock) -> None:
    motor = enabled_motor(clock, initial_position=0.7)
    clock.advance(2.0)
    motor.advance()
    assert motor.position == pytest.approx(0.7, abs=1e-12)
    assert motor.velocity == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("target", [1e-3, 0.05, 0.5, -2.0, 12.0])
def test_converges_to_the_commanded_position(clock: ManualClock, target: float) -> None:
    motor = enabled_motor(clock)
    motor.command(target)
    clock.advance(5.0)
    reading = motor.sample()
    assert motor.position == pytest.approx(target, abs=1e-9)
    assert motor.velocity == pytest.approx(0.0, abs=1e-9)
    assert reading.position == pytest.approx(target, abs=COUNT / 2 + 1e-12)
    assert reading.timestamp == pytest.approx(5.0, abs=STEP_S)


def test_large_step_takes_about_the_time_optimal_duration(clock: ManualClock) -> None:
    # 3 rad at 6 rad/s and 60 rad/s²: 0.6 s time-optimal; braking at 0.75 g costs a little more.
    motor = enabled_motor(clock)
    motor.command(3.0)
    samples = trace(motor, clock, 2.0)
    settle_index = next(k for k, (p, _) in enumerate(samples) if abs(p - 3.0) < COUNT / 2)
    assert (settle_index + 1) * STEP_S == pytest.approx(0.65, abs=0.05)


@settings(deadline=None, max_examples=60)
@given(target=st.floats(-6.0, 6.0).filter(lambda x: abs(x) > 1e-4))
def test_step_response_does_not_overshoot(target: float) -> None:
    clock = ManualClock()
    motor = enabled_motor(clock)
    motor.command(target)
    positions = [p for p, _ in trace(motor, clock, 3.0)]
    overshoot = max((p - target) * math.copysign(1.0, target) for p in positions)
    assert overshoot <= 1e-6  # far below one encoder count (3.8e-4 rad)
    assert positions[-1] == pytest.approx(target, abs=1e-6)


def test_no_limit_cycle_at_the_target(clock: ManualClock) -> None:
    motor = enabled_motor(clock, initial_position=0.25)
    motor.command(1.25)
    trace(motor, clock, 1.0)
    settled = trace(motor, clock, 2.0)
    readings = []
    for _ in range(1000):
        clock.advance(STEP_S)
        readings.append(motor.sample().position)
    assert max(abs(v) for _, v in settled) <= 1e-9
    assert max(abs(p - 1.25) for p, _ in settled) <= 1e-9
    # The encoder reading never flickers between counts.
    assert max(readings) - min(readings) == pytest.approx(0.0, abs=COUNT / 2)


def test_underdamped_velocity_loop_overshoots(clock: ManualClock) -> None:
    motor = enabled_motor(clock, position_gain=60.0, velocity_gain=90.0)
    motor.command(0.01)
    assert max(p for p, _ in trace(motor, clock, 1.0)) > 0.01 + COUNT


def test_velocity_feed_forward_tracks_a_ramp(clock: ManualClock) -> None:
    # A 250 Hz stream of (position, velocity) on a 1 rad/s ramp: the lag stays within one period
    # of the ramp (the target is held between commands) once the start transient is over.
    motor = enabled_motor(clock)
    errors = []
    for k in range(500):
        motor.command(k * 0.004, 1.0)
        clock.advance(0.004)
        motor.advance()
        errors.append(motor.position - k * 0.004)
    assert max(abs(e) for e in errors[100:]) <= 0.004


command_sequences = st.lists(
    st.tuples(
        st.floats(0.0, 0.05),  # hold time, s
        st.floats(-5.0, 5.0),  # position, rad
        st.floats(-12.0, 12.0),  # velocity feed-forward, rad/s (beyond the limit on purpose)
        st.sampled_from(["command", "disable", "enable"]),
    ),
    min_size=1,
    max_size=25,
)


@settings(deadline=None, max_examples=80)
@given(sequence=command_sequences)
def test_velocity_and_acceleration_limits_are_never_exceeded(
    sequence: list[tuple[float, float, float, str]],
) -> None:
    clock = ManualClock()
    params = MotorParams(max_velocity=4.0, max_acceleration=30.0)
    motor = SimulatedMotor(params, clock)
    motor.enable()
    previous = 0.0
    for hold_s, position, velocity_ff, action in sequence:
        if action == "command":
            motor.command(position, velocity_ff)
        elif action == "disable":
            motor.disable()
        else:
            motor.enable()
        for _, velocity in trace(motor, clock, hold_s):
            assert abs(velocity) <= params.max_velocity + LIMIT_TOLERANCE
            assert abs(velocity - previous) <= params.max_acceleration * STEP_S + LIMIT_TOLERANCE
            previous = velocity


@settings(deadline=None, max_examples=100)
@given(position=st.floats(-50.0, 50.0), counts_per_rev=st.sampled_from([4096, 16384, 1 << 20]))
def test_readings_are_quantised_to_the_encoder_resolution(
    position: float, counts_per_rev: int
) -> None:
    params = MotorParams(initial_position=position, counts_per_rev=counts_per_rev)
    reading = SimulatedMotor(params, ManualClock()).sample().position
    counts = reading / params.resolution
    assert counts == pytest.approx(round(counts), abs=1e-6)
    assert reading == pytest.approx(position, abs=params.resolution / 2 + 1e-9)


def test_noise_has_the_configured_spread(clock: ManualClock) -> None:
    motor = SimulatedMotor(MotorParams(noise_std=0.01, initial_position=1.0), clock, seed=3)
    readings = np.array([motor.sample().position for _ in range(4000)])
    assert readings.mean() == pytest.approx(1.0, abs=0.001)
    assert readings.std() == pytest.approx(0.01, rel=0.05)


def run_scenario(seed: int) -> list[tuple[float, float, float]]:
    clock = ManualClock()
    motor = SimulatedMotor(MotorParams(noise_std=0.002), clock, seed=seed)
    motor.enable()
    out = []
    for k in range(200):
        motor.command(math.sin(k * 0.05), 0.5)
        clock.advance(0.004)
        sample = motor.sample()
        out.append((sample.position, sample.velocity, sample.timestamp))
    return out


def test_same_seed_gives_identical_readings() -> None:
    # Bit-identical is the claim, hence the exact comparison.
    np.testing.assert_array_equal(run_scenario(seed=7), run_scenario(seed=7))


def test_different_seeds_give_different_noise() -> None:
    first, second = np.array(run_scenario(seed=7)), np.array(run_scenario(seed=8))
    assert np.max(np.abs(first[:, 0] - second[:, 0])) > 0.001


def test_motion_does_not_depend_on_how_often_the_motor_is_observed() -> None:
    # The physics runs on a fixed tick grid, so observing it more often changes nothing.
    sparse_clock, dense_clock = ManualClock(), ManualClock()
    sparse, dense = (
        SimulatedMotor(MotorParams(), sparse_clock),
        SimulatedMotor(MotorParams(), dense_clock),
    )
    for motor in (sparse, dense):
        motor.enable()
        motor.command(1.0)
    sparse_clock.advance(0.3)
    sparse.advance()
    trace(dense, dense_clock, 0.3)
    np.testing.assert_array_equal(
        [sparse.position, sparse.velocity], [dense.position, dense.velocity]
    )


def test_time_reports_the_latest_control_tick(clock: ManualClock) -> None:
    motor = SimulatedMotor(MotorParams(step_s=0.001), clock)
    clock.advance(0.0105)
    motor.advance()
    assert motor.time == pytest.approx(0.010, abs=1e-12)


# -- faults ------------------------------------------------------------------------------------


def test_fault_code_drops_torque_and_refuses_enable_until_cleared(clock: ManualClock) -> None:
    motor = enabled_motor(clock)
    motor.command(5.0)
    trace(motor, clock, 0.5)  # cruising at the velocity limit
    motor.faults.fault_code = 0x8
    stopping = trace(motor, clock, 0.2)
    assert not motor.enabled
    assert motor.faulted
    assert stopping[-1][1] == pytest.approx(0.0, abs=1e-12)
    # Coasting down at the acceleration limit: 6 rad/s to rest in 0.1 s (200 ticks).
    assert stopping[0][1] == pytest.approx(6.0 - 60.0 * STEP_S, abs=1e-9)
    assert stopping[198][1] > 0.0
    assert stopping[199][1] == pytest.approx(0.0, abs=1e-9)
    motor.enable()
    assert not motor.enabled
    motor.clear_faults()
    assert motor.faults.fault_code == 0
    motor.enable()
    assert motor.enabled


def test_frozen_encoder_freezes_the_reading_not_the_shaft(clock: ManualClock) -> None:
    motor = enabled_motor(clock)
    motor.command(1.0)
    clock.advance(0.1)
    motor.faults.frozen_encoder = True
    frozen = motor.sample()
    clock.advance(0.5)
    later = motor.sample()
    assert later.position == pytest.approx(frozen.position, abs=0.0)
    assert later.velocity == pytest.approx(0.0, abs=0.0)
    assert later.timestamp == pytest.approx(0.6, abs=1e-9)
    assert motor.position == pytest.approx(1.0, abs=1e-6)
    motor.faults.frozen_encoder = False
    assert motor.sample().position == pytest.approx(1.0, abs=COUNT / 2 + 1e-12)


def test_stuck_shaft_does_not_move_until_released(clock: ManualClock) -> None:
    motor = enabled_motor(clock)
    motor.advance()
    motor.faults.stuck = True
    motor.command(1.0)
    clock.advance(1.0)
    assert motor.sample().position == pytest.approx(0.0, abs=1e-12)
    assert motor.enabled
    motor.faults.stuck = False
    motor.command(1.0)  # as the control loop keeps doing
    clock.advance(1.0)
    assert motor.sample().position == pytest.approx(1.0, abs=COUNT / 2 + 1e-12)


def test_watchdog_expires_without_commands_and_latches(clock: ManualClock) -> None:
    motor = enabled_motor(clock, watchdog_s=0.1)
    clock.advance(0.09)
    motor.advance()
    assert motor.enabled
    clock.advance(0.02)
    motor.advance()
    assert motor.watchdog_expired
    assert not motor.enabled
    motor.command(0.0)  # a late command neither clears nor re-enables
    motor.enable()
    assert not motor.enabled
    motor.clear_faults()
    motor.enable()
    assert motor.enabled


def test_commands_feed_the_watchdog(clock: ManualClock) -> None:
    motor = enabled_motor(clock, watchdog_s=0.1)
    for _ in range(100):
        clock.advance(0.05)
        motor.command(0.0)
    assert motor.enabled
    assert not motor.watchdog_expired


def test_watchdog_only_runs_while_enabled(clock: ManualClock) -> None:
    motor = SimulatedMotor(MotorParams(watchdog_s=0.1), clock)
    clock.advance(10.0)
    motor.advance()
    assert not motor.watchdog_expired


# -- parameters --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("max_velocity", 0.0, "max_velocity: 0.0"),
        ("max_acceleration", -1.0, "max_acceleration: -1.0"),
        ("position_gain", math.nan, "position_gain: nan"),
        ("step_s", math.inf, "step_s: inf"),
        ("velocity_gain", 30.0, "velocity_gain: 30.0 1/s must be finite and > position_gain"),
        ("counts_per_rev", 0, "counts_per_rev: 0"),
        ("noise_std", -0.1, "noise_std: -0.1"),
        ("watchdog_s", -1.0, "watchdog_s: -1.0"),
        ("initial_position", math.nan, "initial_position: nan"),
    ],
)
def test_invalid_motor_parameters_are_named(field: str, value: float, expected: str) -> None:
    with pytest.raises(DriverConfigError, match=expected):
        MotorParams(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"drop_probability": 1.5}, "drop_probability: 1.5 outside"),
        ({"delay_s": -0.001}, "delay_s: -0.001"),
    ],
)
def test_invalid_link_faults_are_named(kwargs: dict[str, float], expected: str) -> None:
    with pytest.raises(DriverConfigError, match=expected):
        LinkFaults(**kwargs)  # type: ignore[arg-type]


# -- impedance mode (the MIT actuators' law) ---------------------------------------------------


def test_impedance_settles_where_the_spring_balances_the_feed_forward(clock: ManualClock) -> None:
    motor = enabled_motor(clock, max_velocity=20.0, inertia=0.01)
    # kp 20 N·m/rad, kd 0.5 N·m·s/rad (ζ = 0.5 / (2·√(20·0.01)) ≈ 0.56): rests where
    # kp·(1 - p) + 0.4 N·m = 0, i.e. p = 1.02 rad, holding -0.4 N·m of spring.
    motor.command_impedance(1.0, 0.0, kp=20.0, kd=0.5, torque_ff=0.4)
    trace(motor, clock, 3.0)
    assert motor.position == pytest.approx(1.02, abs=1e-6)
    assert motor.velocity == pytest.approx(0.0, abs=1e-6)
    assert motor.torque == pytest.approx(0.0, abs=1e-5)


def test_impedance_torque_is_clamped_and_limits_still_hold(clock: ManualClock) -> None:
    motor = enabled_motor(clock, max_velocity=5.0, max_acceleration=1000.0, inertia=0.01)
    motor.command_impedance(10.0, 0.0, kp=100.0, kd=0.0, max_torque=2.0)
    clock.advance(STEP_S)
    motor.advance()
    assert motor.torque == pytest.approx(2.0, abs=1e-12)  # 1000 N·m asked
    assert motor.velocity == pytest.approx(2.0 / 0.01 * STEP_S, abs=1e-12)  # a = τ / J
    velocities = [v for _, v in trace(motor, clock, 1.0)]
    assert max(abs(v) for v in velocities) <= 5.0 + LIMIT_TOLERANCE


def test_a_position_command_leaves_impedance_mode(clock: ManualClock) -> None:
    motor = enabled_motor(clock)
    motor.command_impedance(0.5, 0.0, kp=0.0, kd=0.0)  # no torque at all: stays put
    trace(motor, clock, 0.2)
    assert motor.position == pytest.approx(0.0, abs=1e-12)
    motor.command(0.5)  # the cascade again
    trace(motor, clock, 1.0)
    assert motor.position == pytest.approx(0.5, abs=1e-6)


def test_impedance_stops_with_the_torque_off(clock: ManualClock) -> None:
    motor = enabled_motor(clock)
    motor.command_impedance(0.0, 3.0, kp=0.0, kd=1.0)
    trace(motor, clock, 0.5)
    assert motor.velocity == pytest.approx(3.0, abs=1e-3)
    motor.disable()
    trace(motor, clock, 0.5)
    assert motor.velocity == 0.0
    assert motor.torque == pytest.approx(0.0, abs=1e-12)
