"""Planning a goal into the loop's motion command, from the loop's latest sample: a joints or
gripper goal needs only a limit check; a pose goal is IK seeded from the *measured* state (limit
and reachability checks, the "no branch jump" rule; the gripper, the fixed joints and those that
do not move the link keep their commanded position), a linear goal a straight tool line checked
point by point and time-scaled; a keypoints goal is mapped (`kinematics.mapping`) from the
measured state and refused when a segment stays more than `KEYPOINTS_TOLERANCE` off its target
direction; a trajectory goal's points are checked against the limits and time-scaled within them
(`armd.motion.timed_trajectory`). The linear and trajectory goals' paths are planned in
`armd.planning.paths`. Every refusal is a `Rejected` whose message is the goal's reason. No I/O,
no state between goals: `armd.planning.goals` runs it (pose, keypoints and trajectory goals in a
worker thread).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from armd.link.messages import (
    GripperGoal,
    JointsGoal,
    KeypointsGoal,
    NamedGoal,
    PoseGoal,
    TrajectoryGoal,
)
from armd.link.protocol import FollowPath, Grip, Move, MoveTo, Sample
from armd.motion.trajectory import MotionLimits, PlanningError, plan_path
from armd.planning.collision_guard import CollisionGuard
from armd.planning.paths import MAX_PATH_SAMPLES, linear_waypoints, trajectory_move
from kinematics import KinematicsError, KinematicTree, Pose, solve_ik
from kinematics.ik import IKOptions
from kinematics.mapping import MappingOptions, map_chain

__all__ = [
    "KEYPOINTS_TOLERANCE",
    "MAX_PATH_SAMPLES",
    "Gripper",
    "PlanSettings",
    "Planned",
    "Planner",
    "Rejected",
]

Array = NDArray[np.float64]
Planned = PoseGoal | JointsGoal | KeypointsGoal | GripperGoal | NamedGoal | TrajectoryGoal
# rad (2.9°): the worst segment direction error a keypoints goal may leave. A leader's or a
# skeleton's shape rarely fits our joint axes exactly (our elbow bends in one plane); beyond
# this the arm's shape would visibly differ from the target's, and the goal is refused.
KEYPOINTS_TOLERANCE = 0.05
_KEYPOINTS_OPTIONS = MappingOptions(tolerance=KEYPOINTS_TOLERANCE)
# A pose whose seeded IK solution collides: at least this many restarts for a clear one, more
# while the IK time budget lasts, never more than the second number.
_MIN_COLLISION_RESTARTS = 8
_COLLISION_RESTARTS = 64


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
    poses: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # the config's, checked


class Rejected(Exception):  # noqa: N818 (an outcome carried through the planner, not an error)
    """Planning refused the goal; the message is the reason sent with the status."""


class Planner:
    """Plans goals for one arm (its model, tool link and motion limits)."""

    def __init__(
        self,
        tree: KinematicTree,
        tool_link: str,
        limits: MotionLimits,
        settings: PlanSettings,
        guard: CollisionGuard | None = None,
    ) -> None:
        """`guard`: the collision checks every planned motion passes (None: none)."""
        self.tree = tree
        self.tool_link = tool_link
        self.limits = limits
        self.settings = settings
        # The gripper: while it holds an object (the loop's sample says so), IK and the keypoints
        # mapping never move it, only a goal naming it does: the grip must survive the arm's
        # moves. Otherwise it is a joint like the others (a gripper joint on the tool's chain,
        # as a wrist standing in for one, then moves the tool). Fixed joints have pinned limits.
        gripper = settings.gripper
        self.hold = frozenset() if gripper is None else frozenset({gripper.joint})
        self._held = np.isin(tree.joint_names, sorted(self.hold))
        self._nothing_held = np.zeros(tree.dof, dtype=bool)
        self.guard = guard

    def plan(self, goal: Planned, sample: Sample) -> Move:
        """The loop command for `goal` from the loop's `sample`, or `Rejected` (a path that
        collides: a reason starting with ``collision:``, `armd.planning.collision_guard`)."""
        move = self._plan(goal, sample)
        if self.guard is not None:
            reason = self.guard.check_move(move, sample)
            if reason is not None:
                raise Rejected(reason)
        return move

    def _plan(self, goal: Planned, sample: Sample) -> Move:
        try:
            if isinstance(goal, JointsGoal | NamedGoal):
                joints = goal if isinstance(goal, JointsGoal) else self._named(goal)
                return self._plan_joints(joints, sample)
            if isinstance(goal, GripperGoal):
                return self._plan_gripper(goal, sample)
            if isinstance(goal, KeypointsGoal):
                return self._plan_keypoints(goal, sample)
            if isinstance(goal, TrajectoryGoal):
                return self._plan_trajectory(goal, sample)
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
        kept = self._kept([name not in goal.positions for name in self.tree.joint_names])
        return MoveTo(goal.goal_id, target, self.limits.scaled(goal.speed), kept=kept)

    def _named(self, goal: NamedGoal) -> JointsGoal:
        poses = self.settings.poses
        if goal.name not in poses:
            known = ", ".join(repr(name) for name in poses) or "none (config: poses)"
            raise Rejected(f"name: {goal.name!r} is not a named pose of this arm; poses: {known}")
        return JointsGoal(goal.goal_id, poses[goal.name], goal.speed)

    def _plan_gripper(self, goal: GripperGoal, sample: Sample) -> Move:
        """The gripper joint to its opening; the other joints keep their commanded position.
        Closing stops where the grip reaches the goal's effort."""
        gripper = self.settings.gripper
        if gripper is None:
            raise Rejected("type: 'gripper': this arm has no gripper (config: gripper)")
        if not 0.0 <= goal.opening <= 1.0:  # `armd.api.payloads` checks it; goals built in code too
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
        kept = frozenset(range(self.tree.dof)) - {joint}
        return MoveTo(goal.goal_id, target, self.limits.scaled(goal.speed), grip=grip, kept=kept)

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
                hold=self.settings.fixed_joints | self._holding(sample)[0],
            )
        except KinematicsError as exc:
            raise Rejected(f"points: {exc}") from None
        if not result.success:
            raise Rejected(f"points: shape not reachable within the joint limits: {result.message}")
        target = np.where(result.determined, result.q, commanded)
        violations = self.tree.limits.check(target)
        if violations:
            raise Rejected("; ".join(str(v) for v in violations))
        kept = self._kept(~np.asarray(result.determined))
        return MoveTo(goal.goal_id, target, self.limits.scaled(goal.speed), kept=kept)

    def _plan_trajectory(self, goal: TrajectoryGoal, sample: Sample) -> Move:
        commanded = sample.commanded_position
        assert commanded is not None
        kept = self._kept([name not in goal.joints for name in self.tree.joint_names])
        try:
            return trajectory_move(
                goal, commanded, self.tree, self.limits, self.settings.fixed_joints, kept
            )
        except PlanningError as exc:
            raise Rejected(str(exc)) from None

    def _target(self, goal: PoseGoal) -> tuple[str, Pose | Array]:
        link = goal.link or self.tool_link
        if goal.orientation is None:
            return link, np.array(goal.position)
        return link, Pose(goal.position, goal.orientation)

    def _plan_pose(self, goal: PoseGoal, sample: Sample) -> Move:
        link, target = self._target(goal)
        seed = self._seed(sample, link)
        limits = self.limits.scaled(goal.speed)
        oriented = isinstance(target, Pose)
        hold = self._holding(sample)[0]
        result = solve_ik(self.tree, target, seed, link, self.settings.ik, hold=hold)
        if not result.success:
            found = None
            if self.guard is not None:  # a collision is the reason when every solution collides
                found = self._collision_free_ik(
                    target, seed, link, lambda q: MoveTo(goal.goal_id, q, limits), sample
                )
            if found is None:
                raise Rejected(self._why_unreachable(target, seed, link, result.message, hold))
            result = replace(result, q=found)
        q = np.array(result.q)
        kept = self._left(q, sample, link)
        move = MoveTo(goal.goal_id, q, limits, self._pose_tolerance(q, link, oriented), kept=kept)
        if self.guard is None or self.guard.check_move(move, sample) is None:
            return move
        clear = self._collision_free_ik(
            target, seed, link, lambda q: replace(move, target=q), sample
        )
        if clear is None:
            reason = self.guard.check_move(move, sample)
            raise Rejected(reason or "collision: the target's motion collides")
        tolerance = self._pose_tolerance(clear, link, oriented)
        return MoveTo(goal.goal_id, clear, limits, tolerance, kept=self._left(clear, sample, link))

    def _collision_free_ik(
        self,
        target: Pose | Array,
        seed: Array,
        link: str,
        move_to: Callable[[Array], MoveTo],
        sample: Sample,
    ) -> Array | None:
        """An IK solution whose motion is clear, from random seeds within the "no branch jump"
        box around `seed` (the whole range without one) while the IK time budget lasts (at least
        `_MIN_COLLISION_RESTARTS`). None when none was found; `Rejected` with the collision of
        the first solution found when every solution found collides."""
        assert self.guard is not None
        options = replace(self.settings.ik, restarts=False)
        box = self.settings.ik.max_joint_change
        lower, upper = self.tree.limits.lower, self.tree.limits.upper
        if box is not None:
            lower, upper = np.maximum(lower, seed - box), np.minimum(upper, seed + box)
        lower = np.where(np.isfinite(lower), lower, -np.pi)
        upper = np.where(np.isfinite(upper), upper, np.pi)
        rng = np.random.default_rng(0)
        first: str | None = None
        deadline = time.thread_time() + self.settings.ik.time_budget_s  # as the IK counts it
        for attempt in range(_COLLISION_RESTARTS):
            if attempt >= _MIN_COLLISION_RESTARTS and time.thread_time() > deadline:
                break
            hold, held = self._holding(sample)
            start = np.where(held, seed, rng.uniform(lower, upper))  # a held gripper stays
            result = solve_ik(self.tree, target, start, link, options, hold=hold)
            q = np.array(result.q)
            if not result.success or (box is not None and np.max(np.abs(q - seed)) > box):
                continue
            reason = self.guard.check_move(move_to(q), sample)
            if reason is None:
                return q
            first = first or reason
        if first is not None:
            raise Rejected(first)
        return None

    def _holding(self, sample: Sample) -> tuple[frozenset[str], NDArray[np.bool_]]:
        """The joints IK keeps where they are for `sample` (names, and as a q mask)."""
        if sample.held is None:
            return frozenset(), self._nothing_held
        return self.hold, self._held

    def _seed(self, sample: Sample, link: str) -> Array:
        """IK's seed: the measured position of the joints it may move; the commanded one of the
        others (held, or not moving `link`), which keep it, as a joints goal's unnamed joints."""
        measured, commanded = sample.measured_position, sample.commanded_position
        assert measured is not None
        assert commanded is not None
        return np.where(self._moving(sample, link), measured, commanded)

    def _moving(self, sample: Sample, link: str) -> NDArray[np.bool_]:
        """The joints IK may move for `link` (q mask): on its chain, not held."""
        moving: NDArray[np.bool_] = self.tree.chain(link).moving & ~self._holding(sample)[1]
        return moving

    def _left(self, q: Array, sample: Sample, link: str) -> frozenset[int]:
        """The joints IK left out for `link` (`MoveTo.kept`): not moved by it, at their
        commanded position in `q` (a target, or every waypoint of a path, (m, n))."""
        commanded = sample.commanded_position
        assert commanded is not None
        unchanged = np.all(np.atleast_2d(q) == commanded, axis=0)
        return self._kept(~self._moving(sample, link) & unchanged)

    @staticmethod
    def _kept(left_out: NDArray[np.bool_] | list[bool]) -> frozenset[int]:
        """The q indices of a goal's joints it leaves out (`MoveTo.kept`), from a q mask."""
        return frozenset(int(i) for i in np.flatnonzero(left_out))

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

    def _why_unreachable(
        self, target: Pose | Array, seed: Array, link: str, message: str, hold: frozenset[str]
    ) -> str:
        """Tell 'out of reach' from 'reachable only by jumping to another branch'."""
        bound = self.settings.ik.max_joint_change
        if bound is not None:
            options = _without_box(self.settings.ik)
            anywhere = solve_ik(self.tree, target, seed, link, options, hold=hold)
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
        if not isinstance(target, Pose):
            target = Pose(target, self.tree.fk(start_q, link).quaternion)
        steps = (self.settings.linear_step, self.settings.angular_step)
        hold = self._holding(sample)[0]
        try:
            waypoints, distance, angle = linear_waypoints(
                self.tree, link, start_q, target, self.settings.ik, steps, hold
            )
        except PlanningError as exc:
            raise Rejected(str(exc)) from None
        rate = min(
            self.settings.max_linear_speed / max(distance, 1e-9),
            self.settings.max_angular_speed / max(angle, 1e-9),
        )
        try:
            path = plan_path(np.array(waypoints), self.limits.scaled(goal.speed), rate * goal.speed)
        except PlanningError as exc:
            raise Rejected(f"linear path: {exc}") from None
        tolerance = self._pose_tolerance(waypoints[-1], link, True)
        return FollowPath(
            goal.goal_id, path, tolerance, kept=self._left(np.array(waypoints), sample, link)
        )


def _column_sum(rows: Array) -> float:
    """Σ over the columns of their norms (a floor keeps a zero Jacobian from dividing by 0)."""
    return max(float(np.sum(np.linalg.norm(rows, axis=0))), 1e-9)


def _without_box(options: IKOptions) -> IKOptions:
    return replace(options, max_joint_change=None)
