"""The cia402 driver end to end against simulated CiA 402 drives on python-can's `virtual` bus
(and once on `udp_multicast`, hop limit 0): start-up, enable from the measured position, ticks,
faults, heartbeat loss, the disable walks, close, and bad input.

What the driver sends is checked on the wire by a spy on the same bus, decoded here from CiA 301
and CiA 402 (`tests/drivers/cia402_wire.py`), not with the driver's own code. Each test has its
own channel. Nothing asserts speed: waits poll a condition with a generous deadline, and the
heartbeat timeout is generous except where heartbeat loss is the point.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import can
import pydantic
import pytest

from drivers import DeviceCommand, LoopContext, load_driver_class
from drivers.can_link import make_bus
from drivers.cia402.driver import CiA402Driver, CiA402Params
from drivers.cia402.objects import State
from drivers.cia402.sim import SimDriveConfig, SimulatedCiA402Bus, SimulatedDrive
from drivers.cia402.sim_drive import EDS_PATH
from drivers.errors import DeviceFaultError, DriverConfigError, DriverOpenError, DriverTimeoutError
from drivers.sim.motor import MotorParams
from tests.drivers.cia402_wire import Spy

START = {1: 0.7, 2: -1.2}  # initial shaft positions, rad
COUNTS = 131072  # increments per revolution (the EDS's 0x608F)
QUANTUM = 2 * math.pi / COUNTS  # rad
PERIOD_S = 0.004


@pytest.fixture
def channel() -> str:
    return f"cia402-test-{uuid.uuid4().hex}"


def drive_config(node_id: int, **motor: Any) -> SimDriveConfig:
    values: dict[str, Any] = {"max_velocity": 6.0, "initial_position": START.get(node_id, 0.0)}
    values.update(motor)
    return SimDriveConfig(node_id, MotorParams(**values), serial_number=node_id)


def params(channel: str, **overrides: Any) -> CiA402Params:
    values: dict[str, Any] = {
        "interface": "virtual",
        "channel": channel,
        "heartbeat_ms": 50,
        "heartbeat_timeout_ms": 5000,
        "sdo_timeout_s": 1.0,
        "state_timeout_s": 3.0,
        "open_timeout_s": 5.0,
        "devices": {
            "shoulder": {
                "node_id": 1,
                "identity": {"vendor_id": 0xA4D, "product_code": 0x402},
                "torque_limit": 1.5,
                "following_error_window": 0.25,
                "quick_stop_option": 6,
            },
            "elbow": {"node_id": 2, "disable": "disable_operation"},
        },
    }
    values.update(overrides)
    limits = {"shoulder": (-3.0, 3.0), "elbow": (2.5, -2.5)[::-1]}
    given = CiA402Params.model_validate(values)
    result = CiA402Driver.with_loop(given, LoopContext(PERIOD_S, limits))
    assert isinstance(result, CiA402Params)
    return result


@asynccontextmanager
async def simulated(channel: str, *drives: SimulatedDrive) -> AsyncIterator[SimulatedCiA402Bus]:
    drives = drives or (SimulatedDrive(drive_config(1)), SimulatedDrive(drive_config(2)))
    async with SimulatedCiA402Bus(make_bus("virtual", channel), drives) as sim:
        yield sim


async def eventually(
    check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 5.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(PERIOD_S)


async def tick(driver: CiA402Driver, targets: dict[str, float]) -> dict[str, Any]:
    states = await driver.read()
    await driver.write({name: DeviceCommand(t) for name, t in targets.items()})
    await asyncio.sleep(PERIOD_S)
    return dict(states)


def test_registry_finds_the_cia402_driver() -> None:
    assert load_driver_class("cia402") is CiA402Driver


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"devices": {"a": {"node_id": 1}, "b": {"node_id": 1}}}, "same node_id"),
        ({"devices": {"a": {"node_id": 128}}}, "node_id"),
        ({"heartbeat_timeout_ms": 40}, "must exceed heartbeat_ms"),
        ({"devices": {"a": {"node_id": 1, "quick_stop_option": 9}}}, "quick_stop_option"),
        ({"devices": {"a": {"node_id": 1, "disable": "off"}}}, "disable"),
        ({"devices": {"a": {"node_id": 1, "position_limits": [1, -1]}}}, "lower must be below"),
        ({"devices": {"a": {"node_id": 1, "torque_limt": 1}}}, "torque_limt"),
    ],
)
def test_params_are_validated(channel: str, change: dict[str, Any], message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        params(channel, **change)


def test_with_loop_fills_the_period_and_the_limits(channel: str) -> None:
    p = params(channel)
    assert p.loop_period_s == PERIOD_S
    assert p.devices["shoulder"].position_limits == (-3.0, 3.0)
    assert p.devices["elbow"].position_limits == (-2.5, 2.5)
    with pytest.raises(DriverConfigError, match=r"value × 10\^index"):
        CiA402Driver.with_loop(p, LoopContext(1 / 3, {}))


async def test_start_up_configures_every_drive_on_the_wire(channel: str) -> None:
    async with simulated(channel) as sim:
        with Spy(channel) as spy:
            async with CiA402Driver(params(channel)):
                frames = spy.drain()
            for node in (1, 2):
                log = spy.node_log(frames, node)
                assert log[0] == ("upload", 0x1018, 1)  # identity first
                assert log.index(("nmt", 0x80)) < log.index(("download", 0x6060, 0, 8))
                assert log.index(("nmt", 0x01)) > max(
                    i for i, entry in enumerate(log) if entry[0] == "download"
                )
                writes = spy.downloads(frames, node)
                assert writes[(0x6060, 0)] == 8  # cyclic synchronous position
                assert writes[(0x60C2, 1)] == 4  # 4 × 10^-3 s
                assert writes[(0x60C2, 2)] == 0xFD
                assert writes[(0x605A, 0)] == (6 if node == 1 else 2)
                assert writes[(0x1017, 0)] == 50
                assert writes[(0x1A00, 1)] == 0x60410010
                assert writes[(0x1A00, 2)] == 0x60640020
                assert writes[(0x1A00, 3)] == 0x603F0010
                assert writes[(0x1A01, 1)] == 0x606C0020
                assert writes[(0x1A01, 2)] == 0x60770010
                assert writes[(0x1600, 1)] == 0x60400010
                assert writes[(0x1600, 2)] == 0x607A0020
                assert writes[(0x1601, 1)] == 0x60B10020
                assert writes[(0x1800, 2)] == 1  # synchronous
                assert writes[(0x1400, 2)] == 1
                assert writes[(0x1800, 1)] == 0x180 + node  # valid again after the mapping
            shoulder = spy.downloads(frames, 1)
            assert shoulder[(0x6065, 0)] == round(0.25 * COUNTS / (2 * math.pi))
            assert shoulder[(0x607D, 1)] == round(-3.0 * COUNTS / (2 * math.pi)) & 0xFFFFFFFF
            assert shoulder[(0x607D, 2)] == round(3.0 * COUNTS / (2 * math.pi))
            assert shoulder[(0x6072, 0)] == 750  # 1.5 N·m of the rated 2 N·m
            assert (0x6072, 0) not in spy.downloads(frames, 2)  # no torque_limit: the drive's
            with sim.drives[1].lock:
                assert sim.drives[1].value(0x6060) == 8


async def test_enable_starts_from_the_measured_position(channel: str) -> None:
    async with simulated(channel) as sim, CiA402Driver(params(channel)) as driver:
        with Spy(channel) as spy:
            await driver.enable()
            frames = spy.drain()
        for node in (1, 2):
            held = round(START[node] * COUNTS / (2 * math.pi))
            assert spy.controlword_changes(frames, node) == [0x0006, 0x0007, 0x000F]
            log = spy.node_log(frames, node)
            written = log.index(("download", 0x607A, 0, held & 0xFFFFFFFF))
            enabling = log.index(("rpdo", 0x000F, held))
            assert written < enabling  # 0x607A = position actual before enable operation
            assert all(t == held for _, t in spy.rpdos(frames, node))
            with sim.drives[node].lock:
                assert sim.drives[node].state is State.OPERATION_ENABLED
                assert sim.drives[node].motor.position == pytest.approx(START[node], abs=1e-6)
        states = await driver.read()
        assert all(s.enabled for s in states.values())


@pytest.mark.parametrize(
    ("velocity_offset", "pdos"), [(True, [0x201, 0x202, 0x301, 0x302]), (False, [0x201, 0x202])]
)
async def test_every_tick_is_the_rpdos_of_every_node_then_one_sync(
    channel: str, velocity_offset: bool, pdos: list[int]
) -> None:
    devices = {
        name: {"node_id": node, "velocity_offset": velocity_offset}
        for name, node in (("shoulder", 1), ("elbow", 2))
    }
    async with simulated(channel), CiA402Driver(params(channel, devices=devices)) as driver:
        await driver.enable()
        with Spy(channel) as spy:
            for _ in range(20):
                await tick(driver, {"shoulder": START[1]})  # at rest, one device commanded
            frames = spy.drain()
        cycles = spy.cycles(frames)
        assert len(cycles) == 20
        for cycle in cycles:  # the RPDOs of both nodes, then the SYNC that applies them
            assert sorted(cycle) == pdos


async def test_moves_follow_the_targets(channel: str) -> None:
    async with simulated(channel) as sim, CiA402Driver(params(channel)) as driver:
        await driver.enable()
        goal = {"shoulder": 1.2, "elbow": -0.8}
        start = {"shoulder": START[1], "elbow": START[2]}
        steps = 100  # ≤ 0.005 rad per step: well inside the 0.25 rad following error window
        for k in range(1, steps + 1):
            await tick(driver, {n: start[n] + (goal[n] - start[n]) * k / steps for n in goal})

        async def arrived() -> bool:
            states = await tick(driver, goal)
            return all(abs(states[n].position - goal[n]) <= 2 * QUANTUM for n in goal)

        await eventually(arrived, "the move")
        with sim.drives[2].lock:
            assert sim.drives[2].motor.position == pytest.approx(-0.8, abs=2 * QUANTUM)
        states = await driver.read()
        assert states["shoulder"].fault is None
        assert states["shoulder"].effort is not None


async def test_an_injected_over_current_is_a_device_fault_and_reset_clears_it(channel: str) -> None:
    async with simulated(channel) as sim, CiA402Driver(params(channel)) as driver:
        await driver.enable()
        with sim.drives[1].lock:
            sim.drives[1].inject_fault(0x2310)

        async def faulted() -> bool:
            states = await tick(driver, {"shoulder": START[1], "elbow": START[2]})
            return states["shoulder"].fault is not None

        await eventually(faulted, "the fault")
        state = (await driver.read())["shoulder"]
        assert state.fault is not None
        assert not state.enabled
        assert state.fault.code == 0x2310
        assert state.fault.message == "node 1 (device 'shoulder'): 0x2310 continuous over-current"
        await driver.disable()  # the faulted drive is left as it is, the other walks down
        with pytest.raises(DeviceFaultError, match="0x2310 continuous over-current"):
            await driver.enable()
        with Spy(channel) as spy:
            await driver.clear_faults()
            frames = spy.drain()
        assert spy.controlword_changes(frames, 1)[-2:] == [0x0000, 0x0080]  # the rising edge
        assert spy.controlword_changes(frames, 2) == [0x0006]  # not faulted: unchanged
        assert (await driver.read())["shoulder"].fault is None
        await driver.enable()
        assert all(s.enabled for s in (await driver.read()).values())


async def test_a_following_error_trips_the_drive(channel: str) -> None:
    async with simulated(channel) as sim, CiA402Driver(params(channel)) as driver:
        await driver.enable()
        with sim.drives[1].lock:
            sim.drives[1].motor.faults.stuck = True

        async def tripped() -> bool:
            states = await tick(driver, {"shoulder": START[1] + 0.5})
            return states["shoulder"].fault is not None

        await eventually(tripped, "the following error")
        fault = (await driver.read())["shoulder"].fault
        assert fault is not None
        assert fault.code == 0x8611
        assert fault.message.endswith("0x8611 following error")


async def test_a_lost_heartbeat_makes_the_feedback_stale(channel: str) -> None:
    # 50 ms heartbeats, lost after 1 s without one (a loaded machine delays a healthy one far less).
    p = params(channel, heartbeat_timeout_ms=1000)
    async with simulated(channel) as sim, CiA402Driver(p) as driver:
        await driver.enable()
        with sim.drives[1].lock:
            sim.drives[1].lose_heartbeat()

        async def lost() -> bool:
            await tick(driver, {})
            return driver.stats.timeouts > 0

        await eventually(lost, "the lost heartbeat")
        assert re.fullmatch(
            r"node 1 \(device 'shoulder'\): no heartbeat for \d+\.\d{3} s",
            driver.stats.last_error or "",
        )
        first = (await tick(driver, {}))["shoulder"].timestamp
        await asyncio.sleep(0.05)
        later = await tick(driver, {})
        assert later["shoulder"].timestamp == first  # stale: the time of the last heartbeat
        assert later["elbow"].timestamp > first


async def test_disable_by_quick_stop_switches_off_only_at_rest(channel: str) -> None:
    async with simulated(channel) as sim, CiA402Driver(params(channel)) as driver:
        await driver.enable()
        for k in range(1, 60):  # moving at 1.25 rad/s when disable comes
            await tick(driver, {"shoulder": START[1] + 0.005 * k})
        with Spy(channel) as spy:
            await driver.disable()
            frames = spy.drain()
        assert spy.controlword_changes(frames, 1) == [0x0002, 0x0000, 0x0006]
        assert spy.controlword_changes(frames, 2) == [0x0007, 0x0006]  # disable operation
        velocity = spy.velocity_before_controlword(frames, 1, 0x0000)
        assert abs(velocity) * 2 * math.pi / COUNTS < 0.01  # at rest before disable voltage
        for node in (1, 2):
            with sim.drives[node].lock:
                assert sim.drives[node].state is State.READY_TO_SWITCH_ON


async def test_close_walks_every_drive_down_and_sends_nothing_after(channel: str) -> None:
    async with simulated(channel) as sim:
        with Spy(channel) as spy:
            driver = CiA402Driver(params(channel))
            await driver.open()
            await driver.enable()
            await tick(driver, {"shoulder": START[1]})
            await driver.close()
            frames = spy.drain()
            await asyncio.sleep(0.2)
            after = [f for f in spy.drain() if spy.from_host(f)]
        assert after == []
        assert spy.controlword_changes(frames, 1)[-3:] == [0x0002, 0x0000, 0x0006]
        for node in (1, 2):
            with sim.drives[node].lock:
                assert sim.drives[node].state is State.READY_TO_SWITCH_ON


async def test_malformed_frames_are_counted(channel: str) -> None:
    async with simulated(channel), CiA402Driver(params(channel)) as driver:
        with can.Bus(interface="virtual", channel=channel) as raw:
            raw.send(can.Message(arbitration_id=0x181, data=b"\x01\x02\x03", is_extended_id=False))
            raw.send(can.Message(arbitration_id=0x701, data=b"", is_extended_id=False))

            async def counted() -> bool:
                await driver.read()
                return driver.stats.corrupt_replies >= 2

            await eventually(counted, "the malformed frames counted")
        assert driver.stats.per_device_errors["shoulder"] >= 2
        states = await driver.read()
        assert states["shoulder"].position == pytest.approx(START[1], abs=QUANTUM)


def _eds_without(tmp_path: Path, name: str, edit: Callable[[str], str]) -> Path:
    path = tmp_path / name
    path.write_text(edit(EDS_PATH.read_text()))
    return path


def _drop_object(index: str) -> Callable[[str], str]:
    return lambda text: re.sub(rf"\[{index}(sub\w+)?\]\n(\w.*\n)*\n", "", text)


@pytest.mark.parametrize(
    ("eds_edit", "message"),
    [
        (
            _drop_object("60C2"),
            "node 2 (device 'elbow'): 60C2:01 Interpolation time period value: SDO abort "
            "0x06020000 (object does not exist in the object dictionary)",
        ),
        (
            # the drive says its velocity offset cannot be mapped, which the driver's EDS allows
            lambda text: re.sub(r"(\[60B1\]\n(?:\w.*\n)*?PDOMapping=)1", r"\g<1>0", text),
            "node 2 (device 'elbow'): 1601:01 Mapped object 1: SDO abort 0x06040041 (object "
            "cannot be mapped to the PDO)",
        ),
    ],
)
async def test_a_drive_refusing_an_object_fails_open_naming_it(
    channel: str, tmp_path: Path, eds_edit: Callable[[str], str], message: str
) -> None:
    odd = SimulatedDrive(drive_config(2), eds=_eds_without(tmp_path, "odd.eds", eds_edit))
    async with simulated(channel, SimulatedDrive(drive_config(1)), odd) as sim:
        with pytest.raises(DriverOpenError) as error:
            await CiA402Driver(params(channel)).open()
        assert message in str(error.value)
        assert "\n" not in str(error.value)
        assert all(d.state is not State.OPERATION_ENABLED for d in sim.drives.values())


async def test_another_identity_fails_open(channel: str) -> None:
    other = SimulatedDrive(SimDriveConfig(1, vendor_id=0x9A, product_code=0x7))
    async with simulated(channel, other, SimulatedDrive(drive_config(2))):
        with pytest.raises(
            DriverOpenError,
            match=r"node 1 \(device 'shoulder'\): 1018:01/02 "
            r"identity: vendor 0x0000009A product 0x00000007, expected vendor "
            r"0x00000A4D product 0x00000402",
        ):
            await CiA402Driver(params(channel)).open()


async def test_a_drive_stuck_in_a_state_fails_enable_and_nothing_is_enabled(channel: str) -> None:
    async with simulated(channel) as sim, CiA402Driver(params(channel, state_timeout_s=0.3)) as d:
        with sim.drives[2].lock:
            sim.drives[2].state = State.NOT_READY_TO_SWITCH_ON  # it never gets ready
        with pytest.raises(DriverTimeoutError) as error:
            await d.enable()
        assert (
            "node 2 (device 'elbow'): still not ready to switch on after 0.3 s of controlword "
            "0x0006, expected ready to switch on" in str(error.value)
        )
        for drive in sim.drives.values():
            with drive.lock:
                assert drive.state is not State.OPERATION_ENABLED
        states = await d.read()
        assert not any(s.enabled for s in states.values())


async def test_over_udp_multicast_own_frames_are_ignored() -> None:
    group = f"239.74.{uuid.uuid4().int % 200 + 20}.{uuid.uuid4().int % 250 + 1}"
    configs = [drive_config(1), drive_config(2)]
    p = params(group).model_copy(update={"interface": "udp_multicast", "hop_limit": 0})
    async with SimulatedCiA402Bus.create("udp_multicast", group, configs), CiA402Driver(p) as d:
        await d.enable()
        for k in range(1, 30):
            await tick(d, {"shoulder": START[1] + 0.002 * k, "elbow": START[2]})
        await d.disable()
        assert d.stats.corrupt_replies == 0


async def test_an_external_sync_producer_drives_the_cycles(channel: str) -> None:
    p = params(channel, sync="external")
    async with simulated(channel) as sim:
        with Spy(channel) as spy:
            sync = can.Message(arbitration_id=0x080, data=b"", is_extended_id=False)
            producer = spy.bus.send_periodic(sync, PERIOD_S)  # its frames never reach the spy
            try:
                async with CiA402Driver(p) as driver:
                    await driver.enable()
                    for k in range(1, 30):
                        await tick(driver, {"shoulder": START[1] + 0.002 * k})
                    frames = spy.drain()
                    assert not [
                        f for f in frames if f.arbitration_id == 0x080
                    ]  # no SYNC of its own
                    assert spy.controlword_changes(frames, 1)[-1] == 0x000F
                    with sim.drives[1].lock:
                        assert sim.drives[1].state is State.OPERATION_ENABLED
            finally:
                producer.stop()


def _fixed_mapping_eds(tmp_path: Path, status_objects: list[int]) -> Path:
    """The shipped EDS with read-only PDO mappings: TPDO1 `status_objects`, TPDO2 velocity and
    torque actual, RPDO1 controlword + target, RPDO2 velocity offset (entries as in 0x1A00)."""
    mappings = {
        "1A00": status_objects,
        "1A01": [0x606C0020, 0x60770010],
        "1600": [0x60400010, 0x607A0020],
        "1601": [0x60B10020],
    }
    text = EDS_PATH.read_text()
    for index, entries in mappings.items():
        values = {0: len(entries)} | dict(enumerate(entries, start=1))
        for sub in range(9):
            section = rf"\[{index}sub{sub:X}\]\n"
            text = re.sub(rf"({section}(?:\w.*\n)*?AccessType=)rw", r"\g<1>ro", text)
            value = f"0x{values.get(sub, 0):08X}" if sub else str(values[0])
            text = re.sub(rf"({section}(?:\w.*\n)*?DefaultValue=).*", rf"\g<1>{value}", text)
    path = tmp_path / "fixed.eds"
    path.write_text(text)
    return path


async def test_a_fixed_mapping_from_the_eds_is_read_and_used(channel: str, tmp_path: Path) -> None:
    eds = _fixed_mapping_eds(tmp_path, [0x60410010, 0x60640020, 0x603F0010])
    drives = [SimulatedDrive(drive_config(n), eds=eds) for n in (1, 2)]
    devices = {
        "shoulder": {"node_id": 1, "eds": str(eds)},
        "elbow": {"node_id": 2, "eds": str(eds)},
    }
    async with simulated(channel, *drives):
        with Spy(channel) as spy:
            async with CiA402Driver(params(channel, devices=devices)) as driver:
                await driver.enable()
                for k in range(1, 20):
                    await tick(driver, {"shoulder": START[1] + 0.002 * k})
                states = await driver.read()
            frames = spy.drain()
        mapping_writes = [k for k in spy.downloads(frames, 1) if 0x1600 <= k[0] < 0x1C00]
        assert mapping_writes == []  # read, not written
        assert states["shoulder"].position == pytest.approx(START[1] + 0.038, abs=0.01)


async def test_a_fixed_mapping_without_position_actual_fails_open(
    channel: str, tmp_path: Path
) -> None:
    eds = _fixed_mapping_eds(tmp_path, [0x60410010, 0x603F0010])
    drives = [SimulatedDrive(drive_config(n), eds=eds) for n in (1, 2)]
    devices = {"shoulder": {"node_id": 1, "eds": str(eds)}}
    async with simulated(channel, *drives):
        with pytest.raises(
            DriverOpenError,
            match=r"node 1 \(device 'shoulder'\): the drive's fixed TPDO mapping lacks 6064:00",
        ):
            await CiA402Driver(params(channel, devices=devices)).open()
