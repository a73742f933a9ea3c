"""The Feetech driver end to end through a pty against the simulated STS3215 chain, and the
simulated chain's own behaviour on the wire (broadcast, status levels, Lock, Reg Write)."""

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
from drivers.errors import (
    DeviceFaultError,
    DriverIOError,
    DriverOpenError,
    DriverStateError,
    DriverTimeoutError,
    UnsupportedCommandError,
)
from drivers.feetech import protocol as ft
from drivers.feetech.driver import FeetechDriver, FeetechParams
from drivers.feetech.protocol import ErrorBit, Packet
from drivers.feetech.sim import SimulatedFeetechChain, run
from drivers.feetech.table import Addr
from drivers.registry import load_driver_class
from drivers.sim.driver import ManualClock
from drivers.sim.motor import MotorParams

INITIAL = {1: 0.5, 2: -1.0, 3: 2.0}  # rad from the middle of the turn
DEVICES = {"shoulder": {"id": 1}, "elbow": {"id": 2}, "gripper": {"id": 3, "torque_limit": 0.5}}
NAMES = {1: "shoulder", 2: "elbow", 3: "gripper"}
COUNT = 2 * math.pi / 4096  # one encoder count, rad
FAST_MOTOR = MotorParams(max_velocity=40.0, max_acceleration=400.0, counts_per_rev=4096)


@pytest.fixture
def chain() -> Iterator[SimulatedFeetechChain]:
    with SimulatedFeetechChain(
        [1, 2, 3], initial_positions=INITIAL, motor_params=FAST_MOTOR
    ) as chain:
        yield chain


def params(chain: SimulatedFeetechChain, **overrides: Any) -> FeetechParams:
    # A pty served by a Python thread has the scheduling jitter of a loaded machine, which real
    # servos do not have: a generous margin keeps the tests independent of the load (one test
    # below runs with the defaults).
    values: dict[str, Any] = {"port": chain.port, "devices": DEVICES, "reply_margin_s": 0.2}
    return FeetechParams.model_validate(values | overrides)


@pytest.fixture
async def driver(chain: SimulatedFeetechChain) -> AsyncIterator[FeetechDriver]:
    async with FeetechDriver(params(chain)) as driver:
        yield driver


async def wait_until(
    condition: Callable[[], Awaitable[bool]], timeout_s: float = 5.0, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.005)


async def move_to(driver: FeetechDriver, goals: Mapping[str, float], tol: float = 0.01) -> None:
    """Stream the goals like a control loop until every servo is within `tol` rad."""

    async def arrived() -> bool:
        await driver.write({name: DeviceCommand(goal) for name, goal in goals.items()})
        states = await driver.read()
        return all(abs(states[name].position - goal) < tol for name, goal in goals.items())

    await wait_until(arrived, what=f"servos to reach {dict(goals)}")


def u16(data: bytes) -> int:
    return int.from_bytes(data, "little")


# -- open, enable, read, write ----------------------------------------------------------------


def test_the_registry_finds_the_driver() -> None:
    assert load_driver_class("feetech") is FeetechDriver


def test_effort_is_optional_in_device_state() -> None:
    # Drivers that measure no effort are unchanged: the field defaults to None.
    assert DeviceState(position=0.0, velocity=0.0, timestamp=0.0).effort is None


async def test_open_with_default_params_reads_positions_in_si(
    chain: SimulatedFeetechChain,
) -> None:
    clock = ManualClock(now=42.0)
    defaults = FeetechParams(port=chain.port, devices=DEVICES)  # reply deadlines untuned
    async with FeetechDriver(defaults, clock=clock) as driver:
        states = await driver.read()
    assert set(states) == {"shoulder", "elbow", "gripper"}
    for device_id, name in NAMES.items():
        state = states[name]
        assert state.position == pytest.approx(INITIAL[device_id], abs=COUNT)
        assert state.velocity == pytest.approx(0.0, abs=1e-9)
        assert state.effort == pytest.approx(0.0, abs=1e-9)
        assert (state.timestamp, state.fault, state.enabled) == (42.0, None, False)
    assert driver.lifecycle is Lifecycle.CLOSED
    # 0 rad is the middle of the turn: 2048 counts.
    assert u16(chain.read_table(1, Addr.PRESENT_POSITION, 2)) == 2048 + round(0.5 / COUNT)


