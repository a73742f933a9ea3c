"""The end of a grip and the moves after it (`armd.control.grip`): a gripper whose command is
still moving when its effort reaches the grip comes back to its grip (`GripSettle`), and a move
that leaves the gripper out keeps the grip even when the value the planner filled in for the
gripper is not the loop's command any more (it planned from an older sample): in-process on the
simulated UR5 (`tests.armd.rig`) and on the physics-simulated SO-101 of
config/so101_physics.yaml, whose soft gripper servo lags its command onto the cube.

The physics rig ticks by hand: each tick runs the loop once, then steps the physics and the
clock by one period, so nothing depends on timing. It starts at rest at `grasp_cube` with the
gripper open, the jaws around the cube."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import yaml

from armd.config.control_setup import control_setup
from armd.config.load import ArmSetup, load_config
from armd.control.grip import KEPT, GripSettle
from armd.control.hardware import ArmHardware
from armd.control.loop import ControlLoop
from armd.control.timing import Schedule
from armd.control.wiring import build_loop
from armd.daemon.process import plan_settings
from armd.link.messages import GoalStatus, GripperGoal, Mode, NamedGoal, StatusUpdate
from armd.link.protocol import Event, MoveTo, Sample
from armd.motion.trajectory import Setpoint
from armd.planning.planner import Planner
from drivers.mujoco.driver import MujocoDriver
from drivers.sim.driver import ManualClock
from tests.armd.control.test_grip import assert_holds, holding
from tests.armd.control.test_gripper_stall import GRIP_JOINT
from tests.armd.rig import LIMITS, PERIOD

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "config" / "so101_physics.yaml"


@dataclass
class PhysicsRig:
    setup: ArmSetup
    loop: ControlLoop
    driver: MujocoDriver
    clock: ManualClock
    planner: Planner
    statuses: list[StatusUpdate] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)

    @property
    def period_s(self) -> float:
        return self.loop.settings.period_s

    def emit(self, event: Event) -> None:
        if isinstance(event, StatusUpdate):
            self.statuses.append(event)
        elif isinstance(event, Sample):
            self.samples.append(event)

    async def run(self, ticks: int) -> None:
        for _ in range(ticks):
            await self.loop.tick()
            self.driver.advance(self.period_s)
            self.clock.advance(self.period_s)

    async def run_until(self, condition: Callable[[], object], limit_s: float = 10.0) -> None:
        for _ in range(round(limit_s / self.period_s)):
            if condition():
                return
            await self.run(1)
        raise AssertionError("condition not reached in simulated time")

    def final(self, goal_id: str) -> StatusUpdate | None:
        return next((s for s in self.statuses if s.goal_id == goal_id and s.status.is_final), None)

    async def wait_final(self, goal_id: str) -> StatusUpdate:
        await self.run_until(lambda: self.final(goal_id) is not None)
        final = self.final(goal_id)
        assert final is not None
        return final

    def joint(self, name: str) -> int:
        return self.loop.joint_names.index(name)


def _config(directory: Path) -> Path:
    """config/so101_physics.yaml with absolute paths, its devices starting at `grasp_cube`
    with the gripper open."""
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    config["model"] = str((CONFIG.parent / config["model"]).resolve())
    params = config["drivers"]["physics"]["params"]
    params["urdf"] = str(ROOT / "config" / params["urdf"])
    devices = params["devices"]
    grasp = config["poses"]["grasp_cube"]
    for joint, position in grasp.items():
        device = config["joints"][joint]["device"]
        devices[device] = {**devices[device], "initial_position": position}
    config["lock_file"] = str(directory / "armd.lock")
    path = directory / "so101_physics.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


async def physics_rig(directory: Path) -> PhysicsRig:
    """The rig, enabled and holding at `grasp_cube` (the cube settled on the table)."""
    setup = load_config(_config(directory))
    control = control_setup(setup)
    clock = ManualClock()
    (bus,) = control.drivers.values()
    driver = MujocoDriver(bus.params, clock=clock, realtime=False)
    hardware = ArmHardware({bus.name: driver}, control.transmission)
    limits = control.limits
    planner = Planner(setup.tree, setup.tool_link, limits, plan_settings(setup))
    rig = PhysicsRig(setup, None, driver, clock, planner)  # type: ignore[arg-type]
    rig.loop = build_loop(control, hardware, Schedule(control.loop.period_s, clock), rig.emit)
    await hardware.open()
    await rig.run_until(lambda: rig.loop.mode == Mode.HOLDING)
    await rig.run(round(0.2 / rig.period_s))  # the arm and the cube come to rest
    return rig


# -- the settle after a grip ---------------------------------------------------------------------


def test_a_gripper_still_moving_at_its_grip_comes_back_to_it_within_its_limits() -> None:
    """The other joints stop as fast as their limits allow; the gripper, closing at its top
    speed when the grip is reached, stops and returns to where it was commanded then."""
    velocity = np.array([0.5, -0.3, 0.0, 0.2, 0.0, -LIMITS.velocity[GRIP_JOINT]])
    start = Setpoint(np.array([0.1, -0.5, 0.5, 0.0, 0.5, 0.4]), velocity, np.zeros(6))
    settle = GripSettle(start, GRIP_JOINT, 0.4, LIMITS)
    times = np.arange(0.0, settle.duration + 2 * PERIOD, PERIOD)
    samples = [settle.sample(float(t)) for t in times]
    positions = np.array([s.position for s in samples])
    end = samples[-1]
    assert end.position[GRIP_JOINT] == pytest.approx(0.4, abs=1e-9)
    assert np.allclose(end.velocity, 0.0, atol=1e-9)
    assert positions[:, GRIP_JOINT].min() < 0.4 - 0.01  # it did overshoot, then came back
    others = np.delete(np.arange(6), GRIP_JOINT)
    stop = settle.target[others]
    assert np.allclose(end.position[others], stop, atol=1e-9)
    speeds = np.abs(np.array([s.velocity for s in samples]))
    accelerations = np.abs(np.array([s.acceleration for s in samples]))
    assert (speeds <= LIMITS.velocity * (1 + 1e-9)).all()
    assert (accelerations <= LIMITS.acceleration * (1 + 1e-9)).all()


async def test_a_move_whose_planner_filled_in_an_older_gripper_command_keeps_the_grip() -> None:
    """The daemon plans from the latest sample it has; the gripper's command may have moved
    since (a settle under way, or a sample a few ticks old). A move that leaves the gripper out
    (`kept`) keeps the grip whatever value was filled in: the gripper stays at its grip and the
    move succeeds on the other joints."""
    rig, _pipeline, command = await holding()
    commanded = rig.loop.commanded
    assert commanded is not None
    target = commanded.position.copy()
    target[2] += 0.3  # the elbow
    target[GRIP_JOINT] = command + 0.05  # a value the gripper was never commanded at
    kept = frozenset(range(6)) - {2}
    assert rig.ledger is not None
    assert rig.ledger.receive("lift") is None
    rig.ledger.report(StatusUpdate("lift", GoalStatus.ACCEPTED, None))
    rig.loop.handle(MoveTo("lift", target, LIMITS, kept=kept))
    await rig.run_until(lambda: rig.final("lift") is not None)
    final = rig.final("lift")
    assert final is not None
    assert final.status == GoalStatus.SUCCEEDED, final
    assert rig.loop.measured is not None
    assert rig.loop.measured.position[2] == pytest.approx(target[2], abs=0.005)
    await rig.run(int(0.5 / PERIOD))
    assert_holds(rig, command)


# -- the physics SO-101 ----------------------------------------------------------------------------

LATE_TICKS = 5  # how many ticks older than the loop's command the lift's sample is (20 ms)


async def test_the_physics_so101_lifts_the_cube_with_a_move_planned_while_its_grip_settled(
    tmp_path: Path,
) -> None:
    """The soft gripper servo lags its command: when its effort reaches the grip the jaw is
    still moving onto the cube, and after the goal succeeded the command overshoots and comes
    back to its grip. A lift to `over_cube` planned from a sample of that settle reaches the
    loop LATE_TICKS later, its gripper value neither the grip nor the command: it keeps the
    grip, succeeds, and the cube comes up with the jaws, squeezed at about the grip's effort."""
    rig = await physics_rig(tmp_path)
    gripper = rig.joint("gripper")
    cube = rig.driver.object_position("cube")
    rig.loop.handle(rig.planner.plan(GripperGoal("close", opening=0.0), rig.samples[-1]))
    closed = await rig.wait_final("close")
    assert closed.status == GoalStatus.SUCCEEDED
    assert closed.reason is not None
    assert closed.reason.startswith("held: gripper effort")
    held = rig.loop.motions.held
    assert held is not None
    await rig.run(2)  # into the settle
    sample = rig.samples[-1]
    assert sample.held == gripper
    lift = rig.planner.plan(NamedGoal("lift", "over_cube"), sample)
    await rig.run(LATE_TICKS)
    sampled = sample.commanded_position
    assert sampled is not None
    assert rig.loop.commanded is not None
    assert abs(sampled[gripper] - held.position) > 0.001  # neither the grip ...
    assert abs(sampled[gripper] - rig.loop.commanded.position[gripper]) > 0.001  # ... nor now
    rig.loop.handle(lift)
    lifted = await rig.wait_final("lift")
    assert lifted.status == GoalStatus.SUCCEEDED, lifted
    assert rig.loop.motions.held == held
    await rig.run(round(0.5 / rig.period_s))
    assert rig.loop.commanded.position[gripper] == pytest.approx(held.position, abs=KEPT)
    measured = rig.loop.measured
    assert measured is not None
    assert measured.effort is not None
    grip = rig.setup.config.gripper
    assert grip is not None
    stall = rig.setup.config.joints["gripper"].stall
    assert stall is not None
    assert grip.effort * grip.max_effort <= abs(measured.effort[gripper]) < stall.effort
    # over_cube is 8 cm above the cube's grasp: it came up with the jaws
    assert rig.driver.object_position("cube")[2] - cube[2] > 0.07
