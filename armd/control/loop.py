"""The control loop: read → safety checks → trajectory setpoint → limits → write, at a fixed rate.

One `tick` never awaits the network: it consumes what the other tasks left for it (a pending
motion request, an e-stop or reset flag) and leaves behind what they read (statuses, the latest
telemetry, the fault). In the daemon it runs in a process of its own (`armd.control.process`).
Modes (`armd.link.messages.Mode`):

    INACTIVE --valid read--> HOLDING <--> MOVING / STOPPING
        any --fault--> FAULT (stop, then hold or disable), any --estop--> ESTOP; reset --> HOLDING

The modes, faults, enabling and reset are `armd.control.supervisor.LoopSupervisor`'s, which this
loop extends. Safety rules kept here (docs/safety.md): every command passes the `SetpointLimiter`;
a pre-empted motion is never resumed on its own; drive watchdogs are fed by this loop's own writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from armd.control.feedforward import TorqueFeedForward
from armd.control.grip import held_reason
from armd.control.hardware import ArmHardware
from armd.control.limiter import SetpointLimiter
from armd.control.motions import Ended, Motions
from armd.control.safety import SafetyMonitor
from armd.control.streaming import timeout_reason
from armd.control.supervisor import LoopSupervisor
from armd.control.timing import Schedule
from armd.link.handover import Handover
from armd.link.messages import Fault, GoalStatus, Mode, StatusUpdate
from armd.link.protocol import (
    Command,
    EngageEstop,
    Event,
    FollowPath,
    LatchFault,
    MeasuredState,
    MoveTo,
    Ready,
    Reset,
    Sample,
    Shutdown,
    Stop,
    StreamTarget,
    TorqueMap,
)
from armd.motion.trajectory import MotionLimits, Setpoint
from armd.ratelimit import RateLimiter
from drivers import DriverError

__all__ = ["ControlLoop", "LoopSettings"]

log = logging.getLogger(__name__)
_first_commands = logging.getLogger(f"{__name__}.first_commands")
Array = NDArray[np.float64]
SHUTDOWN_STOP_TIMEOUT_S = 5.0
BLOCKED_VELOCITY = 0.05  # rad/s (m/s): a gripper slower than this at its grip is on its object


@dataclass(frozen=True, slots=True)
class LoopSettings:
    period_s: float
    joint_tolerance: float  # rad: a goal succeeds when every joint is this close to its target
    settle_timeout_s: float
    disable_on_fault: bool
    auto_enable: bool = True
    sample_every: int = 1  # ticks between routine samples (a change of state is sent at once)
    stream_timeout_s: float | None = None  # a stream's timeout; None: streaming not enabled
    # ticks ahead of each sample that its nearest forecast (`Sample.ahead`) looks, the others
    # twice and four times as far; None: no forecasts
    handover_ticks: int | None = None


class ControlLoop(LoopSupervisor):
    """The fixed-rate loop, on its modes and faults (`LoopSupervisor`). Construct once, then
    `await run(stop)` (or call `tick` in tests)."""

    def __init__(
        self,
        joint_names: tuple[str, ...],
        hardware: ArmHardware,
        monitor: SafetyMonitor,
        limits: MotionLimits,
        settings: LoopSettings,
        schedule: Schedule,
        emit: Callable[[Event], None],
    ) -> None:
        limiter = SetpointLimiter(
            monitor.lower, monitor.upper, limits.velocity, limits.acceleration, settings.period_s
        )
        motions = Motions(
            joint_names,
            limits,
            settings.period_s,
            settings.joint_tolerance,
            settings.settle_timeout_s,
            self._status,
            settings.stream_timeout_s,
        )
        super().__init__(
            joint_names, hardware, monitor, limiter, motions, settings.auto_enable, emit
        )
        self.limits = limits
        self.settings = settings
        self.schedule = schedule
        self.measured: MeasuredState | None = None
        self.ready = False  # every joint was read once
        self.shutting_down = False
        self._errors = RateLimiter(burst=3, interval_s=60.0)
        self._sampled: tuple[object, ...] = ()  # the state the last `Sample` carried
        # a map older than a few samples: the daemon stopped refreshing it
        self.feedforward = TorqueFeedForward(
            len(joint_names), max(0.2, 10 * settings.sample_every * settings.period_s)
        )

    # -- commands (applied at the next tick boundary) ---------------------------------------------

    def handle(self, command: Command) -> None:
        """Take a command (`armd.link.protocol`); it acts at the next tick."""
        if isinstance(command, MoveTo | FollowPath | Stop | StreamTarget):
            self.motions.take(command)
            if self._enabled and self.commanded is not None:
                self.motions.prepare(self.commanded, (self.limiter.lower, self.limiter.upper))
        elif isinstance(command, TorqueMap):
            self.feedforward.take(command, self.schedule.clock())
        elif isinstance(command, EngageEstop):
            self._estop_request = True
        elif isinstance(command, Reset):
            self._reset_request = True
        elif isinstance(command, LatchFault):
            self._fault_request = command.fault
        elif isinstance(command, Shutdown):
            self.shutting_down = True
            self.handle(Stop(None, "daemon stopping"))
        else:
            raise TypeError(f"not a command: {command!r}")

    @property
    def busy(self) -> bool:
        """Moving, or a command waits for the next tick."""
        return self.motions.busy

    @property
    def taken(self) -> int:
        """Motion commands (moves and stops; not stream targets) taken in."""
        return self.motions.taken

    # -- the loop ---------------------------------------------------------------------------------

    async def run(
        self,
        after_tick: Callable[[], None] = lambda: None,
        until: Callable[[], bool] = lambda: False,
    ) -> None:
        """Tick on the schedule until a `Shutdown` has brought the arm to rest (or
        `SHUTDOWN_STOP_TIMEOUT_S` passed), or `until()`; `after_tick` runs after every tick (the
        control process feeds the systemd watchdog from there, so only a ticking loop feeds it)."""
        deadline = float("inf")
        while not until():
            if self.shutting_down:
                if not self.busy or time.monotonic() > deadline:
                    return
                deadline = min(deadline, time.monotonic() + SHUTDOWN_STOP_TIMEOUT_S)
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
            self.motions.active = None
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
        requested, self._fault_request = self._fault_request, None
        if requested is not None and self.fault is None and self.mode is not Mode.ESTOP:
            self._latch(requested)
        if self._reset_request:
            await self._reset(measured, now)
        self._apply_requests()
        if self._enabled and self.commanded is not None:
            await self._command()
            self._track_goal(measured)
        if self._disable_pending:
            await self._disable()
        if not self.ready and measured.complete():
            self.ready = True
            self._emit(Ready(len(self.hardware.drivers)))
        held = self.motions.held
        key = (
            self.mode,
            self.taken,
            self.busy,
            self.moving,
            self.fault,
            self.schedule.missed,
            held,
        )
        if key != self._sampled or self.tick_count % self.settings.sample_every == 0:
            self._sampled = key
            self._emit(self._sample(measured, now))

    async def _read(self) -> MeasuredState | None:
        try:
            self.measured = await self.hardware.read()
        except DriverError as exc:
            # Keep the previous reading: its timestamps age, and staleness decides.
            log.debug("read failed: %s", exc)
        return self.measured

    # -- motions ----------------------------------------------------------------------------------

    def _apply_requests(self) -> None:
        if self.motions.pending is None:
            if self.motions.quiet(self.tick_count):
                assert self.settings.stream_timeout_s is not None
                self._stop_motion(timeout_reason(self.settings.stream_timeout_s))
            return
        commanded = self.commanded if self._enabled else None
        bounds = (self.limiter.lower, self.limiter.upper)
        mode = self.motions.apply(commanded, self.tick_count, self.mode, bounds)
        if mode is not None:
            self._set_mode(mode)

    async def _command(self) -> None:
        assert self.commanded is not None
        wanted = self.motions.setpoint(self.commanded, self.tick_count)
        position, velocity = self.limiter.apply(wanted.position, wanted.velocity)
        acceleration = (velocity - self.commanded.velocity) / self.settings.period_s
        self.commanded = Setpoint(position, velocity, acceleration)
        self._log_first_commands()
        try:
            torque = self.feedforward.torque(self.commanded, self.schedule.clock())
            await self.hardware.write(position, velocity, torque)
        except DriverError as exc:
            if self.fault is None:
                self._latch(Fault("driver_lost", f"writing commands failed: {exc}"))

    def _track_goal(self, measured: MeasuredState) -> None:
        assert self.commanded is not None
        ended = self.motions.track(measured, self.tick_count, self.commanded)
        if ended is Ended.HELD:
            grip = self.motions.grip
            assert grip is not None
            if abs(measured.velocity[grip.joint]) < BLOCKED_VELOCITY:  # on its object: stay there
                self._relieve(grip.joint, self.commanded.position[grip.joint])
            self.motions.settle_grip(
                self.commanded, self.tick_count, held_reason(grip, measured, self.joint_names)
            )
            self._set_mode(Mode.STOPPING)
        elif ended is Ended.STOP and self.mode in (Mode.FAULT, Mode.ESTOP):
            self._disable_pending = self.settings.disable_on_fault and self._enabled
        elif ended is not None:
            self._set_mode(Mode.HOLDING)

    def _log_first_commands(self) -> None:
        """At DEBUG, when this tick issues the first command of a goal's motion or of a stream's
        newest target (`armd.control.loop` at DEBUG: the benches' latencies, bench/loop.py and
        bench/stream.py). `time.monotonic`: the same clock in every process."""
        active, tick = self.motions.active, self.tick_count
        if active is None or not _first_commands.isEnabledFor(logging.DEBUG):
            return
        if active.start_tick == tick and not active.is_stop:
            _first_commands.debug(
                "goal %s: first command at monotonic %.6f", active.goal_id, time.monotonic()
            )
        stream = active.stream
        if stream is not None and stream.target_tick == tick:  # a leader's read → this command
            _first_commands.debug(
                "stream %s seq %d: first command at monotonic %.6f",
                stream.stream_id,
                stream.seq,
                time.monotonic(),
            )

    # -- outputs ----------------------------------------------------------------------------------

    def _status(self, goal_id: str | None, status: GoalStatus, reason: str | None) -> None:
        self._emit(StatusUpdate(goal_id, status, reason))

    def _sample(self, measured: MeasuredState, now: float) -> Sample:
        return Sample(
            self.tick_count,
            now,
            self.mode,
            self.taken,
            self.busy,
            self.moving,
            self.schedule.missed,
            self.fault,
            Sample.rows(measured, self.commanded),
            None if self.motions.held is None else self.motions.held.joint,
            self._ahead(now),
            self.motions.streaming,
        )

    def _ahead(self, now: float) -> tuple[Handover, ...]:
        lead = self.settings.handover_ticks
        if lead is None or not self._enabled or self.commanded is None:
            return ()
        return self.motions.ahead(self.commanded, self.tick_count, now, lead)
