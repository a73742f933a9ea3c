"""The control process: the drivers and the control loop, in a process of their own.

The daemon (`armd.daemon.process`) starts it as ``python -m armd.control.process --fd N``, N being
its
end of a socket pair (`armd.link.channel`), and sends it the validated
`armd.control.wiring.ControlSetup`
(the config is parsed once, by the daemon). It asks for real-time scheduling (``SCHED_FIFO`` at
``realtime_priority``; refused, it runs at normal priority with a warning) and then locks its
memory (`armd.control.timing.lock_memory`; refused, a warning), opens the drivers and
answers `Opened` or `OpenFailed`; then it is ``loop.handle(link.recv())`` with ``emit = link.send``
(`armd.link.protocol`): each command is applied as the link reads it, between ticks; events
(statuses,
faults, mode changes, a `Sample` after every tick) go back as they happen. Nothing it does waits
for the daemon. It imports neither the kinematics nor numba: the daemon computes the telemetry's
forward kinematics.

It ignores SIGINT and SIGTERM: the daemon decides when to stop and sends `Shutdown` (the same
happens when the link closes: the daemon died). Either way the arm comes to rest first (at most
`armd.control.loop.SHUTDOWN_STOP_TIMEOUT_S`), then the drives are disabled and closed. A command
that
cannot be applied ends its goal (``aborted``); only `Shutdown` or the link closing end the
process.

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
import signal
import socket
import sys
import time
from collections.abc import Sequence

from armd.control.timing import PreciseTimer, Schedule, lock_memory, raise_priority
from armd.control.wiring import ControlSetup, build_hardware, build_loop
from armd.link.channel import Closed, Link, Opened, OpenFailed, Watchdog
from armd.link.messages import GoalStatus, StatusUpdate
from armd.link.protocol import (
    Command,
    EngageEstop,
    Event,
    Notice,
    Sample,
    Shutdown,
)
from armd.logs import configure_logging, write_in_background
from drivers import DriverError

__all__ = ["main"]

log = logging.getLogger("armd.control.process")  # not "__main__" when run with -m
STATS_INTERVAL_S = 60.0
MISSED_WARNING_INTERVAL_S = 10.0
RECONNECT_INTERVAL_S = 1.0
SETUP_TIMEOUT_S = 30.0
FINISH_TIMEOUT_S = 1.0  # for the daemon to read the last frame and end its side of the link
SAMPLE_BACKLOG_BYTES = 256 * 1024  # `Sample` events wait while more than this is unsent


class ControlServer:
    """The control process's work: the loop, the daemon's commands, the loop's events."""

    def __init__(self, setup: ControlSetup, link: Link, watchdog_interval_s: float | None) -> None:
        self.setup = setup
        self._link = link
        self._watchdog_interval_s = watchdog_interval_s
        self.hardware = build_hardware(setup)
        self.timer = PreciseTimer(setup.loop.period_s)
        schedule = Schedule(setup.loop.period_s, time.monotonic, self.timer.sleep_until)
        self.loop = build_loop(setup, self.hardware, schedule, self._emit)
        self._missed_reported = 0
        self._missed_warned_at = -math.inf
        self._outbox: list[Event] = []

    def _emit(self, event: Event) -> None:
        """Events wait until the tick or the command that made them is done (`_flush_events`):
        nothing is written to the daemon between a tick's read and its command."""
        self._outbox.append(event)

    def _flush_events(self) -> None:
        """Send the waiting events, in order, in one write."""
        if not self._outbox:  # most ticks
            return
        outbox, self._outbox = self._outbox, []
        if self._link.backlog >= SAMPLE_BACKLOG_BYTES:
            # a `Sample` dropped while backed up: the next one carries the state as well
            outbox = [e for e in outbox if not isinstance(e, Sample)]
        if outbox:
            self._link.send_all(outbox)

    def _send(self, message: object) -> None:
        self._link.send(message)

    async def serve(self) -> int:
        """Open the drivers, run until `Shutdown` (or the link closes), close them; exit code."""
        try:
            await self.hardware.open()
        except DriverError as exc:
            self._send(OpenFailed(f"cannot open the drivers: {exc}"))
            await self._flush()
            return 1
        # The start-up objects (modules, drivers) live as long as the process: out of the
        # collector's sight, a full collection takes ~1 ms instead of tens of ms.
        gc.collect()
        gc.freeze()
        self._send(Opened())
        self._link.handle_with(self._apply)
        try:
            async with asyncio.TaskGroup() as tasks:
                link = tasks.create_task(self._shut_down_when_the_link_ends(), name="link")
                reconnect = tasks.create_task(self._reconnect_lost_drivers(), name="reconnect")
                homing = tasks.create_task(self._feed_while_homing(), name="homing watchdog")
                await self._run_loop()
                link.cancel()
                reconnect.cancel()
                homing.cancel()
        finally:  # a crash too: the drives are left disabled (the daemon sees no `Closed`)
            with contextlib.suppress(DriverError):
                await self.hardware.disable()
            await self.hardware.close()
            self.timer.close()
        self._send(Closed())
        await self._flush()
        return 0

    async def _shut_down_when_the_link_ends(self) -> None:
        """When the link closes (the daemon died), shut down."""
        try:
            await self._link.closed()
        except ConnectionError as exc:
            log.error("control link broken: %s", exc)
        log.warning("control link closed by the daemon: bringing the arm to rest")
        self._link.close()  # nobody reads the events any more
        self.loop.handle(Shutdown())

    def _apply(self, message: object) -> None:
        """A command from the daemon, as the link reads it (between ticks)."""
        try:
            self._handle(message)
        finally:
            self._flush_events()

    def _handle(self, message: object) -> None:
        if not isinstance(message, Command):  # the protocol's union of command types
            log.error("control link: not a command: %r", message)
            return
        try:
            self.loop.handle(message)
        except Exception as exc:  # only `Shutdown` or the link closing end this process
            log.exception("control link: applying %s failed", type(message).__name__)
            goal_id = getattr(message, "goal_id", None)
            if goal_id is not None:
                reason = f"internal error: {type(exc).__name__}: {exc}"
                self._emit(StatusUpdate(goal_id, GoalStatus.ABORTED, reason))
            if isinstance(message, EngageEstop):  # fail safe
                self.loop.handle(EngageEstop())

    async def _feed_while_homing(self) -> None:
        """The loop does not tick while a drive homes inside its first enable (seconds, bounded by
        the drive's homing timeout): the systemd watchdog is fed meanwhile, and only then, so
        that a loop stuck anywhere else still stops feeding it."""
        if not self._watchdog_interval_s:
            return
        while True:
            await asyncio.sleep(self._watchdog_interval_s / 2)
            until = self.hardware.homing_until
            if until is not None and time.monotonic() < until:
                self._send(Watchdog())

    async def _run_loop(self) -> None:
        loop = self.loop
        every_watchdog = max(1, int((self._watchdog_interval_s or 1.0) / 2 * self.setup.loop_hz))
        every_stats = max(1, int(STATS_INTERVAL_S * self.setup.loop_hz))

        def after_tick() -> None:
            self._flush_events()
            if self._watchdog_interval_s and loop.tick_count % every_watchdog == 0:
                self._send(Watchdog())
            if loop.tick_count % every_stats == 0:
                self.log_timing()
            if loop.schedule.missed != self._missed_reported:
                self._warn_missed_ticks()

        try:
            await loop.run(after_tick)
        finally:
            self._flush_events()
            self.log_timing()

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

    async def _flush(self) -> None:
        await self._link.finish(FINISH_TIMEOUT_S)  # after the queued frames


