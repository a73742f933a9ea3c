"""The Dynamixel driver end to end through a pty against the simulated X-series chain, and the
simulated chain's own behaviour (control-table rules, torque, watchdog, reboot)."""

from __future__ import annotations

import asyncio
import io
import math
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any

import pytest
import serial

from drivers.base import DeviceCommand, DeviceState, Lifecycle
from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.driver import (
    FAULT_BUS_WATCHDOG,
    DynamixelDriver,
    DynamixelParams,
)
from drivers.dynamixel.protocol import Addr, HardwareError, StatusError
from drivers.dynamixel.sim import SimulatedDynamixelChain, run
from drivers.errors import (
    DeviceFaultError,
    DriverIOError,
    DriverOpenError,
    DriverStateError,
    DriverTimeoutError,
    UnsupportedCommandError,
)
from drivers.registry import load_driver_class
from drivers.sim.driver import ManualClock
from drivers.sim.motor import MotorParams

INITIAL = {1: 0.5, 2: 1.0, 3: 2.0}  # rad at the device (within the first turn)
DEVICES = {
    "shoulder": {"id": 1},
    "elbow": {"id": 2, "direction": -1},
    "wrist": {"id": 3, "offset_rad": 0.25},
}
# SI positions of INITIAL through the direction / offset above.
INITIAL_SI = {"shoulder": 0.5, "elbow": -1.0, "wrist": 2.25}
COUNT = 2 * math.pi / 4096  # one encoder count, rad
FAST_MOTOR = MotorParams(max_velocity=40.0, max_acceleration=400.0, counts_per_rev=4096)


@pytest.fixture
def chain() -> Iterator[SimulatedDynamixelChain]:
    with SimulatedDynamixelChain(
        [1, 2, 3], initial_positions=INITIAL, motor_params=FAST_MOTOR, reboot_s=0.05
    ) as chain:
        yield chain


def params(chain: SimulatedDynamixelChain, **overrides: Any) -> DynamixelParams:
    # A pty served by a Python thread has the scheduling jitter of a loaded machine, which real
    # devices do not have: a generous margin keeps the tests independent of the load. The bus
    # watchdog has its own test.
    values: dict[str, Any] = {
        "port": chain.port,
        "devices": DEVICES,
        "reply_margin_s": 0.2,
        "bus_watchdog_s": None,
    }
    return DynamixelParams.model_validate(values | overrides)


@pytest.fixture
async def driver(chain: SimulatedDynamixelChain) -> AsyncIterator[DynamixelDriver]:
    async with DynamixelDriver(params(chain)) as driver:
        yield driver


async def wait_until(
    condition: Callable[[], Awaitable[bool]], timeout_s: float = 5.0, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.005)


async def move_to(driver: DynamixelDriver, goals: Mapping[str, float], tol: float = 0.01) -> None:
    """Stream the goals like a control loop until every device is within `tol` rad."""

    async def arrived() -> bool:
        await driver.write({name: DeviceCommand(goal) for name, goal in goals.items()})
        states = await driver.read()
        return all(abs(states[name].position - goal) < tol for name, goal in goals.items())

    await wait_until(arrived, what=f"devices to reach {dict(goals)}")


def positions(states: Mapping[str, DeviceState]) -> dict[str, float]:
    return {name: state.position for name, state in states.items()}


# -- open, enable, read, write ----------------------------------------------------------------


def test_the_registry_finds_the_driver() -> None:
    assert load_driver_class("dynamixel") is DynamixelDriver


async def test_open_reads_positions_in_si_with_the_injected_clock(
    chain: SimulatedDynamixelChain,
) -> None:
    clock = ManualClock(now=42.0)
    async with DynamixelDriver(params(chain), clock=clock) as driver:
        states = await driver.read()
    assert set(states) == {"shoulder", "elbow", "wrist"}
    for name, state in states.items():
        assert state.position == pytest.approx(INITIAL_SI[name], abs=COUNT)
        assert state.velocity == pytest.approx(0.0, abs=1e-9)
        assert (state.timestamp, state.fault, state.enabled) == (42.0, None, False)
    assert driver.lifecycle is Lifecycle.CLOSED


