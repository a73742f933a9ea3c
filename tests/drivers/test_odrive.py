"""The ODrive driver end to end against the simulated ODrive on python-can's `virtual` bus.

Each test uses its own channel name. Nothing asserts speed: waits poll for a condition with a
generous deadline.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import can
import pydantic
import pytest

from drivers import DeviceCommand, Lifecycle, load_driver_class
from drivers.errors import (
    DeviceFaultError,
    DriverIOError,
    DriverOpenError,
    DriverStateError,
    DriverTimeoutError,
    UnsupportedCommandError,
)
from drivers.odrive import protocol as proto
from drivers.odrive.axis import AxisRecord
from drivers.odrive.driver import ODriveDriver, ODriveParams
from drivers.odrive.sim import (
    Corruption,
    SimAxisConfig,
    SimulatedAxis,
    SimulatedODrive,
    serve,
)
from drivers.sim.motor import MotorParams

TURN = 2.0 * math.pi
QUANTUM = TURN / MotorParams().counts_per_rev  # encoder resolution, rad
START = {0: 0.7, 1: -1.2}  # initial motor positions, rad


@pytest.fixture
def channel() -> str:
    return f"odrive-test-{uuid.uuid4().hex}"


def axis_config(node_id: int, **overrides: Any) -> SimAxisConfig:
    values: dict[str, Any] = {
        "node_id": node_id,
        "motor": MotorParams(initial_position=START.get(node_id, 0.0)),
        "heartbeat_period_s": 0.01,
        "encoder_period_s": 0.005,
    }
    values.update(overrides)
    return SimAxisConfig(**values)


def params(channel: str, **overrides: Any) -> ODriveParams:
    values: dict[str, Any] = {
        "interface": "virtual",
        "channel": channel,
        "devices": {"shoulder": {"node_id": 0}, "elbow": {"node_id": 1, "direction": -1}},
        "open_timeout_s": 2.0,
        "enable_timeout_s": 2.0,
        "feedback_timeout_s": 0.5,  # generous: a loaded test machine delays frames
        "reply_timeout_s": 0.5,  # likewise: the simulator is a task on the test's own loop
    }
    values.update(overrides)
    return ODriveParams.model_validate(values)


@asynccontextmanager
async def simulated(channel: str, *configs: SimAxisConfig) -> AsyncIterator[SimulatedODrive]:
    configs = configs or (axis_config(0), axis_config(1))
    async with SimulatedODrive.create("virtual", channel, configs) as sim:
        yield sim


async def eventually(
    check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 5.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def test_registry_finds_the_odrive_driver() -> None:
    assert load_driver_class("odrive") is ODriveDriver


def test_params_are_validated(channel: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="same node_id 1"):
        params(channel, devices={"a": {"node_id": 1}, "b": {"node_id": 1}})
    with pytest.raises(pydantic.ValidationError, match="node_id"):
        params(channel, devices={"a": {"node_id": 64}})
    with pytest.raises(pydantic.ValidationError, match="extra"):
        params(channel, baudrate=1_000_000)


async def test_open_reads_positions_in_si_units(channel: str) -> None:
    async with simulated(channel), ODriveDriver(params(channel)) as driver:
        states = await driver.read()
        assert set(states) == {"shoulder", "elbow"}
        assert states["shoulder"].position == pytest.approx(START[0], abs=QUANTUM)
        assert states["elbow"].position == pytest.approx(-START[1], abs=QUANTUM)  # direction -1
        for state in states.values():
            assert state.velocity == pytest.approx(0.0, abs=1e-9)
            assert state.fault is None
            assert not state.enabled
            assert state.timestamp <= time.monotonic()
        with pytest.raises(DriverStateError):
            await driver.write({"shoulder": DeviceCommand(0.0)})


async def test_scale_maps_odrive_turns_to_motor_radians(channel: str) -> None:
    devices = {"shoulder": {"node_id": 0, "scale": 0.5}}
    async with (
        simulated(channel, axis_config(0)),
        ODriveDriver(params(channel, devices=devices)) as driver,
    ):
        states = await driver.read()
        assert states["shoulder"].position == pytest.approx(0.5 * START[0], abs=QUANTUM)


async def test_enable_holds_the_measured_position(channel: str) -> None:
    async with simulated(channel) as sim, ODriveDriver(params(channel)) as driver:
        await driver.enable()
        for node_id in (0, 1):
            axis = sim.axis(node_id)
            assert axis.state is proto.AxisState.CLOSED_LOOP_CONTROL
            assert axis.control_mode is proto.ControlMode.POSITION_CONTROL
            assert axis.input_mode is proto.InputMode.PASSTHROUGH
            assert axis.input_pos_turns * TURN == pytest.approx(START[node_id], abs=QUANTUM)
        started = time.monotonic()
        await eventually(
            lambda: _newer_than(driver, started), "fresh estimates after enable", timeout_s=2.0
        )
        states = await driver.read()
        assert states["shoulder"].enabled
        assert states["shoulder"].position == pytest.approx(START[0], abs=2 * QUANTUM)
        assert states["elbow"].position == pytest.approx(-START[1], abs=2 * QUANTUM)


async def _newer_than(driver: ODriveDriver, t: float) -> bool:
    states = await driver.read()
    return all(state.timestamp > t + 0.02 for state in states.values())


async def test_motion_converges_to_the_target(channel: str) -> None:
    targets = {"shoulder": 1.1, "elbow": 0.9}
    async with simulated(channel) as sim, ODriveDriver(params(channel)) as driver:
        await driver.enable()

        async def arrived() -> bool:
            await driver.write({name: DeviceCommand(q) for name, q in targets.items()})
            states = await driver.read()
            return all(abs(states[n].position - q) < 2 * QUANTUM for n, q in targets.items())

        await eventually(arrived, "both axes at their targets")
        assert sim.axis(1).input_pos_turns * TURN == pytest.approx(-0.9, abs=1e-6)
        assert driver.stats.writes > 0
        assert driver.stats.corrupt_replies == 0


async def test_velocity_feed_forward_reaches_the_odrive(channel: str) -> None:
    async with simulated(channel) as sim, ODriveDriver(params(channel)) as driver:
        await driver.enable()
        await driver.write({"shoulder": DeviceCommand(START[0], velocity=0.5 * TURN)})
        await eventually(
            lambda: _async(sim.axis(0).motor.velocity_ff > 0.0), "feed-forward applied"
        )
        assert sim.axis(0).motor.velocity_ff == pytest.approx(0.5 * TURN, abs=0.001 * TURN)


async def _async(value: bool) -> bool:
    return value


async def test_input_mode_is_configured(channel: str) -> None:
    async with (
        simulated(channel) as sim,
        ODriveDriver(params(channel, input_mode="pos_filter")) as driver,
    ):
        await driver.enable()
        assert sim.axis(0).input_mode is proto.InputMode.POS_FILTER


async def test_current_and_velocity_limits_are_sent_at_enable(channel: str) -> None:
    devices = {
        "shoulder": {"node_id": 0, "current_limit": 12.5, "velocity_limit": 4.0},
        "elbow": {"node_id": 1},  # no limits: the axis keeps its own configuration
    }
    async with simulated(channel) as sim, ODriveDriver(params(channel, devices=devices)) as driver:
        await driver.enable()
        assert (sim.axis(0).velocity_limit_turns_s, sim.axis(0).current_limit_a) == (4.0, 12.5)
        assert (sim.axis(1).velocity_limit_turns_s, sim.axis(1).current_limit_a) == (None, None)


def test_limits_go_together(channel: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="current_limit and velocity_limit go"):
        params(channel, devices={"a": {"node_id": 1, "current_limit": 10.0}})
    with pytest.raises(pydantic.ValidationError, match="greater than 0"):
        params(channel, devices={"a": {"node_id": 1, "current_limit": -1, "velocity_limit": 2}})


async def test_write_rejects_non_finite_commands(channel: str) -> None:
    async with simulated(channel), ODriveDriver(params(channel)) as driver:
        await driver.enable()
        with pytest.raises(UnsupportedCommandError, match="shoulder"):
            await driver.write({"shoulder": DeviceCommand(math.nan)})


async def test_axis_error_is_reported_refuses_enable_and_clears(channel: str) -> None:
    fast = params(channel, enable_timeout_s=0.3)
    async with simulated(channel) as sim, ODriveDriver(fast) as driver:
        sim.axis(0).motor.faults.fault_code = proto.AxisError.DRV_FAULT
        await eventually(lambda: _fault_of(driver, "shoulder", 0x20), "DRV_FAULT reported")
        state = (await driver.read())["shoulder"]
        assert state.fault is not None
        assert "DRV_FAULT" in state.fault.message
        with pytest.raises(DeviceFaultError, match=r"'shoulder' \(node 0\).*DRV_FAULT"):
            await driver.enable()
        assert driver.lifecycle is Lifecycle.OPEN
        assert sim.axis(1).state is proto.AxisState.IDLE  # nothing was enabled
        with pytest.raises(DeviceFaultError, match="persist"):
            await driver.clear_faults()  # the cause is still there
        sim.axis(0).motor.faults.fault_code = 0
        await driver.clear_faults()
        assert (await driver.read())["shoulder"].fault is None
        await driver.enable()
        assert sim.axis(0).state is proto.AxisState.CLOSED_LOOP_CONTROL


async def _fault_of(driver: ODriveDriver, name: str, code: int) -> bool:
    fault = (await driver.read())[name].fault
    return fault is not None and fault.code == code


async def test_error_while_enabled_disarms_and_latches(channel: str) -> None:
    async with simulated(channel) as sim, ODriveDriver(params(channel)) as driver:
        await driver.enable()
        sim.axis(1).raise_error(proto.AxisError.MOTOR_OVER_TEMP)
        await eventually(lambda: _fault_of(driver, "elbow", 0x2000), "MOTOR_OVER_TEMP")
        assert not (await driver.read())["elbow"].enabled
        await driver.disable()
        await driver.clear_faults()
        assert (await driver.read())["elbow"].fault is None


async def test_estop_disarms_every_axis(channel: str) -> None:
    async with simulated(channel) as sim, ODriveDriver(params(channel)) as driver:
        await driver.enable()
        driver.estop()
        await eventually(lambda: _fault_of(driver, "shoulder", 0x2000000), "ESTOP_REQUESTED")
        assert sim.axis(1).state is proto.AxisState.IDLE


async def test_watchdog_expires_when_writes_stop(channel: str) -> None:
    configs = [axis_config(0, watchdog_timeout_s=0.25), axis_config(1)]
    async with simulated(channel, *configs), ODriveDriver(params(channel)) as driver:
        await driver.enable()
        for _ in range(5):
            await driver.write({"shoulder": DeviceCommand(START[0])})
            await asyncio.sleep(0.01)
        assert (await driver.read())["shoulder"].fault is None
        await eventually(lambda: _fault_of(driver, "shoulder", 0x1000000), "watchdog expiry")
        state = (await driver.read())["shoulder"]
        assert state.fault is not None
        assert "WATCHDOG_TIMER_EXPIRED" in state.fault.message
        assert not state.enabled


async def test_disable_idles_the_axes(channel: str) -> None:
    async with simulated(channel) as sim, ODriveDriver(params(channel)) as driver:
        await driver.enable()
        await driver.disable()
        assert all(axis.state is proto.AxisState.IDLE for axis in sim.axes.values())
        assert not (await driver.read())["shoulder"].enabled


async def test_disable_reports_an_unconfirmed_idle(channel: str) -> None:
    async with (
        simulated(channel) as sim,
        ODriveDriver(params(channel, enable_timeout_s=0.2)) as driver,
    ):
        await driver.enable()
        sim.axis(1).faults.drop_heartbeats = True
        with pytest.raises(DriverTimeoutError, match=r"disable.*'elbow' \(node 1\)"):
            await driver.disable()
        assert sim.axis(1).state is proto.AxisState.IDLE  # the request itself got through


async def test_close_idles_enabled_axes(channel: str) -> None:
    async with simulated(channel) as sim:
        async with ODriveDriver(params(channel)) as driver:
            await driver.enable()
        assert driver.lifecycle is Lifecycle.CLOSED
        assert sim.axis(0).state is proto.AxisState.IDLE


async def test_open_times_out_naming_silent_nodes(channel: str) -> None:
    devices = {"shoulder": {"node_id": 0}, "wrist": {"node_id": 5}}
    driver = ODriveDriver(params(channel, devices=devices, open_timeout_s=0.3))
    async with simulated(channel, axis_config(0)):
        with pytest.raises(DriverTimeoutError, match=r"'wrist' \(node 5\): no heartbeat"):
            await driver.open()
    assert driver.lifecycle is Lifecycle.CLOSED


async def test_open_times_out_when_a_device_goes_silent(channel: str) -> None:
    async with simulated(channel) as sim:
        sim.axis(1).faults.silent = True
        driver = ODriveDriver(params(channel, open_timeout_s=0.3))
        with pytest.raises(DriverTimeoutError, match=r"node 1") as caught:
            await driver.open()
        assert "node 0" not in str(caught.value)


async def test_open_fails_cleanly_for_a_missing_interface(channel: str) -> None:
    driver = ODriveDriver(params(channel, interface="no-such-interface"))
    with pytest.raises(DriverOpenError, match="no-such-interface"):
        await driver.open()
    assert driver.lifecycle is Lifecycle.CLOSED


async def test_lost_replies_leave_a_stale_timestamp(channel: str) -> None:
    strict = params(channel, feedback_timeout_s=0.05)
    async with simulated(channel) as sim, ODriveDriver(strict) as driver:
        sim.axis(0).faults.drop_estimates = True

        async def counted() -> bool:
            await driver.read()
            return driver.stats.missing_replies > 0

        await eventually(counted, "missing replies counted")
        before = (await driver.read())["shoulder"]
        await asyncio.sleep(0.05)
        after = await driver.read()
        assert after["shoulder"] == before  # same position, same (old) timestamp
        assert after["elbow"].timestamp > before.timestamp
        assert driver.stats.per_device_errors["shoulder"] > 0
        sim.axis(0).faults.drop_estimates = False
        await eventually(
            lambda: _timestamp_after(driver, "shoulder", before.timestamp), "fresh estimates"
        )


async def _timestamp_after(driver: ODriveDriver, name: str, t: float) -> bool:
    return (await driver.read())[name].timestamp > t


@pytest.mark.parametrize("corruption", [Corruption.SHORT, Corruption.NAN])
async def test_corrupt_frames_are_counted_and_ignored(channel: str, corruption: Corruption) -> None:
    async with simulated(channel) as sim, ODriveDriver(params(channel)) as driver:
        await driver.enable()
        sim.axis(0).faults.corrupt_estimates = corruption
        await eventually(lambda: _async(driver.stats.corrupt_replies >= 3), "corrupt frames")
        before = (await driver.read())["shoulder"]
        seen = driver.stats.corrupt_replies
        await eventually(lambda: _async(driver.stats.corrupt_replies >= seen + 3), "more")
        after = (await driver.read())["shoulder"]
        assert (after.position, after.timestamp) == (before.position, before.timestamp)
        assert math.isfinite(after.position)
        assert driver.stats.per_device_errors["shoulder"] >= seen + 3


async def test_enable_refuses_without_a_current_position(channel: str) -> None:
    strict = params(channel, feedback_timeout_s=0.05)
    async with simulated(channel) as sim, ODriveDriver(strict) as driver:
        sim.axis(1).faults.drop_estimates = True
        await asyncio.sleep(0.1)  # longer than feedback_timeout_s
        with pytest.raises(DriverTimeoutError, match=r"current position from .*'elbow' \(node 1\)"):
            await driver.enable()
        assert driver.lifecycle is Lifecycle.OPEN
        assert all(axis.state is proto.AxisState.IDLE for axis in sim.axes.values())


async def test_delayed_replies_still_open(channel: str) -> None:
    async with simulated(channel) as sim:
        sim.axis(0).faults.reply_delay_s = 0.05
        async with ODriveDriver(params(channel)) as driver:
            assert (await driver.read())["shoulder"].position == pytest.approx(
                START[0], abs=QUANTUM
            )


async def test_frozen_encoder_keeps_reporting_the_same_position(channel: str) -> None:
    async with simulated(channel) as sim, ODriveDriver(params(channel)) as driver:
        await driver.enable()
        sim.axis(0).motor.faults.frozen_encoder = True
        frozen_at = time.monotonic()
        await eventually(lambda: _timestamp_after(driver, "shoulder", frozen_at + 0.02), "frames")
        target = START[0] + 0.3

        async def moved() -> bool:
            await driver.write({"shoulder": DeviceCommand(target)})
            return sim.axis(0).motor.position > target - 0.01

        await eventually(moved, "the shaft to move")
        assert (await driver.read())["shoulder"].position == pytest.approx(START[0], abs=QUANTUM)


async def test_enable_times_out_and_rolls_back_without_heartbeats(channel: str) -> None:
    async with (
        simulated(channel) as sim,
        ODriveDriver(params(channel, enable_timeout_s=0.2)) as driver,
    ):
        sim.axis(1).faults.drop_heartbeats = True
        with pytest.raises(DriverTimeoutError, match=r"'elbow' \(node 1\)"):
            await driver.enable()
        assert driver.lifecycle is Lifecycle.OPEN
        await eventually(
            lambda: _async(all(a.state is proto.AxisState.IDLE for a in sim.axes.values())),
            "axes back to IDLE",
        )


async def test_rtr_feedback_without_cyclic_estimates(channel: str) -> None:
    configs = [axis_config(0, encoder_period_s=0.0), axis_config(1, encoder_period_s=0.0)]
    async with (
        simulated(channel, *configs) as sim,
        ODriveDriver(params(channel, feedback="rtr")) as driver,
    ):
        first = await driver.read()
        second = await driver.read()
        assert second["shoulder"].timestamp > first["shoulder"].timestamp
        await driver.enable()
        await driver.write({"shoulder": DeviceCommand(1.0)})
        fresh = (await driver.read())["shoulder"]
        sim.axis(0).faults.drop_estimates = True
        timeouts = driver.stats.timeouts
        assert (await driver.read())["shoulder"] == fresh  # no reply: the old reading stays
        assert (await driver.read())["shoulder"] == fresh
        assert driver.stats.timeouts >= timeouts + 2
        assert driver.stats.per_device_errors["shoulder"] >= 2


async def test_cyclic_mode_without_cyclic_estimates_explains_itself(channel: str) -> None:
    configs = [axis_config(0, encoder_period_s=0.0)]
    devices = {"shoulder": {"node_id": 0}}
    async with simulated(channel, *configs):
        driver = ODriveDriver(params(channel, devices=devices, open_timeout_s=0.2))
        with pytest.raises(DriverTimeoutError, match="encoder_msg_rate_ms"):
            await driver.open()


async def test_bus_shut_down_raises_io_error(channel: str) -> None:
    buses: list[can.BusABC] = []

    def factory() -> can.BusABC:
        buses.append(can.Bus(interface="virtual", channel=channel))
        return buses[-1]

    async with simulated(channel):
        driver = ODriveDriver(params(channel), bus_factory=factory)
        await driver.open()
        await driver.enable()
        buses[0].shutdown()  # the interface disappears under the driver
        with pytest.raises(DriverIOError, match="virtual"):
            await driver.write({"shoulder": DeviceCommand(START[0])})
        with pytest.raises(DriverIOError):
            await driver.disable()
        assert driver.lifecycle is Lifecycle.OPEN

        async def read_fails() -> bool:
            try:
                await driver.read()
            except DriverIOError:
                return True
            return False

        await eventually(read_fails, "read to raise DriverIOError")
        assert driver.stats.io_errors >= 1
        await driver.close()  # never raises
        assert driver.lifecycle.value == "closed"


async def test_serve_entry_point(channel: str) -> None:
    stop = asyncio.Event()
    server = asyncio.create_task(
        serve(
            "virtual", channel, [0, 1], heartbeat_period_s=0.01, encoder_period_s=0.005, stop=stop
        )
    )
    try:
        async with ODriveDriver(params(channel)) as driver:
            assert set(await driver.read()) == {"shoulder", "elbow"}
    finally:
        stop.set()
        await asyncio.wait_for(server, timeout=5.0)


# -- the simulated axis alone, on a manual clock ---------------------------------------------------


class ManualClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def command(axis: SimulatedAxis, frame: proto.Frame) -> list[proto.Frame]:
    return axis.handle(frame)


def heartbeat_of(axis: SimulatedAxis) -> proto.Heartbeat:
    """Advance the axis (watchdog, faults), then ask for its heartbeat by RTR."""
    axis.poll()
    (reply,) = command(axis, proto.make_request(axis.node_id, proto.Command.HEARTBEAT))
    return proto.parse_heartbeat(reply.data)


def test_simulated_axis_watchdog_and_latching() -> None:
    clock = ManualClock()
    axis = SimulatedAxis(SimAxisConfig(node_id=2, watchdog_timeout_s=0.1), clock)
    closed = proto.make_set_axis_state(2, proto.AxisState.CLOSED_LOOP_CONTROL)
    command(axis, closed)
    assert axis.state is proto.AxisState.CLOSED_LOOP_CONTROL
    clock.now += 0.05
    command(axis, proto.make_set_input_pos(2, 0.0))
    clock.now += 0.09
    assert heartbeat_of(axis).axis_error == 0
    clock.now += 0.02
    beat = heartbeat_of(axis)
    assert beat.axis_error == proto.AxisError.WATCHDOG_TIMER_EXPIRED
    assert beat.axis_state == proto.AxisState.IDLE
    command(axis, closed)  # refused while the error is latched
    assert beat.axis_state == heartbeat_of(axis).axis_state == proto.AxisState.IDLE
    assert axis.procedure_result is proto.ProcedureResult.DISARMED
    command(axis, proto.make_clear_errors(2))
    command(axis, closed)
    assert axis.state is proto.AxisState.CLOSED_LOOP_CONTROL


def test_simulated_axis_answers_requests_and_estop() -> None:
    clock = ManualClock()
    axis = SimulatedAxis(SimAxisConfig(node_id=1), clock)
    (reply,) = command(axis, proto.make_request(1, proto.Command.GET_VERSION))
    assert proto.parse_version(reply.data).fw_minor == 6
    command(axis, proto.make_estop(1))
    (reply,) = command(axis, proto.make_request(1, proto.Command.GET_ERROR))
    status = proto.parse_error_status(reply.data)
    assert status.active_errors == proto.AxisError.ESTOP_REQUESTED
    axis.faults.silent = True
    assert command(axis, proto.make_request(1, proto.Command.GET_ERROR)) == []
    assert axis.poll() == []


def test_a_held_up_simulated_axis_still_reports_its_index_search_under_way() -> None:
    """A poll after both a heartbeat's time and the search's end (the host held the simulation
    up) sends the heartbeat a drive sends while it searches, then the one due now: a master
    waits for one that shows the search under way."""
    clock = ManualClock()
    config = SimAxisConfig(node_id=0, heartbeat_period_s=0.1, index_search_s=0.2)
    axis = SimulatedAxis(config, clock)
    axis.poll()  # the heartbeat at 0 s
    command(axis, proto.make_set_axis_state(0, proto.AxisState.ENCODER_INDEX_SEARCH))
    clock.now += 0.5  # past the heartbeat due at 0.1 s and the search's end at 0.2 s
    heartbeat = proto.arbitration_id(0, proto.Command.HEARTBEAT)
    beats = [proto.parse_heartbeat(f.data) for f in axis.poll() if f.arbitration_id == heartbeat]
    assert [(b.axis_state, b.procedure_result) for b in beats] == [
        (proto.AxisState.ENCODER_INDEX_SEARCH, proto.ProcedureResult.BUSY),
        (proto.AxisState.IDLE, proto.ProcedureResult.SUCCESS),
    ]


def test_simulated_axis_enters_closed_loop_at_the_last_input_pos() -> None:
    clock = ManualClock()
    axis = SimulatedAxis(SimAxisConfig(node_id=0, motor=MotorParams(initial_position=1.0)), clock)
    command(axis, proto.make_set_axis_state(0, proto.AxisState.CLOSED_LOOP_CONTROL))
    clock.now += 1.0
    assert axis.motor.sample().position == pytest.approx(0.0, abs=QUANTUM)  # it jumped to 0


@pytest.mark.parametrize(
    ("direction", "scale", "limit", "torque", "expected"),
    [
        (1, 1.0, None, 0.75, 0.75),
        (-1, 1.0, None, 0.75, -0.75),
        (1, 2.0, None, 0.75, 1.5),  # two motor-shaft turns per ODrive turn: twice the torque
        (-1, 2.0, 1.0, 0.75, -1.0),  # within the axis's torque_limit
    ],
)
def test_the_torque_feed_forward_at_the_odrives_motor(
    direction: int, scale: float, limit: float | None, torque: float, expected: float
) -> None:
    """Torque_FF for armd's torque at the motor shaft: the same power through the axis's
    direction and scale, within its torque_limit."""
    axis = AxisRecord("a", 0, direction * scale * 2 * math.pi, limit)
    assert axis.torque_ff_nm(torque) == pytest.approx(expected, abs=1e-12)
