"""Fault injection through the real MIT driver: the control loop on `ArmHardware` and a
`MitDriver` on python-can's ``virtual`` bus, against simulated Damiao actuators on the same
channel (the rig of tests/armd/hw_rigs.py). Everything runs in real time; waits have generous
deadlines and nothing asserts speed. Every test also checks that no command left the position,
velocity or acceleration limits.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np

from armd.control.transmission import ArmTransmission
from armd.link.messages import GoalStatus, Mode, StatusUpdate
from drivers.mit import protocol as proto
from drivers.mit.driver import MitDriver, MitParams
from drivers.mit.models import lookup
from drivers.mit.sim import SimActuatorConfig, SimulatedMitBus
from drivers.sim.motor import MotorParams
from tests.armd.hw_rigs import (
    PERIOD_S,
    Q0,
    STALL_S,
    THRESHOLDS,
    Array,
    HwRig,
    PluggableCan,
    _joint_resolution,
    assert_goals_refused_while_latched,
    assert_holds_then_faults_on_stale_feedback,
    assert_latched,
    assert_reset_restarts_from_the_measured_position,
    pause,
    q,
    small_arm_transmission,
    start_moving,
    start_rig,
    stop_rig,
)
from tests.realtime import StallProbe, at_sim_priority

DEVICES = ("m1", "m2")
IDS = (1, 2)
DIRECTIONS = (1, -1)
QUANTUM = 25.0 / 65535  # DM4310 position step, rad at the motor
TIMEOUT_S = 0.5  # the actuators' CAN timeout (TIMEOUT register)


@dataclass
class MitBench:
    rig: HwRig
    sim: SimulatedMitBus
    bus: PluggableCan
    transmission: ArmTransmission
    stalls: StallProbe | None = None  # the reference of the actuators' receiver thread

    def silence(self, silent: bool) -> None:
        with self.sim.lock:
            for actuator in self.sim.actuators.values():
                actuator.faults.silent = silent

    def true_q(self) -> Array:
        """The joints' true positions, from the simulated shafts."""
        with self.sim.lock:
            motor = [
                direction * self.sim.actuator(i).motor.sample().position
                for direction, i in zip(DIRECTIONS, IDS, strict=True)
            ]
        return self.transmission.joint_positions(motor)

    def resolution(self) -> Array:
        return _joint_resolution(self.transmission, QUANTUM)


@contextlib.asynccontextmanager
async def mit_bench(*, timeout_s: float = TIMEOUT_S) -> AsyncIterator[MitBench]:
    """Two simulated DM4310 (their CAN timeout set, as the driver recommends) and a loop on the
    real `MitDriver`, on a fresh virtual channel, at real-time priority (`at_sim_priority`)."""
    with at_sim_priority():
        async with _mit_bench(timeout_s) as bench:
            yield bench


@contextlib.asynccontextmanager
async def _mit_bench(timeout_s: float) -> AsyncIterator[MitBench]:
    channel = f"armd-faults-mit-{uuid.uuid4().hex}"
    transmission = small_arm_transmission("mit", DEVICES)
    motor_q0 = transmission.motor_positions(q(*Q0))
    configs = [
        SimActuatorConfig(
            slave_id=i,
            master_id=i + 0x10,
            model=lookup("DM4310"),
            motor=MotorParams(max_velocity=20.0, initial_position=d * motor_q0[k]),
            timeout_s=timeout_s,
            seed=i,
        )
        for k, (i, d) in enumerate(zip(IDS, DIRECTIONS, strict=True))
    ]
    params = MitParams.model_validate(
        {
            "interface": "virtual",
            "channel": channel,
            "devices": {
                name: {"id": i, "model": "DM4310", "kp": 40.0, "kd": 1.0, "direction": d}
                for name, i, d in zip(DEVICES, IDS, DIRECTIONS, strict=True)
            },
            "reply_margin_s": 0.003,
            "open_timeout_s": 0.5,
        }
    )
    bus = PluggableCan(channel)
    async with SimulatedMitBus.create("virtual", channel, configs) as sim:
        rig = await start_rig({"mit": MitDriver(params, bus_factory=bus)}, transmission)
        try:
            with StallProbe(late_s=STALL_S) as stalls:
                yield MitBench(rig, sim, bus, transmission, stalls)
        finally:
            await stop_rig(rig)


async def assert_reset_clears_the_actuators(bench: MitBench) -> None:
    """Reset (the clear-error frame through `hardware.clear_faults()`), then the shared checks."""
    await assert_reset_restarts_from_the_measured_position(bench)
    for actuator in bench.sim.actuators.values():
        assert actuator.error == 0
        assert actuator.motor.enabled


