"""The in-process `sim` driver: configuration, lifecycle, motion, and every fault path, on a manual
clock (no sleeps, no wall-clock timing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic
import pytest

from drivers.base import DeviceCommand, DeviceState, DriverParams, Lifecycle
from drivers.errors import (
    DeviceFaultError,
    DriverConfigError,
    DriverIOError,
    DriverOpenError,
    DriverStateError,
)
from drivers.sim.driver import ManualClock, SimDriver, SimFault, fault_message
from drivers.sim.motor import MotorParams

NAMES = ("shoulder", "elbow", "wrist")
PERIOD_S = 0.004  # a 250 Hz control loop
COUNT = MotorParams().resolution


class FakeParams(DriverParams):
    pass


def make_driver(clock: ManualClock, **device: Any) -> SimDriver:
    """Three devices, at 0.0, 0.5 and -0.5 rad; `device` overrides every device's parameters."""
    config = {
        "devices": {
            name: {"initial_position": start, **device}
            for name, start in zip(NAMES, (0.0, 0.5, -0.5), strict=True)
        }
    }
    return SimDriver(SimDriver.Params.model_validate(config), clock=clock)


def hold(position: float) -> dict[str, DeviceCommand]:
    return {name: DeviceCommand(position) for name in NAMES}


async def cycle(
    driver: SimDriver,
    clock: ManualClock,
    commands: Mapping[str, DeviceCommand],
    duration_s: float,
) -> Mapping[str, DeviceState]:
    """Run the control loop's read -> write cycle at 250 Hz for `duration_s`; the last read."""
    states: Mapping[str, DeviceState] = {}
    for _ in range(round(duration_s / PERIOD_S)):
        clock.advance(PERIOD_S)
        states = await driver.read()
        await driver.write(commands)
    return states


# -- configuration -----------------------------------------------------------------------------


def test_devices_keep_configuration_order(clock: ManualClock) -> None:
    assert make_driver(clock).device_names == NAMES


def test_device_parameters_reach_the_motor(clock: ManualClock) -> None:
    driver = make_driver(clock, max_velocity=2.0, counts_per_rev=4096, watchdog_s=0.2, seed=5)
    params = driver.motor("elbow").params
    assert params.max_velocity == pytest.approx(2.0, abs=0.0)
    assert params.counts_per_rev == 4096
    assert params.watchdog_s == pytest.approx(0.2, abs=0.0)
    assert params.initial_position == pytest.approx(0.5, abs=0.0)
    assert driver.motor("elbow").seed == 5


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"devices": {}}, "at least 1 item"),
        ({"devices": {"a": {"max_velcity": 1.0}}}, "max_velcity"),
        ({"devices": {"a": {"max_velocity": -1.0}}}, "max_velocity"),
        ({"devices": {"a": {"watchdog_s": float("nan")}}}, "watchdog_s"),
        ({"devices": {"a": {"velocity_gain": 10.0}}}, "velocity_gain 10.0 1/s must be >"),
        ({"devices": {" ": {}}}, "must not be blank"),
        ({"devices": {"a": {}}, "reply_timeout_s": 0.0}, "reply_timeout_s"),
        ({"devices": {"a": {}}, "bus": "can0"}, "bus"),
    ],
)
def test_invalid_configuration_is_named(config: dict[str, Any], expected: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=expected):
        SimDriver.Params.model_validate(config)


def test_other_drivers_params_are_refused(clock: ManualClock) -> None:
    with pytest.raises(DriverConfigError, match=r"needs SimDriver\.Params, got FakeParams"):
        SimDriver(FakeParams(), clock=clock)


def test_unknown_device_accessor_names_the_known_ones(clock: ManualClock) -> None:
    with pytest.raises(DriverConfigError, match=r"'hand'.*'shoulder', 'elbow', 'wrist'"):
        make_driver(clock).motor("hand")


def test_fault_message_names_every_bit() -> None:
    message = fault_message(SimFault.OVERCURRENT | SimFault.WATCHDOG_EXPIRED | 0x400)
    assert message == "overcurrent, watchdog expired, unknown fault bits 0x400 (code 0x421)"