async def test_open_writes_the_eeprom_only_when_a_value_differs(
    chain: SimulatedFeetechChain,
) -> None:
    assert chain.read_table(1, Addr.RETURN_DELAY_TIME, 1) == bytes([250])  # 500 µs
    async with FeetechDriver(params(chain)):
        pass
    for device_id in (1, 2, 3):
        assert chain.read_table(device_id, Addr.RETURN_DELAY_TIME, 1) == b"\x00"
        assert chain.read_table(device_id, Addr.LOCK, 1) == b"\x01"  # locked again
        with chain.device(device_id) as device:
            assert device.eeprom_writes == 1
    async with FeetechDriver(params(chain)):  # a second start-up writes nothing
        pass
    chain.power_cycle(1)  # written under Lock = 0: kept
    assert chain.read_table(1, Addr.RETURN_DELAY_TIME, 1) == b"\x00"
    for device_id in (1, 2, 3):
        with chain.device(device_id) as device:
            assert device.eeprom_writes == 1


async def test_open_sets_position_mode(chain: SimulatedFeetechChain) -> None:
    chain.write_table(2, Addr.OPERATING_MODE, b"\x01")
    async with FeetechDriver(params(chain)):
        pass
    assert chain.read_table(2, Addr.OPERATING_MODE, 1) == b"\x00"


async def test_enable_holds_the_present_position_and_writes_the_torque_limit(
    chain: SimulatedFeetechChain, driver: FeetechDriver
) -> None:
    chain.write_table(1, Addr.GOAL_POSITION, (3000).to_bytes(2, "little"))  # a stale goal
    await driver.enable()
    await asyncio.sleep(0.2)
    states = await driver.read()
    for device_id, name in NAMES.items():
        assert states[name].position == pytest.approx(INITIAL[device_id], abs=2 * COUNT)
        assert states[name].enabled
        assert chain.read_table(device_id, Addr.TORQUE_ENABLE, 1) == b"\x01"
    assert u16(chain.read_table(1, Addr.TORQUE_LIMIT, 2)) == 1000
    assert u16(chain.read_table(3, Addr.TORQUE_LIMIT, 2)) == 500  # torque_limit: 0.5


async def test_writes_move_every_servo_and_disable_lets_go(
    chain: SimulatedFeetechChain, driver: FeetechDriver
) -> None:
    with pytest.raises(DriverStateError, match="cannot write while open"):
        await driver.write({"shoulder": DeviceCommand(0.0)})
    await driver.enable()
    goals = {"shoulder": 1.5, "elbow": -2.0, "gripper": 0.0}
    await move_to(driver, goals)
    assert u16(chain.read_table(2, Addr.GOAL_POSITION, 2)) == 2048 - round(2.0 / COUNT)
    await driver.disable()
    for device_id in (1, 2, 3):
        assert chain.read_table(device_id, Addr.TORQUE_ENABLE, 1) == b"\x00"
    assert not (await driver.read())["shoulder"].enabled
    assert driver.stats.missing_replies == 0


async def test_velocity_is_reported_while_moving(driver: FeetechDriver) -> None:
    await driver.enable()
    speeds = []
    for _ in range(40):
        await driver.write({"shoulder": DeviceCommand(-2.5)})
        speeds.append((await driver.read())["shoulder"].velocity)
        await asyncio.sleep(0.005)
    assert min(speeds) < -1.0  # rad/s, toward the goal


async def test_goals_outside_the_position_limits_are_refused(
    chain: SimulatedFeetechChain, driver: FeetechDriver
) -> None:
    await driver.enable()
    with pytest.raises(UnsupportedCommandError, match=r"outside its position limits \[0, 4095\]"):
        await driver.write({"elbow": DeviceCommand(3.5)})
    with pytest.raises(UnsupportedCommandError, match="finite"):
        await driver.write({"elbow": DeviceCommand(math.nan)})


