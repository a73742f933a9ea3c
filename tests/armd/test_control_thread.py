"""The control thread: coroutines run on its own event loop and thread, results, exceptions and
cancellation come back; callbacks are posted to the caller's loop; real-time scheduling is asked
for and its refusal is survivable. And the timerfd-based `PreciseTimer` it sleeps with."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import AsyncIterator

import pytest

from armd.control_thread import ControlThread, on_loop
from armd.timing import PreciseTimer, Schedule


@pytest.fixture
async def control() -> AsyncIterator[ControlThread]:
    thread = ControlThread("test-control")
    thread.start()
    try:
        yield thread
    finally:
        await thread.stop()


async def test_a_coroutine_runs_on_the_control_thread_and_returns_its_result(
    control: ControlThread,
) -> None:
    async def where() -> tuple[int, asyncio.AbstractEventLoop]:
        await asyncio.sleep(0.001)
        return threading.get_ident(), asyncio.get_running_loop()

    ident, loop = await control.run(where())
    assert ident != threading.get_ident()
    assert loop is control.loop
    assert loop is not asyncio.get_running_loop()


async def test_an_exception_comes_back_to_the_caller(control: ControlThread) -> None:
    async def fail() -> None:
        raise ValueError("bus on fire")

    with pytest.raises(ValueError, match="bus on fire"):
        await control.run(fail())


async def test_cancelling_the_caller_cancels_the_coroutine_and_waits_for_its_cleanup(
    control: ControlThread,
) -> None:
    started, events = threading.Event(), []

    async def hold_the_bus() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.05)  # e.g. closing a bus takes a moment
            events.append("cleaned up")

    caller = asyncio.create_task(control.run(hold_the_bus()))
    await asyncio.to_thread(started.wait, 5.0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert events == ["cleaned up"]  # before the caller saw its cancellation


async def test_a_coroutine_cancelled_on_the_control_loop_cancels_the_caller(
    control: ControlThread,
) -> None:
    async def cancelled() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await control.run(cancelled())


async def test_stop_ends_the_thread_and_cancels_what_is_left_on_its_loop(
    control: ControlThread,
) -> None:
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            cancelled.set()

    control.loop.call_soon_threadsafe(lambda: control.loop.create_task(forever()))
    await asyncio.sleep(0.05)
    await control.stop()
    assert cancelled.is_set()
    assert not any(t.name == "test-control" for t in threading.enumerate())


async def test_on_loop_posts_calls_from_another_thread_in_order_and_runs_local_ones_at_once(
    control: ControlThread,
) -> None:
    received: list[tuple[int, int]] = []

    def record(n: int) -> None:
        received.append((n, threading.get_ident()))

    post = on_loop(asyncio.get_running_loop(), record)

    async def publish() -> None:
        for n in range(100):
            post(n)

    await control.run(publish())
    await asyncio.sleep(0.01)  # the posted calls run on this loop's next iterations
    assert [n for n, _ in received] == list(range(100))
    assert {ident for _, ident in received} == {threading.get_ident()}
    post(100)  # from this loop's own thread: at once
    assert received[-1][0] == 100


async def test_the_thread_runs_at_real_time_priority_when_allowed() -> None:
    if os.geteuid() != 0:
        pytest.skip("SCHED_FIFO needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO here")
    thread = ControlThread("test-rt", priority=10)
    thread.start()
    try:

        async def policy() -> tuple[int, int]:
            return os.sched_getscheduler(0), os.sched_getparam(0).sched_priority

        assert await thread.run(policy()) == (os.SCHED_FIFO, 10)
        assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the caller's thread is unchanged
    finally:
        await thread.stop()


async def test_a_refused_priority_is_a_warning_and_the_thread_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    thread = ControlThread("test-refused", priority=100)  # beyond SCHED_FIFO's 99: refused
    with caplog.at_level(logging.WARNING, logger="armd.control_thread"):
        thread.start()
    try:

        async def answer() -> int:
            return 42

        assert await thread.run(answer()) == 42
    finally:
        await thread.stop()
    (record,) = [r for r in caplog.records if r.name == "armd.control_thread"]
    assert "real-time priority 100 refused" in record.getMessage()
    assert "LimitRTPRIO" in record.getMessage()


async def test_precise_timer_never_wakes_before_its_deadline() -> None:
    timer = PreciseTimer()
    try:
        for delay in (0.0003, 0.0017, 0.004, 0.0):
            deadline = time.monotonic() + delay
            await timer.sleep_until(deadline)
            assert time.monotonic() >= deadline
        past = time.monotonic() - 1.0
        await timer.sleep_until(past)  # already due: returns at once
    finally:
        timer.close()


async def test_precise_timer_drives_a_schedule_on_the_control_thread(
    control: ControlThread,
) -> None:
    async def ticks() -> tuple[list[float], int]:
        timer = PreciseTimer()
        schedule = Schedule(0.002, time.monotonic, timer.sleep_until)
        starts = []
        try:
            for _ in range(20):
                deadline = await schedule.wait()
                starts.append(time.monotonic() - deadline)
                schedule.advance()
        finally:
            timer.close()
        return starts, schedule.ticks

    lateness, ticks = await control.run(ticks())
    assert ticks == 20
    assert all(late >= 0.0 for late in lateness)  # never early; how late is for bench/


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