# -- lifecycle ---------------------------------------------------------------------------------


async def test_read_before_open_is_refused(clock: ManualClock) -> None:
    with pytest.raises(DriverStateError, match="cannot read while closed"):
        await make_driver(clock).read()


async def test_write_before_enable_is_refused(clock: ManualClock) -> None:
    async with make_driver(clock) as driver:
        with pytest.raises(DriverStateError, match="cannot write while open; must be enabled"):
            await driver.write(hold(0.0))


async def test_async_with_opens_and_closes(clock: ManualClock) -> None:
    driver = make_driver(clock)
    async with driver:
        inside = driver.lifecycle
        await driver.enable()
        assert all(driver.motor(name).enabled for name in NAMES)
    assert inside is Lifecycle.OPEN
    assert driver.lifecycle is Lifecycle.CLOSED
    assert not any(driver.motor(name).enabled for name in NAMES)


async def test_close_is_idempotent(clock: ManualClock) -> None:
    driver = make_driver(clock)
    await driver.close()
    await driver.open()
    await driver.enable()
    await driver.close()
    await driver.close()
    assert driver.lifecycle is Lifecycle.CLOSED


async def test_first_read_reports_every_device_at_rest(clock: ManualClock) -> None:
    clock.advance(12.5)
    async with make_driver(clock) as driver:
        states = await driver.read()
    assert list(states) == list(NAMES)
    for name, start in zip(NAMES, (0.0, 0.5, -0.5), strict=True):
        assert states[name].position == pytest.approx(start, abs=COUNT / 2)
        assert states[name].velocity == pytest.approx(0.0, abs=1e-12)
        assert states[name].timestamp == pytest.approx(12.5, abs=1e-12)
        assert states[name].fault is None
        assert not states[name].enabled
    assert driver.stats.reads == 1


async def test_enable_holds_the_current_position(clock: ManualClock) -> None:
    async with make_driver(clock) as driver:
        await driver.enable()
        commands = {name: DeviceCommand(s.position) for name, s in (await driver.read()).items()}
        states = await cycle(driver, clock, commands, 0.5)
    for name, start in zip(NAMES, (0.0, 0.5, -0.5), strict=True):
        assert states[name].position == pytest.approx(start, abs=COUNT / 2)
        assert states[name].enabled


async def test_devices_converge_to_commanded_positions(clock: ManualClock) -> None:
    targets = {"shoulder": 1.0, "elbow": -0.25, "wrist": 2.5}
    commands = {name: DeviceCommand(target) for name, target in targets.items()}
    async with make_driver(clock) as driver:
        await driver.enable()
        states = await cycle(driver, clock, commands, 1.5)
    for name, target in targets.items():
        assert states[name].position == pytest.approx(target, abs=COUNT / 2 + 1e-9)
        assert states[name].velocity == pytest.approx(0.0, abs=1e-6)
        assert states[name].timestamp == pytest.approx(clock.now, abs=1e-12)
    assert driver.stats.writes == round(1.5 / PERIOD_S)


async def test_write_to_an_unknown_device_is_refused(clock: ManualClock) -> None:
    async with make_driver(clock) as driver:
        await driver.enable()
        with pytest.raises(DriverStateError, match=r"unknown device\(s\) \['hand'\]"):
            await driver.write({"hand": DeviceCommand(0.0)})


# -- device faults -----------------------------------------------------------------------------


