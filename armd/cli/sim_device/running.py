"""What every ``armd sim-device`` kind shares when it runs: one-line errors naming the kind, and
SIGTERM ending a simulation like SIGINT until the simulation handles signals itself."""

from __future__ import annotations

import argparse
import functools
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from armd.cli.common import EXIT_OK, EXIT_USAGE, Command, guarded, say_error
from armd.control.timing import raise_priority
from drivers import DriverError

__all__ = ["add_priority_argument", "guarded_kind", "interrupt_on"]

MAX_PRIORITY = 99  # SCHED_FIFO's range on Linux: 1 ... 99


def add_priority_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--realtime-priority",
        type=int,
        default=0,
        metavar="N",
        help="answer like hardware on a busy machine: SCHED_FIFO at N, 1..99, like the control "
        "process's realtime_priority (needs root or LimitRTPRIO; default 0: normal priority)",
    )


def guarded_kind(command: Command) -> Command:
    """One-line errors (usage errors prefixed with the device kind); a signal that arrives before
    the simulation took over its handling ends the command normally. The simulation runs at the
    real-time priority asked for (its threads inherit it), as a device's firmware answers
    whatever else the robot computer does."""
    inner = guarded(DriverError, OSError, ImportError, context=_context)(command)

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        priority = getattr(args, "realtime_priority", 0)
        if not 0 <= priority <= MAX_PRIORITY:
            say_error(f"sim-device: --realtime-priority: {priority} outside [0, {MAX_PRIORITY}]")
            return EXIT_USAGE
        raise_priority(priority, _context(args))
        try:
            return inner(args)
        except KeyboardInterrupt:
            return EXIT_OK

    return run


def _context(args: argparse.Namespace) -> str:
    return f"sim-device {args.device_kind}"


@contextmanager
def interrupt_on(signum: signal.Signals) -> Iterator[None]:
    """Let `signum` raise KeyboardInterrupt (like SIGINT) until the block takes it over."""
    previous = signal.signal(signum, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signum, previous)
