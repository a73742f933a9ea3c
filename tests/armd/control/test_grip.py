"""A held grip (`armd.control.grip`), in-process on the simulated arm: a gripper that closed on an
object (`MotorFaults.block_at` between the fingers) keeps holding it, commanded inside it at its
grip, through every goal, stream and stop that does not name the gripper, and through the e-stop
and its reset; those goals succeed without waiting for the gripper to reach a command it never
reaches. A goal, pose or stream that names the gripper, turning the drives off, or a stall of the
gripper releases it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from armd.link.messages import (
    Goal,
    GoalStatus,
    GripperGoal,
    JointsGoal,
    KeypointsGoal,
    Mode,
    NamedGoal,
    PoseGoal,
    StatusUpdate,
    StopGoal,
    StreamEnd,
    StreamJoints,
    StreamMessage,
    StreamPose,
    StreamTwist,
    TrajectoryGoal,
)
from armd.link.protocol import EngageEstop, Reset
from armd.planning.goals import GoalPipeline
from armd.planning.stream_cartesian import CartesianStream
from armd.planning.stream_input import StreamInput, StreamSettings
from kinematics.ik import IKOptions
from tests.armd.control.test_gripper_stall import (
    GRIP_JOINT,
    gripper_rig,
    obstacle_at,
    stall_on,
)
from tests.armd.rig import PERIOD, Rig

OBJECT = 0.4  # the gripper joint's position where the object is (closing runs from 1 to 0)
GRIP_EFFORT = 0.3  # the goals' grip, in the simulated device's effort (max_effort 1)
ELBOW = 2


async def holding(**options: object) -> tuple[Rig, GoalPipeline, float]:
    """A rig whose gripper closed on the object and holds it, at rest; the command it holds at."""
    rig, pipeline, _ = await gripper_rig(**options)  # type: ignore[arg-type]
    obstacle_at(rig, OBJECT)
    final = await run_goal(rig, pipeline, GripperGoal("grip", opening=0.0, effort=GRIP_EFFORT))
    assert final.reason is not None
    assert final.reason.startswith("held: wrist_3_joint effort")
    await rig.run_until(lambda: not rig.loop.busy)
    commanded = rig.loop.commanded
    assert commanded is not None
    assert commanded.position[GRIP_JOINT] < OBJECT - 0.01  # inside the object: that is the grip
    assert_holds(rig, float(commanded.position[GRIP_JOINT]))
    return rig, pipeline, float(commanded.position[GRIP_JOINT])


async def run_goal(rig: Rig, pipeline: GoalPipeline, goal: Goal) -> StatusUpdate:
    """Submit `goal` (planned as the daemon plans it), run until its final status, which must be
    ``succeeded``, and return it."""
    pipeline.submit(goal)
    await pipeline.plan_pending()
    await rig.run_until(lambda: rig.final(goal.goal_id or "") is not None)
    final = rig.final(goal.goal_id or "")
    assert final is not None
    assert final.status == GoalStatus.SUCCEEDED, final
    return final


def assert_holds(rig: Rig, command: float, *, fault: str | None = None) -> None:
    """Still commanded where it closed on the object, on it, pushing at least at the grip (the
    command is where the effort reached the grip); the fault latched (code), if any."""
    commanded, measured = rig.loop.commanded, rig.loop.measured
    assert commanded is not None
    assert measured is not None
    assert measured.effort is not None
    assert commanded.position[GRIP_JOINT] == pytest.approx(command, abs=1e-9)
    assert measured.position[GRIP_JOINT] == pytest.approx(OBJECT, abs=0.01)
    assert abs(measured.effort[GRIP_JOINT]) >= GRIP_EFFORT
    assert rig.loop.motions.held is not None
    assert (rig.loop.fault.code if rig.loop.fault else None) == fault


def assert_released(rig: Rig) -> None:
    measured = rig.loop.measured
    assert measured is not None
    assert measured.effort is not None
    assert rig.loop.motions.held is None
    assert abs(measured.effort[GRIP_JOINT]) < GRIP_EFFORT / 2


def measured(rig: Rig) -> np.ndarray:
    assert rig.loop.measured is not None
    return rig.loop.measured.position.copy()


# -- goals that do not name the gripper ------------------------------------------------------------


def _joints(rig: Rig) -> Goal:
    return JointsGoal("next", {"elbow_joint": 1.0})


def _named(rig: Rig) -> Goal:
    return NamedGoal("next", "carry")


def _trajectory(rig: Rig) -> Goal:
    q = measured(rig)
    points = ((q[0], q[ELBOW]), (q[0] + 0.2, q[ELBOW] + 0.3), (q[0] + 0.3, q[ELBOW] + 0.4))
    return TrajectoryGoal("next", ("shoulder_pan_joint", "elbow_joint"), (0.0, 0.5, 1.0), points)


def _pose(rig: Rig) -> Goal:
    tcp = rig.tree.fk(measured(rig), "tool0").translation + np.array([0.05, 0.0, -0.03])
    return PoseGoal("next", (float(tcp[0]), float(tcp[1]), float(tcp[2])))


def _pose_of_a_link_the_gripper_does_not_move(rig: Rig) -> Goal:
    """As a real gripper joint, off the tool's chain: IK leaves it at its seed, which must be its
    commanded position (the measured one, on the object's surface, would let go)."""
    link = rig.tree.fk(measured(rig), "wrist_1_link").translation + np.array([0.0, 0.03, -0.03])
    return PoseGoal("next", (float(link[0]), float(link[1]), float(link[2])), link="wrist_1_link")


def _oriented_pose(rig: Rig) -> Goal:
    """A pose reachable without moving the gripper joint (the rig's gripper is the UR5's last
    joint: IK solves with it where it is commanded)."""
    q = measured(rig) + np.array([0.2, 0.1, -0.2, 0.1, 0.1, 0.0])
    q[GRIP_JOINT] = rig.loop.commanded.position[GRIP_JOINT]  # type: ignore[union-attr]
    target = rig.tree.fk(q, "tool0")
    position = tuple(float(v) for v in target.translation)
    quaternion = tuple(float(v) for v in target.quaternion)
    return PoseGoal("next", position, quaternion)  # type: ignore[arg-type]


def _linear(rig: Rig) -> Goal:
    tcp = rig.tree.fk(measured(rig), "tool0").translation + np.array([0.0, 0.05, 0.0])
    return PoseGoal("next", (float(tcp[0]), float(tcp[1]), float(tcp[2])), motion="linear")


def _keypoints(rig: Rig) -> Goal:
    links = ("upper_arm_link", "forearm_link", "wrist_2_link", "tool0")
    q = measured(rig) + np.array([0.3, 0.2, -0.2, 0.1, 0.0, 0.0])
    points = tuple(tuple(float(v) for v in rig.tree.fk(q, link).translation) for link in links)
    return KeypointsGoal("next", links, points)  # type: ignore[arg-type]


GOALS: dict[str, Callable[[Rig], Goal]] = {
    "joints": _joints,
    "named": _named,
    "trajectory": _trajectory,
    "pose": _pose,
    "pose-off-the-chain": _pose_of_a_link_the_gripper_does_not_move,
    "oriented-pose": _oriented_pose,
    "linear": _linear,
    "keypoints": _keypoints,
}


@pytest.mark.parametrize("make", GOALS.values(), ids=GOALS.keys())
async def test_a_goal_that_does_not_name_the_gripper_moves_the_arm_and_keeps_the_grip(
    make: Callable[[Rig], Goal],
) -> None:
    rig, pipeline, command = await holding()
    before = measured(rig)
    await run_goal(rig, pipeline, make(rig))
    moved = np.abs(measured(rig) - before)
    assert np.delete(moved, GRIP_JOINT).max() > 0.02  # the arm moved
    await rig.run(int(0.5 / PERIOD))
    assert_holds(rig, command)


async def test_goals_one_after_another_keep_the_grip_and_the_open_goal_releases_it() -> None:
    rig, pipeline, command = await holding()
    for make in GOALS.values():
        await run_goal(rig, pipeline, make(rig))
        assert_holds(rig, command)
    final = await run_goal(rig, pipeline, GripperGoal("open", opening=1.0))
    assert final.reason is None
    assert measured(rig)[GRIP_JOINT] == pytest.approx(1.0, abs=0.005)  # the joint tolerance
    assert_released(rig)
    await run_goal(rig, pipeline, JointsGoal("after", {"elbow_joint": 0.3}))
    assert rig.loop.motions.held is None


async def test_a_stop_keeps_the_grip() -> None:
    rig, pipeline, command = await holding()
    pipeline.submit(JointsGoal("moving", {"elbow_joint": 2.0}, speed=0.2))
    await rig.run(int(0.3 / PERIOD))
    await run_goal(rig, pipeline, StopGoal("stop"))
    assert rig.final("moving").status == GoalStatus.ABORTED  # type: ignore[union-attr]
    await rig.run_until(lambda: not rig.loop.busy)
    assert_holds(rig, command)
    await run_goal(rig, pipeline, JointsGoal("again", {"elbow_joint": 1.0}))
    assert_holds(rig, command)


async def test_the_estop_and_its_reset_keep_the_grip_where_it_held() -> None:
    """A reset restarts from the measured position, but the gripper where it holds: restarting
    it at its measured position, on the object's surface, would let go of the object."""
    rig, pipeline, command = await holding()
    pipeline.submit(JointsGoal("moving", {"elbow_joint": 2.0}, speed=0.2))
    await rig.run(int(0.3 / PERIOD))
    rig.loop.handle(EngageEstop())
    await rig.run_until(lambda: rig.loop.mode == Mode.ESTOP and not rig.loop.busy)
    assert rig.final("moving").status == GoalStatus.ABORTED  # type: ignore[union-attr]
    assert_holds(rig, command)
    rig.loop.handle(Reset())
    await rig.run_until(lambda: rig.loop.mode == Mode.HOLDING)
    await rig.run(int(0.5 / PERIOD))
    assert_holds(rig, command)
    await run_goal(rig, pipeline, JointsGoal("again", {"elbow_joint": 1.0}))
    assert_holds(rig, command)


async def test_a_fault_of_another_joint_and_its_reset_keep_the_grip() -> None:
    """The elbow jams (its following error faults): the arm stops, the gripper keeps holding; once
    the jam is gone, the reset restarts the arm with the gripper where it holds."""
    rig, pipeline, command = await holding()
    elbow = measured(rig)[ELBOW]
    jam = elbow + 0.1
    rig.driver.motor("m2").faults.block_at = -(jam - 0.2)  # m2 = -(elbow - 0.2), the rig's
    pipeline.submit(JointsGoal("jammed", {"elbow_joint": elbow + 0.5}, speed=0.3))
    await rig.run_until(lambda: rig.loop.fault is not None)
    assert rig.loop.fault is not None
    assert (rig.loop.fault.code, rig.loop.fault.joint) == ("following_error", "elbow_joint")
    assert rig.final("jammed").status == GoalStatus.ABORTED  # type: ignore[union-attr]
    await rig.run_until(lambda: not rig.loop.busy)
    await rig.run(int(0.5 / PERIOD))
    assert_holds(rig, command, fault="following_error")
    rig.driver.motor("m2").faults.block_at = None
    rig.loop.handle(Reset())
    await rig.run_until(lambda: rig.loop.mode == Mode.HOLDING)
    await rig.run(int(0.5 / PERIOD))
    assert_holds(rig, command)
    await run_goal(rig, pipeline, JointsGoal("after", {"elbow_joint": elbow + 0.3}))
    assert_holds(rig, command)


async def test_drives_turned_off_on_the_estop_let_go_and_restart_where_the_gripper_is() -> None:
    """`safety.on_fault: disable`: a gripper without torque holds nothing; after the reset it is
    commanded where it is, like every joint, and later goals count it again."""
    rig, pipeline, _ = await holding(disable_on_fault=True)
    rig.loop.handle(EngageEstop())
    await rig.run_until(lambda: rig.loop.commanded is None)
    assert rig.loop.motions.held is None
    rig.loop.handle(Reset())
    await rig.run_until(lambda: rig.loop.mode == Mode.HOLDING)
    await rig.run(int(0.2 / PERIOD))
    commanded = rig.loop.commanded
    assert commanded is not None
    assert commanded.position[GRIP_JOINT] == pytest.approx(OBJECT, abs=0.01)
    assert_released(rig)
    await run_goal(rig, pipeline, JointsGoal("after", {"elbow_joint": 1.0}))


# -- what releases the grip -----------------------------------------------------------------------


RELEASING: dict[str, Goal] = {
    "joints": JointsGoal("next", {"elbow_joint": 1.0, "wrist_3_joint": 0.7}),
    "named": NamedGoal("next", "home"),  # names the gripper: open
    "gripper-position": GripperGoal("next", opening=0.7),
}


@pytest.mark.parametrize("goal", RELEASING.values(), ids=RELEASING.keys())
async def test_a_goal_that_names_the_gripper_moves_it_and_releases_the_grip(goal: Goal) -> None:
    rig, pipeline, _ = await holding()
    await run_goal(rig, pipeline, goal)
    assert measured(rig)[GRIP_JOINT] > OBJECT + 0.2  # off the object, where the goal put it
    assert_released(rig)


async def test_closing_again_harder_holds_at_the_new_grip() -> None:
    rig, pipeline, command = await holding()
    final = await run_goal(rig, pipeline, GripperGoal("harder", opening=0.0, effort=0.6))
    assert final.reason is not None
    assert final.reason.startswith("held: wrist_3_joint effort")
    await rig.run_until(lambda: not rig.loop.busy)
    measured_state = rig.loop.measured
    assert measured_state is not None
    assert measured_state.effort is not None
    assert abs(measured_state.effort[GRIP_JOINT]) >= 0.6
    assert rig.loop.commanded.position[GRIP_JOINT] < command  # type: ignore[union-attr]
    assert rig.loop.motions.held is not None


async def test_a_stall_of_the_held_gripper_releases_it() -> None:
    """Stall protection still watches the gripper: a stall effort below the grip faults, and the
    gripper is commanded where it is (it stops pushing)."""
    rig, _pipeline, _ = await holding(stall=stall_on(GRIP_JOINT, effort=0.25, time_s=0.2))
    await rig.run_until(lambda: rig.loop.fault is not None)
    assert rig.loop.fault is not None
    assert rig.loop.fault.code == "stall"
    await rig.run(int(0.5 / PERIOD))
    assert_released(rig)


# -- streams ---------------------------------------------------------------------------------------


def stream_input(rig: Rig, pipeline: GoalPipeline) -> StreamInput:
    """The daemon's stream input in front of the rig's loop (`armd.daemon.process`): the gripper,
    which IK never moves, is the planner's (the rig fixes no joint)."""
    names = rig.tree.joint_names
    assert rig.ledger is not None
    assert rig.port is not None
    limits = rig.tree.limits
    cartesian = CartesianStream(
        rig.tree,
        IKOptions(restarts=False, max_joint_change=1.0),
        np.array([name not in pipeline.planner.hold for name in names]),
        np.array(limits.lower),
        np.array(limits.upper),
    )
    return StreamInput(
        StreamSettings(True, 0.1, "tool0"),
        cartesian,
        rig.port,
        rig.ledger,
        rig.statuses.append,
        clock=rig.clock,
    )


def _stream_joints(rig: Rig, seq: int) -> StreamMessage:
    return StreamJoints("s", seq, {"elbow_joint": float(measured(rig)[ELBOW]) + 0.03})


def _stream_pose(rig: Rig, seq: int) -> StreamMessage:
    tcp = rig.tree.fk(measured(rig), "tool0").translation + np.array([0.003, 0.0, 0.0])
    return StreamPose("s", seq, (float(tcp[0]), float(tcp[1]), float(tcp[2])), None, "tool0")


def _stream_twist(rig: Rig, seq: int) -> StreamMessage:
    return StreamTwist("s", seq, (0.05, 0.0, 0.0), (0.0, 0.0, 0.0))


STREAMS: dict[str, Callable[[Rig, int], StreamMessage]] = {
    "joints": _stream_joints,
    "pose": _stream_pose,
    "twist": _stream_twist,
}


@pytest.mark.parametrize("make", STREAMS.values(), ids=STREAMS.keys())
async def test_a_stream_that_does_not_name_the_gripper_moves_the_arm_and_keeps_the_grip(
    make: Callable[[Rig, int], StreamMessage],
) -> None:
    rig, pipeline, command = await holding(stream_timeout_s=0.1)
    streams = stream_input(rig, pipeline)
    before = measured(rig)
    for seq in range(1, 41):
        streams.submit(make(rig, seq))
        await rig.run(5)  # 50 Hz
    streams.submit(StreamEnd("s", 41))
    await rig.run_until(lambda: rig.final("s") is not None)
    assert rig.final("s").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    assert np.delete(np.abs(measured(rig) - before), GRIP_JOINT).max() > 0.02  # the arm moved
    await rig.run(int(0.5 / PERIOD))
    assert_holds(rig, command)


async def test_a_stream_that_names_the_gripper_moves_it_and_releases_the_grip() -> None:
    """A leader arm streaming its own gripper to the follower's commands it."""
    rig, pipeline, _ = await holding(stream_timeout_s=0.1)
    streams = stream_input(rig, pipeline)
    streams.submit(StreamJoints("s", 1, {"elbow_joint": 1.0, "wrist_3_joint": 0.8}))
    await rig.run(5)
    streams.submit(StreamEnd("s", 2))
    await rig.run_until(lambda: rig.final("s") is not None)
    assert rig.final("s").status == GoalStatus.SUCCEEDED  # type: ignore[union-attr]
    assert measured(rig)[GRIP_JOINT] == pytest.approx(0.8, abs=0.005)
    assert_released(rig)
