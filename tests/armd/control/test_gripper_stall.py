"""The gripper goal (close until held, open), the grip held through later goals, streams, stops,
the e-stop and its reset, and stall protection, in-process on the simulated arm: an obstacle in
the simulated motor (`MotorFaults.block_at`) is the object between the fingers, or the jam that
stalls a joint; the simulated drive's effort rises as it pushes."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from armd.control.safety import StallLimits
from armd.link.messages import Fault, GoalStatus, GripperGoal, JointsGoal, Mode
from armd.link.protocol import LatchFault, Reset
from armd.planning.goals import Gripper
from tests.armd.planning.test_goals import SETTINGS
from tests.armd.rig import PERIOD, Rig, pipeline_rig

GRIP_JOINT = 5  # wrist_3_joint, on motor m5 (gear 1, sign 1, offset 0.5)
OPEN, CLOSED = 1.0, 0.0
GRIPPER = Gripper("wrist_3_joint", OPEN, CLOSED, max_effort=1.0, effort=0.4)
Q0 = np.array([0.0, -0.5, 0.5, 0.0, 0.5, OPEN])


POSES = {
    "carry": {"shoulder_pan_joint": 0.4, "elbow_joint": 0.9},  # leaves the gripper alone
    "home": {"shoulder_pan_joint": 0.0, "elbow_joint": 0.5, "wrist_3_joint": OPEN},  # opens it
}


async def gripper_rig(stall: StallLimits | None = None, **options: Any):  # type: ignore[no-untyped-def]
    """The arm holding, its gripper open; `options` as `pipeline_rig`'s."""
    settings = dataclasses.replace(SETTINGS, gripper=GRIPPER, fixed_joints=frozenset(), poses=POSES)
    rig, pipeline, statuses = await pipeline_rig(
        Q0, settings, stall, unfollowed=(GRIP_JOINT,), **options
    )
    await rig.run_until(lambda: rig.loop.mode == Mode.HOLDING)
    return rig, pipeline, statuses


def obstacle_at(rig: Rig, joint_position: float) -> None:
    """An object at this position of the gripper joint (in motor terms, through the rig's
    transmission: m5 = joint - 0.5)."""
    rig.driver.motor("m5").faults.block_at = joint_position - 0.5


async def test_closing_on_an_object_stops_there_holding_it_and_succeeds() -> None:
    rig, pipeline, _statuses = await gripper_rig()
    obstacle_at(rig, 0.4)
    pipeline.submit(GripperGoal("g", opening=0.0, effort=0.3))
    await rig.run_until(lambda: rig.final("g") is not None)
    final = rig.final("g")
    assert final is not None
    assert final.status == GoalStatus.SUCCEEDED
    assert final.reason is not None
    assert final.reason.startswith("held: wrist_3_joint effort")
    measured = rig.loop.measured
    assert measured is not None
    assert measured.effort is not None
    assert measured.position[GRIP_JOINT] == pytest.approx(0.4, abs=0.01)  # at the object
    await rig.run(int(0.5 / PERIOD))  # the stop under way settles: it holds, it does not push on
    assert rig.loop.mode == Mode.HOLDING
    commanded = rig.loop.commanded
    assert commanded is not None
    assert commanded.position[GRIP_JOINT] > 0.2
    assert abs(rig.loop.measured.effort[GRIP_JOINT]) < 1.0  # type: ignore[union-attr]


async def test_closing_on_nothing_reaches_the_closed_position() -> None:
    rig, pipeline, _ = await gripper_rig()
    pipeline.submit(GripperGoal("g", opening=0.0))
    await rig.run_until(lambda: rig.final("g") is not None)
    final = rig.final("g")
    assert final is not None
    assert final.status == GoalStatus.SUCCEEDED
    assert final.reason is None
    assert rig.loop.measured.position[GRIP_JOINT] == pytest.approx(CLOSED, abs=0.01)  # type: ignore[union-attr]


async def test_opening_ignores_the_effort_and_the_other_joints_hold() -> None:
    rig, pipeline, _ = await gripper_rig()
    pipeline.submit(GripperGoal("c", opening=0.0))
    await rig.run_until(lambda: rig.final("c") is not None)
    before = rig.loop.commanded.position.copy()  # type: ignore[union-attr]
    pipeline.submit(GripperGoal("o", opening=0.5, effort=0.0))  # effort 0 would stop a closing
    await rig.run_until(lambda: rig.final("o") is not None)
    assert rig.final("o").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    after = rig.loop.commanded.position  # type: ignore[union-attr]
    assert after[GRIP_JOINT] == pytest.approx(0.5, abs=1e-9)
    np.testing.assert_array_equal(np.delete(after, GRIP_JOINT), np.delete(before, GRIP_JOINT))


