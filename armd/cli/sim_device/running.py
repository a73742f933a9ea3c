"""What every ``armd sim-device`` kind shares when it runs: one-line errors naming the kind, and
SIGTERM ending a simulation like SIGINT until the simulation handles signals itself."""

from __future__ import annotations

import argparse
import functools
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from armd.cli.common import EXIT_OK, Command, guarded
from drivers import DriverError

__all__ = ["guarded_kind", "interrupt_on"]


def guarded_kind(command: Command) -> Command:
    """One-line errors (usage errors prefixed with the device kind); a signal that arrives before
    the simulation took over its handling ends the command normally."""
    inner = guarded(DriverError, OSError, ImportError, context=_context)(command)

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
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
