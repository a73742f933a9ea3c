"""The MIT driver end to end against the simulated actuators on python-can's `virtual` bus:
open, enable, read, move, disable and every fault path.

Each test uses its own channel name. Nothing asserts speed: waits poll for a condition with a
generous deadline, and the reply margin is generous so that a loaded machine loses no reply.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pydantic
import pytest

from drivers import DeviceCommand, load_driver_class
from drivers.errors import (
    DeviceFaultError,
    DriverOpenError,
    DriverStateError,
    DriverTimeoutError,
    UnsupportedCommandError,
)
from drivers.mit import protocol as proto
from drivers.mit.driver import FRAME_BITS, MitDriver, MitParams
from drivers.mit.models import lookup
from drivers.mit.sim import Corruption, SimActuatorConfig, SimulatedMitBus
from drivers.sim.motor import MotorParams

START = {1: 0.7, 2: -1.2}  # initial shaft positions, rad
P_STEP = 25.0 / 65535  # DM4310 position quantum, rad
V_STEP = 60.0 / 4095  # DM4310 velocity quantum, rad/s


@pytest.fixture
def channel() -> str:
    return f"mit-test-{uuid.uuid4().hex}"


def actuator(slave_id: int, model: str = "DM4310", **overrides: Any) -> SimActuatorConfig:
    values: dict[str, Any] = {
        "slave_id": slave_id,
        "master_id": slave_id + 0x10,
        "model": lookup(model),
        "motor": MotorParams(max_velocity=20.0, initial_position=START.get(slave_id, 0.0)),
    }
    values.update(overrides)
    return SimActuatorConfig(**values)


def params(channel: str, model: str = "DM4310", **overrides: Any) -> MitParams:
    values: dict[str, Any] = {
        "interface": "virtual",
        "channel": channel,
        "devices": {
            "shoulder": {"id": 1, "model": model, "kp": 30.0, "kd": 1.0},
            "elbow": {"id": 2, "model": model, "kp": 30.0, "kd": 1.0, "direction": -1},
        },
        "reply_margin_s": 0.05,
        "open_timeout_s": 2.0,
    }
    values.update(overrides)
    return MitParams.model_validate(values)


@asynccontextmanager
async def simulated(channel: str, *configs: SimActuatorConfig) -> AsyncIterator[SimulatedMitBus]:
    configs = configs or (actuator(1), actuator(2))
    async with SimulatedMitBus.create("virtual", channel, configs) as sim:
        yield sim


async def eventually(
    check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 5.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def track(driver: MitDriver, targets: dict[str, float], what: str) -> None:
    """Run read → write cycles toward `targets` until every device rests within 0.01 rad."""

    async def arrived() -> bool:
        states = await driver.read()
        await driver.write({name: DeviceCommand(t) for name, t in targets.items()})
        return all(
            abs(states[n].position - t) < 0.01 and abs(states[n].velocity) < 2 * V_STEP
            for n, t in targets.items()
        )

    await eventually(arrived, what)


def test_registry_finds_the_mit_driver() -> None:
    assert load_driver_class("mit") is MitDriver


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ({"a": {"id": 1, "model": "DM4310"}, "b": {"id": 1, "model": "DM4310"}}, "same id"),
        (
            {"a": {"id": 1, "model": "DM4310"}, "b": {"id": 0x11, "model": "DM4310"}},
            "device 'a': master_id 17 is the id of device 'b'",
        ),
        (
            {
                "a": {"id": 1, "model": "AK80-9", "master_id": 0},
                "b": {"id": 2, "model": "AK80-9", "master_id": 0},
            },
            "master_id 0 shared, Damiao only",
        ),
        (
            {
                "a": {"id": 1, "model": "DM4310", "master_id": 0},
                "b": {"id": 0x21, "model": "DM4310", "master_id": 0},
            },
            "must differ in the low 4 bits",
        ),
        ({"a": {"id": 1, "model": "DM9999"}}, "unknown model 'DM9999'"),
        ({"a": {"id": 1, "model": "DM4310", "kp": 501}}, "kp"),
        ({"a": {"id": 1, "model": "DM4310", "kd": 6}}, "kd"),
        ({"a": {"id": 1, "model": "DM4310", "torque_limit": 12}}, "exceeds t_max 10.0"),
        ({"a": {"id": 1, "model": "DM4310", "master_id": 1}}, "equals id"),
    ],
)
def test_params_are_validated(channel: str, devices: dict[str, Any], message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        params(channel, devices=devices)


def test_the_reply_deadline_is_the_wire_time_plus_the_margin(channel: str) -> None:
    devices = {f"j{i}": {"id": i, "model": "DM4310"} for i in range(1, 7)}
    driver = MitDriver(params(channel, devices=devices, bitrate=1_000_000, reply_margin_s=0.002))
    # 6 commands + 6 replies of 135 bits at 1 Mbit/s
    assert driver.wire_time_s == pytest.approx(12 * FRAME_BITS / 1e6, abs=1e-12)
    assert driver.reply_deadline_s == pytest.approx(0.00162 + 0.002, abs=1e-12)


async def test_motors_may_share_a_master_id_as_damiao_ships_them(channel: str) -> None:
    configs = (actuator(1, master_id=0), actuator(2, master_id=0))
    devices = {
        "shoulder": {"id": 1, "master_id": 0, "model": "DM4310"},
        "elbow": {"id": 2, "master_id": 0, "model": "DM4310"},
    }
    async with simulated(channel, *configs), MitDriver(params(channel, devices=devices)) as d:
        states = await d.read()
        assert states["shoulder"].position == pytest.approx(START[1], abs=P_STEP)
        assert states["elbow"].position == pytest.approx(START[2], abs=P_STEP)
        await d.enable()
        await track(d, {"shoulder": 0.1, "elbow": -0.3}, "the move")
        assert d.stats.corrupt_replies == 0


async def test_open_reads_positions_in_si_units(channel: str) -> None:
    async with simulated(channel), MitDriver(params(channel)) as driver:
        states = await driver.read()
        assert set(states) == {"shoulder", "elbow"}
        assert states["shoulder"].position == pytest.approx(START[1], abs=P_STEP)
        assert states["elbow"].position == pytest.approx(-START[2], abs=P_STEP)  # direction -1
        for state in states.values():
            assert state.velocity == pytest.approx(0.0, abs=V_STEP)
            assert state.effort == pytest.approx(0.0, abs=20.0 / 4095)
            assert state.fault is None
            assert not state.enabled
        with pytest.raises(DriverStateError):
            await driver.write({"shoulder": DeviceCommand(0.0)})


async def test_enable_holds_then_moves_then_disables(channel: str) -> None:
    async with simulated(channel) as sim, MitDriver(params(channel)) as driver:
        await driver.enable()
        states = await driver.read()
        assert all(s.enabled for s in states.values())
        assert states["shoulder"].position == pytest.approx(START[1], abs=0.005)  # no jump
        assert sim.actuator(1).commands_applied >= 1  # the hold command
        await track(driver, {"shoulder": 0.2, "elbow": 0.5}, "the move")
        with sim.lock:
            assert sim.actuator(2).motor.position == pytest.approx(-0.5, abs=0.01)
        await driver.disable()
        states = await driver.read()
        assert not any(s.enabled for s in states.values())
        assert not sim.actuator(1).motor.enabled


async def test_effort_is_the_reply_torque_with_the_device_sign(channel: str) -> None:
    async with simulated(channel) as sim, MitDriver(params(channel)) as driver:
        await driver.enable()
        with sim.lock:
            sim.actuator(2).motor.faults.stuck = True  # it pushes without moving
        target = -START[2] + 0.1  # elbow (direction -1) 0.1 rad further in armd's sense

        async def pushing() -> bool:
            states = await driver.read()
            await driver.write({"elbow": DeviceCommand(target)})
            effort = states["elbow"].effort
            return effort is not None and effort > 2.0

        await eventually(pushing, "a positive effort")  # kp 30 · 0.1 rad = 3 N·m
        with sim.lock:
            assert sim.actuator(2).motor.torque == pytest.approx(-3.0, abs=0.1)


async def test_the_torque_limit_bounds_the_spring(channel: str) -> None:
    devices = {"shoulder": {"id": 1, "model": "DM4310", "kp": 30.0, "kd": 1.0, "torque_limit": 1}}
    async with simulated(channel) as sim, MitDriver(params(channel, devices=devices)) as driver:
        await driver.enable()
        with sim.lock:
            sim.actuator(1).motor.faults.stuck = True
        for _ in range(20):
            await driver.read()
            await driver.write({"shoulder": DeviceCommand(START[1] + 1.0)})  # 30 N·m unlimited
        await driver.read()
        with sim.lock:
            torque = sim.actuator(1).motor.torque
        # 1 N·m, give or take a quantum of position (kp · 25/65535) and of velocity (kd · V_STEP)
        assert 0.9 <= torque <= 1.0 + 30 * P_STEP + 1.0 * V_STEP


async def test_a_position_beyond_p_max_is_refused(channel: str) -> None:
    async with simulated(channel) as sim, MitDriver(params(channel)) as driver:
        await driver.enable()
        await driver.read()  # the replies to the hold command are in
        applied = sim.actuator(1).commands_applied
        with pytest.raises(UnsupportedCommandError, match=r"outside ±12.5 rad \(p_max\)"):
            await driver.write({"shoulder": DeviceCommand(13.0)})
        await asyncio.sleep(0.02)
        assert sim.actuator(1).commands_applied == applied


async def test_a_motor_in_the_wrong_mode_is_refused_at_open(channel: str) -> None:
    wrong = actuator(2, control_mode=proto.ControlMode.POS_VEL)
    async with simulated(channel, actuator(1), wrong):
        driver = MitDriver(params(channel))
        with pytest.raises(DriverOpenError, match=r"'elbow'.*control mode POS_VEL.*not MIT"):
            await driver.open()
        assert driver.lifecycle.value == "closed"


async def test_ranges_that_differ_from_the_motors_registers_are_refused(channel: str) -> None:
    devices = {"shoulder": {"id": 1, "model": "DM4310", "v_max": 45.0}}
    async with simulated(channel):
        driver = MitDriver(params(channel, devices=devices))
        with pytest.raises(DriverOpenError, match=r"v_max 45.0 but register VMAX = 30"):
            await driver.open()
        # check_ranges off: the configured ranges are believed
        async with MitDriver(params(channel, devices=devices, check_ranges=False)) as driver:
            assert "shoulder" in await driver.read()


async def test_open_sets_the_can_timeout_or_warns_without_one(
    channel: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with simulated(channel) as sim:
        async with MitDriver(params(channel)):
            pass
        assert "no CAN timeout (register TIMEOUT = 0) on device 'shoulder'" in caplog.text
        caplog.clear()
        async with MitDriver(params(channel, can_timeout_s=0.05)):
            assert sim.actuator(1).registers[proto.Register.TIMEOUT] == 1000  # 50 µs units
            assert sim.actuator(2).motor.params.watchdog_s == pytest.approx(0.05, abs=1e-12)
        assert "no CAN timeout" not in caplog.text


async def test_a_silent_motor_fails_open_naming_it(channel: str) -> None:
    async with simulated(channel) as sim:
        sim.actuator(2).faults.silent = True
        driver = MitDriver(params(channel, open_timeout_s=0.2))
        with pytest.raises(DriverTimeoutError, match=r"'elbow' \(id 2, master id 18\)"):
            await driver.open()


@pytest.mark.parametrize(
    ("state", "words"),
    [
        (proto.DamiaoState.OVER_VOLTAGE, "over-voltage"),
        (proto.DamiaoState.UNDER_VOLTAGE, "under-voltage"),
        (proto.DamiaoState.OVER_CURRENT, "over-current"),
        (proto.DamiaoState.MOS_OVER_TEMPERATURE, "MOSFET over-temperature (MOSFET 120 °C"),
        (proto.DamiaoState.ROTOR_OVER_TEMPERATURE, "rotor over-temperature (MOSFET 30 °C"),
    ],
)
async def test_a_device_fault_is_reported_refuses_enable_and_clears(
    channel: str, state: proto.DamiaoState, words: str
) -> None:
    async with simulated(channel) as sim, MitDriver(params(channel)) as driver:
        await driver.enable()
        with sim.lock:
            sim.actuator(1).raise_error(state)

        async def faulted() -> bool:
            states = await driver.read()
            await driver.write({"shoulder": DeviceCommand(START[1])})
            return states["shoulder"].fault is not None

        await eventually(faulted, "the fault")
        fault = (await driver.read())["shoulder"].fault
        assert fault is not None
        assert fault.code == state
        assert words in fault.message
        assert not sim.actuator(1).motor.enabled  # torque dropped
        await driver.disable()
        with pytest.raises(DeviceFaultError, match=words.split(" (", maxsplit=1)[0]):
            await driver.enable()
        await driver.clear_faults()
        assert (await driver.read())["shoulder"].fault is None
        await driver.enable()
        assert sim.actuator(1).motor.enabled


async def test_a_fault_whose_cause_persists_is_not_cleared(
    channel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with simulated(channel) as sim, MitDriver(params(channel)) as driver:
        sim.actuator(1).raise_error(proto.DamiaoState.UNDER_VOLTAGE)
        monkeypatch.setattr(sim.actuator(1).motor, "clear_faults", lambda: None)  # supply low
        with pytest.raises(DeviceFaultError, match=r"persist.*'shoulder'.*under-voltage"):
            await driver.clear_faults()


async def test_lost_communication_after_the_can_timeout(channel: str) -> None:
    configs = (actuator(1, timeout_s=0.05), actuator(2))
    async with simulated(channel, *configs) as sim, MitDriver(params(channel)) as driver:
        await driver.enable()
        await asyncio.sleep(0.2)  # the loop stopped writing

        async def lost() -> bool:
            fault = (await driver.read())["shoulder"].fault
            return fault is not None and "lost communication" in fault.message

        await driver.disable()
        await eventually(lost, "lost communication")
        assert not sim.actuator(1).motor.enabled
        await driver.clear_faults()
        assert (await driver.read())["shoulder"].fault is None


async def test_lost_replies_keep_the_old_reading_and_are_counted(channel: str) -> None:
    async with simulated(channel) as sim, MitDriver(params(channel, reply_margin_s=0.01)) as d:
        await d.enable()
        before = (await d.read())["shoulder"]
        sim.actuator(1).faults.drop_replies = True
        for _ in range(3):
            await d.write({"shoulder": DeviceCommand(START[1]), "elbow": DeviceCommand(-START[2])})
            states = await d.read()
        assert states["shoulder"].timestamp == before.timestamp  # not made up
        assert states["elbow"].timestamp > before.timestamp
        assert d.stats.missing_replies == 3
        assert d.stats.per_device_errors == {"shoulder": 3}
        sim.actuator(1).faults.drop_replies = False
        await d.write({"shoulder": DeviceCommand(START[1])})
        assert (await d.read())["shoulder"].timestamp > before.timestamp


@pytest.mark.parametrize("corruption", [Corruption.SHORT, Corruption.WRONG_ID])
async def test_corrupt_replies_are_counted_and_never_believed(
    channel: str, corruption: Corruption
) -> None:
    async with simulated(channel) as sim, MitDriver(params(channel, reply_margin_s=0.01)) as d:
        before = (await d.read())["shoulder"]
        sim.actuator(1).faults.corrupt_replies = corruption
        states = await d.read()
        assert states["shoulder"] == before
        assert d.stats.missing_replies == 1

        async def counted() -> bool:
            return d.stats.corrupt_replies >= 1

        await eventually(counted, "the corrupt reply counted")


async def test_a_disconnected_bus_fails_disable_but_close_never_raises(channel: str) -> None:
    async with simulated(channel) as sim:
        driver = MitDriver(params(channel, open_timeout_s=0.2))
        await driver.open()
        await driver.enable()
        for a in sim.actuators.values():
            a.faults.silent = True
        with pytest.raises(DriverTimeoutError, match="no reply reporting disabled"):
            await driver.disable()
        await driver.close()
        await driver.close()  # idempotent


async def test_cubemars_actuators_answer_the_same_driver(channel: str) -> None:
    configs = (actuator(1, "AK80-64"), actuator(2, "AK80-64"))
    async with (
        simulated(channel, *configs) as sim,
        MitDriver(params(channel, model="AK80-64")) as driver,
    ):
        states = await driver.read()
        assert states["shoulder"].position == pytest.approx(START[1], abs=P_STEP)
        assert not states["shoulder"].enabled
        await driver.enable()
        await track(driver, {"shoulder": 1.0, "elbow": 0.0}, "the move")
        assert (await driver.read())["shoulder"].enabled
        with sim.lock:
            sim.actuator(1).raise_error(proto.DamiaoState.OVER_CURRENT)
        await driver.write({"shoulder": DeviceCommand(1.0)})
        fault = (await driver.read())["shoulder"].fault
        assert fault is not None
        assert fault.message == "CubeMars error 2: over-current"
        await driver.disable()
        with pytest.raises(DeviceFaultError, match="no clear-error frame"):
            await driver.clear_faults()