async def test_a_gripper_goal_without_a_gripper_is_rejected() -> None:
    rig, pipeline, _statuses = await pipeline_rig(
        Q0, dataclasses.replace(SETTINGS, fixed_joints=frozenset())
    )
    await rig.run_until(lambda: rig.loop.mode == Mode.HOLDING)
    pipeline.submit(GripperGoal("g", opening=1.0))
    final = rig.final("g")
    assert final is not None
    assert final.status == GoalStatus.REJECTED
    assert final.reason == "type: 'gripper': this arm has no gripper (config: gripper)"


def stall_on(joint: int, effort: float = 0.5, time_s: float = 0.2) -> StallLimits:
    efforts = np.full(6, np.inf)
    efforts[joint] = effort
    return StallLimits(efforts, np.full(6, time_s), np.full(6, 0.05))


async def test_a_joint_pushing_against_a_jam_faults_stall_and_stops_pushing() -> None:
    rig, pipeline, _ = await gripper_rig(stall=stall_on(GRIP_JOINT))
    obstacle_at(rig, 0.8)
    pipeline.submit(JointsGoal("j", {"wrist_3_joint": 0.0}))  # not a grip: it pushes on
    await rig.run_until(lambda: rig.loop.fault is not None)
    fault = rig.loop.fault
    assert fault is not None
    assert fault.code == "stall"
    assert fault.joint == "wrist_3_joint"
    assert "while not moving" in fault.message
    assert rig.final("j").status == GoalStatus.ABORTED  # type: ignore[union-attr]
    await rig.run(int(0.5 / PERIOD))
    assert rig.loop.mode == Mode.FAULT
    measured = rig.loop.measured
    assert measured is not None
    assert measured.effort is not None
    # commanded where it stalled: the drive no longer strains against the jam
    assert abs(measured.effort[GRIP_JOINT]) < 0.1
    assert rig.loop.commanded.position[GRIP_JOINT] == pytest.approx(0.8, abs=0.01)  # type: ignore[union-attr]


async def test_holding_a_load_for_less_than_the_stall_time_is_no_stall() -> None:
    rig, pipeline, _ = await gripper_rig(stall=stall_on(GRIP_JOINT, effort=0.5, time_s=10.0))
    obstacle_at(rig, 0.8)
    pipeline.submit(JointsGoal("j", {"wrist_3_joint": 0.0}))
    await rig.run(int(2.0 / PERIOD))
    assert rig.loop.fault is None  # straining 1.5 s of the 10 s allowed
    rig.driver.motor("m5").faults.block_at = None  # the jam is gone: the goal completes
    await rig.run_until(lambda: rig.final("j") is not None)
    assert rig.final("j").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]


async def test_unreported_effort_never_stalls() -> None:
    """A driver that reports no effort (NaN) cannot be judged: no stall, whatever the speed."""
    rig, _pipeline, _ = await gripper_rig(stall=stall_on(GRIP_JOINT, effort=0.0))
    measured = rig.loop.measured
    assert measured is not None
    for k in range(100):
        now = rig.clock() + k * 0.01
        unknown = dataclasses.replace(
            measured, effort=np.full(6, np.nan), timestamp=np.full(6, now)
        )
        assert rig.loop.monitor.check(unknown, now).fault is None


async def test_a_fault_whose_stop_ended_inside_an_obstacle_resets_and_stops_pushing() -> None:
    """A fault found elsewhere (the daemon's contact check) while a joint pushes into a jam: the
    controlled stop ends inside it and holds there, straining; a reset restarts from where the
    joint is, so the strain is no reason to refuse it."""
    rig, pipeline, _ = await gripper_rig(stall=stall_on(GRIP_JOINT, time_s=0.2))
    obstacle_at(rig, 0.8)
    pipeline.submit(JointsGoal("j", {"wrist_3_joint": 0.0}))  # pushes on into the jam
    await rig.run_until(lambda: rig.loop.measured.position[GRIP_JOINT] < 0.85)  # type: ignore[union-attr]
    rig.loop.handle(LatchFault(Fault("contact", "joint 'wrist_3_joint': external torque", None)))
    await rig.run_until(lambda: rig.loop.fault is not None)
    assert rig.loop.fault.code == "contact"  # type: ignore[union-attr]
    await rig.run(int(0.5 / PERIOD))  # at rest, held against the jam longer than the stall time
    measured = rig.loop.measured
    assert measured is not None
    assert measured.effort is not None
    assert abs(measured.effort[GRIP_JOINT]) >= 0.5  # straining: a stall, were the arm holding
    rig.loop.handle(Reset())
    await rig.run_until(lambda: rig.loop.mode == Mode.HOLDING)
    assert rig.loop.fault is None
    await rig.run(int(0.5 / PERIOD))
    assert rig.loop.mode == Mode.HOLDING  # restarted where it stood: no strain, no stall
    assert abs(rig.loop.measured.effort[GRIP_JOINT]) < 0.1  # type: ignore[union-attr]
