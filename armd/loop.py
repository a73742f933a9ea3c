"""The control loop: read → safety checks → trajectory setpoint → limits → write, at a fixed rate.

One `tick` never awaits the network: it consumes what the other tasks left for it (a pending
motion request, an e-stop or reset flag) and leaves behind what they read (statuses, the latest
telemetry, the fault). In the daemon it runs in a process of its own (`armd.control_process`).
Modes (`armd.messages.Mode`):

    INACTIVE --valid read--> HOLDING <--> MOVING / STOPPING
        any --fault--> FAULT (stop, then hold or disable), any --estop--> ESTOP; reset --> HOLDING

Safety rules kept here (DESIGN.md): start inactive; enable only after a valid read; the first
command equals the measured position; every command passes the `SetpointLimiter`; stale feedback
and faults lead to a controlled stop; faults and e-stops latch until `reset`; a pre-empted motion
is never resumed on its own; drive watchdogs are fed by this loop's own writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from armd.hardware import ArmHardware
from armd.limiter import SetpointLimiter
from armd.messages import Fault, GoalStatus, Mode, StatusUpdate, Telemetry
from armd.ratelimit import RateLimiter
from armd.safety import MeasuredState, SafetyMonitor, Verdict
from armd.timing import Schedule
from armd.trajectory import (
    JointMotion,
    Motion,
    MotionLimits,
    PathMotion,
    PlanningError,
    Setpoint,
    StopMotion,
)
from drivers import DriverError
from kinematics import KinematicTree, Pose

__all__ = [
    "MAX_MOTION_DURATION_S",
    "ControlLoop",
    "LoopSettings",
    "MoveRequest",
    "StopRequest",
    "check_request",
]

log = logging.getLogger(__name__)
Array = NDArray[np.float64]
MAX_MOTION_DURATION_S = 3600.0
_LIMIT_SLACK = 1e-9  # relative: limits scaled on the daemon's side may round up by an ulp


@dataclass(frozen=True, slots=True)
class MoveRequest:
    """A planned goal for the loop: a joint target, or a joint path starting where the arm is."""

    goal_id: str
    limits: MotionLimits
    target: Array | None = None
    path: Array | None = None
    path_rate_limit: float = float("inf")  # 1/s: bound on ds/dt (Cartesian speed limits)
    tcp_target: Pose | None = None  # for pose goals: success also needs the link here
    tcp_link: str | None = None
    tcp_tolerance: tuple[float, float] = (1e-3, 1e-2)  # m, rad


@dataclass(frozen=True, slots=True)
class StopRequest:
    """Stop the motion, then hold. The goal being stopped ends as `outcome` with `reason`
    (``preempted`` when a newer goal asked for the stop, e.g. a linear move that starts at rest)."""

    goal_id: str | None = None
    reason: str = "stop requested"
    outcome: GoalStatus = GoalStatus.ABORTED


def check_request(request: MoveRequest, lower: Array, upper: Array, limits: MotionLimits) -> None:
    """Raise `PlanningError` unless `request` is one this loop can follow: finite targets or
    paths of the right shape within the position bounds, motion limits positive and within the
    loop's `limits`, a positive path rate. The loop checks every request it receives, whoever
    planned it."""
    n = lower.shape[0]
    for name, value in (
        ("velocity", request.limits.velocity),
        ("acceleration", request.limits.acceleration),
        ("jerk", request.limits.jerk),
    ):
        bound = getattr(limits, name)
        if (
            value.shape != (n,)
            or not np.all(value > 0.0)
            or not np.all(value <= bound * (1.0 + _LIMIT_SLACK))
        ):
            raise PlanningError(f"{name} limits {value.tolist()} must be in (0, {bound.tolist()}]")
    points = request.target[None, :] if request.target is not None else request.path
    what = "target" if request.target is not None else "path"
    if points is None or points.ndim != 2 or points.shape[1] != n or points.shape[0] < 1:
        raise PlanningError(f"a move needs a target or a path of {n} joint positions")
    if not np.all(np.isfinite(points)):
        raise PlanningError(f"{what}: positions must be finite numbers")
    outside = (points < lower - _LIMIT_SLACK) | (points > upper + _LIMIT_SLACK)
    if np.any(outside):
        joint = int(np.nonzero(outside.any(axis=0))[0][0])
        raise PlanningError(
            f"{what}: joint {joint} position outside [{lower[joint]:g}, {upper[joint]:g}]"
        )
    if request.target is None and not request.path_rate_limit > 0.0:
        raise PlanningError(f"path rate limit {request.path_rate_limit} must be > 0")


@dataclass(frozen=True, slots=True)
class LoopSettings:
    period_s: float
    telemetry_every: int  # ticks between telemetry samples
    joint_tolerance: float  # rad: a goal succeeds when every joint is this close to its target
    settle_timeout_s: float
    disable_on_fault: bool
    auto_enable: bool = True


@dataclass
class _Active:
    goal_id: str | None
    motion: Motion
    start_tick: int
    is_stop: bool = False
    request: MoveRequest | None = None


class ControlLoop:
    """The fixed-rate loop. Construct once, then `await run(stop)` (or call `tick` in tests)."""

    def __init__(
        self,
        tree: KinematicTree,
        tool_link: str,
        hardware: ArmHardware,
        monitor: SafetyMonitor,
        limits: MotionLimits,
        settings: LoopSettings,
        schedule: Schedule,
        publish_status: Callable[[StatusUpdate], None],
        publish_fault: Callable[[Fault | None], None],
        publish_telemetry: Callable[[Telemetry], None],
        on_mode_change: Callable[[Mode], None] = lambda mode: None,
    ) -> None:
        self.tree = tree
        self.tool_link = tool_link
        self.hardware = hardware
        self.monitor = monitor
        self.limits = limits
        self.settings = settings
        self.schedule = schedule
        self._publish_status = publish_status
        self._publish_fault = publish_fault
        self._publish_telemetry = publish_telemetry
        self._on_mode_change = on_mode_change
        self.limiter = SetpointLimiter(
            tree.limits.lower,
            tree.limits.upper,
            limits.velocity,
            limits.acceleration,
            settings.period_s,
        )
        self.mode = Mode.INACTIVE
        self.tick_count = 0
        self.measured: MeasuredState | None = None
        self.commanded: Setpoint | None = None
        self.fault: Fault | None = None
        self.healthy = False
        self._enabled = False
        self._active: _Active | None = None
        self._pending: MoveRequest | StopRequest | None = None
        self._estop_request = False
        self._reset_request = False
        self._hold_reason: str | None = None
        self._disable_pending = False
        self._errors = RateLimiter(burst=3, interval_s=60.0)

    # -- requests from the other tasks (applied at the next tick boundary) ------------------------

    def submit(self, request: MoveRequest | StopRequest) -> None:
        """Queue a motion request; a newer one replaces it before it starts (newest wins)."""
        replaced = self._pending
        if replaced is not None and replaced.goal_id is not None:  # a stop with an id too
            self._status(replaced.goal_id, GoalStatus.PREEMPTED, "superseded before it started")
        self._pending = request

    def engage_estop(self) -> None:
        self._estop_request = True

    def reset(self) -> None:
        self._reset_request = True

    @property
    def moving(self) -> bool:
        """True while a motion or a stop is under way (the commanded state is changing)."""
        return self._active is not None

    @property
    def busy(self) -> bool:
        """Moving, or a request waits for the next tick."""
        return self._active is not None or self._pending is not None

    # -- the loop ---------------------------------------------------------------------------------

    async def run(
        self, until: Callable[[], bool], after_tick: Callable[[], None] = lambda: None
    ) -> None:
        """Tick on the schedule until `until()` is true; `after_tick` runs after every tick (the
        daemon feeds the systemd watchdog from there, so only a ticking loop feeds it)."""
        while not until():
            await self.schedule.wait()
            try:
                await self.tick()
            except Exception as exc:  # the task boundary: a bug becomes a latched fault
                self._tick_failed(exc)
            self.schedule.advance()
            after_tick()

    def _tick_failed(self, exc: Exception) -> None:
        """A tick raised (a bug, never the input: requests are checked): latch a fault, which
        stops the arm, or hold the last command if even that fails."""
        if self._errors.allow(type(exc).__name__) is not None:
            log.exception("control tick %d failed", self.tick_count)
        if self.fault is not None:
            return
        try:
            self._latch(
                Fault("internal_error", f"control tick failed: {type(exc).__name__}: {exc}")
            )
        except Exception:
            log.exception("latching the internal error failed: holding the last command")
            self._active = None
            if self.commanded is not None and np.all(np.isfinite(self.commanded.position)):
                self.commanded = Setpoint.at_rest(self.commanded.position)
            else:
                self._disable_pending = True

    async def tick(self) -> None:
        now = self.schedule.clock()
        self.tick_count += 1
        measured = await self._read()
        if measured is None:
            return
        if self.mode == Mode.INACTIVE and not self._estop_request:
            await self._try_enable(measured, now)
        else:
            self._supervise(measured, now)
        if self._reset_request:
            await self._reset(measured, now)
        self._apply_requests()
        if self._enabled and self.commanded is not None:
            await self._command()
            self._track_goal(measured)
        if self._disable_pending:
            await self._disable()
        if self.tick_count % self.settings.telemetry_every == 0:
            self._publish_telemetry(self._telemetry(measured, now))

    async def _read(self) -> MeasuredState | None:
        try:
            self.measured = await self.hardware.read()
        except DriverError as exc:
            # Keep the previous reading: its timestamps age, and staleness decides.
            log.debug("read failed: %s", exc)
        return self.measured

    async def _try_enable(self, measured: MeasuredState, now: float) -> None:
        """Enable once every joint has fresh, fault-free feedback inside its limits; the first
        command is the measured position."""
        check = self.monitor.check(measured, now)
        if check.verdict is Verdict.FAULT and check.fault is not None and self.fault is None:
            self._latch(check.fault)  # e.g. found outside the limits: visible, and needs a reset
        if self.fault is not None or not measured.complete() or check.verdict is not Verdict.OK:
            self.healthy = False
            return
        if not self.settings.auto_enable:
            return
        try:
            await self.hardware.enable()
        except DriverError as exc:
            self._latch(Fault("enable_failed", f"enabling the drives failed: {exc}"))
            return
        self._enabled = True
        self._start_from_measured(measured)

    def _start_from_measured(self, measured: MeasuredState) -> None:
        self.limiter.reset(measured.position)
        self.commanded = Setpoint.at_rest(measured.position)
        self._active = None
        self._set_mode(Mode.HOLDING)
        self.healthy = True

    def _supervise(self, measured: MeasuredState, now: float) -> None:
        """Safety checks, latched states and the e-stop / reset requests."""
        commanded = self.commanded
        check = self.monitor.check(
            measured,
            now,
            None if commanded is None else commanded.position,
            None if commanded is None else commanded.velocity,
        )
        if self._estop_request:
            self._estop_request = False
            self._stop_everything(Mode.ESTOP, "e-stop engaged")
        if check.verdict is Verdict.FAULT and check.fault is not None and self.fault is None:
            self._latch(check.fault)
        elif check.verdict is Verdict.HOLD and self.mode in (Mode.MOVING, Mode.HOLDING):
            if self._hold_reason is None:
                log.warning("stale feedback, holding: %s", check.reason)
            self._hold_reason = check.reason
            if self.mode == Mode.MOVING:
                self._stop_motion(f"stale feedback: {check.reason}")
        elif check.verdict is Verdict.OK:
            self._hold_reason = None  # the outage is over: the next one is logged again
        self.healthy = self.fault is None and check.verdict is Verdict.OK

    def _latch(self, fault: Fault) -> None:
        log.error("fault %s: %s", fault.code, fault.message)
        self.fault = fault
        self._publish_fault(fault)
        self._stop_everything(Mode.FAULT, f"fault: {fault.message}")

    def _stop_everything(self, mode: Mode, reason: str) -> None:
        if self.mode in (Mode.FAULT, Mode.ESTOP) and mode == Mode.ESTOP:
            return
        self._drop_pending(reason)
        if self._enabled and self.commanded is not None:
            self._stop_motion(reason)
        self._set_mode(mode)

    async def _reset(self, measured: MeasuredState, now: float) -> None:
        """Clear a latched fault or e-stop once its cause is gone. Device faults are cleared on the
        drives (which needs them disabled); the loop then re-enables from the measured position."""
        if self.moving:
            return  # still stopping: the reset waits until the arm is at rest
        self._reset_request = False
        if self.mode not in (Mode.FAULT, Mode.ESTOP):
            return
        if self.hardware.failed:
            log.warning(
                "reset refused: drivers %s not reconnected yet", sorted(self.hardware.failed)
            )
            return
        device_fault = self.fault is not None and self.fault.code == "device_fault"
        if device_fault or measured.faults or (self._enabled and not self.hardware.enabled):
            # Latched drive faults are cleared on the drives, which needs them disabled; a driver
            # that was reconnected comes back disabled: both restart through INACTIVE. A drive
            # may report a fault behind another one (its watchdog expired while its replies were
            # lost): cleared too, or no reset could ever succeed.
            await self._disable()
            try:
                await self.hardware.clear_faults()
            except DriverError as exc:
                log.warning("reset refused: clearing the device faults failed: %s", exc)
                return
            measured = await self.hardware.read()
        if self.fault is not None and self.fault.code == "limit_exceeded" and measured.complete():
            self.monitor.accept_excursion(measured.position)
        if self.monitor.check(measured, now).verdict is Verdict.FAULT or not measured.complete():
            log.warning("reset refused: the fault is still active")
            return
        log.info("reset: %s cleared", self.fault.code if self.fault else "e-stop")
        self.fault = None
        self._publish_fault(None)
        if self._enabled:
            self._start_from_measured(measured)
        else:
            self._set_mode(Mode.INACTIVE)

    # -- motions ----------------------------------------------------------------------------------

    def _drop_pending(self, reason: str) -> None:
        pending, self._pending = self._pending, None
        if isinstance(pending, MoveRequest):
            self._status(pending.goal_id, GoalStatus.ABORTED, reason)
        elif isinstance(pending, StopRequest) and pending.goal_id is not None:
            self._status(pending.goal_id, GoalStatus.SUCCEEDED, None)

    def _stop_motion(self, reason: str, outcome: GoalStatus = GoalStatus.ABORTED) -> None:
        """Controlled stop from the commanded state; the active goal ends as `outcome`."""
        active = self._active
        if active is not None and active.goal_id is not None and not active.is_stop:
            self._status(active.goal_id, outcome, reason)
        assert self.commanded is not None
        stop = StopMotion(self.commanded, self.limits)
        goal_id = active.goal_id if active is not None and active.is_stop else None
        self._active = _Active(goal_id, stop, self.tick_count, is_stop=True)
        if self.mode == Mode.MOVING:
            self._set_mode(Mode.STOPPING)

    def _apply_requests(self) -> None:
        request, self._pending = self._pending, None
        if request is None:
            return
        if isinstance(request, StopRequest):
            if self.mode == Mode.MOVING:
                self._stop_motion(request.reason, request.outcome)
            active = self._active
            if active is not None and active.is_stop:
                # The stop under way now answers this request; an earlier stop's id is answered.
                if request.goal_id is not None:
                    if active.goal_id is not None:
                        reason = f"preempted by {request.goal_id}"
                        self._status(active.goal_id, GoalStatus.PREEMPTED, reason)
                    active.goal_id = request.goal_id
            elif request.goal_id is not None:
                self._status(request.goal_id, GoalStatus.SUCCEEDED, None)
            return
        if not self._enabled or self.mode not in (Mode.HOLDING, Mode.MOVING, Mode.STOPPING):
            latched = self.mode in (Mode.FAULT, Mode.ESTOP)
            reason = f"arm is {self.mode.value}" + (": reset first" if latched else "")
            self._status(request.goal_id, GoalStatus.ABORTED, reason)
            return
        self._start_move(request)

    def _start_move(self, request: MoveRequest) -> None:
        assert self.commanded is not None
        try:
            motion = self._plan(request, self.commanded)
        except PlanningError as exc:
            self._status(request.goal_id, GoalStatus.ABORTED, str(exc))
            return
        except Exception as exc:  # a request this loop cannot follow ends its goal, nothing more
            log.exception("goal %s: planning its motion failed", request.goal_id)
            reason = f"internal error: {type(exc).__name__}: {exc}"
            self._status(request.goal_id, GoalStatus.ABORTED, reason)
            return
        previous = self._active
        if previous is not None and previous.goal_id is not None:  # a stop under way too
            self._status(previous.goal_id, GoalStatus.PREEMPTED, f"preempted by {request.goal_id}")
        self._active = _Active(request.goal_id, motion, self.tick_count, request=request)
        self._set_mode(Mode.MOVING)

    def _plan(self, request: MoveRequest, start: Setpoint) -> Motion:
        check_request(request, self.limiter.lower, self.limiter.upper, self.limits)
        motion: Motion
        if request.target is not None:
            motion = JointMotion(start, request.target, request.limits)
        else:
            assert request.path is not None
            moving = np.any(np.abs(start.velocity) > 1e-9)
            if moving or np.max(np.abs(request.path[0] - start.position)) > 1e-6:
                raise PlanningError("the arm moved since the path was planned; send the goal again")
            motion = PathMotion(request.path, request.limits, request.path_rate_limit)
        if not motion.duration <= MAX_MOTION_DURATION_S:  # NaN too
            raise PlanningError(
                f"the motion would take {motion.duration:.6g} s (at most "
                f"{MAX_MOTION_DURATION_S:g} s); move in steps or faster"
            )
        return motion

    def _motion_time(self, active: _Active) -> float:
        """Time into the motion of this tick's setpoint: a motion planned at tick k starts from
        the state commanded at tick k - 1, so tick k samples it one period in."""
        return (self.tick_count - active.start_tick + 1) * self.settings.period_s

    async def _command(self) -> None:
        assert self.commanded is not None
        active = self._active
        wanted = (
            self.commanded if active is None else active.motion.sample(self._motion_time(active))
        )
        position, velocity = self.limiter.apply(wanted.position, wanted.velocity)
        acceleration = (velocity - self.commanded.velocity) / self.settings.period_s
        self.commanded = Setpoint(position, velocity, acceleration)
        if active is not None and active.start_tick == self.tick_count and not active.is_stop:
            # monotonic: the same clock in every process (bench/loop.py measures goal latency)
            log.debug("goal %s: first command at monotonic %.6f", active.goal_id, time.monotonic())
        try:
            await self.hardware.write(position, velocity)
        except DriverError as exc:
            if self.fault is None:
                self._latch(Fault("driver_lost", f"writing commands failed: {exc}"))

    def _track_goal(self, measured: MeasuredState) -> None:
        active = self._active
        if active is None:
            return
        t = self._motion_time(active)
        if not active.motion.done(t):
            return
        if active.is_stop:
            self._finish_stop(active)
            return
        error = float(np.max(np.abs(measured.position - active.motion.sample(t).position)))
        if error <= self.settings.joint_tolerance and self._tcp_reached(active, measured):
            self._status(active.goal_id, GoalStatus.SUCCEEDED, None)
        elif t - active.motion.duration > self.settings.settle_timeout_s:
            timeout = self.settings.settle_timeout_s
            reason = f"did not settle: joint error {error:.4f} rad after {timeout:g} s"
            self._status(active.goal_id, GoalStatus.ABORTED, reason)
        else:
            return
        self._active = None
        self._set_mode(Mode.HOLDING)

    def _tcp_reached(self, active: _Active, measured: MeasuredState) -> bool:
        request = active.request
        if request is None or request.tcp_target is None or request.tcp_link is None:
            return True
        distance, angle = self.tree.fk(measured.position, request.tcp_link).distance_to(
            request.tcp_target
        )
        return distance <= request.tcp_tolerance[0] and angle <= request.tcp_tolerance[1]

    def _finish_stop(self, active: _Active) -> None:
        self._active = None
        if active.goal_id is not None:
            self._status(active.goal_id, GoalStatus.SUCCEEDED, None)
        if self.mode in (Mode.FAULT, Mode.ESTOP):
            self._disable_pending = self.settings.disable_on_fault and self._enabled
            return
        self._set_mode(Mode.HOLDING)

    async def _disable(self) -> None:
        """Drives off after a fault stop (config `on_fault: disable`); a reset re-enables them
        from the measured position."""
        self._disable_pending = False
        self._enabled = False
        self.commanded = None
        try:
            await self.hardware.disable()
        except DriverError as exc:
            log.error("disabling the drives failed: %s", exc)

    # -- outputs ----------------------------------------------------------------------------------

    def _status(self, goal_id: str | None, status: GoalStatus, reason: str | None) -> None:
        self._publish_status(StatusUpdate(goal_id, status, reason))

    def _set_mode(self, mode: Mode) -> None:
        if mode != self.mode:
            self.mode = mode
            self._on_mode_change(mode)

    def _telemetry(self, measured: MeasuredState, now: float) -> Telemetry:
        q = np.nan_to_num(measured.position)
        pose = self.tree.fk(q, self.tool_link)
        return Telemetry(
            t=now,
            mode=self.mode,
            joints={
                name: (float(measured.position[i]), float(measured.velocity[i]))
                for i, name in enumerate(self.tree.joint_names)
            },
            tcp_link=self.tool_link,
            tcp_position=(
                float(pose.translation[0]),
                float(pose.translation[1]),
                float(pose.translation[2]),
            ),
            tcp_orientation=tuple(float(v) for v in pose.quaternion),  # type: ignore[arg-type]
            missed_ticks=self.schedule.missed,
        )