async def test_an_scs_servo_is_read_on_its_own_and_moves_with_the_others() -> None:
    # SCS0009 (id 3): big-endian words, 1024 counts per turn, no Sync Read: the driver reads it
    # with its own Read while one Sync Read serves the STS servos.
    with SimulatedFeetechChain(
        [1, 2, 3], initial_positions=INITIAL, motor_params=FAST_MOTOR, models={3: "scs0009"}
    ) as chain:
        devices = DEVICES | {"gripper": {"id": 3, "model": "scs0009"}}
        # Big-endian: 512 + round(2.0 rad x 1024 / 2π) = 838 = 0x0346.
        assert chain.read_table(3, Addr.PRESENT_POSITION, 2) == b"\x03\x46"
        async with FeetechDriver(params(chain, devices=devices)) as driver:
            states = await driver.read()
            scs_count = 2 * math.pi / 1024
            assert states["gripper"].position == pytest.approx(INITIAL[3], abs=scs_count)
            await driver.enable()
            await move_to(driver, {"shoulder": 0.3, "gripper": 1.0}, tol=scs_count)
            await driver.disable()
            assert chain.read_table(3, Addr.TORQUE_ENABLE, 1) == b"\x00"
            assert driver.stats.missing_replies == 0
            assert driver.stats.timeouts == 0
        assert chain.read_table(3, 48, 1) == b"\x01"  # the SCS Lock (48): untouched, RDT was 0


def test_an_scs_servo_has_no_torque_limit() -> None:
    device = {"id": 3, "model": "scs0009", "torque_limit": 0.5}
    with pytest.raises(ValueError, match="scs0009 has no Torque_Limit item"):
        FeetechParams.model_validate({"port": "p", "devices": {"gripper": device}})


# -- open failures --------------------------------------------------------------------------


async def test_a_missing_port_is_an_open_error_naming_it() -> None:
    driver = FeetechDriver(FeetechParams(port="/dev/nonexistent-feetech", devices=DEVICES))
    with pytest.raises(DriverOpenError, match="/dev/nonexistent-feetech"):
        await driver.open()
    assert driver.lifecycle is Lifecycle.CLOSED


async def test_silent_ids_are_named(chain: SimulatedFeetechChain) -> None:
    devices = DEVICES | {"wrist": {"id": 9}}
    driver = FeetechDriver(params(chain, devices=devices, retries=0))
    with pytest.raises(DriverTimeoutError, match=r"no answer to Ping from servo 'wrist' \(id 9\)"):
        await driver.open()
    assert driver.lifecycle is Lifecycle.CLOSED


async def test_a_wrong_model_is_refused(chain: SimulatedFeetechChain) -> None:
    devices = DEVICES | {"elbow": {"id": 2, "model": "sts3250"}}
    with pytest.raises(DriverOpenError, match=r"model number 777, configured sts3250 \(2825\)"):
        await FeetechDriver(params(chain, devices=devices)).open()


async def test_a_wrong_baud_rate_gets_no_answer(chain: SimulatedFeetechChain) -> None:
    driver = FeetechDriver(params(chain, baudrate=57600, retries=0))
    with pytest.raises(DriverTimeoutError, match="at 57600 baud: no answer to Ping"):
        await driver.open()


async def test_multi_turn_limits_are_refused(chain: SimulatedFeetechChain) -> None:
    chain.write_table(3, Addr.MAX_POSITION_LIMIT, b"\x00\x00")
    chain.write_table(3, Addr.MIN_POSITION_LIMIT, b"\x00\x00")
    with pytest.raises(DriverOpenError, match=r"'gripper' \(id 3\): position limits .* \[0, 0\]"):
        await FeetechDriver(params(chain)).open()


