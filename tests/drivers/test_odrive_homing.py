"""ODrive homing (`drivers.odrive.homing`) end to end: the driver against the simulated ODrive on
python-can's `virtual` bus. Index search and end-stop homing run at the first `enable()` after
`open()`, fail with an error naming the axis, and are not repeated after a reset.

Each test uses its own channel name. Nothing asserts speed: the timeouts are generous except the
one a test expects to expire.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pydantic
import pytest

from drivers import Lifecycle
from drivers.errors import DeviceFaultError, DriverTimeoutError
from drivers.odrive import protocol as proto
from drivers.odrive.driver import ODriveDriver, ODriveParams
from drivers.odrive.sim import SimAxisConfig, SimulatedAxis, SimulatedODrive
from drivers.sim.motor import MotorParams

TURN = 2.0 * math.pi
QUANTUM = TURN / MotorParams().counts_per_rev  # encoder resolution, rad
START = 0.7  # rad, the homed axis's initial motor position
INDEX_SEARCH = {"method": "index_search", "timeout_s": 5.0}


async def idle_soon(axis: SimulatedAxis, timeout_s: float = 5.0) -> None:
    """Wait until the simulated axis has processed the driver's request for IDLE."""
    deadline = time.monotonic() + timeout_s
    while axis.state is not proto.AxisState.IDLE:
        assert time.monotonic() < deadline, f"axis still in {axis.state.name}"
        await asyncio.sleep(0.005)


@pytest.fixture
def channel() -> str:
    return f"odrive-homing-{uuid.uuid4().hex}"


def axis_config(node_id: int, **overrides: Any) -> SimAxisConfig:
    values: dict[str, Any] = {
        "node_id": node_id,
        "motor": MotorParams(initial_position=START if node_id == 0 else -1.2),
        "heartbeat_period_s": 0.01,
        "encoder_period_s": 0.005,
        "index_search_s": 0.1,
    }
    values.update(overrides)
    return SimAxisConfig(**values)


def params(
    channel: str, homing: dict[str, Any], feedback: str = "cyclic", **shoulder: Any
) -> ODriveParams:
    return ODriveParams.model_validate(
        {
            "feedback": feedback,
            "interface": "virtual",
            "channel": channel,
            "devices": {
                "shoulder": {"node_id": 0, "homing": homing, **shoulder},
                "elbow": {"node_id": 1},
            },
            "open_timeout_s": 2.0,
            "enable_timeout_s": 2.0,
            "feedback_timeout_s": 0.5,  # generous: a loaded test machine delays frames
            "reply_timeout_s": 0.5,  # likewise: the simulator is a task on the test's own loop
        }
    )


@asynccontextmanager
async def simulated(channel: str, **shoulder: Any) -> AsyncIterator[SimulatedAxis]:
    """The simulated ODrive (shoulder node 0 with `shoulder` config overrides, elbow node 1);
    yields the shoulder's axis."""
    configs = (axis_config(0, **shoulder), axis_config(1))
    async with SimulatedODrive.create("virtual", channel, configs) as sim:
        yield sim.axis(0)


def test_homing_options_are_validated(channel: str) -> None:
    endstop = {"method": "endstop", "direction": -1, "velocity": 0.5, "current_limit": 2.0}
    with pytest.raises(pydantic.ValidationError, match="needs current_limit and velocity_limit"):
        params(channel, endstop)
    with pytest.raises(pydantic.ValidationError, match="above velocity_limit"):
        params(channel, endstop, current_limit=10.0, velocity_limit=0.2)
    with pytest.raises(pydantic.ValidationError, match=r"current_limit 2\.0 A above current_limit"):
        params(channel, endstop, current_limit=1.0, velocity_limit=5.0)
    with pytest.raises(pydantic.ValidationError, match="direction"):
        params(channel, {**endstop, "direction": 0}, current_limit=10.0, velocity_limit=5.0)
    with pytest.raises(pydantic.ValidationError, match="method"):
        params(channel, {"method": "magic"})
    with pytest.raises(pydantic.ValidationError, match="timeout_s"):
        params(channel, {"method": "index_search", "timeout_s": 0})


@pytest.mark.parametrize("feedback", ["cyclic", "rtr"])
async def test_index_search_then_closed_loop_at_the_measured_position(
    channel: str, feedback: str
) -> None:
    period_s = 0.005 if feedback == "cyclic" else 0.0  # rtr: estimates only when requested
    async with (
        simulated(channel, encoder_offset_turns=0.25, encoder_period_s=period_s) as axis,
        ODriveDriver(params(channel, INDEX_SEARCH, feedback)) as driver,
    ):
        before = await driver.read()
        assert before["shoulder"].position == pytest.approx(START + 0.25 * TURN, abs=QUANTUM)
        assert driver.slow_enable_s is not None
        assert driver.slow_enable_s >= 5.0
        await driver.enable()
        assert driver.slow_enable_s is None  # nothing left to home
        assert axis.state is proto.AxisState.CLOSED_LOOP_CONTROL
        assert axis.control_mode is proto.ControlMode.POSITION_CONTROL
        # The encoder now counts from the index (motor position 0), and closed loop started
        # where the shaft is: no jump.
        assert axis.input_pos_turns * TURN == pytest.approx(START, abs=2 * QUANTUM)
        after = await driver.read()
        assert after["shoulder"].position == pytest.approx(START, abs=2 * QUANTUM)
        assert after["shoulder"].enabled
        assert axis.motor.position == pytest.approx(START, abs=2 * QUANTUM)


