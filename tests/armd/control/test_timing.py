"""The timerfd-based `PreciseTimer` and the `Schedule` it serves: never early, usable again after
a cancelled wait, and on its own event loop. (How late is for bench/, never asserted here.)"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from pathlib import Path

import pytest

from armd.control.timing import PreciseTimer, Schedule, _has_capability, lock_memory


async def test_precise_timer_never_wakes_before_its_deadline() -> None:
    timer = PreciseTimer()
    try:
        for delay in (0.0003, 0.0017, 0.004, 0.0):
            deadline = time.monotonic() + delay
            await timer.sleep_until(deadline)
            assert time.monotonic() >= deadline
        await timer.sleep_until(time.monotonic() - 1.0)  # already due: returns at once
    finally:
        timer.close()


async def test_a_schedule_on_the_precise_timer_ticks_at_or_after_each_deadline() -> None:
    timer = PreciseTimer()
    schedule = Schedule(0.002, time.monotonic, timer.sleep_until)
    try:
        for _ in range(20):
            deadline = await schedule.wait()
            assert time.monotonic() >= deadline
            schedule.advance()
    finally:
        timer.close()
    assert schedule.ticks == 20


async def test_a_cancelled_timer_wait_leaves_the_timer_usable() -> None:
    timer = PreciseTimer()
    try:
        wait = asyncio.create_task(timer.sleep_until(time.monotonic() + 60))
        await asyncio.sleep(0.01)
        wait.cancel()
        with pytest.raises(asyncio.CancelledError):
            await wait
        deadline = time.monotonic() + 0.002
        await timer.sleep_until(deadline)
        assert time.monotonic() >= deadline
    finally:
        timer.close()


def test_a_timer_serves_one_event_loop_after_another_once_closed() -> None:
    timer = PreciseTimer()

    async def nap() -> None:
        deadline = time.monotonic() + 0.001
        await timer.sleep_until(deadline)
        assert time.monotonic() >= deadline

    asyncio.run(nap())
    timer.close()
    asyncio.run(nap())  # a new timerfd on the new loop
    timer.close()


async def test_the_worst_lateness_covers_late_starts_and_overruns_since_the_last_report() -> None:
    now = [0.0]

    async def sleep_until(deadline: float) -> None:
        now[0] = max(now[0], deadline)

    schedule = Schedule(0.004, lambda: now[0], sleep_until)
    await schedule.wait()
    schedule.advance()
    assert schedule.take_worst_lateness() == 0.0
    await schedule.wait()
    now[0] += 0.0101  # the tick took 10.1 ms of its 4 ms slot: the next two slots are missed
    schedule.advance()
    assert schedule.missed == 2
    assert abs(schedule.take_worst_lateness() - 0.0101) < 1e-12
    assert schedule.take_worst_lateness() == 0.0  # reported once


async def test_period_error_percentiles_come_from_a_histogram_without_a_history() -> None:
    """Lateness 0.000, 0.001, ..., 0.099 ms for 100 ticks and one of 250 ms: the percentiles are
    the upper edges of their 10 µs bins, the maximum is exact, and nothing is kept per tick."""
    now = [0.0]
    late = iter([k * 1e-6 for k in range(100)] + [0.25])

    async def sleep_until(deadline: float) -> None:
        now[0] = deadline + next(late)

    schedule = Schedule(1.0, lambda: now[0], sleep_until)
    for _ in range(101):
        await schedule.wait()
        schedule.advance()
    stats = schedule.stats()
    assert stats.ticks == 101
    assert stats.p50_s == pytest.approx(6e-5)  # the 51st: 50 µs, in the bin [50, 60) µs
    assert stats.p99_s == pytest.approx(1e-4)  # the 100th: 99 µs, in [90, 100) µs
    assert stats.max_s == pytest.approx(0.25)
    assert not any(isinstance(v, list | tuple) and len(v) > 20_000 for v in vars(schedule).values())


async def test_after_an_overrun_a_periodic_timer_sleeps_to_its_next_slot_without_spinning() -> None:
    """Expiries that passed unread during a long tick neither end the next wait early nor leave
    it spinning on the clock until its deadline."""
    period = 0.02
    timer = PreciseTimer(period)
    try:
        first = time.monotonic() + period
        await timer.sleep_until(first)
        while time.monotonic() < first + 2.5 * period:  # the tick overruns two slots and a half
            pass
        deadline = first + 3 * period  # the next slot on the grid, ~10 ms away
        cpu0 = time.thread_time()
        await timer.sleep_until(deadline)
        cpu = time.thread_time() - cpu0
        assert time.monotonic() >= deadline
        assert cpu < 0.5 * (deadline - first - 2.5 * period), f"{cpu * 1e3:.2f} ms of CPU"
    finally:
        timer.close()


def status_with_capabilities(tmp_path: Path, effective: int) -> Path:
    status = tmp_path / "status"
    status.write_text(f"Name:\tpython\nCapPrm:\t{effective:016x}\nCapEff:\t{effective:016x}\n")
    return status


def test_capabilities_are_read_from_the_effective_set(tmp_path: Path) -> None:
    assert _has_capability(14, status_with_capabilities(tmp_path, 1 << 14))
    assert not _has_capability(14, status_with_capabilities(tmp_path, (1 << 13) | (1 << 15)))
    assert not _has_capability(14, tmp_path / "absent")


def test_memory_is_not_locked_under_a_finite_limit_without_the_capability(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A later allocation could fail under a finite LimitMEMLOCK: not even tried, and said."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    finite = 8 << 20 if hard == resource.RLIM_INFINITY else min(hard, 8 << 20)
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (finite, hard))
    try:
        with caplog.at_level(logging.WARNING, logger="armd.control.timing"):
            assert not lock_memory("test", status_with_capabilities(tmp_path, 0))
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (soft, hard))
    assert f"test: memory not locked (LimitMEMLOCK is {finite} bytes" in caplog.text
    assert "LimitMEMLOCK=infinity" in caplog.text
    assert Path("/proc/self/status").read_text().count("VmLck:\t       0 kB") == 1