def test_duplicate_ids_and_bad_torque_limits_are_config_errors() -> None:
    with pytest.raises(ValueError, match="same id 1"):
        FeetechParams.model_validate({"port": "p", "devices": {"a": {"id": 1}, "b": {"id": 1}}})
    with pytest.raises(ValueError, match="less than or equal to 1"):
        FeetechParams.model_validate({"port": "p", "devices": {"a": {"id": 1, "torque_limit": 2}}})


# -- load, torque limit and device faults ---------------------------------------------------


async def test_load_is_reported_as_effort_and_the_torque_limit_clamps_it(
    chain: SimulatedFeetechChain, driver: FeetechDriver
) -> None:
    await driver.enable()
    with chain.device(1) as servo:
        servo.faults.external_load = -0.3
    with chain.device(3) as servo:
        servo.faults.external_load = 0.7  # above the gripper's torque limit of 0.5
    states = await driver.read()
    assert states["shoulder"].effort == pytest.approx(-0.3, abs=0.002)
    assert states["gripper"].effort == pytest.approx(0.5, abs=0.002)
    assert u16(chain.read_table(3, Addr.PRESENT_LOAD, 2)) == 500
    assert u16(chain.read_table(1, Addr.PRESENT_LOAD, 2)) == 0x400 | 300  # sign bit 10
    for _ in range(30):  # the gripper stalls against the load it cannot overcome
        await driver.write({"gripper": DeviceCommand(1.0)})
        gripper = (await driver.read())["gripper"]
        await asyncio.sleep(0.005)
    assert gripper.position == pytest.approx(INITIAL[3], abs=2 * COUNT)
    assert gripper.fault is None


async def test_an_overload_is_a_fault_that_drops_torque_and_clears(
    chain: SimulatedFeetechChain, driver: FeetechDriver
) -> None:
    chain.write_table(2, Addr.PROTECTION_TIME, b"\x01")  # 10 ms instead of 2 s
    await driver.enable()
    with chain.device(2) as servo:
        servo.faults.external_load = 0.9  # beyond Overload_Torque (80 %)

    async def faulted() -> bool:
        return (await driver.read())["elbow"].fault is not None

    await wait_until(faulted, what="an overload")
    elbow = (await driver.read())["elbow"]
    assert elbow.fault is not None
    assert elbow.fault.code == ErrorBit.OVERLOAD
    assert "overload; the servo switched torque off" in elbow.fault.message
    assert not elbow.enabled
    assert chain.read_table(2, Addr.TORQUE_ENABLE, 1) == b"\x00"
    # Torque Enable = 0 (here: disable) clears the overload latch (the simulation's model).
    await driver.disable()
    assert (await driver.read())["elbow"].fault is None
    await driver.clear_faults()  # nothing left to clear
    await driver.enable()  # the load is still there: it trips again
    await wait_until(faulted, what="a second overload")


async def test_overheat_refuses_enable_until_the_servo_cools_down(
    chain: SimulatedFeetechChain, driver: FeetechDriver
) -> None:
    await driver.enable()
    with chain.device(1) as servo:
        servo.faults.temperature_c = 75.0  # Max_Temperature_Limit 70 °C
    shoulder = (await driver.read())["shoulder"]
    assert shoulder.fault is not None
    assert shoulder.fault.code == ErrorBit.OVERHEAT
    assert "overheat; the servo switched torque off (75 °C" in shoulder.fault.message
    await driver.disable()
    with pytest.raises(DeviceFaultError, match=r"faults persist: servo 'shoulder' .*overheat"):
        await driver.clear_faults()
    with chain.device(1) as servo:
        servo.faults.temperature_c = None
    await driver.clear_faults()
    await driver.enable()
    assert (await driver.read())["shoulder"].fault is None


async def test_a_voltage_error_is_a_fault_but_keeps_torque(
    chain: SimulatedFeetechChain, driver: FeetechDriver
) -> None:
    await driver.enable()
    with chain.device(3) as servo:
        servo.faults.supply_v = 15.0  # Max_Voltage_Limit 14.0 V
    gripper = (await driver.read())["gripper"]
    assert gripper.fault is not None
    assert gripper.fault.code == ErrorBit.VOLTAGE
    assert gripper.fault.message == "input voltage out of range; torque stays on (25 °C, 15.0 V)"
    assert gripper.enabled  # voltage is not in the default Unloading_Condition (44)
    assert chain.read_table(3, Addr.TORQUE_ENABLE, 1) == b"\x01"