async def test_open_switches_the_operating_mode_and_maps_the_status_block(
    chain: SimulatedDynamixelChain, driver: DynamixelDriver
) -> None:
    for device_id in (1, 2, 3):
        assert chain.read_table(device_id, Addr.OPERATING_MODE, 1) == b"\x04"  # extended
        address, mapping = dxl.make_indirect_mapping(1)
        assert chain.read_table(device_id, address, len(mapping)) == mapping


async def test_enable_holds_the_present_position_even_with_a_stale_goal(
    chain: SimulatedDynamixelChain, driver: DynamixelDriver
) -> None:
    # A goal left in the table (by an earlier program) would make the device jump on torque on.
    assert chain.write_table(1, Addr.GOAL_POSITION, dxl.i32(3000)) == StatusError.NONE
    before = positions(await driver.read())
    await driver.enable()
    await asyncio.sleep(0.2)
    states = await driver.read()
    assert all(state.enabled for state in states.values())
    for name, position in positions(states).items():
        assert position == pytest.approx(before[name], abs=2 * COUNT)


async def test_writes_move_every_device_to_its_goal(
    chain: SimulatedDynamixelChain, driver: DynamixelDriver
) -> None:
    await driver.enable()
    goals = {"shoulder": 1.2, "elbow": -0.4, "wrist": 3.0}
    await move_to(driver, goals)
    # Direction and offset reach the device: elbow's -0.4 rad is +0.4 rad at the shaft, and
    # wrist's 3.0 rad is 2.75 rad at the shaft.
    elbow_raw = int.from_bytes(chain.read_table(2, Addr.GOAL_POSITION, 4), "little", signed=True)
    wrist_raw = int.from_bytes(chain.read_table(3, Addr.GOAL_POSITION, 4), "little", signed=True)
    assert (elbow_raw, wrist_raw) == (dxl.rad_to_counts(0.4), dxl.rad_to_counts(2.75))
    assert driver.stats.writes > 0
    assert driver.stats.missing_replies == driver.stats.corrupt_replies == 0


async def test_extended_mode_goes_beyond_one_turn(driver: DynamixelDriver) -> None:
    await driver.enable()
    await move_to(driver, {"shoulder": 7.5})


async def test_write_needs_enable_and_disable_lets_go(
    chain: SimulatedDynamixelChain, driver: DynamixelDriver
) -> None:
    with pytest.raises(DriverStateError, match="cannot write while open"):
        await driver.write({"shoulder": DeviceCommand(1.0)})
    await driver.enable()
    await driver.disable()
    assert not any(state.enabled for state in (await driver.read()).values())
    assert chain.read_table(1, Addr.TORQUE_ENABLE, 1) == b"\x00"


async def test_non_finite_and_out_of_range_goals_are_refused(
    chain: SimulatedDynamixelChain,
) -> None:
    async with DynamixelDriver(params(chain, operating_mode="position")) as driver:
        assert chain.read_table(1, Addr.OPERATING_MODE, 1) == b"\x03"
        await driver.enable()
        with pytest.raises(UnsupportedCommandError, match=r"'shoulder' \(id 1\).*\[0, 4095\]"):
            await driver.write({"shoulder": DeviceCommand(-0.5)})
        with pytest.raises(UnsupportedCommandError, match="finite"):
            await driver.write({"shoulder": DeviceCommand(math.nan)})
        await move_to(driver, {"shoulder": 6.0})


# -- open failures ----------------------------------------------------------------------------


async def test_a_missing_port_is_an_open_error_naming_it() -> None:
    driver = DynamixelDriver(DynamixelParams(port="/dev/nonexistent-dxl", devices=DEVICES))
    with pytest.raises(DriverOpenError, match="/dev/nonexistent-dxl"):
        await driver.open()
    assert driver.lifecycle is Lifecycle.CLOSED