async def test_a_failed_index_search_fails_the_enable_naming_the_axis(channel: str) -> None:
    async with (
        simulated(channel) as axis,
        ODriveDriver(params(channel, INDEX_SEARCH)) as driver,
    ):
        axis.faults.no_index = True
        with pytest.raises(DeviceFaultError) as caught:
            await driver.enable()
        message = str(caught.value)
        assert "device 'shoulder' (node 0): homing (index_search)" in message
        assert "index search failed" in message
        assert "procedure result TIMEOUT" in message
        assert "CALIBRATION_ERROR" in message
        assert driver.lifecycle is Lifecycle.OPEN
        await idle_soon(axis)


async def test_an_index_search_that_does_not_finish_times_out(channel: str) -> None:
    homing = {"method": "index_search", "timeout_s": 0.3}
    async with (
        simulated(channel, index_search_s=30.0) as axis,
        ODriveDriver(params(channel, homing)) as driver,
    ):
        with pytest.raises(DriverTimeoutError, match=r"did not finish within 0\.3 s"):
            await driver.enable()
        assert driver.lifecycle is Lifecycle.OPEN
        await idle_soon(axis)  # the driver asked for IDLE


async def test_homing_runs_once_per_open_not_after_a_reset(channel: str) -> None:
    async with simulated(channel) as axis:
        driver = ODriveDriver(params(channel, INDEX_SEARCH))
        async with driver:
            await driver.enable()
            # From now on an index search would fail: a re-enable must not search again.
            axis.faults.no_index = True
            axis.raise_error(proto.AxisError.ESTOP_REQUESTED)
            await driver.disable()
            await driver.clear_faults()
            await driver.enable()
            assert axis.state is proto.AxisState.CLOSED_LOOP_CONTROL
        async with driver:  # opened again: homed again
            with pytest.raises(DeviceFaultError, match="index search failed"):
                await driver.enable()


ENDSTOP = {
    "method": "endstop",
    "direction": -1,
    "velocity": 0.5,
    "current_limit": 2.0,
    "offset": -0.1,
    "dwell_s": 0.1,
    "timeout_s": 5.0,
}
LIMITS = {"current_limit": 10.0, "velocity_limit": 5.0}


@pytest.mark.parametrize("feedback", ["cyclic", "rtr"])
async def test_endstop_homing_sets_the_position_and_restores_the_limits(
    channel: str, feedback: str
) -> None:
    stop = 0.2  # rad, below START: direction -1 drives into it
    period_s = 0.005 if feedback == "cyclic" else 0.0  # rtr: estimates only when requested
    async with (
        simulated(channel, encoder_period_s=period_s) as axis,
        ODriveDriver(params(channel, ENDSTOP, feedback, **LIMITS)) as driver,
    ):
        axis.motor.faults.block_at = stop
        await driver.enable()
        assert axis.motor.position == pytest.approx(stop, abs=1e-3)  # it went to the stop
        assert axis.state is proto.AxisState.CLOSED_LOOP_CONTROL
        assert axis.control_mode is proto.ControlMode.POSITION_CONTROL
        assert (axis.velocity_limit_turns_s, axis.current_limit_a) == (5.0, 10.0)
        states = await driver.read()
        # The stop reads `offset` turns; closed loop holds there.
        assert states["shoulder"].position == pytest.approx(-0.1 * TURN, abs=2 * QUANTUM)
        assert axis.input_pos_turns == pytest.approx(-0.1, abs=1e-3)
        assert abs(axis.motor.effort) < 0.1  # no longer pushing against the stop


async def test_endstop_homing_without_a_stop_times_out(channel: str) -> None:
    homing = {**ENDSTOP, "timeout_s": 0.4}
    async with (
        simulated(channel) as axis,
        ODriveDriver(params(channel, homing, **LIMITS)) as driver,
    ):
        with pytest.raises(DriverTimeoutError) as caught:
            await driver.enable()
        assert "device 'shoulder' (node 0): homing (endstop): no end stop within 0.4 s" in str(
            caught.value
        )
        await idle_soon(axis)
        assert driver.lifecycle is Lifecycle.OPEN


async def test_a_cancelled_homing_leaves_the_axis_idle(channel: str) -> None:
    async with (
        simulated(channel) as axis,
        ODriveDriver(params(channel, ENDSTOP, **LIMITS)) as driver,
    ):
        enabling = asyncio.create_task(driver.enable())
        deadline = time.monotonic() + 5.0
        while axis.state is not proto.AxisState.CLOSED_LOOP_CONTROL:  # pushing, no stop ahead
            assert time.monotonic() < deadline, "the homing never started"
            await asyncio.sleep(0.005)
        enabling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await enabling
        await idle_soon(axis)
        assert driver.lifecycle is Lifecycle.OPEN


async def test_an_axis_error_while_pushing_fails_the_homing(channel: str) -> None:
    async with (
        simulated(channel) as axis,
        ODriveDriver(params(channel, ENDSTOP, **LIMITS)) as driver,
    ):
        enabling = asyncio.create_task(driver.enable())
        deadline = time.monotonic() + 5.0
        while axis.state is not proto.AxisState.CLOSED_LOOP_CONTROL:  # pushing, no stop ahead
            assert time.monotonic() < deadline, "the homing never started"
            await asyncio.sleep(0.005)
        axis.raise_error(proto.AxisError.MOTOR_OVER_TEMP)
        with pytest.raises(DeviceFaultError) as caught:
            await enabling
        message = str(caught.value)
        assert "device 'shoulder' (node 0): homing (endstop): the axis reports" in message
        assert "MOTOR_OVER_TEMP" in message
        assert driver.lifecycle is Lifecycle.OPEN
