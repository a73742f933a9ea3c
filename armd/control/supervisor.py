"""The control loop's modes: enabling after a valid read, the safety verdicts, latched faults and
e-stops, their reset, and the drives switched off after a fault stop.

`LoopSupervisor` keeps the state these rules decide (the mode, the latched fault, whether the
drives are enabled, the requests the next tick acts on) and the transitions between the modes
(`armd.link.messages.Mode`); `armd.control.loop.ControlLoop` builds on it with the tick, the
commands it takes and the motions it follows. The safety rules kept here are those of
docs/safety.md: start inactive; enable only after a valid read; the first command equals the
measured position; stale feedback and faults lead to a controlled stop; faults and e-stops latch
until `reset`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from armd.control.hardware import ArmHardware
from armd.control.limiter import SetpointLimiter
from armd.control.motions import Motions
from armd.control.safety import SafetyMonitor, Verdict
from armd.link.messages import Fault, GoalStatus, Mode
from armd.link.protocol import Event, FaultChanged, MeasuredState, ModeChanged
from armd.motion.trajectory import Setpoint
from drivers import DriverError

__all__ = ["LoopSupervisor"]

# the loop's logger: what it decides is set to a level under one name (`--log-level
# INFO,armd.control.loop=DEBUG`)
log = logging.getLogger("armd.control.loop")


class LoopSupervisor:
    """The modes of the control loop and the transitions between them (see the module)."""

    def __init__(
        self,
        joint_names: tuple[str, ...],
        hardware: ArmHardware,
        monitor: SafetyMonitor,
        limiter: SetpointLimiter,
        motions: Motions,
        auto_enable: bool,
        emit: Callable[[Event], None],
    ) -> None:
        self.joint_names = joint_names
        self.hardware = hardware
        self.monitor = monitor
        self.limiter = limiter
        self.motions = motions
        self._auto_enable = auto_enable
        self._emit = emit
        self.mode = Mode.INACTIVE
        self.tick_count = 0
        self.commanded: Setpoint | None = None
        self.fault: Fault | None = None
        self.healthy = False
        self._enabled = False
        self._estop_request = False
        self._reset_request = False
        self._fault_request: Fault | None = None  # the daemon's (LatchFault), for the next tick
        self._hold_reason: str | None = None
        self._disable_pending = False

    @property
    def moving(self) -> bool:
        """True while a motion or a stop is under way (the commanded state is changing)."""
        return self.motions.moving

    async def _try_enable(self, measured: MeasuredState, now: float) -> None:
        """Enable once every joint has fresh, fault-free feedback inside its limits; the first
        command is the measured position."""
        check = self.monitor.check(measured, now)
        if check.verdict is Verdict.FAULT and check.fault is not None and self.fault is None:
            self._latch(check.fault)  # e.g. found outside the limits: visible, and needs a reset
        if self.fault is not None or not measured.complete() or check.verdict is not Verdict.OK:
            self.healthy = False
            return
        if not self._auto_enable:
            return
        try:
            await self.hardware.enable()
        except DriverError as exc:
            self._latch(Fault("enable_failed", f"enabling the drives failed: {exc}"))
            return
        self._enabled = True
        self._start_from_measured(measured)

    def _start_from_measured(self, measured: MeasuredState) -> None:
        """Restart at rest where the arm is; a gripper holding an object (a reset with the drives
        on) stays commanded where it holds, so that a reset does not drop what it carries."""
        position, held = measured.position, self.motions.held
        if held is not None and self.commanded is not None:
            position = held.restore(position, self.commanded.position)
        self.limiter.reset(position)
        self.commanded = Setpoint.at_rest(position)
        self.motions.active = None
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
            if check.fault.code == "stall" and commanded is not None:
                joint = self.joint_names.index(check.fault.joint or "")
                self._relieve(joint, measured.position[joint])
                if self.motions.held is not None and self.motions.held.joint == joint:
                    self.motions.held = None  # a stalled gripper lets go, as stall protection
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

    def _relieve(self, joint: int, position_now: float) -> None:
        """A joint that cannot move (stalled, or a gripper on its object) is commanded at rest at
        `position_now`, so that it stops pushing further; the other joints keep their commanded
        state for the stop that follows."""
        assert self.commanded is not None
        position, velocity = self.limiter.relieve(joint, position_now)
        acceleration = self.commanded.acceleration.copy()
        acceleration[joint] = 0.0
        self.commanded = Setpoint(position, velocity, acceleration)

    def _latch(self, fault: Fault) -> None:
        log.error("fault %s: %s", fault.code, fault.message)
        self.fault = fault
        self._emit(FaultChanged(fault))
        self._stop_everything(Mode.FAULT, f"fault: {fault.message}")

    def _stop_everything(self, mode: Mode, reason: str) -> None:
        if self.mode in (Mode.FAULT, Mode.ESTOP) and mode == Mode.ESTOP:
            return
        self.motions.drop_pending(reason)
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
        cleared = self.monitor.clear_to_reset(measured, now).verdict is not Verdict.FAULT
        if not (cleared and measured.complete()):
            log.warning("reset refused: the fault is still active")
            return
        log.info("reset: %s cleared", self.fault.code if self.fault else "e-stop")
        self.fault = None
        self._emit(FaultChanged(None))
        if self._enabled:
            self._start_from_measured(measured)
        else:
            self._set_mode(Mode.INACTIVE)

    def _stop_motion(self, reason: str, outcome: GoalStatus = GoalStatus.ABORTED) -> None:
        """Controlled stop from the commanded state; the active goal ends as `outcome`."""
        assert self.commanded is not None
        self.motions.stop(self.commanded, self.tick_count, reason, outcome)
        if self.mode == Mode.MOVING:
            self._set_mode(Mode.STOPPING)

    async def _disable(self) -> None:
        """Drives off after a fault stop (config `on_fault: disable`); a reset re-enables them
        from the measured position."""
        self._disable_pending = False
        self._enabled = False
        self.commanded = None
        self.motions.held = None  # a gripper without torque holds nothing
        try:
            await self.hardware.disable()
        except DriverError as exc:
            log.error("disabling the drives failed: %s", exc)

    def _set_mode(self, mode: Mode) -> None:
        if mode != self.mode:
            self.mode = mode
            self._emit(ModeChanged(mode))
