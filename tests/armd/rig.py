"""A control loop on the simulated UR5, ticked by hand on a manual clock (shared by the loop and
goal-pipeline tests). The loop runs in-process through the same two calls as in the control
process: `handle(command)` and `emit(event)`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from armd.api.statuses import StatusLedger
from armd.control.loop import ControlLoop, LoopSettings
from armd.control.safety import SafetyThresholds, StallLimits
from armd.control.timing import Schedule
from armd.control.transmission import ArmTransmission, Transmission
from armd.control.wiring import ControlSetup, DriverSetup, build_hardware, build_loop
from armd.link.messages import Fault, StatusUpdate
from armd.link.protocol import Event, FaultChanged, LoopPort, MoveTo, Sample
from armd.motion.trajectory import MotionLimits
from armd.planning.collision_guard import CollisionGuard
from armd.planning.goals import GoalPipeline, PlanSettings
from drivers.sim.driver import ManualClock, SimDriver
from kinematics import JointLimit, KinematicTree, load_tree

ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
PERIOD = 0.004
VELOCITY, ACCELERATION, JERK = 2.0, 8.0, 160.0
EPS = 1e-9
LIMITS = MotionLimits(np.full(6, VELOCITY), np.full(6, ACCELERATION), np.full(6, JERK))


@dataclass
class Rig:
    loop: ControlLoop
    driver: SimDriver
    clock: ManualClock
    tree: KinematicTree
    statuses: list[StatusUpdate] = field(default_factory=list)
    faults: list[Fault | None] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    commands: list[tuple[int, np.ndarray]] = field(default_factory=list)  # (limiter resets, q)
    ledger: StatusLedger | None = None  # statuses go through it (as in the daemon) when set
    port: LoopPort | None = None  # the daemon's side, in-process

    def emit(self, event: Event) -> None:
        if isinstance(event, StatusUpdate):
            if self.ledger is None:
                self.statuses.append(event)
            else:
                self.ledger.report(event)
        elif isinstance(event, FaultChanged):
            self.faults.append(event.fault)
        elif isinstance(event, Sample):
            self.samples.append(event)
            if self.port is not None:
                self.port.take(event)

    async def run(self, ticks: int) -> None:
        for _ in range(ticks):
            await self.loop.tick()
            if self.loop.commanded is not None:
                self.commands.append(
                    (self.loop.limiter.resets, self.loop.commanded.position.copy())
                )
            self.clock.advance(PERIOD)

    async def run_until(self, condition, limit_s: float = 20.0) -> None:  # type: ignore[no-untyped-def]
        for _ in range(int(limit_s / PERIOD)):
            if condition():
                return
            await self.run(1)
        raise AssertionError("condition not reached in simulated time")

    def final(self, goal_id: str) -> StatusUpdate | None:
        return next((s for s in self.statuses if s.goal_id == goal_id and s.status.is_final), None)


def ur5() -> KinematicTree:
    tree = load_tree(ROBOTS / "ur5.urdf")
    return tree.with_limits(
        {name: JointLimit(-3.0, 3.0, VELOCITY, ACCELERATION) for name in tree.joint_names}
    )


async def make_rig(
    q0: np.ndarray | None = None,
    *,
    disable_on_fault: bool = False,
    statuses: StatusLedger | None = None,
    sample_every: int = 1,
    stall: StallLimits | None = None,
    unfollowed: tuple[int, ...] = (),
    stream_timeout_s: float | None = None,
    handover_ticks: int | None = None,
) -> Rig:
    """The rig; with `statuses`, the loop reports through that ledger (as in the daemon), whose
    output must then be the rig's `statuses` list; `stream_timeout_s` enables streaming;
    `handover_ticks`, the samples' forecast (`Sample.ahead`)."""
    tree = ur5()
    q0 = np.zeros(tree.dof) if q0 is None else q0
    gears = [1.0, 50.0, 1.0, 1.0, 2.0, 1.0]
    signs = [1, 1, -1, 1, 1, 1]
    transmissions = [
        Transmission(name, "sim", f"m{i}", gears[i], signs[i], 0.1 * i)  # type: ignore[arg-type]
        for i, name in enumerate(tree.joint_names)
    ]
    transmission = ArmTransmission(tree.joint_names, transmissions)
    motor_q0 = transmission.motor_positions(q0)
    clock = ManualClock()
    params = SimDriver.Params(
        devices={
            f"m{i}": {
                "initial_position": float(motor_q0[i]),
                "max_velocity": 200.0,
                "max_acceleration": 2000.0,
            }
            for i in range(tree.dof)
        }
    )
    setup = ControlSetup(
        name="rig",
        joint_names=tuple(tree.joint_names),
        lower=np.array(tree.limits.lower),
        upper=np.array(tree.limits.upper),
        limits=LIMITS,
        loop=LoopSettings(
            period_s=PERIOD,
            joint_tolerance=0.005,
            settle_timeout_s=2.0,
            disable_on_fault=disable_on_fault,
            sample_every=sample_every,
            stream_timeout_s=stream_timeout_s,
            handover_ticks=handover_ticks,
        ),
        safety=SafetyThresholds(
            stale_hold_s=0.05,
            stale_fault_s=0.25,
            following_error=0.05,
            following_error_per_velocity=0.1,
            limit_tolerance=0.02,
            stall=stall,
            unfollowed=unfollowed,
        ),
        transmission=transmission,
        drivers={"sim": DriverSetup("sim", "sim", SimDriver, params, tuple(tree.joint_names))},
        realtime_priority=0,
    )
    hardware = build_hardware(setup, clock)
    driver = hardware.drivers["sim"]
    assert isinstance(driver, SimDriver)
    rig = Rig(None, driver, clock, tree, ledger=statuses)  # type: ignore[arg-type]
    rig.loop = build_loop(setup, hardware, Schedule(PERIOD, clock), rig.emit)
    await hardware.open()
    return rig


