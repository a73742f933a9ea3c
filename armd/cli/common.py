"""What the subcommands share: exit codes, one-line errors, and the guard that turns expected
failures into them (never a traceback)."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "Command", "UsageError", "guarded", "say_error"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

Command = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """A command-line argument is wrong (exit code 2)."""


def say_error(message: str) -> None:
    """``armd: error: <message>`` on one line of stderr."""
    print(f"armd: error: {' '.join(message.split())}", file=sys.stderr)


def guarded(
    *failures: type[BaseException],
    context: Callable[[argparse.Namespace], str] = lambda args: "",
) -> Callable[[Command], Command]:
    """Run a command so that a `UsageError` exits 2 and any of `failures` exits 1, each with one
    line on stderr (`context(args)` prefixes usage errors, e.g. the subcommand's name)."""

    def decorate(command: Command) -> Command:
        @functools.wraps(command)
        def run(args: argparse.Namespace) -> int:
            try:
                return command(args)
            except BrokenPipeError:  # the reader of stdout left: `armd.cli.main` ends quietly
                raise
            except UsageError as exc:
                prefix = context(args)
                say_error(f"{prefix}: {exc}" if prefix else str(exc))
                return EXIT_USAGE
            except failures as exc:
                say_error(str(exc))
                return EXIT_FAILURE

        return run

    return decorate