async def test_an_over_current_mid_motion_stops_latches_and_reset_clears_it() -> None:
    async with mit_bench() as bench:
        rig, loop = bench.rig, bench.rig.loop
        await start_moving(bench)

        with bench.sim.lock:
            bench.sim.actuator(2).raise_error(proto.DamiaoState.OVER_CURRENT)
        await rig.run_until(lambda: loop.mode == Mode.FAULT, "the device fault")
        fault = rig.faults[-1]
        assert fault is not None
        assert (fault.code, fault.joint) == ("device_fault", "elbow")
        assert "Damiao error 0xA: over-current" in fault.message
        assert rig.finals("g") == [StatusUpdate("g", GoalStatus.ABORTED, f"fault: {fault.message}")]
        assert not bench.sim.actuator(2).motor.enabled  # the motor dropped torque itself
        await rig.settle()
        assert bench.sim.actuator(1).motor.enabled  # the healthy one holds
        await assert_goals_refused_while_latched(rig)
        await rig.run_for(0.2)
        assert_latched(rig, fault)

        await assert_reset_clears_the_actuators(bench)
        rig.assert_within_limits()


async def test_the_can_timeout_drops_torque_when_the_loop_stalls() -> None:
    async with mit_bench() as bench:
        rig, loop = bench.rig, bench.rig.loop
        await start_moving(bench)

        # The loop stops ticking: no command reaches the motors. Shorter than the stale-feedback
        # fault (1 s): MIT actuators answer commands only, so a stalled loop has no feedback.
        paused = time.monotonic()
        await pause(TIMEOUT_S + 0.3)
        for actuator in bench.sim.actuators.values():
            assert actuator.error == proto.DamiaoState.LOST_COMMUNICATION
            assert not actuator.motor.enabled

        await rig.run_until(lambda: loop.mode == Mode.FAULT, "the fault when ticking resumes")
        fault = rig.faults[-1]
        assert fault is not None
        # A machine that stalled the test (the pause's end, the first ticks) until the last
        # reply (up to a period before the pause) was older than the stale-feedback fault's 1 s
        # latches that fault first, as it must; measured, not assumed.
        silent_s = time.monotonic() - paused + PERIOD_S
        if silent_s < THRESHOLDS.stale_fault_s or fault.code != "stale_feedback":
            assert fault.code == "device_fault", (fault, silent_s)
            assert "lost communication" in fault.message
        await rig.settle()
        assert_latched(rig, fault)

        await assert_reset_clears_the_actuators(bench)
        rig.assert_within_limits()


async def test_a_silent_actuator_holds_then_faults_and_stays_latched_until_reset() -> None:
    async with mit_bench() as bench:
        rig = bench.rig
        await start_moving(bench)

        bench.sim.actuator(1).faults.silent = True  # unplugged: no replies, commands ignored
        fault = await assert_holds_then_faults_on_stale_feedback(rig)
        await rig.settle()
        await assert_goals_refused_while_latched(rig)
        bench.sim.actuator(1).faults.silent = False
        await rig.run_for(0.3)
        assert_latched(rig, fault)  # replies are back, the fault stays until reset
        # Unfed meanwhile, its CAN timeout dropped torque; the reset clears it.
        assert bench.sim.actuator(1).error == proto.DamiaoState.LOST_COMMUNICATION

        await assert_reset_clears_the_actuators(bench)
        np.testing.assert_allclose(bench.true_q(), rig.loop.measured.position, atol=0.02)  # type: ignore[union-attr]
        rig.assert_within_limits()


async def test_a_lost_bus_faults_reconnects_only_when_back_and_needs_a_reset() -> None:
    async with mit_bench() as bench:
        rig, loop, hardware = bench.rig, bench.rig.loop, bench.rig.hardware
        await start_moving(bench)

        bench.silence(True)  # the motors are gone from the bus...
        bench.bus.unplug()  # ...and the USB-CAN adapter with it: the driver's bus shuts down
        await rig.run_until(lambda: loop.mode == Mode.FAULT, "the fault")
        fault = rig.faults[-1]
        assert fault is not None
        assert fault.code in ("driver_lost", "stale_feedback"), fault
        await rig.run_until(lambda: "mit" in hardware.failed, "the driver to count as lost")
        await rig.settle()

        assert await hardware.reconnect() == []  # the interface is missing
        bench.bus.plug()
        assert await hardware.reconnect() == []  # the interface is back, the motors are not
        assert "no answer to CTRL_MODE" in hardware.failed["mit"]
        await assert_goals_refused_while_latched(rig)

        bench.silence(False)
        assert await hardware.reconnect() == ["mit"]  # open() read the registers again
        await rig.run_for(0.2)
        assert_latched(rig, fault)  # back, but a reset is needed
        # Unfed while the bus was away, their CAN timeout dropped torque; the reset clears it.
        assert all(
            a.error == proto.DamiaoState.LOST_COMMUNICATION for a in bench.sim.actuators.values()
        )

        await assert_reset_clears_the_actuators(bench)
        rig.assert_within_limits()
