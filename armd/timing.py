"""The control loop's clock: an absolute-deadline schedule and its statistics.

Deadlines are ``start + k × period``; a tick that starts late is measured (period error) and a tick
that overruns its slot makes the schedule skip the slots it missed (counted) instead of bursting to
catch up. asyncio's timers round up to whole milliseconds, so a sleep lands up to 1 ms after its
deadline; that lateness is what the period error measures.
"""

from __future__ import annotations

import asyncio
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["PreciseTimer", "Schedule", "TimingStats"]

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class TimingStats:
    """Period error (tick start minus its deadline, s) over the recent window, and counters."""

    ticks: int
    missed: int
    p50_s: float
    p99_s: float
    max_s: float


async def _sleep_until(clock: Clock, deadline: float) -> None:
    delay = deadline - clock()
    if delay > 0.0:
        await asyncio.sleep(delay)


class PreciseTimer:
    """Wakes the event loop at absolute `time.monotonic` deadlines with sub-millisecond precision.

    asyncio's timers go through epoll, whose timeout is rounded up to whole milliseconds, so a
    tick would start up to 1 ms late. Here a helper thread sleeps (nanosecond clock) until the
    deadline and resolves a future through `call_soon_threadsafe`, which wakes the loop at once.
    The coarse part of the wait stays on asyncio's timer; the thread only covers the last
    `FINE_S`, so it sleeps briefly and rarely holds the GIL. `close` stops the thread.
    """

    FINE_S = 0.002

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[float, asyncio.Future[None]] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None

    async def sleep_until(self, deadline: float) -> None:
        coarse = deadline - self.FINE_S - time.monotonic()
        if coarse > 0.0:
            await asyncio.sleep(coarse)
        if deadline - time.monotonic() <= 0.0:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="armd-timer", daemon=True)
            self._thread.start()
        future = asyncio.get_running_loop().create_future()
        self._requests.put((deadline, future))
        await future

    def _run(self) -> None:
        while (request := self._requests.get()) is not None:
            deadline, future = request
            remaining = deadline - time.monotonic()
            if remaining > 0.0:
                time.sleep(remaining)
            future.get_loop().call_soon_threadsafe(_resolve, future)

    def close(self) -> None:
        if self._thread is not None:
            self._requests.put(None)
            self._thread.join(timeout=1.0)
            self._thread = None


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():  # a cancelled wait (shutdown) leaves nothing to wake
        future.set_result(None)


class Schedule:
    """Absolute deadlines at a fixed period, with lateness and missed-tick bookkeeping."""

    def __init__(
        self,
        period_s: float,
        clock: Clock,
        sleep_until: Callable[[float], Awaitable[None]] | None = None,
        window: int = 100_000,
    ) -> None:
        self.period_s = period_s
        self.clock = clock
        self._sleep_until = sleep_until or (lambda deadline: _sleep_until(clock, deadline))
        self._lateness: deque[float] = deque(maxlen=window)
        self._max_lateness = 0.0
        self.ticks = 0
        self.missed = 0
        self._next: float | None = None

    async def wait(self) -> float:
        """Sleep until the next deadline; returns it (the nominal time of this tick)."""
        if self._next is None:
            self._next = self.clock()
        deadline = self._next
        await self._sleep_until(deadline)
        lateness = max(0.0, self.clock() - deadline)
        self._lateness.append(lateness)
        self._max_lateness = max(self._max_lateness, lateness)
        self.ticks += 1
        return deadline

    def advance(self) -> None:
        """After a tick's work: move to the next deadline, skipping the slots already past."""
        assert self._next is not None
        self._next += self.period_s
        behind = self.clock() - self._next
        if behind > 0.0:
            skipped = math.floor(behind / self.period_s) + 1
            self.missed += skipped
            self._next += skipped * self.period_s

    def stats(self) -> TimingStats:
        values = np.array(self._lateness) if self._lateness else np.zeros(1)
        return TimingStats(
            ticks=self.ticks,
            missed=self.missed,
            p50_s=float(np.percentile(values, 50)),
            p99_s=float(np.percentile(values, 99)),
            max_s=self._max_lateness,
        )