async def test_device_fault_is_reported_refuses_enable_and_clears(clock: ManualClock) -> None:
    async with make_driver(clock) as driver:
        await driver.enable()
        driver.motor("elbow").faults.fault_code = SimFault.OVERTEMPERATURE
        states = await cycle(driver, clock, hold(0.5), 0.1)
        fault = states["elbow"].fault
        assert fault is not None
        assert fault.code == SimFault.OVERTEMPERATURE
        assert fault.message == "overtemperature (code 0x8)"
        assert not states["elbow"].enabled
        assert states["shoulder"].fault is None
        assert states["shoulder"].enabled

        await driver.disable()
        with pytest.raises(DeviceFaultError, match=r"device 'elbow': overtemperature"):
            await driver.enable()
        assert driver.lifecycle is Lifecycle.OPEN
        assert not driver.motor("shoulder").enabled  # refused as a whole

        await driver.clear_faults()
        assert (await driver.read())["elbow"].fault is None
        await driver.enable()
        assert all(driver.motor(name).enabled for name in NAMES)


async def test_clear_faults_is_refused_while_enabled(clock: ManualClock) -> None:
    async with make_driver(clock) as driver:
        await driver.enable()
        with pytest.raises(DriverStateError, match="cannot clear faults while enabled"):
            await driver.clear_faults()


async def test_frozen_encoder_reports_a_still_reading_while_the_shaft_moves(
    clock: ManualClock,
) -> None:
    async with make_driver(clock) as driver:
        await driver.enable()
        before = (await driver.read())["shoulder"]
        driver.motor("shoulder").faults.frozen_encoder = True
        states = await cycle(driver, clock, hold(1.0), 1.0)
    assert states["shoulder"].position == pytest.approx(before.position, abs=0.0)
    assert states["shoulder"].timestamp == pytest.approx(clock.now, abs=1e-12)
    assert states["shoulder"].fault is None
    assert driver.motor("shoulder").position == pytest.approx(1.0, abs=1e-6)


async def test_stuck_joint_does_not_follow(clock: ManualClock) -> None:
    async with make_driver(clock) as driver:
        await driver.enable()
        await driver.read()
        driver.motor("wrist").faults.stuck = True
        states = await cycle(driver, clock, hold(1.0), 1.0)
    assert states["wrist"].position == pytest.approx(-0.5, abs=COUNT / 2)
    assert states["wrist"].enabled
    assert states["elbow"].position == pytest.approx(1.0, abs=COUNT / 2 + 1e-9)


async def test_watchdog_expires_without_writes_and_latches(clock: ManualClock) -> None:
    async with make_driver(clock) as driver:
        await driver.enable()
        await cycle(driver, clock, hold(0.2), 0.2)
        for _ in range(30):  # reads alone do not feed the watchdog
            clock.advance(PERIOD_S)
            states = await driver.read()
        fault = states["shoulder"].fault
        assert fault is not None
        assert fault.code == SimFault.WATCHDOG_EXPIRED
        assert "watchdog expired" in fault.message
        assert "watchdog_s = 0.1 s" in fault.message
        assert not states["shoulder"].enabled

        await driver.write(hold(0.0))  # too late: latched
        clock.advance(PERIOD_S)
        assert (await driver.read())["elbow"].fault is not None
        await driver.disable()
        await driver.clear_faults()
        await driver.enable()
        states = await cycle(driver, clock, hold(0.0), 0.5)
    assert all(state.fault is None for state in states.values())
    assert states["elbow"].position == pytest.approx(0.0, abs=COUNT / 2 + 1e-9)


async def test_watchdog_zero_disables_it(clock: ManualClock) -> None:
    async with make_driver(clock, watchdog_s=0.0) as driver:
        await driver.enable()
        clock.advance(10.0)
        states = await driver.read()
    assert all(state.fault is None and state.enabled for state in states.values())


# -- transport faults --------------------------------------------------------------------------


async def test_dropped_replies_keep_the_previous_state_and_are_counted(clock: ManualClock) -> None:
    async with make_driver(clock) as driver:
        first = await driver.read()
        driver.link("elbow").drop_probability = 1.0
        for _ in range(5):
            clock.advance(PERIOD_S)
            states = await driver.read()
    assert states["elbow"] is first["elbow"]  # the very reading kept, not a re-made one
    assert states["elbow"].timestamp == pytest.approx(0.0, abs=0.0)
    assert states["shoulder"].timestamp == pytest.approx(5 * PERIOD_S, abs=1e-12)
    assert driver.stats.missing_replies == 5
    assert driver.stats.per_device_errors == {"elbow": 5}
    assert driver.stats.last_error == "sim: device 'elbow': reply dropped"


