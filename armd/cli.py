"""The `armd` command line. The only place that configures logging and calls `sys.exit`.

Every subcommand lives in `armd.commands.<module>` and registers itself with ``register``.
Expected failures (bad files, bad arguments, unreachable devices) are one-line messages on stderr
and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import NoReturn

from armd import __version__
from armd.logs import configure_logging, parse_level_spec

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


def _level_spec(spec: str) -> str:
    try:
        parse_level_spec(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return spec


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="armd", description="Robot arm controller daemon.")
    parser.add_argument("--version", action="version", version=f"armd {__version__}")
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=_level_spec,
        metavar="LEVEL[,LOGGER=LEVEL...]",
        help="DEBUG, INFO (default), WARNING or ERROR; e.g. INFO,armd.loop=DEBUG",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return func(args)
    except BrokenPipeError:  # `armd model show ... | head`: the reader left, not an error
        sys.stderr.close()
        return 0
