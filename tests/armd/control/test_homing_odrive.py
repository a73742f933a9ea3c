"""ODrive homing seen from the control loop: the loop on `ArmHardware` and an `ODriveDriver` on
python-can's ``virtual`` bus against a `SimulatedODrive` (tests/armd/hw_rigs.py). The first enable
homes the axis, a failed homing latches ``enable_failed`` naming the axis, and a reset after a
fault re-enables without homing again. Real time, generous deadlines, nothing asserts speed.
"""

from __future__ import annotations

from armd.link.messages import Mode
from armd.link.protocol import Reset
from drivers.odrive.protocol import AxisError, AxisState
from tests.armd.hw_rigs import (
    assert_reset_restarts_from_the_measured_position,
    odrive_bench,
    start_moving,
)

INDEX_SEARCH = {"method": "index_search", "timeout_s": 5.0}


async def test_the_first_enable_homes_and_a_reset_does_not_home_again() -> None:
    async with odrive_bench(homing=INDEX_SEARCH) as bench:
        rig, loop, axis = bench.rig, bench.rig.loop, bench.sim.axis(0)
        await start_moving(bench)  # enabled (after the index search), and moving
        assert axis.index_searches == 1
        assert bench.sim.axis(1).index_searches == 0  # no homing configured

        axis.raise_error(AxisError.MISSING_ESTIMATE)
        await rig.run_until(lambda: loop.mode == Mode.FAULT, "the device fault")
        await rig.settle()
        await assert_reset_restarts_from_the_measured_position(bench)
        assert axis.index_searches == 1
        rig.assert_within_limits()


async def test_a_failed_homing_latches_enable_failed_until_a_reset() -> None:
    async with odrive_bench(homing=INDEX_SEARCH) as bench:
        rig, loop, axis = bench.rig, bench.rig.loop, bench.sim.axis(0)
        axis.faults.no_index = True
        await rig.run_until(lambda: loop.mode == Mode.FAULT, "the failed enable")
        fault = loop.fault
        assert fault is not None
        assert fault.code == "enable_failed"
        assert "device 'axis0' (node 0): homing (index_search)" in fault.message
        assert "the index search failed" in fault.message
        assert axis.state is AxisState.IDLE
        assert not rig.sent  # nothing was commanded

        axis.faults.no_index = False  # the cause is gone (e.g. the encoder's index wire fixed)
        loop.handle(Reset())
        await rig.run_until(lambda: loop.mode == Mode.HOLDING, "the reset to enable")
        assert axis.index_searches == 2
        assert axis.state is AxisState.CLOSED_LOOP_CONTROL
        rig.assert_within_limits()