async def test_silent_ids_are_named(chain: SimulatedDynamixelChain) -> None:
    devices = DEVICES | {"gripper": {"id": 9}, "extra": {"id": 12}}
    driver = DynamixelDriver(params(chain, devices=devices, retries=0))
    with pytest.raises(DriverTimeoutError, match=r"'gripper' \(id 9\), device 'extra' \(id 12\)"):
        await driver.open()
    assert driver.lifecycle is Lifecycle.CLOSED


async def test_a_port_in_use_by_another_driver_is_refused(driver: DynamixelDriver) -> None:
    second = DynamixelDriver(driver.params)
    with pytest.raises(DriverOpenError, match="cannot open"):
        await second.open()


async def test_a_wrong_baud_rate_gets_no_answer(chain: SimulatedDynamixelChain) -> None:
    driver = DynamixelDriver(params(chain, baudrate=57600, retries=0))
    with pytest.raises(DriverTimeoutError, match="at 57600 baud: no answer to Ping"):
        await driver.open()


async def test_unknown_models_are_refused_unless_accepted() -> None:
    with SimulatedDynamixelChain([1], model_number=4321) as chain:
        devices = {"one": {"id": 1}}
        with pytest.raises(DriverOpenError, match="model number 4321"):
            await DynamixelDriver(params(chain, devices=devices)).open()
        async with DynamixelDriver(
            params(chain, devices=devices, accept_unknown_models=True)
        ) as driver:
            assert "one" in await driver.read()


async def test_the_operating_mode_is_not_changed_under_torque(
    chain: SimulatedDynamixelChain,
) -> None:
    assert chain.write_table(2, Addr.TORQUE_ENABLE, b"\x01") == StatusError.NONE
    with pytest.raises(DriverOpenError, match=r"'elbow' \(id 2\): Operating Mode is 3"):
        await DynamixelDriver(params(chain)).open()


async def test_a_current_limit_caps_goal_current_and_the_effort_is_the_present_current(
    chain: SimulatedDynamixelChain,
) -> None:
    devices = {"shoulder": {"id": 1, "current_limit": 0.5}, "elbow": {"id": 2, "direction": -1}}
    config = params(chain, devices=devices, operating_mode="current_based_position")
    async with DynamixelDriver(config) as driver:
        assert chain.read_table(1, Addr.OPERATING_MODE, 1) == b"\x05"
        await driver.enable()
        # 0.5 A in the XM430's 2.69 mA units, written before torque on (RAM, no EEPROM wear)
        assert chain.read_table(1, Addr.GOAL_CURRENT, 2) == round(0.5 / 0.00269).to_bytes(
            2, "little"
        )
        assert chain.read_table(2, Addr.GOAL_CURRENT, 2) == b"\x00\x00"  # not configured
        with chain.device(1) as device:
            device.motor.faults.block_at = 0.45  # an obstacle just below the shaft (0.5 rad)
        for _ in range(40):  # push into it: the current rises to the cap, never beyond
            await driver.write({"shoulder": DeviceCommand(0.0), "elbow": DeviceCommand(-1.0)})
            states = await driver.read()
        shoulder = states["shoulder"]
        assert shoulder.position == pytest.approx(0.45, abs=2 * COUNT)
        assert shoulder.effort == pytest.approx(-0.5, abs=0.00269)  # at the cap, pushing down
        assert states["elbow"].effort is not None
        assert abs(states["elbow"].effort) < 0.05


async def test_current_limits_are_checked_against_the_model_and_the_device() -> None:
    with pytest.raises(ValueError, match="current_limit needs operating_mode"):
        DynamixelParams.model_validate(
            {"port": "/dev/null", "devices": {"a": {"id": 1, "current_limit": 1.0}}}
        )
    devices = {"one": {"id": 1, "current_limit": 3.3}}  # the XM430's Current Limit: 3.21 A
    with SimulatedDynamixelChain([1]) as chain:
        config = params(chain, devices=devices, operating_mode="current_based_position")
        with pytest.raises(DriverOpenError, match=r"above the device's Current Limit \(38\)"):
            await DynamixelDriver(config).open()
    with SimulatedDynamixelChain([1], model_number=1060) as chain:  # XL430: no current sensing
        config = params(chain, devices=devices, operating_mode="current_based_position")
        with pytest.raises(DriverOpenError, match="no current sensing"):
            await DynamixelDriver(config).open()


