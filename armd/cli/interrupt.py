"""Ctrl-C for the commands that run an event loop, made impossible to lose.

`asyncio.run` turns the first SIGINT into a cancellation of the main task, and relies on every
await on the way to let it through. On Python 3.11 some do not: `asyncio.wait_for` (ours, and the
libraries': aiomqtt, the drivers' executors) drops a cancellation that arrives as the awaited call
completes, and the command then runs on as if the key was never pressed; on a loaded machine that
coincidence is common. `run` cancels the main task again every `RECANCEL_S` until it ends, and
then raises `KeyboardInterrupt` as a plain `asyncio.run` would.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["RECANCEL_S", "run"]

T = TypeVar("T")
RECANCEL_S = 0.2  # s between cancellations of a main task that has not ended yet


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` where SIGINT cancels `main` until it ends (then `KeyboardInterrupt`)."""
    return asyncio.run(_interruptible(main))


async def _interruptible(main: Coroutine[Any, Any, T]) -> T:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    interrupted = False

    def interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        if not task.done():
            task.cancel()
            loop.call_later(RECANCEL_S, interrupt_again)

    def interrupt_again() -> None:
        if not task.done():
            interrupt()

    loop.add_signal_handler(signal.SIGINT, interrupt)
    try:
        return await main
    except asyncio.CancelledError:
        if interrupted:
            raise KeyboardInterrupt from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
