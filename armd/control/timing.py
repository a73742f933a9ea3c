"""The control loop's clock: an absolute-deadline schedule and its statistics.

Deadlines are ``start + k × period``; a tick that starts late is measured (period error) and a tick
that overruns its slot makes the schedule skip the slots it missed (counted) instead of bursting to
catch up. asyncio's timers round up to whole milliseconds, so a sleep lands up to 1 ms after its
deadline, unless the schedule sleeps with a `PreciseTimer`; the lateness is what the period error
measures.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import math
import os
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PreciseTimer", "Schedule", "TimingStats", "lock_memory", "raise_priority"]

Clock = Callable[[], float]
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TimingStats:
    """Period error (tick start minus its deadline, s) since the schedule started, and counters.
    The percentiles are read off a histogram of `LATENESS_BIN_S` bins (rounded up to a bin)."""

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
    """Wakes its event loop at absolute `time.monotonic` deadlines with sub-millisecond precision.

    asyncio's timers go through epoll, whose timeout is rounded up to whole milliseconds, so a
    tick would start up to 1 ms late. A Linux timerfd armed at the deadline (nanoseconds,
    ``CLOCK_MONOTONIC``, the clock of `time.monotonic`) becomes readable then and wakes the loop's
    epoll at once: no helper thread, so the wake-up waits for no other thread to hand over the
    interpreter lock. Where timerfd is missing (not Linux) the wait falls back to asyncio's timer.

    With `period_s` the timerfd is armed periodically: deadlines on the grid ``first + k ×
    period`` (a `Schedule`'s) cost no system call to arm, and only a deadline off the grid (after
    missed slots, or a new schedule) re-arms it. Never wakes before the deadline.

    One timer serves one event loop (the first to wait on it); `close` it on that loop.
    """

    def __init__(self, period_s: float | None = None) -> None:
        self._timerfd = _TIMERFD
        self._period_s = period_s
        self._fd: int | None = None
        self._next: float | None = None  # the armed timerfd's next expiry, if armed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None

    async def sleep_until(self, deadline: float) -> None:
        if deadline - time.monotonic() <= 0.0:
            return
        if self._timerfd is None:
            await _sleep_until(time.monotonic, deadline)
            return
        if self._fd is None:
            self._fd = self._timerfd.create()
            self._loop = asyncio.get_running_loop()
            self._loop.add_reader(self._fd, self._expired)
        if self._next is not None and time.monotonic() >= self._next:
            self._expired()  # an expiry not yet read (an overrun tick): the grid moved on
        if self._next is None or abs(self._next - deadline) > _SAME_DEADLINE_S:
            self._timerfd.arm(self._fd, deadline, self._period_s or 0.0)
            self._next = deadline
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None
        while time.monotonic() < deadline:  # the grid's rounding: at most a microsecond
            pass

    def _expired(self) -> None:
        assert self._fd is not None
        try:
            data = os.read(self._fd, 8)  # the expiration count; reading it re-arms readability
        except BlockingIOError:  # nothing expired since the last read
            return
        if self._next is not None:
            count = int.from_bytes(data, sys.byteorder)
            self._next = self._next + count * self._period_s if self._period_s else None
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def close(self) -> None:
        if self._fd is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None
            self._next = None


_SAME_DEADLINE_S = 1e-6  # a deadline this close to the armed expiry is that expiry


class _TimerFd:
    """``timerfd_create`` / ``timerfd_settime`` (absolute, ``CLOCK_MONOTONIC``) from the C library
    (`os` has them only from Python 3.13)."""

    CLOCK_MONOTONIC = 1
    TFD_TIMER_ABSTIME = 1

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.timerfd_create.argtypes = [ctypes.c_int, ctypes.c_int]
        self._libc.timerfd_create.restype = ctypes.c_int
        self._libc.timerfd_settime.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(_ITimerSpec),
            ctypes.c_void_p,
        ]
        self._libc.timerfd_settime.restype = ctypes.c_int

    def create(self) -> int:
        fd = int(self._libc.timerfd_create(self.CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC))
        if fd < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"timerfd_create: {os.strerror(errno)}")
        return fd

    def arm(self, fd: int, deadline: float, interval_s: float = 0.0) -> None:
        """First expiry at `deadline`, then every `interval_s` (0: once)."""
        seconds, fraction = divmod(deadline, 1.0)
        value = _TimeSpec(int(seconds), int(fraction * 1e9))
        interval = _TimeSpec(int(interval_s), round(interval_s % 1.0 * 1e9))
        spec = _ITimerSpec(interval, value)
        if self._libc.timerfd_settime(fd, self.TFD_TIMER_ABSTIME, ctypes.byref(spec), None) < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"timerfd_settime: {os.strerror(errno)}")


class _TimeSpec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("it_interval", _TimeSpec), ("it_value", _TimeSpec)]


def _load_timerfd() -> _TimerFd | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return _TimerFd()
    except (OSError, AttributeError):  # no C library symbols: the asyncio timer will do
        return None


_TIMERFD = _load_timerfd()


class Schedule:
    """Absolute deadlines at a fixed period, with lateness and missed-tick bookkeeping."""

    def __init__(
        self,
        period_s: float,
        clock: Clock,
        sleep_until: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        self.period_s = period_s
        self.clock = clock
        self._sleep_until = sleep_until or (lambda deadline: _sleep_until(clock, deadline))
        # lateness histogram: bin k counts lateness in [k, k + 1) × LATENESS_BIN_S, the last bin
        # everything beyond. O(1) per tick, and `stats` never sorts a long history inside a tick
        # (sorting 100 000 samples took ~9 ms: a stall of several ticks once a minute).
        self._lateness_bins = [0] * (_LATENESS_BINS + 1)
        self._max_lateness = 0.0
        self._worst_recent = 0.0
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
        self._lateness_bins[min(int(lateness / LATENESS_BIN_S), _LATENESS_BINS)] += 1
        self._max_lateness = max(self._max_lateness, lateness)
        self._worst_recent = max(self._worst_recent, lateness)
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
            # how late the tick ended, measured from the deadline of the slot it overran
            self._worst_recent = max(self._worst_recent, behind + self.period_s)

    def take_worst_lateness(self) -> float:
        """The worst lateness (s) since the previous call: a tick's start after its deadline,
        or its end after the next one (an overrun)."""
        worst, self._worst_recent = self._worst_recent, 0.0
        return worst

    def stats(self) -> TimingStats:
        return TimingStats(
            ticks=self.ticks,
            missed=self.missed,
            p50_s=self._percentile(0.50),
            p99_s=self._percentile(0.99),
            max_s=self._max_lateness,
        )

    def _percentile(self, q: float) -> float:
        """The upper edge of the bin holding the q-quantile (the maximum in the overflow bin);
        a walk from the first bin, which holds nearly every tick."""
        wanted, seen = q * self.ticks, 0
        for k, count in enumerate(self._lateness_bins):
            seen += count
            if seen >= wanted and seen > 0:
                return self._max_lateness if k == _LATENESS_BINS else (k + 1) * LATENESS_BIN_S
        return 0.0


LATENESS_BIN_S = 1e-5  # 10 µs
_LATENESS_BINS = 10_000  # up to 100 ms


def raise_priority(priority: int, who: str) -> None:
    """Ask for real-time scheduling (``SCHED_FIFO`` at `priority`; 0: stay at normal priority)
    for this process, so that a busy machine does not delay its ticks; `who` names the process in
    the log. Refused (no ``LimitRTPRIO``, not Linux): a warning, and it runs at normal priority."""
    if priority <= 0:
        return
    try:  # pid 0: this process's main thread; the threads it starts (bus readers) inherit it
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as exc:  # AttributeError: not Linux
        log.warning(
            "%s: real-time priority %d refused (%s): running at normal priority, so a busy "
            "machine delays ticks; allow it with LimitRTPRIO=%d (see systemd/armd.service) or "
            "set realtime_priority: 0",
            who,
            priority,
            exc.strerror if isinstance(exc, OSError) else exc,
            priority,
        )
    else:
        log.info("%s: real-time priority %d (SCHED_FIFO)", who, priority)


_MCL_CURRENT, _MCL_FUTURE, _MCL_ONFAULT = 1, 2, 4  # <sys/mman.h> (Linux; MCL_ONFAULT: 4.4)
_CAP_IPC_LOCK = 14  # <linux/capability.h>


def lock_memory(who: str, status: Path = Path("/proc/self/status")) -> bool:
    """Keep this process's memory resident from now on: under memory pressure the kernel would
    otherwise page out code or data that a tick needs, and the tick would wait for the disk
    (a real-time process's usual ``mlockall``, as cyclictest or ros2_control's realtime_tools
    do). ``MCL_ONFAULT`` locks the pages in use and those touched later without faulting in the
    rest, so the resident size does not grow. Only with an unlimited ``LimitMEMLOCK`` (or
    ``CAP_IPC_LOCK``): under a finite limit a later allocation could fail. Otherwise, or when
    refused: a warning, and the process runs unlocked. True when locked."""
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft != resource.RLIM_INFINITY and not _has_capability(_CAP_IPC_LOCK, status):
        log.warning(
            "%s: memory not locked (LimitMEMLOCK is %d bytes, not infinity): under memory "
            "pressure the kernel may page out what a tick needs; allow it with "
            "LimitMEMLOCK=infinity (see systemd/armd.service)",
            who,
            soft,
        )
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mlockall(_MCL_CURRENT | _MCL_FUTURE | _MCL_ONFAULT) != 0:
        log.warning("%s: memory not locked (mlockall: %s)", who, os.strerror(ctypes.get_errno()))
        return False
    log.info("%s: memory locked (mlockall, on fault)", who)
    return True


def _has_capability(bit: int, status: Path) -> bool:
    """Whether the effective capability set in `status` (/proc/self/status) holds `bit`."""
    try:
        text = status.read_text(encoding="ascii")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> bit & 1)
    return False