def assert_within_limits(rig: Rig) -> None:
    """Every command within the position limits; velocity and acceleration (finite differences)
    within theirs, inside each stretch of continuous control (a reset restarts from the measured
    position, which is where the drive already is)."""
    limits = rig.tree.limits
    segments: dict[int, list[np.ndarray]] = {}
    for resets, q in rig.commands:
        segments.setdefault(resets, []).append(q)
    for stretch in segments.values():
        commands = np.array(stretch)
        assert np.all(commands >= limits.lower - EPS)
        assert np.all(commands <= limits.upper + EPS)
        velocity = np.diff(commands, axis=0) / PERIOD
        assert np.all(np.abs(velocity) <= VELOCITY + 1e-6)
        acceleration = np.diff(velocity, axis=0) / PERIOD
        assert np.all(np.abs(acceleration) <= ACCELERATION * (1 + 1e-6) + 1e-6)


def move(goal_id: str, target: list[float], speed: float = 1.0) -> MoveTo:
    return MoveTo(goal_id, np.array(target), LIMITS.scaled(speed))


async def pipeline_rig(
    q0: np.ndarray,
    settings: PlanSettings,
    stall: StallLimits | None = None,
    unfollowed: tuple[int, ...] = (),
    *,
    disable_on_fault: bool = False,
    stream_timeout_s: float | None = None,
    handover_ticks: int | None = None,
    guard: CollisionGuard | None = None,
) -> tuple[Rig, GoalPipeline, list[StatusUpdate]]:
    """A goal pipeline in front of a rig's loop, both reporting through one ledger (as in the
    daemon) into the rig's `statuses`, which is also returned; `guard` checks its goals."""
    statuses: list[StatusUpdate] = []
    ledger = StatusLedger(statuses.append)
    rig = await make_rig(
        q0,
        statuses=ledger,
        stall=stall,
        unfollowed=unfollowed,
        disable_on_fault=disable_on_fault,
        stream_timeout_s=stream_timeout_s,
        handover_ticks=handover_ticks,
    )
    rig.statuses = statuses
    rig.port = LoopPort(rig.loop.handle, ledger.report, rig.tree.dof)
    await rig.run(1)
    pipeline = GoalPipeline(
        rig.tree, "tool0", rig.port, LIMITS, settings, ledger, guard, clock=rig.clock
    )
    return rig, pipeline, statuses
