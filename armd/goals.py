"""The goal pipeline: validated goals in, planned motion requests out to the control loop.

A goal never blocks the tick. Planning a pose goal (IK seeded from the latest *measured* state,
limit and reachability checks, the "no branch jump" rule, linear paths) runs in a worker thread;
the compiled kernels release the GIL. A joints goal needs only a limit check and is planned
inline. A keypoints goal is mapped (`kinematics.mapping`) from the measured state, in the worker
thread too, and refused when a segment stays more than `KEYPOINTS_TOLERANCE` off its target
direction. The newest goal wins: a goal superseded before it was planned ends as ``preempted``.

Statuses go through the `StatusLedger`, which keeps the contract (``accepted`` or ``rejected``
first, then one final status): ``rejected`` (with the reason) when planning fails, else
``accepted`` and the request goes to the loop, which reports ``succeeded`` / ``aborted`` /
``preempted``. Each goal is isolated: any exception while planning it rejects that goal only
(``internal error: ...``, the traceback logged) and the pipeline carries on.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from armd.messages import (
    Goal,
    GoalStatus,
    GripperGoal,
    JointsGoal,
    KeypointsGoal,
    Mode,
    PoseGoal,
    StatusUpdate,
    StopGoal,
)
from armd.payloads import MIN_SPEED
from armd.protocol import FollowPath, Grip, LoopPort, Move, MoveTo, Sample, Stop, superseded
from armd.ratelimit import RateLimiter
from armd.statuses import StatusLedger
from armd.trajectory import MotionLimits, PlanningError, plan_path
from kinematics import KinematicsError, KinematicTree, Pose
from kinematics.ik import IKOptions
from kinematics.mapping import MappingOptions, map_chain
from kinematics.quaternion import quat_conj, quat_mul, quat_to_axis_angle

__all__ = ["GoalPipeline", "Gripper", "PlanSettings", "Rejected"]

log = logging.getLogger(__name__)
Array = NDArray[np.float64]
Planned = PoseGoal | JointsGoal | KeypointsGoal | GripperGoal
PATH_STEP_MAX_JOINT_CHANGE = 0.25  # rad between neighbouring samples of a linear path
MAX_PATH_SAMPLES = 4000  # IK samples of a linear path: 20 m at the default 5 mm step
# rad (2.9°): the worst segment direction error a keypoints goal may leave. A leader's or a
# skeleton's shape rarely fits our joint axes exactly (our elbow bends in one plane); beyond
# this the arm's shape would visibly differ from the target's, and the goal is refused.
KEYPOINTS_TOLERANCE = 0.05
_KEYPOINTS_OPTIONS = MappingOptions(tolerance=KEYPOINTS_TOLERANCE)
BROKER_LOST = "the broker connection was lost; goals are refused until it is back"


@dataclass(frozen=True, slots=True)
class Gripper:
    """The gripper joint (`GripperGoal`): its positions open and closed, the device effort of a
    full grip, and the default grip (0..1)."""

    joint: str
    open: float
    closed: float
    max_effort: float
    effort: float


@dataclass(frozen=True, slots=True)
class PlanSettings:
    ik: IKOptions  # tolerances, time budget; max_joint_change = the "no branch jump" bound
    linear_step: float  # m between IK samples of a linear path (and its angular counterpart)
    angular_step: float  # rad
    max_linear_speed: float  # m/s
    max_angular_speed: float  # rad/s
    pose_tolerance: tuple[float, float]  # m, rad: success check on the measured pose
    fixed_joints: frozenset[str] = frozenset()
    stop_wait_s: float = 10.0  # how long a linear goal waits for the arm to come to rest
    joint_tolerance: float = 0.005  # rad: the loop's success tolerance for joint targets
    poll_s: float = 0.004  # s: how often a linear goal looks whether the arm is at rest
    gripper: Gripper | None = None


class Rejected(Exception):  # noqa: N818 (an outcome carried through the planner, not an error)
    """Planning refused the goal; the message is the reason sent with the status."""


class GoalPipeline:
    """Plans goals one at a time in a worker thread; newest wins."""

    def __init__(
        self,
        tree: KinematicTree,
        tool_link: str,
        port: LoopPort,
        limits: MotionLimits,
        settings: PlanSettings,
        statuses: StatusLedger,
    ) -> None:
        self.tree = tree
        self.tool_link = tool_link
        self.port = port
        self.limits = limits
        self.settings = settings
        self.statuses = statuses
        self._pending: Planned | None = None
        self._wakeup = asyncio.Event()
        self._sequence = 0
        self.accepting = True  # False while the broker is away and `broker_loss: stop`
        self._closed: str | None = None  # why goals are refused for good (the daemon stops)
        self._errors = RateLimiter(burst=3, interval_s=60.0)

    def submit(self, goal: Goal) -> None:
        """Take a goal (synchronously, from the MQTT task). Stops act at once."""
        if self.statuses.receive(goal.goal_id) is not None:
            return  # its id is in use: rejected
        if self._closed is not None:
            self._status(goal.goal_id, GoalStatus.REJECTED, self._closed)
            return
        self._sequence += 1
        superseded, self._pending = self._pending, None
        if superseded is not None:
            reason = f"superseded by {goal.goal_id or 'a stop'} before it was planned"
            self._status(superseded.goal_id, GoalStatus.PREEMPTED, reason)
        if isinstance(goal, StopGoal):
            self.port.send(Stop(goal.goal_id))
            return
        if isinstance(goal, JointsGoal | GripperGoal):  # microseconds: here, without a hand-off
            try:
                request = self.plan(goal)
            except Exception as exc:
                self._refuse(goal, exc)
                return
            self._send(goal, self._sequence, request)
            return
        self._pending = goal
        self._wakeup.set()

    def close(self, reason: str) -> None:
        """Refuse every goal from now on with `reason`; a goal waiting to be planned is aborted."""
        self._closed = reason
        pending, self._pending = self._pending, None
        if pending is not None:
            self._status(pending.goal_id, GoalStatus.ABORTED, reason)

    async def run(self) -> None:
        """Plan pending goals until cancelled."""
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            await self.plan_pending()

    async def plan_pending(self) -> None:
        """Plan the goal waiting to be planned, if any, and hand it to the loop."""
        goal, self._pending = self._pending, None
        if goal is not None:
            await self._handle(goal)

    async def _handle(self, goal: Planned) -> None:
        sequence = self._sequence
        try:
            if isinstance(goal, PoseGoal) and goal.motion == "linear":
                await self._wait_at_rest(goal.goal_id)
            request = await asyncio.to_thread(self.plan, goal)  # IK may use its time budget
        except Exception as exc:
            self._refuse(goal, exc)
            return
        self._send(goal, sequence, request)

    def _refuse(self, goal: Planned, exc: Exception) -> None:
        """A goal that could not be planned: `Rejected` says why; a bug costs this goal only,
        never the pipeline."""
        if isinstance(exc, Rejected):
            self._status(goal.goal_id, GoalStatus.REJECTED, str(exc))
            return
        if self._errors.allow(type(exc).__name__) is not None:
            log.error("goal %s: planning failed", goal.goal_id, exc_info=exc)
        reason = f"internal error: {type(exc).__name__}: {exc}"
        self._status(goal.goal_id, GoalStatus.REJECTED, reason)

    def _send(self, goal: Planned, sequence: int, request: Move) -> None:
        """Hand a planned goal to the loop, unless it was superseded, the broker lost or the
        pipeline closed while it was planned."""
        if self._closed is not None:
            self._status(goal.goal_id, GoalStatus.REJECTED, self._closed)
            return
        if sequence != self._sequence:  # a newer goal (or a stop) arrived while planning
            self._status(goal.goal_id, GoalStatus.PREEMPTED, superseded(None))
            return
        if not self.accepting:  # the broker was lost while planning: do not start moving now
            self._status(goal.goal_id, GoalStatus.REJECTED, BROKER_LOST)
            return
        self._status(goal.goal_id, GoalStatus.ACCEPTED, None)
        self.port.send(request)

    async def _wait_at_rest(self, goal_id: str) -> None:
        """Linear paths start from rest: stop a running motion first (it is preempted)."""
        if not self.port.busy:
            return
        self.port.send(Stop(None, f"preempted by {goal_id}", GoalStatus.PREEMPTED))
        deadline = asyncio.get_running_loop().time() + self.settings.stop_wait_s
        while self.port.busy:
            if asyncio.get_running_loop().time() > deadline:
                raise Rejected("the arm did not come to rest for the linear move")
            await asyncio.sleep(self.settings.poll_s)

    # -- planning (runs in a worker thread) -------------------------------------------------------

    def plan(self, goal: Planned) -> Move:
        """The loop command for a goal, or `Rejected` with the reason (from the loop's latest
        sample: the measured state seeds IK, the commanded state starts the motion)."""
        if not self.accepting:
            raise Rejected(BROKER_LOST)
        sample = self.port.latest
        if sample.mode in (Mode.FAULT, Mode.ESTOP):  # the loop would abort it: say so now
            raise Rejected(f"arm is {sample.mode.value}: reset first")
        if sample.commanded_position is None or sample.measured_position is None:
            raise Rejected(f"arm is {sample.mode.value}: not ready for goals")
        if not MIN_SPEED <= goal.speed <= 1.0:  # `armd.payloads` checks it; goals built in code too
            raise Rejected(f"speed: {goal.speed!r} must be in [{MIN_SPEED:g}, 1]")
        try:
            if isinstance(goal, JointsGoal):
                return self._plan_joints(goal, sample)
            if isinstance(goal, GripperGoal):
                return self._plan_gripper(goal, sample)
            if isinstance(goal, KeypointsGoal):
                return self._plan_keypoints(goal, sample)
            if goal.motion == "linear":
                return self._plan_linear(goal, sample)
            return self._plan_pose(goal, sample)
        except KinematicsError as exc:  # e.g. a target that is not finite (goals built in code)
            raise Rejected(f"target: {exc}") from None

    def _plan_joints(self, goal: JointsGoal, sample: Sample) -> Move:
        fixed = sorted(set(goal.positions) & self.settings.fixed_joints)
        if fixed:
            raise Rejected(f"positions: joints {fixed} are fixed by the configuration")
        commanded = sample.commanded_position
        assert commanded is not None
        target = self.tree.q_from_mapping(dict(goal.positions), commanded)
        violations = self.tree.limits.check(target)
        if violations:
            raise Rejected("; ".join(str(v) for v in violations))
        return MoveTo(goal.goal_id, target, self.limits.scaled(goal.speed))

    def _plan_gripper(self, goal: GripperGoal, sample: Sample) -> Move:
        """The gripper joint to its opening; the other joints keep their commanded position.
        Closing stops where the grip reaches the goal's effort."""
        gripper = self.settings.gripper
        if gripper is None:
            raise Rejected("type: 'gripper': this arm has no gripper (config: gripper)")
        if not 0.0 <= goal.opening <= 1.0:  # `armd.payloads` checks it; goals built in code too
            raise Rejected(f"position: {goal.opening!r} must be in [0, 1]")
        effort = gripper.effort if goal.effort is None else goal.effort
        if not 0.0 <= effort <= 1.0:
            raise Rejected(f"effort: {effort!r} must be in [0, 1]")
        commanded = sample.commanded_position
        assert commanded is not None
        joint = self.tree.joint_names.index(gripper.joint)
        target = commanded.copy()
        target[joint] = gripper.closed + goal.opening * (gripper.open - gripper.closed)
        closing = abs(target[joint] - gripper.closed) < abs(commanded[joint] - gripper.closed)
        grip = Grip(joint, effort * gripper.max_effort) if closing else None
        return MoveTo(goal.goal_id, target, self.limits.scaled(goal.speed), grip=grip)

    def _plan_keypoints(self, goal: KeypointsGoal, sample: Sample) -> Move:
        """Map the shape from the measured state; the joints it does not decide (and the fixed
        ones) keep their commanded position, like a joints goal's unnamed joints."""
        measured, commanded = sample.measured_position, sample.commanded_position
        assert measured is not None
        assert commanded is not None
        try:
            result = map_chain(
                self.tree,
                goal.links,
                np.array(goal.points),
                measured,
                options=_KEYPOINTS_OPTIONS,
                hold=self.settings.fixed_joints,
            )
        except KinematicsError as exc:
            raise Rejected(f"points: {exc}") from None
        if not result.success:
            raise Rejected(f"points: shape not reachable within the joint limits: {result.message}")
        target = np.where(result.determined, result.q, commanded)
        violations = self.tree.limits.check(target)
        if violations:
            raise Rejected("; ".join(str(v) for v in violations))
        return MoveTo(goal.goal_id, target, self.limits.scaled(goal.speed))

    def _target(self, goal: PoseGoal) -> tuple[str, Pose | Array]:
        link = goal.link or self.tool_link
        if goal.orientation is None:
            return link, np.array(goal.position)
        return link, Pose(goal.position, goal.orientation)

    def _plan_pose(self, goal: PoseGoal, sample: Sample) -> Move:
        link, target = self._target(goal)
        seed = sample.measured_position
        assert seed is not None
        result = self.tree.ik(target, seed, link, self.settings.ik)
        if not result.success:
            raise Rejected(self._why_unreachable(target, seed, link, result.message))
        q = np.array(result.q)
        return MoveTo(
            goal.goal_id,
            q,
            self.limits.scaled(goal.speed),
            self._pose_tolerance(q, link, isinstance(target, Pose)),
        )

    def _pose_tolerance(self, q: Array, link: str, oriented: bool) -> Array:
        """Joint tolerances (rad, the same for every joint) within which the link is within the
        pose tolerance of where it is at q, to first order: an error e per joint moves the link
        by at most e Σ‖J_i‖ (linear rows for the position, angular rows for the orientation)."""
        jacobian = self.tree.jacobian(q, link)
        position, rotation = self.settings.pose_tolerance
        bound = min(self.settings.joint_tolerance, position / _column_sum(jacobian[:3]))
        if oriented:
            bound = min(bound, rotation / _column_sum(jacobian[3:]))
        return np.full(self.tree.dof, bound)

    def _why_unreachable(self, target: Pose | Array, seed: Array, link: str, message: str) -> str:
        """Tell 'out of reach' from 'reachable only by jumping to another branch'."""
        bound = self.settings.ik.max_joint_change
        if bound is not None:
            anywhere = self.tree.ik(target, seed, link, _without_box(self.settings.ik))
            if anywhere.success:
                worst = float(np.max(np.abs(np.asarray(anywhere.q) - seed)))
                return (
                    f"target reachable only by moving a joint {worst:.2f} rad from its current "
                    f"position (limit {bound:g} rad: no branch jumps); move closer first"
                )
        return f"target unreachable within the joint limits: IK {message}"

    def _plan_linear(self, goal: PoseGoal, sample: Sample) -> Move:
        link, target = self._target(goal)
        start_q = sample.commanded_position
        assert start_q is not None
        start = self.tree.fk(start_q, link)
        goal_pose = target if isinstance(target, Pose) else Pose(target, start.quaternion)
        end = self.tree.ik(goal_pose, start_q, link, _without_box(self.settings.ik))
        if not end.success:  # checked first: a far target must not cost thousands of IK samples
            raise Rejected(f"target unreachable within the joint limits: IK {end.message}")
        distance, angle = start.distance_to(goal_pose)
        steps = max(
            1,
            math.ceil(distance / self.settings.linear_step),
            math.ceil(angle / self.settings.angular_step),
        )
        if steps > MAX_PATH_SAMPLES:
            raise Rejected(
                f"linear path of {distance:.3f} m needs {steps} samples (at most "
                f"{MAX_PATH_SAMPLES}; motion.linear_step is {self.settings.linear_step:g} m)"
            )
        waypoints = [start_q]
        step_options = _continuity_options(self.settings.ik)
        for i in range(1, steps + 1):
            pose = _interpolate(start, goal_pose, i / steps)
            result = self.tree.ik(pose, waypoints[-1], link, step_options)
            if not result.success:
                where = ", ".join(f"{v:.3f}" for v in pose.translation)
                raise Rejected(
                    f"linear path infeasible at {100 * i / steps:.0f} % (position [{where}]): "
                    f"{result.message}"
                )
            waypoints.append(np.array(result.q))
        rate = min(
            self.settings.max_linear_speed / max(distance, 1e-9),
            self.settings.max_angular_speed / max(angle, 1e-9),
        )
        try:
            path = plan_path(np.array(waypoints), self.limits.scaled(goal.speed), rate * goal.speed)
        except PlanningError as exc:
            raise Rejected(f"linear path: {exc}") from None
        return FollowPath(goal.goal_id, path, self._pose_tolerance(waypoints[-1], link, True))

    def _status(self, goal_id: str | None, status: GoalStatus, reason: str | None) -> None:
        if status is GoalStatus.REJECTED:
            log.info("goal %s rejected: %s", goal_id, reason)
        self.statuses.report(StatusUpdate(goal_id, status, reason))


def _column_sum(rows: Array) -> float:
    """Σ over the columns of their norms (a floor keeps a zero Jacobian from dividing by 0)."""
    return max(float(np.sum(np.linalg.norm(rows, axis=0))), 1e-9)


def _without_box(options: IKOptions) -> IKOptions:
    return replace(options, max_joint_change=None)


def _continuity_options(options: IKOptions) -> IKOptions:
    """Each path sample is solved from the previous one, without restarts and within a small box:
    a jump between neighbouring samples would leave the straight line."""
    return replace(options, restarts=False, max_joint_change=PATH_STEP_MAX_JOINT_CHANGE)


def _interpolate(start: Pose, end: Pose, s: float) -> Pose:
    """Straight-line position and slerp orientation at s ∈ [0, 1]."""
    position = start.translation + s * (end.translation - start.translation)
    delta = quat_mul(quat_conj(start.quaternion), end.quaternion)
    axis, angle = quat_to_axis_angle(delta)
    half = 0.5 * s * float(angle)
    partial = np.concatenate(([math.cos(half)], math.sin(half) * axis))
    return Pose(position, quat_mul(start.quaternion, partial))