def test_duplicate_ids_and_bad_watchdogs_are_config_errors() -> None:
    with pytest.raises(ValueError, match="same id 1"):
        DynamixelParams(port="/dev/x", devices={"a": {"id": 1}, "b": {"id": 1}})
    with pytest.raises(ValueError, match=r"\[0.02, 2.54\] s"):
        DynamixelParams(port="/dev/x", devices={"a": {"id": 1}}, bus_watchdog_s=3.0)


# -- faults -----------------------------------------------------------------------------------


async def test_a_hardware_error_is_reported_refuses_enable_and_reboot_clears_it(
    chain: SimulatedDynamixelChain, driver: DynamixelDriver
) -> None:
    await driver.enable()
    chain.inject_hardware_error(2, HardwareError.OVERLOAD)
    elbow = (await driver.read())["elbow"]
    assert elbow.fault is not None
    assert elbow.fault.code == HardwareError.OVERLOAD
    assert "overload" in elbow.fault.message
    assert not elbow.enabled

    await driver.disable()
    with pytest.raises(DeviceFaultError, match=r"'elbow' \(id 2\): overload"):
        await driver.enable()
    await driver.clear_faults()
    states = await driver.read()
    assert all(state.fault is None for state in states.values())
    await driver.enable()
    await move_to(driver, {"elbow": -1.5})


async def test_lost_replies_leave_stale_timestamps_and_are_counted(
    chain: SimulatedDynamixelChain,
) -> None:
    clock = ManualClock(now=1.0)
    async with DynamixelDriver(params(chain), clock=clock) as driver:
        await driver.read()
        with chain.device(2) as device:
            device.faults.silent = True
        clock.advance(1.0)
        states = await driver.read()
        assert states["elbow"].timestamp == 1.0  # the last valid reading, not a made-up one
        assert states["shoulder"].timestamp == states["wrist"].timestamp == 2.0
        assert driver.stats.missing_replies == 1
        assert driver.stats.timeouts == 1
        assert driver.stats.per_device_errors == {"elbow": 1}

        with chain.device(2) as device:
            device.faults.silent = False
        clock.advance(1.0)
        assert (await driver.read())["elbow"].timestamp == 3.0


async def test_a_late_reply_counts_as_missing_and_does_not_block_the_bus(
    chain: SimulatedDynamixelChain, driver: DynamixelDriver
) -> None:
    with chain.device(3) as device:
        device.faults.extra_delay_s = 0.4  # twice the reply margin
    await driver.read()
    assert driver.stats.missing_replies >= 1
    with chain.device(3) as device:
        device.faults.extra_delay_s = 0.0
    await asyncio.sleep(0.3)  # the late reply arrives; the next transaction discards it
    before = driver.stats.missing_replies
    states = await driver.read()
    assert driver.stats.missing_replies == before
    assert states["wrist"].position == pytest.approx(INITIAL_SI["wrist"], abs=COUNT)


async def test_corrupt_replies_and_garbage_are_counted_and_the_parser_resyncs(
    chain: SimulatedDynamixelChain,
) -> None:
    clock = ManualClock(now=1.0)
    async with DynamixelDriver(params(chain), clock=clock) as driver:
        await driver.read()
        with chain.device(1) as device:
            device.faults.corrupt_next = 1
        clock.advance(1.0)
        states = await driver.read()
        assert states["shoulder"].timestamp == 1.0
        assert states["elbow"].timestamp == states["wrist"].timestamp == 2.0
        assert driver.stats.corrupt_replies == 1
        assert driver.stats.missing_replies == 1

        chain.inject_garbage(b"\x00\xff\xff\xfd\x00\x01\x07\xffnoise\xff\xff")
        clock.advance(1.0)
        states = await driver.read()
        assert all(state.timestamp == 3.0 for state in states.values())
        assert driver.stats.corrupt_replies == 2
        assert driver.stats.missing_replies == 1