async def test_partial_drop_rate_is_seeded(clock: ManualClock) -> None:
    counts = []
    for _ in range(2):
        async with make_driver(clock, seed=11) as driver:
            driver.link("wrist").drop_probability = 0.3
            for _ in range(1000):
                await driver.read()
        counts.append(driver.stats.missing_replies)
    assert counts[0] == counts[1]
    assert counts[0] == pytest.approx(300, abs=60)


async def test_never_answered_device_is_absent(clock: ManualClock) -> None:
    driver = make_driver(clock)
    driver.link("wrist").drop_probability = 1.0
    async with driver:
        states = await driver.read()
    assert set(states) == {"shoulder", "elbow"}


async def test_delayed_reply_arrives_with_its_receive_time(clock: ManualClock) -> None:
    async with make_driver(clock) as driver:
        await driver.read()
        driver.link("elbow").delay_s = 0.003
        clock.advance(PERIOD_S)
        in_flight = await driver.read()
        assert in_flight["elbow"].timestamp == pytest.approx(0.0, abs=0.0)
        clock.advance(PERIOD_S)
        arrived = await driver.read()
    assert arrived["elbow"].timestamp == pytest.approx(PERIOD_S + 0.003, abs=1e-12)
    assert arrived["shoulder"].timestamp == pytest.approx(2 * PERIOD_S, abs=1e-12)
    assert driver.stats.timeouts == 0


async def test_reply_later_than_the_timeout_is_counted_and_discarded(clock: ManualClock) -> None:
    async with make_driver(clock) as driver:
        first = await driver.read()
        driver.link("elbow").delay_s = 0.05  # beyond the default reply_timeout_s of 0.01 s
        for _ in range(20):
            clock.advance(PERIOD_S)
            states = await driver.read()
    assert states["elbow"] is first["elbow"]  # the very reading kept, not a re-made one
    assert driver.stats.timeouts == 20
    assert driver.stats.last_error is not None
    assert "delayed 0.05 s, beyond the reply_timeout_s of 0.01 s" in driver.stats.last_error


async def test_disconnection_fails_io_until_reopened(clock: ManualClock) -> None:
    driver = make_driver(clock)
    async with driver:
        await driver.enable()
        await driver.write(hold(0.0))
        driver.link("wrist").disconnected = True
        with pytest.raises(DriverIOError, match=r"cannot read: device\(s\) \['wrist'\] discon"):
            await driver.read()
        assert driver.stats.io_errors == 1
        driver.link("wrist").disconnected = False
        with pytest.raises(DriverIOError, match="close and reopen the driver"):
            await driver.write(hold(0.0))
    assert driver.lifecycle is Lifecycle.CLOSED  # close never raises

    async with driver:
        clock.advance(PERIOD_S)
        states = await driver.read()
    assert set(states) == set(NAMES)
    assert states["wrist"].timestamp == pytest.approx(clock.now, abs=1e-12)


async def test_open_fails_while_disconnected(clock: ManualClock) -> None:
    driver = make_driver(clock)
    driver.link("elbow").disconnected = True
    with pytest.raises(DriverOpenError, match=r"device\(s\) \['elbow'\] disconnected"):
        await driver.open()
    assert driver.lifecycle is Lifecycle.CLOSED


async def test_unreachable_devices_are_stopped_by_their_watchdog(clock: ManualClock) -> None:
    driver = make_driver(clock)
    async with driver:
        await driver.enable()
        await cycle(driver, clock, hold(1.0), 0.1)
        driver.link("shoulder").disconnected = True
    # close() could not disable the devices: they keep going until their watchdog trips.
    motor = driver.motor("shoulder")
    assert motor.enabled
    clock.advance(0.2)
    motor.advance()
    assert motor.watchdog_expired
    assert not motor.enabled
