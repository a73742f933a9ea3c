"""The end-stop search of ``armd calibrate --auto`` (`armd.tools.autocal`) on the `sim` driver, in
process and on a manual clock: the stops found are the simulated ones (to an encoder count), the
other devices hold, the command never leaves the sanity travel, the time-out; and which devices
may be driven into their stops at all (`limited_drivers`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from armd.control.transmission import Transmission
from armd.control.wiring import DriverSetup
from armd.tools.autocal import (
    SETTLED,
    AutoRefusedError,
    AutoSettings,
    EndStopError,
    EndStops,
    Travel,
    limited_drivers,
)
from drivers import Driver
from drivers.dynamixel.driver import DynamixelDriver
from drivers.feetech.driver import FeetechDriver
from drivers.sim.driver import ManualClock, SimDriver, SimFault
from drivers.sim.motor import MotorParams
from kinematics import JointLimit

COUNT = MotorParams().resolution  # one count of the sim devices' encoder, rad
SETTINGS = AutoSettings(speed=0.5, timeout_s=60.0)


def sim_driver(clock: ManualClock, stops: tuple[float, float] | None) -> SimDriver:
    devices = {
        "a": {"initial_position": 0.2, "end_stops": stops, "torque_limit": 0.2},
        "b": {"initial_position": 1.0},
    }
    return SimDriver(SimDriver.Params.model_validate({"devices": devices}), clock=clock)


async def search(
    clock: ManualClock,
    driver: SimDriver,
    t: Transmission,
    settings: AutoSettings = SETTINGS,
    report: Callable[[str], None] = lambda line: None,
) -> Travel:
    async def sleep(dt: float) -> None:
        clock.advance(dt)

    drivers: dict[str, Driver] = {"sim": driver}
    search = EndStops(drivers, settings, {t.joint: 0.2}, clock=clock, sleep=sleep)
    async with driver:
        await driver.enable()
        return await search.find(t, report)


@pytest.mark.parametrize(("sign", "gear"), [(1, 1.0), (-1, 1.0), (1, 3.0)])
async def test_the_stops_found_are_the_simulated_ones(sign: int, gear: float) -> None:
    clock = ManualClock()
    driver = sim_driver(clock, (-0.5, 0.75))
    t = Transmission("j", "sim", "a", gear_ratio=gear, sign=1 if sign > 0 else -1)
    travel = await search(clock, driver, t)
    # the shaft stops exactly at a stop; the reading is within an encoder count of it
    assert (travel.low, travel.high) == pytest.approx((-0.5, 0.75), abs=COUNT)
    assert travel.range_ends == ()  # both are end stops
    # back where it started, within `SETTLED`
    assert driver.motor("a").position == pytest.approx(0.2, abs=SETTLED)
    assert driver.motor("b").position == pytest.approx(1.0, abs=COUNT)  # held at its reading
    assert clock.now < 60.0


async def test_no_end_stop_within_the_travel_fails_without_going_farther() -> None:
    clock = ManualClock()
    driver = sim_driver(clock, None)
    t = Transmission("j", "sim", "a")
    settings = AutoSettings(speed=1.0, max_travel=1.0)
    with pytest.raises(EndStopError, match=r"joint 'j': no end stop in the \+ direction within 1"):
        await search(clock, driver, t, settings)
    assert driver.motor("a").position <= 0.2 + 1.0 + COUNT


async def test_a_search_that_takes_too_long_times_out() -> None:
    clock = ManualClock()
    driver = sim_driver(clock, (-0.5, 0.75))
    t = Transmission("j", "sim", "a")
    with pytest.raises(EndStopError, match=r"joint 'j': its end stops were not found within 2 s"):
        await search(clock, driver, t, AutoSettings(speed=0.2, timeout_s=2.0))
    assert clock.now == pytest.approx(2.0, abs=0.05)


class After:
    """A report callback that does `act` once, at its `n`-th call (a tick of the search)."""

    def __init__(self, n: int, act: Callable[[], None]) -> None:
        self.calls, self.n, self.act = 0, n, act

    def __call__(self, line: str) -> None:
        self.calls += 1
        if self.calls == self.n:
            self.act()


async def test_a_device_that_stops_answering_or_faults_ends_the_search() -> None:
    clock = ManualClock()
    driver = sim_driver(clock, (-0.5, 0.75))
    t = Transmission("j", "sim", "a")

    def silence() -> None:
        driver.link("a").drop_probability = 1.0  # its last reading stays, and ages

    with pytest.raises(EndStopError, match=r"joint 'j': device sim/a does not answer"):
        await search(clock, driver, t, report=After(10, silence))
    assert driver.motor("a").position < 0.75 - 0.1  # stopped long before the stop

    driver = sim_driver(clock, (-0.5, 0.75))

    def fault() -> None:
        driver.motor("b").faults.fault_code = SimFault.OVERTEMPERATURE

    with pytest.raises(EndStopError, match=r"searching joint 'j': device sim/b: overtemp"):
        await search(clock, driver, t, report=After(10, fault))


def setup_of(name: str, cls: type[Driver], params: dict[str, object]) -> DriverSetup:
    return DriverSetup(name, name, cls, cls.Params.model_validate(params), ())


def test_torque_limits_are_lowered_never_raised_and_other_devices_refused() -> None:
    feetech = setup_of(
        "feetech",
        FeetechDriver,
        {"port": "/dev/null", "devices": {"a": {"id": 1}, "g": {"id": 2, "torque_limit": 0.1}}},
    )
    sim = setup_of("sim", SimDriver, {"devices": {"s": {}}})
    drivers = {"feetech": feetech, "sim": sim}
    joints = [Transmission("a", "feetech", "a"), Transmission("g", "feetech", "g")]
    limited = limited_drivers(drivers, [*joints, Transmission("s", "sim", "s")], 0.25)
    devices = getattr(limited["feetech"].params, "devices", {})
    assert (devices["a"].torque_limit, devices["g"].torque_limit) == (0.25, 0.1)
    assert getattr(limited["sim"].params, "devices", {})["s"].torque_limit == 0.25
    assert getattr(drivers["feetech"].params, "devices", {})["a"].torque_limit == 1.0  # a copy

    scs = setup_of(
        "feetech",
        FeetechDriver,
        {"port": "/dev/null", "devices": {"a": {"id": 1, "model": "scs0009"}}},
    )
    dxl = setup_of("dynamixel", DynamixelDriver, {"port": "/dev/null", "devices": {"d": {"id": 1}}})
    with pytest.raises(AutoRefusedError) as refused:
        limited_drivers(
            {"feetech": scs, "dynamixel": dxl},
            [Transmission("x", "feetech", "a"), Transmission("y", "dynamixel", "d")],
            0.2,
        )
    message = str(refused.value)
    assert (
        "joint 'x' (feetech/a, driver type feetech): torque_limit 0.2: scs0009 has no " in message
    )
    assert (
        "joint 'y' (dynamixel/d, driver type dynamixel) has no torque limit armd can set" in message
    )
    assert math.isfinite(SETTINGS.max_travel)


async def test_each_joint_is_searched_within_its_own_limits() -> None:
    clock = ManualClock()

    async def sleep(dt: float) -> None:
        clock.advance(dt)

    devices = {"a": {"end_stops": [-0.3, 0.3]}, "b": {"end_stops": [-0.3, 0.3]}}
    driver = SimDriver(SimDriver.Params.model_validate({"devices": devices}), clock=clock)
    search = EndStops({"sim": driver}, SETTINGS, {"a": 0.2, "b": 0.2}, clock=clock, sleep=sleep)
    speeds = []
    async with driver:
        await driver.enable()
        for name, limit in (("a", JointLimit(velocity=0.1, acceleration=0.2)), ("b", None)):
            t = Transmission(name, "sim", name)
            travel = await search.find(t, lambda line: None, limit)
            assert (travel.low, travel.high) == pytest.approx((-0.3, 0.3), abs=COUNT)
            speeds.append((search.current.speed, search.current.acceleration))
    assert speeds == [(0.1, 0.2), (SETTINGS.speed, SETTINGS.acceleration)]
