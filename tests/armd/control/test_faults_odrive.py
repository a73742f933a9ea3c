"""Fault injection through the real ODrive driver: the control loop on `ArmHardware` and an
`ODriveDriver` on python-can's ``virtual`` bus, against a `SimulatedODrive` on the same channel
(tests/armd/hw_rigs.py). Everything runs in real time; waits have generous deadlines and nothing
asserts speed. Every test also checks that no command left the position, velocity or acceleration
limits.
"""

from __future__ import annotations

import numpy as np
import pytest

from armd.link.messages import GoalStatus, Mode, StatusUpdate
from armd.link.protocol import Reset
from drivers.odrive.protocol import AxisError, AxisState
from tests.armd.hw_rigs import (
    ODriveBench,
    assert_goals_refused_while_latched,
    assert_holds_then_faults_on_stale_feedback,
    assert_latched,
    assert_reset_restarts_from_the_measured_position,
    odrive_bench,
    pause,
    start_moving,
)

WATCHDOG_S = 0.5  # the axes' watchdog (odrive_bench's default)


async def assert_reset_clears_the_axes(bench: ODriveBench) -> None:
    """Reset (Clear_Errors through `hardware.clear_faults()`), then the shared checks: restart
    from the measured position, hold, and a new goal succeeds."""
    await assert_reset_restarts_from_the_measured_position(bench)
    for axis in bench.sim.axes.values():
        assert axis.axis_error == 0
        assert axis.state is AxisState.CLOSED_LOOP_CONTROL


@pytest.mark.parametrize("disable_on_fault", [False, True], ids=["hold", "disable"])
async def test_an_axis_error_mid_motion_stops_latches_and_reset_clears_it(
    disable_on_fault: bool,
) -> None:
    async with odrive_bench(disable_on_fault=disable_on_fault) as bench:
        rig, loop = bench.rig, bench.rig.loop
        await start_moving(bench)

        bench.sim.axis(1).raise_error(AxisError.MISSING_ESTIMATE)  # an encoder estimate failure
        await rig.run_until(lambda: loop.mode == Mode.FAULT, "the device fault")
        fault = rig.faults[-1]
        assert fault is not None
        assert (fault.code, fault.joint) == ("device_fault", "elbow")
        assert fault.message.startswith("joint 'elbow': device fault 0x8: ")
        assert "MISSING_ESTIMATE" in fault.message
        assert rig.finals("g") == [StatusUpdate("g", GoalStatus.ABORTED, f"fault: {fault.message}")]
        assert bench.sim.axis(1).state is AxisState.IDLE  # the drive disarmed itself

        await rig.settle()  # the controlled stop runs out on the commanded side
        stop = [c.velocity for c in rig.sent if c.resets == rig.sent[-1].resets]
        np.testing.assert_allclose(stop[-1], 0.0, atol=1e-12)  # at rest
        if disable_on_fault:  # then the drives are turned off (config `on_fault: disable`)
            assert loop.commanded is None
            assert bench.sim.axis(0).state is AxisState.IDLE
        else:  # then the arm holds: the healthy axis stays in closed loop
            assert loop.commanded is not None
            assert bench.sim.axis(0).state is AxisState.CLOSED_LOOP_CONTROL
        await assert_goals_refused_while_latched(rig)
        await rig.run_for(0.2)
        assert_latched(rig, fault)  # nothing but a reset clears it
        assert bench.sim.axis(1).axis_error & AxisError.MISSING_ESTIMATE  # still on the drive

        await assert_reset_clears_the_axes(bench)
        assert rig.modes.count(Mode.FAULT) == 1
        rig.assert_within_limits()


