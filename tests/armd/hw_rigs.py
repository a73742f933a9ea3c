"""Control loops on the real drivers against their simulated devices, for the fault-injection tests,
and the command log and limit check shared with the property tests.

A rig is the daemon's own stack without MQTT: `ControlLoop` + `ArmHardware` + a real driver — the
`ODriveDriver` on python-can's ``virtual`` bus with a `SimulatedODrive` on the same channel, or the
`DynamixelDriver` on the pty of a `SimulatedDynamixelChain` reached through a stable symlink (as
``/dev/serial/by-id/...`` would be). The devices run on their own thread or task in real time, so a
rig ticks the loop on its real schedule (`HwRig.run_until`, `HwRig.run_for`) and waits for
conditions with generous deadlines; nothing here asserts speed.

The arm is small: three revolute joints (``shoulder``, ``elbow``, ``wrist``), the first two driven
through a transmission (a gearbox on one, a reversed sign and an offset on the other), the wrist a
fixed joint (config ``fixed_joints``), so the loop's q order includes a joint that is never
commanded.

Every command the loop writes is logged (`record_writes`) with the limiter's reset counter and the
measured state of that tick; `assert_commands_within_limits` checks the log against the model's
position, velocity and acceleration limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import can
import numpy as np
from numpy.typing import ArrayLike, NDArray

from armd.control.hardware import ArmHardware
from armd.control.loop import ControlLoop, LoopSettings
from armd.control.safety import SafetyThresholds
from armd.control.timing import Schedule
from armd.control.transmission import ArmTransmission, Transmission
from armd.control.wiring import ControlSetup, build_loop
from armd.link.messages import Fault, GoalStatus, Mode, StatusUpdate
from armd.link.protocol import Event, FaultChanged, ModeChanged, MoveTo, Reset
from armd.motion.trajectory import MotionLimits
from drivers import Driver, DriverError
from drivers.dynamixel.driver import DynamixelDriver, DynamixelParams
from drivers.dynamixel.sim import SimulatedDynamixelChain
from drivers.odrive.driver import ODriveDriver, ODriveParams
from drivers.odrive.sim import SimAxisConfig, SimulatedODrive
from drivers.sim.motor import MotorParams
from kinematics import ConstantMotor, JointLimit, JointLimits, JointMotor, KinematicTree, Link, Pose
from tests.realtime import PtyStallProbe, StallProbe, at_sim_priority

Array = NDArray[np.float64]

# -- the command log and the limit check ---------------------------------------------------------

EPS = 1e-9


@dataclass(frozen=True, slots=True)
class SentCommand:
    """One `ArmHardware.write` by the loop (q order), with the limiter's reset counter at that
    tick (a reset restarts control from the measured position) and the measured position the loop
    had read that tick."""

    resets: int
    position: Array
    velocity: Array
    measured: Array


def record_writes(loop: ControlLoop) -> list[SentCommand]:
    """Log every command the loop sends to its hardware (wraps this instance's `write`)."""
    sent: list[SentCommand] = []
    hardware = loop.hardware
    write = hardware.write

    async def recording_write(
        position: ArrayLike, velocity: ArrayLike, torque: ArrayLike | None = None
    ) -> None:
        measured = loop.measured.position if loop.measured is not None else np.full(0, np.nan)
        sent.append(
            SentCommand(
                loop.limiter.resets,
                np.array(position, dtype=np.float64),
                np.array(velocity, dtype=np.float64),
                measured.copy(),
            )
        )
        await write(position, velocity, torque)

    hardware.write = recording_write  # type: ignore[method-assign]
    return sent


def segments(sent: Sequence[SentCommand]) -> list[list[SentCommand]]:
    """The commands split into stretches of continuous control (one per limiter reset)."""
    out: dict[int, list[SentCommand]] = {}
    for command in sent:
        out.setdefault(command.resets, []).append(command)
    return list(out.values())


def assert_commands_within_limits(
    sent: Sequence[SentCommand], limits: JointLimits, period_s: float
) -> None:
    """No NaN or infinity; every position within the limits; velocity feed-forward and the
    velocity and acceleration of the positions (finite differences over the loop's period) within
    theirs, inside each stretch of continuous control.

    A stretch that starts outside the position limits (a reset after a ``limit_exceeded`` fault
    restarts where the joint is) may stay there or move back only: its bound on that side is its
    first command.
    """
    assert sent, "no command was sent"
    for stretch in segments(sent):
        positions = np.array([c.position for c in stretch])
        velocities = np.array([c.velocity for c in stretch])
        assert np.all(np.isfinite(positions)), "a commanded position is not finite"
        assert np.all(np.isfinite(velocities)), "a commanded velocity is not finite"
        lower = np.minimum(limits.lower, positions[0])
        upper = np.maximum(limits.upper, positions[0])
        assert np.all(positions >= lower - EPS), _worst(positions - lower, "below the lower limit")
        assert np.all(positions <= upper + EPS), _worst(upper - positions, "above the upper limit")
        vmax = limits.velocity * (1 + 1e-9) + 1e-9
        assert np.all(np.abs(velocities) <= vmax), "a velocity feed-forward exceeds its limit"
        velocity = np.diff(positions, axis=0) / period_s
        assert np.all(np.abs(velocity) <= vmax + 1e-6), _worst(
            vmax - np.abs(velocity), "velocity above its limit"
        )
        acceleration = np.diff(velocity, axis=0) / period_s
        amax = limits.acceleration * (1 + 1e-6) + 1e-6
        assert np.all(np.abs(acceleration) <= amax), _worst(
            amax - np.abs(acceleration), "acceleration above its limit"
        )


def _worst(margin: Array, what: str) -> str:
    if margin.size == 0:
        return what
    index = np.unravel_index(int(np.argmin(margin)), margin.shape)
    return f"{what}: by {-float(margin[index]):.3g} at tick {index[0]} joint {index[-1]}"


# -- the small arm -------------------------------------------------------------------------------

PERIOD_S = 0.01  # 100 Hz: the logic does not depend on the rate, and a loaded machine keeps up
STALL_S = 0.01  # s: a hold-up of a bench's probe counted as a stall
VELOCITY, ACCELERATION, JERK = 2.0, 8.0, 160.0
LOWER, UPPER = -1.5, 1.5
JOINTS = ("shoulder", "elbow", "wrist")
DRIVEN = ("shoulder", "elbow")
WRIST = 0.2  # rad: the fixed joint's position
Q0 = (0.3, -0.2)  # rad: where the driven joints start
# Generous for a loaded test machine (the defaults are 50 ms / 250 ms); the tests check
# the order and the reported ages, never the time taken.
THRESHOLDS = SafetyThresholds(
    stale_hold_s=0.1,
    stale_fault_s=1.0,  # a stalled machine must not skip the hold and fault at once
    following_error=0.1,
    following_error_per_velocity=0.2,
    limit_tolerance=0.02,
)
LIMITS = MotionLimits(np.full(3, VELOCITY), np.full(3, ACCELERATION), np.full(3, JERK))


def small_arm() -> KinematicTree:
    limit = JointLimit(LOWER, UPPER, VELOCITY, ACCELERATION)
    return KinematicTree(
        [
            Link("base", None),
            Link("shoulder", "base", JointMotor("revolute", (0, 0, 1), limits=limit)),
            Link("upper_arm", "shoulder", ConstantMotor(Pose([0.3, 0.0, 0.1]))),
            Link("elbow", "upper_arm", JointMotor("revolute", (0, 1, 0), limits=limit)),
            Link("forearm", "elbow", ConstantMotor(Pose([0.25, 0.0, 0.0]))),
            Link("wrist", "forearm", JointMotor("revolute", (1, 0, 0), limits=limit)),
            Link("tool", "wrist", ConstantMotor(Pose([0.08, 0.0, 0.0]))),
        ],
        name="small-arm",
    )


def small_arm_transmission(driver: str, devices: tuple[str, str]) -> ArmTransmission:
    """shoulder through a 2:1 gearbox; elbow reversed with an offset; the wrist fixed."""
    return ArmTransmission(
        JOINTS,
        [
            Transmission("shoulder", driver, devices[0], gear_ratio=2.0),
            Transmission("elbow", driver, devices[1], sign=-1, offset=0.1),
        ],
        fixed_positions={"wrist": WRIST},
    )


def q(shoulder: float, elbow: float) -> Array:
    """A joint vector of the small arm (the wrist at its fixed position)."""
    return np.array([shoulder, elbow, WRIST])


def move(goal_id: str, shoulder: float, elbow: float, speed: float = 1.0) -> MoveTo:
    return MoveTo(goal_id, q(shoulder, elbow), LIMITS.scaled(speed))


# -- the rig -------------------------------------------------------------------------------------


@dataclass
class HwRig:
    """A loop on real drivers; what it published is collected in the lists."""

    loop: ControlLoop
    hardware: ArmHardware
    sent: list[SentCommand]
    tree: KinematicTree
    statuses: list[StatusUpdate] = field(default_factory=list)
    faults: list[Fault | None] = field(default_factory=list)
    modes: list[Mode] = field(default_factory=list)

    def emit(self, event: Event) -> None:
        if isinstance(event, StatusUpdate):
            self.statuses.append(event)
        elif isinstance(event, FaultChanged):
            self.faults.append(event.fault)
        elif isinstance(event, ModeChanged):
            self.modes.append(event.mode)

    async def run_until(
        self, condition: Callable[[], bool], what: str, timeout_s: float = 10.0
    ) -> None:
        """Tick on the loop's real schedule until `condition()` holds (checked before each tick)."""
        deadline = time.monotonic() + timeout_s
        await self.loop.run(until=lambda: condition() or time.monotonic() > deadline)
        if not condition():
            loop = self.loop
            raise AssertionError(
                f"timed out after {timeout_s} s waiting for {what}: mode {loop.mode.value}, "
                f"fault {loop.fault}, failed drivers {loop.hardware.failed}"
            )

    async def run_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        await self.loop.run(until=lambda: time.monotonic() > deadline)

    async def settle(self, what: str = "the stop to end", timeout_s: float = 10.0) -> None:
        """Tick until no motion or stop is under way."""
        await self.run_until(lambda: not self.loop.busy, what, timeout_s)

    def final(self, goal_id: str) -> StatusUpdate | None:
        return next((s for s in self.statuses if s.goal_id == goal_id and s.status.is_final), None)

    def finals(self, goal_id: str) -> list[StatusUpdate]:
        return [s for s in self.statuses if s.goal_id == goal_id and s.status.is_final]

    def assert_within_limits(self) -> None:
        assert_commands_within_limits(self.sent, self.tree.limits, PERIOD_S)

    def last_restart(self) -> SentCommand:
        """The first command of the latest stretch of control (after the latest reset)."""
        return segments(self.sent)[-1][0]


async def start_rig(
    drivers: Mapping[str, Driver],
    transmission: ArmTransmission,
    *,
    disable_on_fault: bool = False,
) -> HwRig:
    """Open the hardware and build the loop (inactive until its first tick)."""
    tree = small_arm()
    hardware = ArmHardware(drivers, transmission)
    await hardware.open()
    setup = ControlSetup(
        name="small-arm",
        joint_names=tuple(tree.joint_names),
        lower=np.array(tree.limits.lower),
        upper=np.array(tree.limits.upper),
        limits=LIMITS,
        loop=LoopSettings(
            period_s=PERIOD_S,
            joint_tolerance=0.01,
            settle_timeout_s=2.0,
            disable_on_fault=disable_on_fault,
        ),
        safety=THRESHOLDS,
        transmission=transmission,
        drivers={},  # built by the caller, on its own buses
        realtime_priority=0,
    )
    rig = HwRig(None, hardware, [], tree)  # type: ignore[arg-type]
    rig.loop = build_loop(setup, hardware, Schedule(PERIOD_S, time.monotonic), rig.emit)
    rig.sent = record_writes(rig.loop)
    return rig


async def stop_rig(rig: HwRig) -> None:
    with contextlib.suppress(DriverError):
        await rig.hardware.disable()
    await rig.hardware.close()


# -- ODrive on a virtual CAN bus -------------------------------------------------------------------

ODRIVE_DEVICES = ("axis0", "axis1")
ODRIVE_DIRECTIONS = (1, -1)
ODRIVE_COUNT = 2 * math.pi / MotorParams().counts_per_rev  # one encoder count, rad at the motor


class PluggableCan:
    """The driver's bus factory: a python-can ``virtual`` bus on `channel` that can be unplugged
    like a USB-CAN adapter: `unplug()` shuts the open buses down under their users, and opening
    fails until `plug()`."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.plugged = True
        self.buses: list[can.BusABC] = []

    def __call__(self) -> can.BusABC:
        if not self.plugged:
            raise can.CanInitializationError(f"no CAN interface {self.channel!r} (unplugged)")
        bus = can.Bus(interface="virtual", channel=self.channel)
        self.buses.append(bus)
        return bus

    def unplug(self) -> None:
        self.plugged = False
        for bus in self.buses:
            bus.shutdown()

    def plug(self) -> None:
        self.plugged = True


@dataclass
class ODriveBench:
    rig: HwRig
    sim: SimulatedODrive
    bus: PluggableCan
    transmission: ArmTransmission
    stalls: StallProbe  # the reference of the simulated axes (tasks on the rig's loop)

    def silence(self, silent: bool) -> None:
        for axis in self.sim.axes.values():
            axis.faults.silent = silent

    def true_q(self) -> Array:
        """The joints' true positions, from the simulated motors' shafts."""
        motor = [
            direction * axis.motor.sample().position
            for direction, axis in zip(ODRIVE_DIRECTIONS, self.sim.axes.values(), strict=True)
        ]
        return self.transmission.joint_positions(motor)

    def resolution(self) -> Array:
        """One encoder count in joint units, per joint (0 for the fixed joint)."""
        return _joint_resolution(self.transmission, ODRIVE_COUNT)


@contextlib.asynccontextmanager
async def odrive_bench(
    *,
    watchdog_timeout_s: float | None = 0.5,
    disable_on_fault: bool = False,
    homing: Mapping[str, Any] | None = None,
) -> AsyncIterator[ODriveBench]:
    """Two simulated ODrive axes (with their watchdog armed, as the driver recommends) and a loop
    on the real `ODriveDriver`, on a fresh virtual channel, at real-time priority
    (`at_sim_priority`). `homing`: axis0's ``homing`` param."""
    with at_sim_priority():
        async with _odrive_bench(watchdog_timeout_s, disable_on_fault, homing) as bench:
            yield bench


@contextlib.asynccontextmanager
async def _odrive_bench(
    watchdog_timeout_s: float | None, disable_on_fault: bool, homing: Mapping[str, Any] | None
) -> AsyncIterator[ODriveBench]:
    channel = f"armd-faults-{uuid.uuid4().hex}"
    transmission = small_arm_transmission("odrive", ODRIVE_DEVICES)
    motor_q0 = transmission.motor_positions(q(*Q0))
    configs = [
        SimAxisConfig(
            node_id=node_id,
            motor=MotorParams(initial_position=ODRIVE_DIRECTIONS[node_id] * motor_q0[node_id]),
            heartbeat_period_s=0.02,
            encoder_period_s=0.005,
            watchdog_timeout_s=watchdog_timeout_s,
            seed=node_id,
        )
        for node_id in (0, 1)
    ]
    params = ODriveParams.model_validate(
        {
            "interface": "virtual",
            "channel": channel,
            "devices": {
                name: {
                    "node_id": node_id,
                    "direction": ODRIVE_DIRECTIONS[node_id],
                    **({"homing": homing} if homing is not None and node_id == 0 else {}),
                }
                for node_id, name in enumerate(ODRIVE_DEVICES)
            },
            "open_timeout_s": 0.5,
            "enable_timeout_s": 2.0,
            "feedback_timeout_s": 0.5,  # generous: a loaded test machine delays frames
        }
    )
    bus = PluggableCan(channel)
    async with SimulatedODrive.create("virtual", channel, configs) as sim:
        rig = await start_rig(
            {"odrive": ODriveDriver(params, bus_factory=bus)},
            transmission,
            disable_on_fault=disable_on_fault,
        )
        try:
            with StallProbe(late_s=STALL_S) as stalls:
                yield ODriveBench(rig, sim, bus, transmission, stalls)
        finally:
            await stop_rig(rig)


# -- Dynamixel on a pty behind a stable link -------------------------------------------------------

DXL_IDS = (1, 2)
DXL_DEVICES = ("servo1", "servo2")
DXL_CENTRE = math.pi  # rad at the device: joints stay within its first turn, which a reboot keeps
DXL_COUNT = 2 * math.pi / 4096
DXL_REPLY_MARGIN_S = 0.015  # a pty served by a Python thread: a loaded machine's jitter


class PluggableChain:
    """A simulated Dynamixel chain behind a stable symlink `link` (as ``/dev/serial/by-id/...``).

    `unplug()` takes the adapter away (its pty hangs up and the link disappears); `plug()` serves
    the same ids on a new pty behind the same link, the servos where they were.
    """

    def __init__(self, link: Path, initial_positions: Mapping[int, float]) -> None:
        self.link = link
        self.chain: SimulatedDynamixelChain | None = None
        self._retired: SimulatedDynamixelChain | None = None
        self._positions = dict(initial_positions)

    def plug(self) -> SimulatedDynamixelChain:
        if self._retired is not None:
            self._positions = {i: self.device_position(i, self._retired) for i in DXL_IDS}
        chain = SimulatedDynamixelChain(
            DXL_IDS,
            initial_positions=self._positions,
            motor_params=MotorParams(counts_per_rev=4096),
            reboot_s=0.05,
        )
        chain.start()
        staged = self.link.with_name(self.link.name + ".new")
        staged.unlink(missing_ok=True)
        os.symlink(chain.port, staged)
        os.replace(staged, self.link)
        self.chain = chain
        return chain

    def unplug(self) -> None:
        chain, self.chain = self.chain, None
        assert chain is not None
        chain.disconnect()
        self.link.unlink(missing_ok=True)
        self._retired = chain

    def stop(self) -> None:
        if self.chain is not None:
            self.chain.stop()
        self.link.unlink(missing_ok=True)

    @property
    def current(self) -> SimulatedDynamixelChain:
        assert self.chain is not None, "the chain is unplugged"
        return self.chain

    def device_position(
        self, device_id: int, chain: SimulatedDynamixelChain | None = None
    ) -> float:
        with (chain or self.current).device(device_id) as device:
            return device.motor.sample().position

    def device_velocity(self, device_id: int) -> float:
        with self.current.device(device_id) as device:
            return device.motor.sample().velocity


@dataclass
class DynamixelBench:
    rig: HwRig
    port: PluggableChain
    transmission: ArmTransmission
    stalls: PtyStallProbe  # the reference of the chain's thread and its pty

    def true_q(self) -> Array:
        motor = [self.port.device_position(i) - DXL_CENTRE for i in DXL_IDS]
        return self.transmission.joint_positions(motor)

    def resolution(self) -> Array:
        return _joint_resolution(self.transmission, DXL_COUNT)


@contextlib.asynccontextmanager
async def dynamixel_bench(
    tmp_path: Path, *, bus_watchdog_s: float | None = 0.5, disable_on_fault: bool = False
) -> AsyncIterator[DynamixelBench]:
    """Two simulated X-series servos on a pty reached through ``tmp_path/ttyDXL`` and a loop on
    the real `DynamixelDriver` (its Bus Watchdog armed), at real-time priority
    (`at_sim_priority`)."""
    with at_sim_priority():
        async with _dynamixel_bench(tmp_path, bus_watchdog_s, disable_on_fault) as bench:
            yield bench


@contextlib.asynccontextmanager
async def _dynamixel_bench(
    tmp_path: Path, bus_watchdog_s: float | None, disable_on_fault: bool
) -> AsyncIterator[DynamixelBench]:
    transmission = small_arm_transmission("dxl", DXL_DEVICES)
    motor_q0 = transmission.motor_positions(q(*Q0))
    port = PluggableChain(
        tmp_path / "ttyDXL", {i: DXL_CENTRE + motor_q0[n] for n, i in enumerate(DXL_IDS)}
    )
    port.plug()
    params = DynamixelParams.model_validate(
        {
            "port": str(port.link),
            "devices": {
                name: {"id": i, "offset_rad": -DXL_CENTRE}
                for name, i in zip(DXL_DEVICES, DXL_IDS, strict=True)
            },
            "bus_watchdog_s": bus_watchdog_s,
            "reply_margin_s": DXL_REPLY_MARGIN_S,
            "usb_latency_s": 0.0,
        }
    )
    try:
        rig = await start_rig(
            {"dxl": DynamixelDriver(params)}, transmission, disable_on_fault=disable_on_fault
        )
        try:
            with PtyStallProbe(late_s=STALL_S) as stalls:
                yield DynamixelBench(rig, port, transmission, stalls)
        finally:
            await stop_rig(rig)
    finally:
        port.stop()


def _joint_resolution(transmission: ArmTransmission, count: float) -> Array:
    resolution = np.zeros(len(transmission.joint_names))
    resolution[transmission.driven] = [count / t.gear_ratio for t in transmission.joints]
    return resolution


async def pause(seconds: float) -> None:
    """The control loop stalls: no tick, so nothing is read or written."""
    await asyncio.sleep(seconds)


# -- scenario steps shared by the ODrive and Dynamixel tests ---------------------------------------


class Bench(Protocol):
    """A rig and the simulated devices behind it, and the reference of their threads."""

    rig: HwRig

    @property
    def stalls(self) -> StallProbe | PtyStallProbe | None:
        """The reference of the devices' threads (None: none, and no stall excuses anything)."""
        ...

    def true_q(self) -> Array:
        """The joints' true positions, from the simulated motors' shafts (rad)."""
        ...

    def resolution(self) -> Array:
        """One encoder count in joint units, per joint (rad; 0 for the fixed joint)."""
        ...


async def start_moving(bench: Bench, goal_id: str = "g") -> None:
    """Wait for the loop to enable, then start a long move and wait until it is well under way."""
    rig, loop = bench.rig, bench.rig.loop
    await rig.run_until(lambda: loop.mode == Mode.HOLDING, "the loop to enable")
    loop.handle(move(goal_id, 1.2, -1.0))
    await rig.run_until(
        lambda: loop.commanded is not None and abs(loop.commanded.velocity[0]) > 0.5,
        "the motion to be under way",
    )
    assert loop.mode == Mode.MOVING


def assert_latched(rig: HwRig, fault: Fault) -> None:
    """The loop is in FAULT with `fault`, which is what was last published."""
    assert rig.loop.mode == Mode.FAULT
    assert rig.loop.fault == fault
    assert rig.faults[-1] == fault


async def assert_goals_refused_while_latched(rig: HwRig, goal_id: str = "refused") -> None:
    mode = rig.loop.mode
    rig.loop.handle(move(goal_id, 0.0, 0.0))
    await rig.run_until(lambda: rig.final(goal_id) is not None, "the refusal")
    reason = f"arm is {mode.value}: reset first"
    assert rig.finals(goal_id) == [StatusUpdate(goal_id, GoalStatus.ABORTED, reason)]


async def assert_reset_restarts_from_the_measured_position(bench: Bench) -> None:
    """Reset: the loop holds again with the fault cleared; its first command equals the measured
    position (and the true shaft position within the encoder resolution), it holds there without
    a jump, and a new goal succeeds."""
    rig, loop = bench.rig, bench.rig.loop
    loop.handle(Reset())
    await rig.run_until(lambda: loop.mode == Mode.HOLDING, "the reset to re-enable")
    assert loop.fault is None
    assert rig.faults[-1] is None
    restart = rig.last_restart()
    np.testing.assert_array_equal(restart.position, restart.measured)
    tolerance = 2 * float(bench.resolution().max())
    np.testing.assert_allclose(restart.position, bench.true_q(), atol=tolerance)
    await rig.run_for(0.3)
    assert loop.commanded is not None
    np.testing.assert_allclose(loop.commanded.position, restart.position, atol=1e-12)
    np.testing.assert_allclose(bench.true_q(), restart.position, atol=tolerance)

    goal_id = f"after-reset-{len(rig.statuses)}"
    started = time.monotonic()
    loop.handle(move(goal_id, 0.2, 0.3))
    await rig.run_until(lambda: rig.final(goal_id) is not None, "the new goal to end")
    if held_through_a_stall(bench, goal_id, started):
        return
    assert rig.finals(goal_id) == [StatusUpdate(goal_id, GoalStatus.SUCCEEDED)]
    assert loop.measured is not None
    np.testing.assert_allclose(loop.measured.position, q(0.2, 0.3), atol=0.01)


def held_through_a_stall(bench: Bench, goal_id: str, started: float) -> bool:
    """Whether goal `goal_id` (sent at `started`) was aborted by a hold on stale feedback that a
    stall explains: one the bench's probe measured, since then, of at least half the hold's
    threshold (the probe's and the driver's transactions are not in phase, and the reads lost
    at either end of a stall each add a period). The rig runs at real-time priority, but a
    pty's bytes pass through a kernel worker at normal priority: a stall starves the loop of
    replies, and it holds the arm, as it must when a real bus goes quiet."""
    final = bench.rig.final(goal_id)
    assert final is not None
    held = final.status is GoalStatus.ABORTED and (final.reason or "").startswith("stale feedback")
    longest_s = 0.0 if bench.stalls is None else bench.stalls.longest_s(started)
    assert not held or longest_s >= THRESHOLDS.stale_hold_s / 2, (final, longest_s)
    return held


async def assert_holds_then_faults_on_stale_feedback(rig: Any) -> Fault:
    """A device went silent mid-motion: the goal is aborted by a hold (the motion stops, the
    drives stay on), then the stale feedback latches a fault; returns that fault."""
    loop = rig.loop
    await rig.run_until(lambda: rig.final("g") is not None, "the hold")
    assert loop.mode == Mode.STOPPING  # held: the motion stops, the drives stay on
    held = rig.final("g")
    assert held is not None
    assert held.status is GoalStatus.ABORTED
    age = re.fullmatch(
        r"stale feedback: joint 'shoulder': feedback (\d+\.\d+) s old", held.reason or ""
    )
    assert age is not None, held.reason
    assert float(age[1]) >= THRESHOLDS.stale_hold_s  # >=: the message rounds to the ms

    await rig.run_until(lambda: loop.mode == Mode.FAULT, "the stale-feedback fault")
    fault = rig.faults[-1]
    assert fault is not None
    assert (fault.code, fault.joint) == ("stale_feedback", "shoulder")
    silent_for = re.match(r"joint 'shoulder': no valid feedback for (\d+\.\d+) s", fault.message)
    assert silent_for is not None, fault.message
    assert float(silent_for[1]) >= THRESHOLDS.stale_fault_s  # >=: rounded to the ms
    assert rig.modes.index(Mode.STOPPING) < rig.modes.index(Mode.FAULT)
    return fault
