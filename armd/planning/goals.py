"""The goal pipeline: validated goals in, planned motion requests out to the control loop.

A goal never blocks the tick. Planning (`armd.planning.planner`) runs from the loop's latest
sample: a
joints or gripper goal, a limit check of microseconds, as it arrives; a pose or keypoints goal
(IK, mapping, linear paths) or a trajectory goal (its time scaling) in a worker thread, where the
compiled kernels release the GIL. The newest goal wins: a goal superseded before it was planned
ends as ``preempted``.

Statuses go through the `StatusLedger`, which keeps the contract (``accepted`` or ``rejected``
first, then one final status): ``rejected`` (with the reason) when planning fails, else
``accepted`` and the request goes to the loop, which reports ``succeeded`` / ``aborted`` /
``preempted``. Each goal is isolated: any exception while planning it rejects that goal only
(``internal error: ...``, the traceback logged) and the pipeline carries on.

With a collision guard, a goal is planned and checked from where it will take over the arm (the
nearest of the sample's forecasts it can still make in time, `armd.link.handover`), and the move
carries that handover: the loop starts it there or not at all. A goal waits for a sample that
can tell (`_plannable`: the loop has taken in the last move sent, which may be waiting for its
own handover); a stream under way cannot, and is stopped first, as for a linear goal. A goal
that cannot be planned before the farthest forecast is `rejected` (an overloaded daemon).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace

from armd.api.payloads import MIN_SPEED
from armd.api.statuses import StatusLedger
from armd.link.handover import Handover
from armd.link.messages import (
    Goal,
    GoalStatus,
    GripperGoal,
    JointsGoal,
    Mode,
    NamedGoal,
    PoseGoal,
    StatusUpdate,
    StopGoal,
)
from armd.link.protocol import FollowPath, LoopPort, Move, Stop, superseded
from armd.motion.trajectory import MotionLimits
from armd.planning.collision_guard import CollisionGuard
from armd.planning.planner import (
    KEYPOINTS_TOLERANCE,
    MAX_PATH_SAMPLES,
    Gripper,
    Planned,
    Planner,
    PlanSettings,
    Rejected,
)
from armd.ratelimit import RateLimiter
from kinematics import KinematicTree

__all__ = [
    "BROKER_LOST",
    "KEYPOINTS_TOLERANCE",
    "MAX_PATH_SAMPLES",
    "GoalPipeline",
    "Gripper",
    "PlanSettings",
    "Rejected",
]

log = logging.getLogger(__name__)
BROKER_LOST = "the broker connection was lost; goals are refused until it is back"
FORECAST_WAIT_S = 1.0  # s: the longest a goal waits for a sample that says where it would start
HANDOVER_MARGIN_S = 0.02  # s: a move sent this close to its handover's tick may miss it


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
        guard: CollisionGuard | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`guard`: the collision checks of every planned motion (None: none); `clock`: the
        loop's (`time.monotonic` but in tests)."""
        self._clock = clock
        self.tree = tree
        self.port = port
        self.settings = settings
        self.statuses = statuses
        self.planner = Planner(tree, tool_link, limits, settings, guard)
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
        quick = isinstance(goal, JointsGoal | GripperGoal | NamedGoal)  # planned in microseconds
        if quick and self._plannable():  # here, at once
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
            else:
                await self._wait_plannable(goal.goal_id)
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
        self.port.send(request)  # first: the status only joins a queue, the loop waits for this
        note = request.note if isinstance(request, FollowPath) else None
        self._status(goal.goal_id, GoalStatus.ACCEPTED, note)

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
        if (
            not MIN_SPEED <= goal.speed <= 1.0
        ):  # `armd.api.payloads` checks it; goals built in code too
            raise Rejected(f"speed: {goal.speed!r} must be in [{MIN_SPEED:g}, 1]")
        if self.planner.guard is None or not sample.ahead:
            return self.planner.plan(goal, sample)
        # Planned and checked from where the loop will start it, which starts it only from there:
        # the nearest forecast still ahead once planned (the loop's tick comes after the link).
        for handover in sample.ahead:
            if not self._in_time(handover):
                continue
            move = self.planner.plan(goal, sample.at_handover(handover))
            if self._in_time(handover):
                return replace(move, handover=handover)
        last = sample.ahead[-1]
        raise Rejected(
            f"the arm moved on before the goal could be planned from it ({last.t - sample.t:.2f} s "
            "of forecasts): the daemon is overloaded; send it again"
        )

    def _in_time(self, handover: Handover) -> bool:
        """Whether a move sent now reaches the loop before `handover`'s tick (or the arm holds
        still there: any tick after it will do)."""
        return handover.at_rest or handover.t - self._clock() > HANDOVER_MARGIN_S

    # -- where a move will start (with a collision guard) -----------------------------------------

    def _plannable(self) -> bool:
        """Whether the latest sample tells where a move sent now would start: the loop has
        taken in every motion command sent, and forecasts the takeover (`Sample.ahead`) or holds
        still without a forecast. Without a collision guard any sample will do: the loop plans
        the motion from wherever the arm is when it takes it."""
        if self.planner.guard is None:
            return True
        latest = self.port.latest
        return self.port.caught_up and (bool(latest.ahead) or not latest.busy)

    async def _wait_plannable(self, goal_id: str) -> None:
        """Wait for a sample that is `_plannable`: the loop takes in a command within a tick,
        a move waiting for its takeover within `Sample.ahead`'s lead, and samples at the
        telemetry rate. A stream under way has no forecast (its targets are yet to come): it is
        stopped first, as for a linear goal; so is anything else still without one after
        `FORECAST_WAIT_S`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FORECAST_WAIT_S
        while not self._plannable():
            streaming = self.port.caught_up and self.port.latest.streaming
            if streaming or loop.time() > deadline:
                await self._wait_at_rest(goal_id)
                return
            await asyncio.sleep(self.settings.poll_s)

    def _status(self, goal_id: str | None, status: GoalStatus, reason: str | None) -> None:
        if status is GoalStatus.REJECTED:
            log.info("goal %s rejected: %s", goal_id, reason)
        self.statuses.report(StatusUpdate(goal_id, status, reason))