# -- communication faults -------------------------------------------------------------------


async def test_lost_replies_leave_stale_timestamps_and_are_counted(
    chain: SimulatedFeetechChain,
) -> None:
    clock = ManualClock(now=1.0)
    async with FeetechDriver(params(chain), clock=clock) as driver:
        await driver.read()
        with chain.device(2) as servo:
            servo.faults.drop_next = 1
        clock.advance(1.0)
        states = await driver.read()
        assert states["elbow"].timestamp == 1.0  # the last valid reading, not a made-up one
        assert states["shoulder"].timestamp == states["gripper"].timestamp == 2.0
        assert driver.stats.missing_replies == 1
        assert driver.stats.timeouts == 1
        assert driver.stats.per_device_errors == {"elbow": 1}
        clock.advance(1.0)
        assert (await driver.read())["elbow"].timestamp == 3.0


async def test_corrupt_replies_and_garbage_are_counted_and_the_parser_resyncs(
    chain: SimulatedFeetechChain,
) -> None:
    clock = ManualClock(now=1.0)
    async with FeetechDriver(params(chain), clock=clock) as driver:
        await driver.read()
        with chain.device(1) as servo:
            servo.faults.corrupt_next = 1
        clock.advance(1.0)
        states = await driver.read()
        assert states["shoulder"].timestamp == 1.0
        assert states["elbow"].timestamp == states["gripper"].timestamp == 2.0
        assert driver.stats.corrupt_replies == 1
        assert driver.stats.missing_replies == 1

        chain.inject_garbage(b"\x00\xff\xff\x01\xf0\xffnoise\xff")
        clock.advance(1.0)
        states = await driver.read()
        assert all(state.timestamp == 3.0 for state in states.values())
        assert states["elbow"].position == pytest.approx(INITIAL[2], abs=COUNT)
        assert driver.stats.corrupt_replies == 2
        assert driver.stats.missing_replies == 1


async def test_a_status_packet_of_another_length_is_not_believed_and_the_reply_is_taken(
    chain: SimulatedFeetechChain,
) -> None:
    clock = ManualClock(now=1.0)
    async with FeetechDriver(params(chain), clock=clock) as driver:
        await driver.read()
        # A well-framed status packet from id 2 with 2 data bytes instead of the 10 asked for,
        # ahead of the real replies: an answer to an earlier request, skipped (`Reply.stale`);
        # the servo's own reply after it is the one that counts.
        chain.inject_garbage(ft.make_status(2, 0, b"\x00\x00"))
        clock.advance(1.0)
        states = await driver.read()
        assert states["elbow"].timestamp == 2.0
        assert states["elbow"].position == pytest.approx(INITIAL[2], abs=COUNT)
        assert states["shoulder"].timestamp == 2.0
        assert driver.stats.corrupt_replies == 0
        assert driver.stats.per_device_errors == {}


