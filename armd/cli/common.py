"""What the subcommands share: exit codes, one-line errors, the guard that turns expected
failures into them (never a traceback), and stdout that says when its reader left."""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO, cast

__all__ = [
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_READER_LEFT",
    "EXIT_USAGE",
    "Command",
    "ReaderLeft",
    "UsageError",
    "guarded",
    "reader_guard",
    "say_error",
]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EXIT_READER_LEFT = 141
"""The reader of stdout left (``armd ... | head -1``): 128 + SIGPIPE, as a shell reports it for
other Unix tools."""

Command = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """A command-line argument is wrong (exit code 2)."""


class ReaderLeft(BaseException):
    """Writing to stdout failed because its reader left (a `BrokenPipeError`): the command ends
    with `EXIT_READER_LEFT`. A `BaseException`, as `KeyboardInterrupt` is, so that no command's
    ``except OSError`` (a broker unreachable, a file unwritable) or ``except Exception`` takes it
    for a failure of its own."""


class _ReaderGuard:
    """`stream` (stdout) whose `write` and `flush` raise `ReaderLeft` for a `BrokenPipeError`;
    everything else is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError as exc:
            raise ReaderLeft from exc

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError as exc:
            raise ReaderLeft from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def reader_guard() -> Iterator[None]:
    """Within it, a write to ``sys.stdout`` whose reader left raises `ReaderLeft`; what is
    written is flushed on the way out (not in the interpreter's exit, whose flush into a closed
    pipe would print "Exception ignored ..." and exit 120)."""
    stream = sys.stdout
    sys.stdout = cast(TextIO, _ReaderGuard(stream))
    try:
        yield
    finally:  # `--help` ends in SystemExit, and its text may still be in the buffer
        try:
            sys.stdout.flush()
        finally:
            sys.stdout = stream


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
            except UsageError as exc:
                prefix = context(args)
                say_error(f"{prefix}: {exc}" if prefix else str(exc))
                return EXIT_USAGE
            except failures as exc:
                say_error(str(exc))
                return EXIT_FAILURE

        return run

    return decorate
