"""The cia402 driver end to end against simulated CiA 402 drives on python-can's `virtual` bus
(and once on `udp_multicast`, hop limit 0): start-up, enable from the measured position, ticks,
faults, heartbeat loss, the disable walks, close, an external SYNC producer. Bad input:
`test_cia402_errors.py`.

What the driver sends is checked on the wire by a spy on the same bus, decoded from CiA 301 and
CiA 402 (`tests/drivers/cia402_wire.py`), not with the driver's own code. Each test has its own
channel. Nothing asserts speed: waits poll a condition with a generous deadline, and the heartbeat
timeout is generous except where heartbeat loss is the point.
"""

from __future__ import annotations

import asyncio
import math
import re
import uuid
from pathlib import Path

import can
import pytest

from drivers import load_driver_class
from drivers.cia402.driver import CiA402Driver
from drivers.cia402.objects import State
from drivers.cia402.sim import SimulatedCiA402Bus, SimulatedDrive
from drivers.cia402.sim_drive import EDS_PATH
from drivers.errors import DeviceFaultError, DriverTimeoutError
from tests.drivers.cia402_rig import (
    COUNTS,
    PERIOD_S,
    QUANTUM,
    START,
    drive_config,
    eventually,
    params,
    simulated,
    tick,
)
from tests.drivers.cia402_wire import Spy, command_of, service_of


@pytest.fixture
def channel() -> str:
    return f"cia402-test-{uuid.uuid4().hex}"


def test_registry_finds_the_cia402_driver() -> None:
    assert load_driver_class("cia402") is CiA402Driver


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
                # the motor holds where it was: the held target is its position in whole
                # increments, so it moves half an increment at most, at the motor's own pace
                motor = sim.drives[node].motor.position
                assert motor == pytest.approx(START[node], abs=QUANTUM / 2 + 1e-12)
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
            """Every report and the elbow's motor at the goal (a report is one TPDO old)."""
            states = await tick(driver, goal)
            with sim.drives[2].lock:
                motor = sim.drives[2].motor.position
            reports = [abs(states[n].position - goal[n]) for n in goal]
            return max(*reports, abs(motor - goal["elbow"])) <= 2 * QUANTUM

        await eventually(arrived, "the move")
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
        first = await tick(driver, {})

        async def elbow_newer() -> bool:
            return (await tick(driver, {}))["elbow"].timestamp > first["elbow"].timestamp

        await eventually(elbow_newer, "a newer reading from the drive whose heartbeat goes on")
        later = await tick(driver, {})
        assert later["shoulder"].timestamp == first["shoulder"].timestamp  # its last heartbeat's
        await driver.disable()
        with pytest.raises(
            DriverTimeoutError,
            match=r"cannot enable: no heartbeat for 1\.0 s from "
            r"node 1 \(device 'shoulder'\)$",
        ):
            await driver.enable()


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


async def test_every_frame_the_driver_sends_is_a_cia301_service(channel: str) -> None:
    async with simulated(channel) as sim:
        with Spy(channel) as spy:
            driver = CiA402Driver(params(channel))
            await driver.open()
            await driver.enable()
            for k in range(1, 10):
                await tick(driver, {"shoulder": START[1] + 0.002 * k, "elbow": START[2]})
            with sim.drives[2].lock:
                sim.drives[2].inject_fault(0x4310)  # excess temperature drive
            await eventually(lambda: _faulted(driver, "elbow"), "the fault")
            await driver.disable()
            await driver.clear_faults()
            await driver.close()
            frames = [f for f in spy.drain() if spy.from_host(f)]
        services = [service_of(frame, {1, 2}) for frame in frames]
        assert services.count("NMT enter pre-operational") == 2
        assert services.count("NMT start") == 2
        commands = [command_of(cw) for cw in spy.controlword_changes(frames, 1)]
        assert commands == [
            "shutdown",
            "switch on / disable operation",
            "enable operation",
            "quick stop",  # disable by quick stop (option 6: stays in quick stop active)
            "disable voltage",  # at rest
            "shutdown",
        ]
        commands = [command_of(cw) for cw in spy.controlword_changes(frames, 2)]
        assert commands == [
            "shutdown",
            "switch on / disable operation",
            "enable operation",
            "switch on / disable operation",  # the fault came: disable walks the others only
            "disable voltage",  # bit 7 low, then
            "fault reset",  # its rising edge
        ]