async def test_an_unplugged_adapter_is_an_io_error(
    chain: SimulatedFeetechChain, driver: FeetechDriver
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


async def read_until_error(driver: FeetechDriver) -> None:
    for _ in range(3):  # the hang-up may take one transaction to show
        await driver.read()


# -- the simulated chain on the wire --------------------------------------------------------


def transact(port: serial.Serial, request: bytes, timeout_s: float = 0.5) -> list[Packet]:
    """Send `request` and collect what comes back within `timeout_s`."""
    port.reset_input_buffer()
    port.write(request)
    parser = ft.PacketParser()
    packets: list[Packet] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        packets += parser.feed(port.read(port.in_waiting or 1))
    return packets


@pytest.fixture
def port(chain: SimulatedFeetechChain) -> Iterator[serial.Serial]:
    with serial.Serial(chain.port, 1_000_000, timeout=0.01) as port:
        yield port


def test_sim_answers_broadcast_only_to_ping_and_sync_read(
    chain: SimulatedFeetechChain, port: serial.Serial
) -> None:
    assert [p.id for p in transact(port, ft.make_ping(ft.BROADCAST_ID))] == [1, 2, 3]
    assert transact(port, ft.make_write(ft.BROADCAST_ID, Addr.ACCELERATION, b"\x10")) == []
    assert chain.read_table(2, Addr.ACCELERATION, 1) == b"\x10"  # obeyed, unanswered
    replies = transact(port, ft.make_sync_read(Addr.ACCELERATION, 1, [3, 1]))
    assert replies == [Packet(3, 0, b"\x10"), Packet(1, 0, b"\x10")]  # in the requested order


def test_sim_ignores_a_bad_checksum(chain: SimulatedFeetechChain, port: serial.Serial) -> None:
    request = ft.make_write(1, Addr.ACCELERATION, b"\x20")
    assert transact(port, request[:-1] + bytes([request[-1] ^ 1])) == []
    assert chain.read_table(1, Addr.ACCELERATION, 1) == b"\x00"


def test_sim_access_rules_lock_and_status_level(
    chain: SimulatedFeetechChain, port: serial.Serial
) -> None:
    # Read-only items ignore writes (no status bit exists for it).
    assert transact(port, ft.make_write(1, Addr.PRESENT_POSITION, b"\x00\x00")) == [Packet(1, 0)]
    assert chain.read_table(1, Addr.PRESENT_POSITION, 2) != b"\x00\x00"
    # Lock = 1 (power-on): an EEPROM write takes effect but is not kept across a power cycle.
    transact(port, ft.make_write(1, Addr.MAX_TEMPERATURE_LIMIT, bytes([60])))
    assert chain.read_table(1, Addr.MAX_TEMPERATURE_LIMIT, 1) == bytes([60])
    chain.power_cycle(1)
    assert chain.read_table(1, Addr.MAX_TEMPERATURE_LIMIT, 1) == bytes([70])
    # Response Status Level 0: Read and Ping answered, Write not.
    transact(port, ft.make_write(1, Addr.RESPONSE_STATUS_LEVEL, b"\x00"))
    assert transact(port, ft.make_write(1, Addr.ACCELERATION, b"\x05")) == []
    assert transact(port, ft.make_read(1, Addr.ACCELERATION, 1)) == [Packet(1, 0, b"\x05")]


def test_sim_reg_write_waits_for_action(chain: SimulatedFeetechChain, port: serial.Serial) -> None:
    assert transact(port, ft.make_reg_write(2, Addr.ACCELERATION, b"\x07")) == [Packet(2, 0)]
    assert chain.read_table(2, Addr.ACCELERATION, 1) == b"\x00"
    assert chain.read_table(2, 64, 1) == b"\x01"  # the asynchronous-write flag
    assert transact(port, ft.make_action()) == []  # broadcast: unanswered
    assert chain.read_table(2, Addr.ACCELERATION, 1) == b"\x07"


def test_sim_status_packets_carry_the_error_bits(
    chain: SimulatedFeetechChain, port: serial.Serial
) -> None:
    with chain.device(1) as servo:
        servo.faults.sensor_error = True
    assert transact(port, ft.make_ping(1)) == [Packet(1, ErrorBit.SENSOR)]


def test_run_prints_the_pty_path_and_stops() -> None:
    out = io.StringIO()
    stop = threading.Event()
    thread = threading.Thread(target=run, args=([1, 2], 57600), kwargs={"stop": stop, "out": out})
    thread.start()
    deadline = time.monotonic() + 5.0
    while not out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    with serial.Serial(out.getvalue().strip(), 57600, timeout=0.01) as port:
        assert [p.id for p in transact(port, ft.make_ping(2))] == [2]
    stop.set()
    thread.join(timeout=5.0)
    assert not thread.is_alive()
