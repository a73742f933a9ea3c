"""The `armd` command line. The only place that configures logging and calls `sys.exit`.

Every subcommand lives in a module of `armd.cli` that defines ``register(subparsers)``.
`COMMANDS` names the module of each command, and only the module of the command given is imported:
``armd --help``, ``--version``, ``goal`` and ``estop`` never import numba or the daemon.
Expected failures (bad files, bad arguments, unreachable devices) are one-line messages on stderr
and a non-zero exit code, never a traceback.

Exit codes: 0 success; 1 the command failed (an invalid file, an unreachable broker or device, a
goal that did not succeed, an offline arm); 2 a wrong argument; 130 interrupted (Ctrl-C); 141
the reader of stdout left (``armd ... | head -1``): 128 + SIGPIPE, what a shell reports for other
Unix tools then, and nothing on stderr. That is handled here, once for every command
(`armd.cli.common.reader_guard`): what a command printed is flushed before the interpreter's exit
(whose own flush into a closed pipe would print "Exception ignored ..." and exit 120), and a
write whose reader left raises `ReaderLeft`, which no command's ``except OSError`` takes for a
failure of its own, from asyncio tasks too.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from armd import __version__
from armd.cli.common import EXIT_READER_LEFT, ReaderLeft, reader_guard
from armd.logs import configure_logging, parse_level_spec

__all__ = ["COMMANDS", "main"]

EXIT_USAGE, EXIT_INTERRUPTED = 2, 130

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("daemon_cmd", "run the daemon"),
    "compile": ("daemon_cmd", "compile the kinematics kernels into numba's cache (once)"),
    "check": ("check_cmd", "validate a config file, its model and drivers (moves nothing)"),
    "goal": ("client.client_cmd", "send a goal over MQTT, show its progress, wait for its outcome"),
    "estop": ("client.client_cmd", "engage or reset the e-stop over MQTT"),
    "watch": ("client.client_cmd", "a live view of an arm's state over MQTT"),
    "payload": ("client.payload_cmd", "set the load at an arm's tool link over MQTT"),
    "record": ("record_cmd", "record an arm's measured state (and its stream) to a CSV file"),
    "replay": ("record_cmd", "replay a recording as a trajectory goal (--dry-run: check only)"),
    "model": ("model_cmd", "inspect or convert a kinematic model file"),
    "fk": ("kinematics_cmd", "forward kinematics: the pose of a link at q"),
    "ik": ("kinematics_cmd", "inverse kinematics: q that puts a link at a target"),
    "dynamics": (
        "dynamics_cmd",
        "gravity torques, inverse dynamics and mass matrix of a model at a state",
    ),
    "calibrate": (
        "calibrate.calibrate_cmd",
        "record each joint's offset and range by hand (torque off)",
    ),
    "leader": ("leader_cmd", "teleoperate a follower arm from a leader arm over MQTT"),
    "map": ("map_cmd", "put a model in the shape of a recorded chain (keypoints)"),
    "collision": (
        "collision_cmd",
        "the distances of the pairs the collision model checks, closest first",
    ),
    "sim-device": (
        "sim_device.sim_device_cmd",
        "run simulated devices (ODrive, MIT, CiA 402, Dynamixel, Feetech)",
    ),
    "dashboard": ("dashboard_cmd", "serve the web dashboard (see and drive the arms in a browser)"),
}
"""Command → (module of `armd.cli` that registers it, one-line help for ``armd --help``)."""


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


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand named in `argv` (the first word that is not an option or its value)."""
    words = iter(argv)
    for word in words:
        if word == "--log-level":
            next(words, None)
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; the full parsers of `command`'s module, a help line for every other command."""
    parser = OneLineParser(
        prog="armd",
        description="Robot arm controller daemon.",
        epilog=(
            "exit codes: 0 success, 1 failure, 2 wrong argument, 130 interrupted, "
            "141 the reader of the output left (| head)"
        ),
    )
    parser.add_argument("--version", action="version", version=f"armd {__version__}")
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=_level_spec,
        metavar="LEVEL[,LOGGER=LEVEL...]",
        help="DEBUG, INFO (default), WARNING or ERROR; e.g. INFO,armd.control.loop=DEBUG",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    registered: set[str] = set()
    if command is not None:
        module = importlib.import_module(f"armd.cli.{COMMANDS[command][0]}")
        module.register(subparsers)
        registered = set(subparsers.choices)
    for name, (_, help_text) in COMMANDS.items():
        if name not in registered:
            subparsers.add_parser(name, help=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command of `argv` (default ``sys.argv[1:]``); its exit code."""
    try:
        with reader_guard():
            return _run(sys.argv[1:] if argv is None else list(argv))
    except (ReaderLeft, BaseExceptionGroup) as exc:
        if not _reader_left(exc):
            raise
        _silence_stdout()
        return EXIT_READER_LEFT


def _run(argv: list[str]) -> int:
    parser = build_parser(_command_in(argv))
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return func(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _reader_left(exc: BaseException) -> bool:
    """Whether `exc` says only that the reader of stdout left: `ReaderLeft`, or a group of
    nothing else (a `TaskGroup`'s). A `BrokenPipeError` of another file (a broker's socket, a
    serial port) is the command's to report."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(ReaderLeft)[1] is None
    return isinstance(exc, ReaderLeft)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush of what is left in its
    buffer does not print "Exception ignored ... BrokenPipeError" on the way out."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