async def test_a_frozen_encoder_keeps_reporting_fresh_but_constant_positions(
    chain: SimulatedDynamixelChain, driver: DynamixelDriver
) -> None:
    # The driver cannot tell; the daemon's following-error check catches it.
    await driver.enable()
    before = (await driver.read())["shoulder"].position
    with chain.device(1) as device:
        device.motor.faults.frozen_encoder = True
    # The encoder freezes at its latest sample, which may be a count newer than `before`.
    frozen = (await driver.read())["shoulder"].position
    assert frozen == pytest.approx(before, abs=4 * 2 * math.pi / 4096)
    for _ in range(20):
        await driver.write({"shoulder": DeviceCommand(frozen + 1.0)})
        assert (await driver.read())["shoulder"].position == frozen
        await asyncio.sleep(0.005)


async def test_an_unplugged_adapter_is_an_io_error(
    chain: SimulatedDynamixelChain, driver: DynamixelDriver
) -> None:
    await driver.enable()
    chain_port = chain.port
    chain.disconnect()
    with pytest.raises(DriverIOError, match=f"port '{chain_port}'"):
        await read_until_error(driver)
    with pytest.raises(DriverIOError):
        await driver.write({"shoulder": DeviceCommand(0.5)})
    await driver.close()  # never raises
    assert driver.lifecycle is Lifecycle.CLOSED


async def read_until_error(driver: DynamixelDriver) -> None:
    for _ in range(3):  # the hang-up may take one transaction to show
        await driver.read()


async def test_the_bus_watchdog_stops_devices_when_the_loop_goes_quiet(
    chain: SimulatedDynamixelChain,
) -> None:
    async with DynamixelDriver(params(chain, bus_watchdog_s=0.2)) as driver:
        await driver.enable()
        assert chain.read_table(1, Addr.BUS_WATCHDOG, 1) == b"\x0a"  # 10 × 20 ms
        await move_to(driver, {"shoulder": 1.0})
        await asyncio.sleep(0.6)  # the control loop stalls: no reads, no writes

        states = await driver.read()
        fault = states["shoulder"].fault
        assert fault is not None
        assert fault.code == FAULT_BUS_WATCHDOG
        assert "watchdog" in fault.message
        held = states["shoulder"].position
        for _ in range(10):  # goals are refused by the device now
            await driver.write({"shoulder": DeviceCommand(2.0)})
            await asyncio.sleep(0.01)
        assert (await driver.read())["shoulder"].position == pytest.approx(held, abs=COUNT)

        await driver.disable()
        await driver.clear_faults()
        assert (await driver.read())["shoulder"].fault is None
        await driver.enable()
        await move_to(driver, {"shoulder": 2.0})


# -- the simulated chain ----------------------------------------------------------------------


def transact(port: serial.Serial, request: bytes, timeout_s: float = 1.0) -> dxl.Packet | None:
    port.reset_input_buffer()
    port.write(request)
    parser = dxl.PacketParser()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for packet in parser.feed(port.read(port.in_waiting or 1)):
            return packet
    return None


@pytest.fixture
def port(chain: SimulatedDynamixelChain) -> Iterator[serial.Serial]:
    with serial.Serial(chain.port, 1_000_000, timeout=0.01) as port:
        yield port


def test_sim_answers_a_ping_like_an_xm430(port: serial.Serial) -> None:
    reply = transact(port, dxl.make_ping(1))
    assert reply is not None
    assert (reply.id, reply.error, reply.data) == (1, 0, bytes([0xFC, 0x03, 46]))  # 1020, fw 46