async def _faulted(driver: CiA402Driver, name: str) -> bool:
    return (await tick(driver, {}))[name].fault is not None


def factor_group_eds(tmp_path: Path, gear: tuple[int, int], feed: tuple[int, int]) -> Path:
    """The shipped EDS with a factor group: 0x6091 gear ratio (motor : driving shaft revolutions)
    and 0x6092 feed constant (position units per driving shaft revolutions)."""

    def record(index: int, name: str, subs: tuple[str, str], values: tuple[int, int]) -> str:
        head = f"[{index:04X}]\nParameterName={name}\nObjectType=0x8\nSubNumber=3\n\n"
        head += (
            f"[{index:04X}sub0]\nParameterName=Highest sub-index supported\nObjectType=0x7\n"
            "DataType=0x0005\nAccessType=const\nDefaultValue=2\nPDOMapping=0\n\n"
        )
        for sub, (sub_name, value) in enumerate(zip(subs, values, strict=True), start=1):
            head += (
                f"[{index:04X}sub{sub}]\nParameterName={sub_name}\nObjectType=0x7\n"
                f"DataType=0x0007\nAccessType=rw\nDefaultValue={value}\nPDOMapping=0\n\n"
            )
        return head

    text = EDS_PATH.read_text(encoding="utf-8")
    text += "\n" + record(0x6091, "Gear ratio", ("Motor revolutions", "Shaft revolutions"), gear)
    text += record(0x6092, "Feed constant", ("Feed", "Shaft revolutions"), feed)
    path = tmp_path / "factor_group.eds"
    path.write_text(text, encoding="utf-8")
    return path


async def test_a_drive_with_a_factor_group_is_driven_in_its_position_units(
    channel: str, tmp_path: Path
) -> None:
    """Gear 5 : 2 and a feed of 36000 units per 3 shaft revolutions: 4800 position units per motor
    revolution (CiA 402-2's position factor), not the encoder's 131072 increments."""
    eds = factor_group_eds(tmp_path, gear=(5, 2), feed=(36000, 3))
    units_per_rev = 36000 / 3 * 2 / 5
    drives = [SimulatedDrive(drive_config(i), eds=eds) for i in (1, 2)]
    devices = {
        "shoulder": {"node_id": 1, "eds": str(eds)},
        "elbow": {"node_id": 2, "eds": str(eds)},
    }
    async with (
        simulated(channel, *drives) as sim,
        CiA402Driver(params(channel, devices=devices)) as driver,
    ):
        states = await driver.read()
        quantum = 2 * math.pi / units_per_rev
        assert states["shoulder"].position == pytest.approx(START[1], abs=quantum)
        with sim.drives[1].lock:  # what the drive itself reports on the wire, in its units
            raw = sim.drives[1].node.sdo[0x6064].raw
        assert raw == round(START[1] / (2 * math.pi) * units_per_rev)
        await driver.enable()
        for k in range(1, 51):
            await tick(driver, {"shoulder": START[1] + 0.3 * k / 50, "elbow": START[2]})

        async def arrived() -> bool:
            """The drive's report and its motor both at the target: the report is one TPDO old,
            so it can arrive while the motor still settles (seen on a loaded machine)."""
            states = await tick(driver, {"shoulder": START[1] + 0.3, "elbow": START[2]})
            with sim.drives[1].lock:
                motor = sim.drives[1].motor.position
            reported = states["shoulder"].position
            return (
                max(abs(reported - (START[1] + 0.3)), abs(motor - (START[1] + 0.3))) <= 2 * quantum
            )

        await eventually(arrived, "the move in position units")
