"""The control process: the drivers and the control loop, in a process of their own.

The daemon (`armd.daemon`) starts it as ``python -m armd.control_process --config FILE --fd N``,
N being its end of a socket pair (`armd.control_link`). It loads the same config, asks for
real-time scheduling (``SCHED_FIFO`` at ``realtime_priority``; refused, it runs at normal priority
with a warning), opens the drivers and answers `Opened` or `OpenFailed`; then it runs the loop,
applies the daemon's requests between ticks, and reports statuses, faults, telemetry, mode changes
and its state after every tick. Nothing it does waits for the daemon.

It ignores SIGINT and SIGTERM: the daemon decides when to stop and sends `Shutdown` (the same
happens when the link closes: the daemon died). Either way the arm comes to rest first (at most
`SHUTDOWN_STOP_TIMEOUT_S`), then the drives are disabled and closed.

Why a process: the control tick is Python, so it needs the interpreter lock. In one process a
flood of MQTT input, goal planning and their garbage collections hold that lock while the tick
waits, and an MQTT thread that the operating system preempts holds it longer still. Here the
tick's process has its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import math
import os
import signal
import socket
import sys
import time
from collections.abc import Sequence

import numpy as np

from armd.config import ArmSetup, build_drivers, load_config
from armd.control_link import (
    Closed,
    Estop,
    FaultChanged,
    LoopState,
    ModeChanged,
    Notice,
    Opened,
    OpenFailed,
    Ready,
    Reset,
    Shutdown,
    Status,
    Submit,
    TelemetrySample,
    Watchdog,
    read_message,
    write_message,
)
from armd.errors import ArmdError
from armd.hardware import ArmHardware
from armd.logs import configure_logging
from armd.loop import ControlLoop, LoopSettings, StopRequest
from armd.messages import GoalStatus, Mode, StatusUpdate
from armd.safety import SafetyMonitor, SafetyThresholds
from armd.timing import PreciseTimer, Schedule
from armd.trajectory import MotionLimits
from drivers import DriverError

__all__ = ["SHUTDOWN_STOP_TIMEOUT_S", "loop_settings", "main", "motion_limits", "safety_monitor"]

log = logging.getLogger("armd.control_process")  # not "__main__" when run with -m
SHUTDOWN_STOP_TIMEOUT_S = 5.0
STATS_INTERVAL_S = 60.0
MISSED_WARNING_INTERVAL_S = 10.0
RECONNECT_INTERVAL_S = 1.0
STATE_BACKLOG_BYTES = 256 * 1024  # `LoopState` frames wait while more than this is unsent


def motion_limits(setup: ArmSetup) -> MotionLimits:
    limits = setup.tree.limits
    return MotionLimits(
        np.array(limits.velocity), np.array(limits.acceleration), np.array(setup.jerk)
    )


def safety_monitor(setup: ArmSetup) -> SafetyMonitor:
    safety = setup.safety
    period = 1.0 / setup.loop_hz
    thresholds = SafetyThresholds(
        stale_hold_s=max(safety.stale_hold_ticks * period, safety.stale_hold_s),
        stale_fault_s=safety.stale_fault_s,
        following_error=safety.following_error,
        following_error_per_velocity=safety.following_error_per_velocity,
        limit_tolerance=safety.limit_tolerance,
    )
    limits = setup.tree.limits
    return SafetyMonitor(setup.tree.joint_names, limits.lower, limits.upper, thresholds)


def loop_settings(setup: ArmSetup) -> LoopSettings:
    return LoopSettings(
        period_s=1.0 / setup.loop_hz,
        telemetry_every=max(1, round(setup.loop_hz / setup.telemetry_hz)),
        joint_tolerance=setup.safety.joint_tolerance,
        settle_timeout_s=setup.safety.settle_timeout_s,
        disable_on_fault=setup.safety.on_fault == "disable",
    )


class ControlServer:
    """The control process's work: the loop, the daemon's requests, the reports."""

    def __init__(
        self,
        setup: ArmSetup,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        watchdog_interval_s: float | None,
    ) -> None:
        self.setup = setup
        self._reader, self._writer = reader, writer
        self._watchdog_interval_s = watchdog_interval_s
        self.hardware = ArmHardware(build_drivers(setup), setup.transmission)
        self.timer = PreciseTimer()
        settings = loop_settings(setup)
        self.loop = ControlLoop(
            setup.tree,
            setup.tool_link,
            self.hardware,
            safety_monitor(setup),
            motion_limits(setup),
            settings,
            Schedule(settings.period_s, time.monotonic, self.timer.sleep_until),
            lambda update: self._send(Status(update)),
            lambda fault: self._send(FaultChanged(fault)),
            lambda telemetry: self._send(TelemetrySample(telemetry)),
            on_mode_change=lambda mode: self._send(ModeChanged(mode)),
        )
        self._taken = 0
        self._stopped = False
        self._missed_reported = 0
        self._missed_warned_at = -math.inf

    def _send(self, message: object) -> None:
        if not self._writer.is_closing():
            write_message(self._writer, message)

    async def serve(self) -> int:
        """Open the drivers, run until `Shutdown` (or the link closes), close them; exit code."""
        try:
            await self.hardware.open()
        except DriverError as exc:
            self._send(OpenFailed(f"cannot open the drivers: {exc}"))
            await self._flush()
            return 1
        # The start-up objects (modules, model, drivers) live as long as the process: out of the
        # collector's sight, a full collection takes ~1 ms instead of tens of ms.
        gc.collect()
        gc.freeze()
        self._send(Opened())
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._run_loop(), name="control loop")
                commands = tasks.create_task(self._commands(), name="commands")
                reconnect = tasks.create_task(self._reconnect_lost_drivers(), name="reconnect")
                await commands
                reconnect.cancel()
                await self._come_to_rest()
                self._stopped = True
        finally:  # a crash too: the drives are left disabled (the daemon sees no `Closed`)
            with contextlib.suppress(DriverError):
                await self.hardware.disable()
            await self.hardware.close()
            self.timer.close()
        self._send(Closed())
        await self._flush()
        return 0

    async def _commands(self) -> None:
        """Apply the daemon's requests as they arrive, until `Shutdown` or the end of the link."""
        while (message := await self._next_command()) is not None:
            if isinstance(message, Shutdown):
                return
            try:
                self._apply(message)
            except Exception as exc:  # only the link closing or `Shutdown` ends this process
                log.exception("control link: applying %s failed", type(message).__name__)
                if isinstance(message, Submit) and message.request.goal_id is not None:
                    reason = f"internal error: {type(exc).__name__}: {exc}"
                    update = StatusUpdate(message.request.goal_id, GoalStatus.ABORTED, reason)
                    self._send(Status(update))
                if isinstance(message, Estop):  # fail safe
                    self.loop.engage_estop()
        log.warning("control link closed by the daemon: bringing the arm to rest")
        self._writer.close()  # nobody reads the reports any more

    def _apply(self, message: object) -> None:
        if isinstance(message, Submit):
            self._taken = message.seq
            self.loop.submit(message.request)
        elif isinstance(message, Estop):
            log.warning("e-stop engaged over MQTT")
            self.loop.engage_estop()
        elif isinstance(message, Reset):
            log.info("reset requested over MQTT")
            self.loop.reset()
        else:
            log.error("control link: unexpected message %r", message)

    async def _next_command(self) -> object | None:
        """The next request; None once the link is closed or broken (the daemon is gone)."""
        try:
            return await read_message(self._reader)
        except ConnectionError as exc:
            log.error("control link broken: %s", exc)
            return None

    async def _run_loop(self) -> None:
        loop = self.loop
        every_watchdog = max(1, int((self._watchdog_interval_s or 1.0) / 2 * self.setup.loop_hz))
        every_stats = max(1, int(STATS_INTERVAL_S * self.setup.loop_hz))
        ready = False

        def after_tick() -> None:
            nonlocal ready
            measured = loop.measured
            if not ready and measured is not None and measured.complete():
                ready = True
                self._send(Ready(len(self.hardware.drivers)))
            if self._watchdog_interval_s and loop.tick_count % every_watchdog == 0:
                self._send(Watchdog())
            if loop.tick_count % every_stats == 0:
                self.log_timing()
            if loop.schedule.missed != self._missed_reported:
                self._warn_missed_ticks()
            if self._writer.transport.get_write_buffer_size() < STATE_BACKLOG_BYTES:
                self._send(self.state())

        try:
            await loop.run(lambda: self._stopped, after_tick)
        finally:
            self.log_timing()

    def state(self) -> LoopState:
        loop = self.loop
        return LoopState(
            tick=loop.tick_count,
            mode=loop.mode,
            taken=self._taken,
            busy=loop.busy,
            moving=loop.moving,
            measured=loop.measured,
            commanded=loop.commanded,
            fault=loop.fault,
        )

    def _warn_missed_ticks(self) -> None:
        """A warning while ticks are being missed: the first at once, then at most one every
        `MISSED_WARNING_INTERVAL_S`, with the count since the previous one and the worst
        lateness."""
        now = time.monotonic()
        if now - self._missed_warned_at < MISSED_WARNING_INTERVAL_S:
            return
        schedule = self.loop.schedule
        missed = schedule.missed - self._missed_reported
        log.warning(
            "missed %d tick(s) of %.1f ms since the last report (%d of %d in all); worst "
            "lateness %.1f ms: the machine or the drivers are too slow for loop_hz %g",
            missed,
            schedule.period_s * 1e3,
            schedule.missed,
            schedule.ticks,
            schedule.take_worst_lateness() * 1e3,
            self.setup.loop_hz,
        )
        self._missed_reported = schedule.missed
        self._missed_warned_at = now

    def log_timing(self) -> None:
        """One INFO line on the loop's timing (every minute and at shutdown)."""
        stats = self.loop.schedule.stats()
        log.info(
            "loop timing: %d ticks, %d missed, period error p50 %.3f ms, p99 %.3f ms, "
            "max %.3f ms; limiter interventions %d",
            stats.ticks,
            stats.missed,
            stats.p50_s * 1e3,
            stats.p99_s * 1e3,
            stats.max_s * 1e3,
            self.loop.limiter.interventions,
        )

    async def _reconnect_lost_drivers(self) -> None:
        """Once a lost bus has faulted the loop, reopen it every `RECONNECT_INTERVAL_S` until it
        is back. The fault stays latched: moving again needs a reset."""
        while True:
            await asyncio.sleep(RECONNECT_INTERVAL_S)
            if self.hardware.failed and self.loop.fault is not None:
                back = await self.hardware.reconnect()
                if back:
                    self._send(Notice(f"drivers {back} reconnected: reset to resume"))

    async def _come_to_rest(self) -> None:
        loop = self.loop
        if loop.moving or loop.mode == Mode.MOVING:
            loop.submit(StopRequest(None, "daemon stopping"))
        deadline = time.monotonic() + SHUTDOWN_STOP_TIMEOUT_S
        while loop.busy and time.monotonic() < deadline:
            await asyncio.sleep(loop.settings.period_s)

    async def _flush(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()


def _raise_priority(priority: int) -> None:
    if priority <= 0:
        return
    try:  # pid 0: this process's main thread; the threads it starts (bus readers) inherit it
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as exc:  # AttributeError: not Linux
        log.warning(
            "control process: real-time priority %d refused (%s): running at normal priority, so "
            "a busy machine delays ticks; allow it with LimitRTPRIO=%d (see "
            "systemd/armd.service) or set realtime_priority: 0",
            priority,
            exc.strerror if isinstance(exc, OSError) else exc,
            priority,
        )
    else:
        log.info("control process: real-time priority %d (SCHED_FIFO)", priority)


async def _serve(config: str, fd: int, watchdog_interval_s: float | None) -> int:
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    try:
        setup = load_config(config)
    except ArmdError as exc:
        write_message(writer, OpenFailed(f"{config}: invalid configuration: {exc}"))
        await writer.drain()
        return 1
    _raise_priority(setup.realtime_priority)
    return await ControlServer(setup, reader, writer, watchdog_interval_s).serve()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m armd.control_process")
    parser.add_argument("--config", required=True)
    parser.add_argument("--fd", type=int, required=True, help="this end of the socket pair")
    parser.add_argument("--watchdog-interval", type=float, default=0.0, help="s; 0: none")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    for sig in (signal.SIGINT, signal.SIGTERM):  # the daemon decides when to stop
        signal.signal(sig, signal.SIG_IGN)
    return asyncio.run(_serve(args.config, args.fd, args.watchdog_interval or None))


if __name__ == "__main__":
    sys.exit(main())