@pytest.mark.parametrize(
    ("address", "data", "error"),
    [
        (Addr.PRESENT_POSITION, dxl.i32(0), StatusError.ACCESS),  # read-only
        (Addr.HARDWARE_ERROR_STATUS, b"\x00", StatusError.ACCESS),  # read-only
        (66, b"\x00", StatusError.ACCESS),  # undefined
        (Addr.GOAL_POSITION, b"\x00\x00", StatusError.DATA_LENGTH),  # half an item
        (Addr.GOAL_POSITION, dxl.i32(5000), StatusError.DATA_LIMIT),  # position mode: 0..4095
        (Addr.TORQUE_ENABLE, b"\x02", StatusError.DATA_RANGE),
        (Addr.BUS_WATCHDOG, b"\xff", StatusError.DATA_RANGE),
        (Addr.GOAL_POSITION, dxl.i32(2000), StatusError.NONE),  # allowed with torque off
    ],
)
def test_sim_enforces_the_control_table_rules(
    port: serial.Serial, address: int, data: bytes, error: int
) -> None:
    reply = transact(port, dxl.make_write(1, address, data))
    assert reply is not None
    assert reply.error == error


def test_sim_locks_eeprom_under_torque_and_drives_to_a_stored_goal(
    chain: SimulatedDynamixelChain, port: serial.Serial
) -> None:
    assert chain.write_table(1, Addr.GOAL_POSITION, dxl.i32(1000)) == StatusError.NONE
    reply = transact(port, dxl.make_write(1, Addr.TORQUE_ENABLE, b"\x01"))
    assert reply is not None
    assert reply.error == 0
    reply = transact(port, dxl.make_write(1, Addr.OPERATING_MODE, b"\x04"))
    assert reply is not None
    assert reply.error == StatusError.ACCESS
    deadline = time.monotonic() + 5.0
    while abs(int.from_bytes(chain.read_table(1, Addr.PRESENT_POSITION, 4), "little") - 1000) > 2:
        assert time.monotonic() < deadline, "the device did not drive to its stored goal"
        time.sleep(0.01)


def test_sim_alert_bit_result_fail_and_reboot(
    chain: SimulatedDynamixelChain, port: serial.Serial
) -> None:
    chain.inject_hardware_error(1, HardwareError.OVERHEATING)
    reply = transact(port, dxl.make_write(1, Addr.TORQUE_ENABLE, b"\x01"))
    assert reply is not None
    assert reply.error == dxl.ALERT_BIT | StatusError.RESULT_FAIL
    reply = transact(port, dxl.make_read(1, Addr.HARDWARE_ERROR_STATUS, 1))
    assert reply is not None
    assert (reply.error, reply.data) == (dxl.ALERT_BIT, bytes([HardwareError.OVERHEATING]))
    reply = transact(port, dxl.make_reboot(1))
    assert reply is not None
    assert reply.error == dxl.ALERT_BIT
    assert transact(port, dxl.make_ping(1), timeout_s=0.02) is None  # still booting
    time.sleep(0.1)
    reply = transact(port, dxl.make_read(1, Addr.HARDWARE_ERROR_STATUS, 1))
    assert reply is not None
    assert (reply.error, reply.data) == (0, b"\x00")


def test_sim_loses_the_multi_turn_count_on_reboot() -> None:
    with SimulatedDynamixelChain([1], initial_positions={1: 2 * math.pi + 0.5}) as chain:
        raw = int.from_bytes(chain.read_table(1, Addr.PRESENT_POSITION, 4), "little", signed=True)
        assert raw == dxl.rad_to_counts(0.5)


def test_run_prints_the_pty_path_and_stops() -> None:
    out = io.StringIO()
    stop = threading.Event()
    thread = threading.Thread(target=run, args=([1, 2], 57600), kwargs={"stop": stop, "out": out})
    thread.start()
    deadline = time.monotonic() + 5.0
    while not out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    path = out.getvalue().strip()
    with serial.Serial(path, 57600, timeout=0.01) as port:
        reply = transact(port, dxl.make_ping(2))
        assert reply is not None
        assert reply.id == 2
    stop.set()
    thread.join(timeout=5.0)
    assert not thread.is_alive()
