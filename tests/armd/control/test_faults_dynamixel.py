"""Fault injection through the real Dynamixel driver: the control loop on `ArmHardware` and a
`DynamixelDriver` on the pty of a `SimulatedDynamixelChain`, reached through a stable symlink as
``/dev/serial/by-id/...`` would be (tests/armd/hw_rigs.py). Everything runs in real time; waits have
generous deadlines and nothing asserts speed. Every test also checks that no command left the
position, velocity or acceleration limits.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from armd.link.messages import GoalStatus, Mode, StatusUpdate
from armd.link.protocol import Reset
from drivers.dynamixel.driver import FAULT_BUS_WATCHDOG
from drivers.dynamixel.protocol import Addr, HardwareError
from tests.armd.hw_rigs import (
    DXL_REPLY_MARGIN_S,
    DynamixelBench,
    assert_goals_refused_while_latched,
    assert_holds_then_faults_on_stale_feedback,
    assert_latched,
    assert_reset_restarts_from_the_measured_position,
    dynamixel_bench,
    pause,
    start_moving,
)

BUS_WATCHDOG_S = 0.5  # dynamixel_bench's default
SHOULDER, ELBOW = 1, 2  # their servos' ids


def table(bench: DynamixelBench, device_id: int, address: int) -> int:
    return bench.port.current.read_table(device_id, address, 1)[0]


@pytest.mark.parametrize("disable_on_fault", [False, True], ids=["hold", "disable"])
async def test_an_overload_mid_motion_stops_latches_and_reset_reboots_the_servo(
    tmp_path: Path, disable_on_fault: bool
) -> None:
    async with dynamixel_bench(tmp_path, disable_on_fault=disable_on_fault) as bench:
        rig, loop = bench.rig, bench.rig.loop
        await start_moving(bench)

        bench.port.current.inject_hardware_error(ELBOW, HardwareError.OVERLOAD)
        await rig.run_until(lambda: loop.mode == Mode.FAULT, "the device fault")
        fault = rig.faults[-1]
        assert fault is not None
        assert (fault.code, fault.joint) == ("device_fault", "elbow")
        assert fault.message.startswith("joint 'elbow': device fault 0x20: hardware error: ")
        assert "overload" in fault.message
        assert rig.final("g") == StatusUpdate("g", GoalStatus.ABORTED, f"fault: {fault.message}")
        assert table(bench, ELBOW, Addr.TORQUE_ENABLE) == 0  # the servo let go by itself

        await rig.settle()  # the controlled stop runs out on the commanded side
        stop = [c.velocity for c in rig.sent if c.resets == rig.sent[-1].resets]
        np.testing.assert_allclose(stop[-1], 0.0, atol=1e-12)  # at rest
        # Then the arm holds (the healthy servo keeps torque), or the drives are turned off
        # (config `on_fault: disable`).
        assert (loop.commanded is None) == disable_on_fault
        assert table(bench, SHOULDER, Addr.TORQUE_ENABLE) == (0 if disable_on_fault else 1)
        await assert_goals_refused_while_latched(rig)
        await rig.run_for(0.2)
        assert_latched(rig, fault)  # nothing but a reset clears it
        assert table(bench, ELBOW, Addr.HARDWARE_ERROR_STATUS) == HardwareError.OVERLOAD

        await assert_reset_restarts_from_the_measured_position(bench)  # Reboot, re-enable
        assert table(bench, ELBOW, Addr.HARDWARE_ERROR_STATUS) == 0
        assert table(bench, ELBOW, Addr.TORQUE_ENABLE) == 1
        assert rig.modes.count(Mode.FAULT) == 1
        rig.assert_within_limits()


async def test_a_servo_dropping_replies_holds_then_faults_and_stays_latched_until_reset(
    tmp_path: Path,
) -> None:
    async with dynamixel_bench(tmp_path) as bench:
        rig, loop = bench.rig, bench.rig.loop
        await start_moving(bench)

        with bench.port.current.device(SHOULDER) as servo:
            servo.faults.silent = True  # it still hears the bus, but every reply is lost
        fault = await assert_holds_then_faults_on_stale_feedback(rig)
        assert rig.hardware.drivers["dxl"].stats.missing_replies > 0
        await rig.settle()
        await assert_goals_refused_while_latched(rig)

        with bench.port.current.device(SHOULDER) as servo:
            servo.faults.silent = False  # replies come back
        fresh_after = rig.hardware.drivers["dxl"].clock()
        await rig.run_until(
            lambda: loop.measured is not None and loop.measured.timestamp[0] > fresh_after,
            "fresh replies",
        )
        await rig.run_for(0.2)
        assert_latched(rig, fault)  # replies are back, the fault stays until reset

        await assert_reset_restarts_from_the_measured_position(bench)
        rig.assert_within_limits()


async def test_an_unplugged_adapter_faults_reconnects_on_a_new_chain_and_needs_a_reset(
    tmp_path: Path,
) -> None:
    async with dynamixel_bench(tmp_path) as bench:
        rig, loop, hardware = bench.rig, bench.rig.loop, bench.rig.hardware
        await start_moving(bench)

        bench.port.unplug()  # the pty hangs up, the by-id link disappears
        await rig.run_until(lambda: loop.mode == Mode.FAULT, "the fault")
        fault = rig.faults[-1]
        assert fault is not None
        assert fault.code in ("driver_lost", "stale_feedback"), fault
        assert rig.final("g") == StatusUpdate("g", GoalStatus.ABORTED, f"fault: {fault.message}")
        await rig.run_until(lambda: "dxl" in hardware.failed, "the driver to count as lost")
        await rig.settle()

        assert await hardware.reconnect() == []  # nothing behind the link
        assert str(bench.port.link) in hardware.failed["dxl"]
        loop.handle(Reset())
        await rig.run_for(0.2)
        assert_latched(rig, fault)  # refused: the port is not back
        await assert_goals_refused_while_latched(rig)

        bench.port.plug()  # the same servos on a new adapter: a new pty behind the same link
        assert await hardware.reconnect() == ["dxl"]
        assert hardware.failed == {}
        await rig.run_for(0.2)
        assert_latched(rig, fault)  # back, but a reset is needed

        await assert_reset_restarts_from_the_measured_position(bench)
        rig.assert_within_limits()


async def test_the_bus_watchdog_stops_the_servos_when_the_loop_stalls(tmp_path: Path) -> None:
    async with dynamixel_bench(tmp_path, bus_watchdog_s=BUS_WATCHDOG_S) as bench:
        rig, loop = bench.rig, bench.rig.loop
        await start_moving(bench)

        await pause(2 * BUS_WATCHDOG_S + 0.3)  # the loop stops ticking: nothing reaches the bus
        resumed = time.monotonic()
        for servo in (SHOULDER, ELBOW):
            assert table(bench, servo, Addr.BUS_WATCHDOG) == 0xFF  # -1: expired
            assert abs(bench.port.device_velocity(servo)) < 1e-3  # stopped where it was

        await rig.run_until(lambda: loop.mode == Mode.FAULT, "the fault when ticking resumes")
        fault = rig.faults[-1]
        assert fault is not None
        # The feedback is 1.3 s old when ticking resumes, past the stale-feedback fault's 1 s:
        # the first read reports the expired watchdog, unless a stall of the pty (measured, at
        # least a reply's margin) lost it, and the stale feedback latches first, as it must.
        if fault.code == "stale_feedback":
            assert bench.stalls.longest_s(resumed) >= DXL_REPLY_MARGIN_S, fault
        else:
            assert fault.code == "device_fault"
            assert fault.joint in ("shoulder", "elbow")
            assert f"device fault {FAULT_BUS_WATCHDOG:#x}: bus watchdog expired" in fault.message
        assert rig.final("g") == StatusUpdate("g", GoalStatus.ABORTED, f"fault: {fault.message}")
        await rig.settle()
        assert_latched(rig, fault)

        await assert_reset_restarts_from_the_measured_position(bench)  # watchdog cleared, re-armed
        armed = round(BUS_WATCHDOG_S / 0.02)  # in 20 ms units
        assert [table(bench, servo, Addr.BUS_WATCHDOG) for servo in (SHOULDER, ELBOW)] == [
            armed,
            armed,
        ]
        rig.assert_within_limits()