async def _serve(fd: int, watchdog_interval_s: float | None) -> int:
    link = await Link.connect(socket.socket(fileno=fd))
    try:
        async with asyncio.timeout(SETUP_TIMEOUT_S):
            setup = await link.next()
    except (TimeoutError, ConnectionError) as exc:
        log.error("control link: no setup from the daemon: %s", exc)
        return 1
    if not isinstance(setup, ControlSetup):
        link.send(OpenFailed(f"control link: expected the setup, got {setup!r}"))
        await link.finish(FINISH_TIMEOUT_S)
        return 1
    if setup.realtime_priority > 0:  # real time: its pages stay resident too
        lock_memory("control process")
    raise_priority(setup.realtime_priority, "control process")
    return await ControlServer(setup, link, watchdog_interval_s).serve()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m armd.control.process")
    parser.add_argument("--fd", type=int, required=True, help="this end of the socket pair")
    parser.add_argument("--watchdog-interval", type=float, default=0.0, help="s; 0: none")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    stop_writing = write_in_background()  # before the priority is raised: its thread stays normal
    for sig in (signal.SIGINT, signal.SIGTERM):  # the daemon decides when to stop
        signal.signal(sig, signal.SIG_IGN)
    try:
        return asyncio.run(_serve(args.fd, args.watchdog_interval or None))
    finally:
        stop_writing()


if __name__ == "__main__":
    sys.exit(main())