async def test_a_silent_axis_holds_then_faults_and_stays_latched_until_reset() -> None:
    async with odrive_bench() as bench:
        rig, loop = bench.rig, bench.rig.loop
        await start_moving(bench)

        bench.sim.axis(0).faults.silent = True  # no heartbeat, no estimate; commands ignored
        fault = await assert_holds_then_faults_on_stale_feedback(rig)
        await rig.settle()
        await assert_goals_refused_while_latched(rig)

        # The silent axis ignored the commands too, so its own watchdog disarmed it.
        await rig.run_until(
            lambda: bool(bench.sim.axis(0).axis_error & AxisError.WATCHDOG_TIMER_EXPIRED),
            "the silent axis's watchdog",
        )
        bench.sim.axis(0).faults.silent = False  # replies come back
        await rig.run_until(
            lambda: loop.measured is not None and bool(loop.measured.faults),
            "fresh replies (reporting the watchdog)",
        )
        await rig.run_for(0.2)
        assert_latched(rig, fault)  # replies are back, the fault stays until reset

        await assert_reset_clears_the_axes(bench)
        rig.assert_within_limits()


async def test_a_lost_bus_faults_reconnects_only_when_back_and_needs_a_reset() -> None:
    async with odrive_bench() as bench:
        rig, loop, hardware = bench.rig, bench.rig.loop, bench.rig.hardware
        await start_moving(bench)

        bench.silence(True)  # the ODrive is gone from the bus...
        bench.bus.unplug()  # ...and the USB-CAN adapter with it: the driver's bus shuts down
        await rig.run_until(lambda: loop.mode == Mode.FAULT, "the fault")
        fault = rig.faults[-1]
        assert fault is not None
        # The write of that tick fails first; staleness would follow.
        assert fault.code in ("driver_lost", "stale_feedback"), fault
        assert rig.final("g") == StatusUpdate("g", GoalStatus.ABORTED, f"fault: {fault.message}")
        await rig.run_until(lambda: "odrive" in hardware.failed, "the driver to count as lost")
        await rig.settle()

        assert await hardware.reconnect() == []  # the interface is missing
        assert "odrive" in hardware.failed
        loop.handle(Reset())
        await rig.run_for(0.2)
        assert_latched(rig, fault)  # refused: the bus is not back
        bench.bus.plug()
        assert await hardware.reconnect() == []  # the interface is back, the ODrive is not
        assert "no answer" in hardware.failed["odrive"]
        await assert_goals_refused_while_latched(rig)

        bench.silence(False)
        assert await hardware.reconnect() == ["odrive"]
        assert hardware.failed == {}
        await rig.run_for(0.2)
        assert_latched(rig, fault)  # back, but a reset is needed
        # Unfed while the bus was away, the axes' watchdogs disarmed them; the reset clears it.
        assert all(
            axis.axis_error & AxisError.WATCHDOG_TIMER_EXPIRED for axis in bench.sim.axes.values()
        )

        await assert_reset_clears_the_axes(bench)
        rig.assert_within_limits()


async def test_the_axis_watchdog_stops_the_motors_when_the_loop_stalls() -> None:
    async with odrive_bench(watchdog_timeout_s=WATCHDOG_S) as bench:
        rig, loop = bench.rig, bench.rig.loop
        await start_moving(bench)

        await pause(2 * WATCHDOG_S + 0.3)  # the loop stops ticking: nothing feeds the watchdogs
        for axis in bench.sim.axes.values():
            assert axis.state is AxisState.IDLE
            assert axis.axis_error & AxisError.WATCHDOG_TIMER_EXPIRED
            assert not axis.motor.enabled
            assert abs(axis.motor.sample().velocity) < 1e-9  # stopped

        await rig.run_until(lambda: loop.mode == Mode.FAULT, "the fault when ticking resumes")
        fault = rig.faults[-1]
        assert fault is not None
        assert fault.code == "device_fault"
        assert fault.joint in ("shoulder", "elbow")
        assert f"device fault {int(AxisError.WATCHDOG_TIMER_EXPIRED):#x}: " in fault.message
        assert "WATCHDOG_TIMER_EXPIRED" in fault.message
        assert rig.final("g") == StatusUpdate("g", GoalStatus.ABORTED, f"fault: {fault.message}")
        await rig.settle()
        assert_latched(rig, fault)

        await assert_reset_clears_the_axes(bench)
        rig.assert_within_limits()
