"""`armd.control.hardware.within`: a driver call within a timeout, with no timer for a call that
completes
without suspending; one that suspends gets the timeout, its errors and its cancellation as with a
plain ``async with asyncio.timeout``."""

from __future__ import annotations

import asyncio

import pytest

from armd.control.hardware import within


async def test_a_call_that_never_suspends_completes_with_no_timer_even_at_zero_timeout() -> None:
    async def instant() -> int:
        return 7

    loop = asyncio.get_running_loop()
    timers = len(loop._scheduled)  # type: ignore[attr-defined]
    assert await within(instant(), 0.0) == 7
    assert len(loop._scheduled) == timers  # type: ignore[attr-defined]


async def test_a_call_that_suspends_completes_within_its_timeout() -> None:
    async def slow() -> str:
        await asyncio.sleep(0.001)
        await asyncio.sleep(0)
        return "done"

    assert await within(slow(), 5.0) == "done"


async def test_a_call_that_suspends_past_its_timeout_is_cancelled_and_raises_timeout() -> None:
    seen: list[str] = []

    async def stuck() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    with pytest.raises(TimeoutError):
        await within(stuck(), 0.01)
    assert seen == ["cancelled"]


@pytest.mark.parametrize("suspend_first", [False, True])
async def test_errors_of_the_call_propagate_unchanged(suspend_first: bool) -> None:
    async def failing() -> None:
        if suspend_first:
            await asyncio.sleep(0)
        raise ValueError("bus on fire")

    with pytest.raises(ValueError, match="bus on fire"):
        await within(failing(), 1.0)


async def test_cancelling_the_caller_cancels_the_suspended_call() -> None:
    seen: list[str] = []
    started = asyncio.Event()

    async def waiting() -> None:
        started.set()
        try:
            await asyncio.sleep(10)
        finally:
            seen.append("finally")

    task = asyncio.create_task(within(waiting(), 60.0))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["finally"]


async def test_a_call_may_handle_what_it_awaits_failing_and_go_on() -> None:
    async def recovering() -> str:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(future.set_exception, OSError("reply lost"))
        try:
            await future
        except OSError:
            await asyncio.sleep(0)
            return "recovered"
        return "unexpected"

    assert await within(recovering(), 1.0) == "recovered"
