"""The control loop's own thread and event loop, away from the MQTT traffic and goal planning.

On one event loop, a flood of MQTT input delays the tick: paho hands over some twenty messages per
socket read, each parsed and validated before the loop can run its timer. Here the control loop,
the drivers and their reconnection run on a second event loop in a thread of their own, and the
rest of the daemon (bridge, goal pipeline) keeps the main one. The two meet only through

- `ControlThread.run`: await a coroutine on the control loop from the main one (its result,
  exception or cancellation come back);
- `ControlLoop`'s request methods (`submit`, `engage_estop`, `reset`), which are thread-safe;
- `on_loop`: callbacks the control loop calls (statuses, telemetry, faults), posted to the main
  loop's thread.

The threads still share the interpreter lock. A thread that wants it waits until the holder
releases it, or at most the interpreter's switch interval (5 ms by default) before the holder is
asked to drop it; the control thread lowers that interval to `SWITCH_INTERVAL_S` so a busy MQTT
thread costs a tick at most a fraction of a millisecond.

The operating system shares the CPU too: with the broker and MQTT clients busy on a small robot
computer, a thread at normal priority waits for a core. The control thread asks for real-time
scheduling (``SCHED_FIFO`` at `priority`, the config's ``realtime_priority``); threads it starts
(bus readers) inherit it. It sleeps between ticks, and the kernel's real-time throttling keeps a
share of every second for the rest of the system. Without the right (root, ``CAP_SYS_NICE`` or
``LimitRTPRIO=`` in the unit) it runs at normal priority, with a warning.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["SWITCH_INTERVAL_S", "ControlThread", "on_loop"]

SWITCH_INTERVAL_S = 0.0002
START_TIMEOUT_S = 5.0

_T = TypeVar("_T")
log = logging.getLogger(__name__)


class ControlThread:
    """A thread running an event loop of its own; `start`, then `run` coroutines on it, `stop`."""

    def __init__(self, name: str = "armd-control", priority: int = 0) -> None:
        self.name = name
        self.priority = priority  # SCHED_FIFO priority (1-99); 0: normal scheduling
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError(f"{self.name}: not started")
        return self._loop

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"{self.name}: already started")
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), name=self.name)
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_S):
            raise RuntimeError(f"{self.name}: its event loop did not start")

    async def _serve(self) -> None:
        if self.priority > 0:
            self._raise_priority()
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._started.set()
        await self._stop.wait()

    def _raise_priority(self) -> None:
        try:  # pid 0: this thread (Linux schedules threads)
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.priority))
        except (OSError, AttributeError) as exc:  # AttributeError: not Linux
            log.warning(
                "%s: real-time priority %d refused (%s): running at normal priority, so a busy "
                "machine delays ticks; allow it with LimitRTPRIO=%d (see systemd/armd.service) "
                "or set realtime_priority: 0",
                self.name,
                self.priority,
                exc.strerror if isinstance(exc, OSError) else exc,
                self.priority,
            )
        else:
            log.info("%s: real-time priority %d (SCHED_FIFO)", self.name, self.priority)

    async def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run `coro` on the control loop and return its result (or raise its exception).

        Cancelling the caller cancels `coro` and waits until it has finished, so whatever it
        holds (a bus, a stop under way) is released before the caller goes on.
        """
        caller = asyncio.get_running_loop()
        outcome: asyncio.Future[_T] = caller.create_future()
        remote: list[asyncio.Task[_T]] = []

        def start() -> None:
            task = self.loop.create_task(coro)
            remote.append(task)
            task.add_done_callback(lambda t: caller.call_soon_threadsafe(_settle, outcome, t))

        def cancel() -> None:  # runs after `start`: the loop keeps the call order
            remote[0].cancel()

        self.loop.call_soon_threadsafe(start)
        try:
            return await asyncio.shield(outcome)
        except asyncio.CancelledError:
            if not outcome.done():
                self.loop.call_soon_threadsafe(cancel)
                await asyncio.wait([outcome])
            raise

    async def stop(self) -> None:
        """Stop the event loop (tasks still on it are cancelled) and join the thread."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        await asyncio.to_thread(thread.join)


def _settle(outcome: asyncio.Future[_T], task: asyncio.Task[_T]) -> None:
    if outcome.done():
        return
    if task.cancelled():
        outcome.cancel()
    elif (exc := task.exception()) is not None:
        outcome.set_exception(exc)
    else:
        outcome.set_result(task.result())


def on_loop(
    loop: asyncio.AbstractEventLoop, callback: Callable[[_T], None]
) -> Callable[[_T], None]:
    """`callback`, callable from any thread: run at once on `loop`'s own thread, posted to it from
    any other (in call order)."""

    def call(value: _T) -> None:
        if _running_loop() is loop:
            callback(value)
        else:
            loop.call_soon_threadsafe(callback, value)

    return call


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
