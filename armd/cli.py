"""The `armd` command line. The only place that configures logging and calls `sys.exit`.

Every subcommand lives in `armd.commands.<module>` and registers itself with ``register``.
Expected failures (bad files, bad arguments, unreachable devices) are one-line messages on stderr
and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import NoReturn

from armd import __version__

__all__ = ["main"]

EXIT_USAGE = 2


def _command_modules() -> list[ModuleType]:
    from armd.commands import (  # noqa: PLC0415
        check_cmd,
        daemon_cmd,
        kinematics_cmd,
        map_cmd,
        sim_device_cmd,
    )

    return [daemon_cmd, check_cmd, kinematics_cmd, map_cmd, sim_device_cmd]


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line naming the command and where to read more (argparse prints the
    whole usage first); every subcommand's parser is of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="armd", description="Robot arm controller daemon.")
    parser.add_argument("--version", action="version", version=f"armd {__version__}")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return func(args)
    except BrokenPipeError:  # `armd model show ... | head`: the reader left, not an error
        sys.stderr.close()
        return 0
