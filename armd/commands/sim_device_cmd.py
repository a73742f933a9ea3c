"""``armd sim-device odrive|dynamixel|feetech``: simulated devices in their own process, so that the
daemon (or ``armd check --probe``) can run its real ``odrive``, ``dynamixel`` or ``feetech`` driver
without hardware.

- ``odrive``: simulated ODrive axes (firmware 0.6 CAN Simple) on a python-can bus. Across
  processes use ``--interface udp_multicast --channel <IPv4 multicast group>`` here and the same
  ``interface`` and ``channel`` in the driver's params.
- ``dynamixel``: a simulated X-series chain on a pseudo-terminal. Its path is printed on one line
  of stdout (``--link`` also makes a symlink to it); give the driver that port, the same baud rate
  and ``reply_margin_s: 0.01`` or more (a Python process serving a pty has millisecond jitter).
- ``feetech``: a simulated Feetech STS3215 chain on a pseudo-terminal, printed the same way; the
  ``feetech`` driver's defaults work with it (same baud rate).

All serve until SIGINT or SIGTERM, then exit 0. Exit codes: 1 the bus or pty cannot be opened,
2 bad arguments; errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
import math
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any, NoReturn

from armd.commands._cli import EXIT_OK, EXIT_USAGE, Command, UsageError, guarded, say_error
from drivers import DriverError

__all__ = ["register"]

MAX_ODRIVE_NODE_ID = 0x3F  # CAN Simple: 6-bit node ids
MAX_DYNAMIXEL_ID = 0xFC  # Protocol 2.0: 253 and 255 would look like a header, 254 is broadcast
MAX_FEETECH_ID = 0xFD  # SCS/STS: 254 is broadcast


class _OneLineParser(argparse.ArgumentParser):
    """Reports argument errors as one line, ``armd: error: <command>: <message>``, exit code 2."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("armd").strip()
        self.exit(EXIT_USAGE, f"armd: error: {command}: {message}\n")


def _guarded(command: Command) -> Command:
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


# -- argument checks ----------------------------------------------------------------------------


def _check_ids(option: str, ids: Sequence[int], maximum: int) -> None:
    outside = [i for i in ids if not 0 <= i <= maximum]
    if outside:
        raise UsageError(f"{option}: {outside} outside [0, {maximum}]")
    if len(set(ids)) != len(ids):
        raise UsageError(f"{option}: {list(ids)} has duplicates")


def _check_seconds(option: str, value: float | None, *, zero_ok: bool) -> None:
    if value is None:
        return
    bound = ">= 0" if zero_ok else "> 0"
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise UsageError(f"{option}: {value} s must be finite and {bound}")


def _check_multicast_group(interface: str, channel: str) -> None:
    """udp_multicast's channel is an IP multicast group (python-can would fail on anything else
    with a less helpful message)."""
    if interface != "udp_multicast":
        return
    try:
        multicast = ipaddress.ip_address(channel).is_multicast
    except ValueError:
        multicast = False
    if not multicast:
        raise UsageError(
            f"--channel: {channel!r} is not an IP multicast group, which udp_multicast needs "
            "(e.g. 239.74.163.2)"
        )


def _check_positive(option: str, value: int | None) -> None:
    if value is not None and value <= 0:
        raise UsageError(f"{option}: {value} must be > 0")


# -- odrive -------------------------------------------------------------------------------------


@_guarded
def _cmd_odrive(args: argparse.Namespace) -> int:
    _check_multicast_group(args.interface, args.channel)
    _check_ids("--node-ids", args.node_ids, MAX_ODRIVE_NODE_ID)
    _check_positive("--bitrate", args.bitrate)
    _check_seconds("--heartbeat-period-s", args.heartbeat_period_s, zero_ok=True)
    _check_seconds("--encoder-period-s", args.encoder_period_s, zero_ok=True)
    _check_seconds("--watchdog-timeout-s", args.watchdog_timeout_s, zero_ok=False)
    from drivers.odrive import sim as odrive_sim  # python-can only when asked for

    with _interrupt_on(signal.SIGTERM):
        # `run` handles SIGINT and SIGTERM itself once its bus is open; it returns after one.
        odrive_sim.run(
            args.interface,
            args.channel,
            args.node_ids,
            bitrate=args.bitrate,
            heartbeat_period_s=args.heartbeat_period_s,
            encoder_period_s=args.encoder_period_s,
            watchdog_timeout_s=args.watchdog_timeout_s,
        )
    return EXIT_OK


@contextmanager
def _interrupt_on(signum: signal.Signals) -> Iterator[None]:
    """Let `signum` raise KeyboardInterrupt (like SIGINT) until the block takes it over."""
    previous = signal.signal(signum, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signum, previous)


# -- dynamixel ----------------------------------------------------------------------------------


@_guarded
def _cmd_dynamixel(args: argparse.Namespace) -> int:
    _check_ids("--ids", args.ids, MAX_DYNAMIXEL_ID)
    _check_serial_args(args)
    from drivers.dynamixel import sim as dynamixel_sim  # pyserial only when asked for

    return _serve_until_signal(dynamixel_sim.run, args)


# -- feetech ------------------------------------------------------------------------------------


@_guarded
def _cmd_feetech(args: argparse.Namespace) -> int:
    _check_ids("--ids", args.ids, MAX_FEETECH_ID)
    _check_serial_args(args)
    from drivers.feetech import sim as feetech_sim  # pyserial only when asked for

    return _serve_until_signal(feetech_sim.run, args)


def _check_serial_args(args: argparse.Namespace) -> None:
    _check_positive("--baudrate", args.baudrate)
    link = args.link
    if link is not None and os.path.lexists(link) and not os.path.islink(link):
        raise UsageError(f"--link: {link} exists and is not a symlink; it is never replaced")


def _serve_until_signal(run: Callable[..., None], args: argparse.Namespace) -> int:
    """Run a pty simulation's `run(ids, baudrate, link=, stop=)` until SIGINT or SIGTERM."""
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    handlers = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        run(args.ids, args.baudrate, link=args.link, stop=stop)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return EXIT_OK


# -- registration -------------------------------------------------------------------------------


def _cmd_without_kind(args: argparse.Namespace) -> int:
    say_error("sim-device: choose the device kind: odrive, dynamixel or feetech")
    return EXIT_USAGE


def _add_odrive_parser(kinds: Any) -> None:
    odrive = kinds.add_parser(
        "odrive", help="simulated ODrive axes (CAN Simple, firmware 0.6) on a python-can bus"
    )
    odrive.add_argument(
        "--interface",
        default="udp_multicast",
        help="python-can interface (udp_multicast: reachable from other processes)",
    )
    odrive.add_argument(
        "--channel", required=True, help="python-can channel, e.g. a multicast group 239.74.163.2"
    )
    odrive.add_argument(
        "--node-ids", nargs="+", type=int, required=True, metavar="ID", help="CAN node ids, 0..63"
    )
    odrive.add_argument("--bitrate", type=int, help="bit rate (default: the interface's)")
    odrive.add_argument(
        "--heartbeat-period-s", type=float, default=0.1, metavar="S", help="0 disables (0.1)"
    )
    odrive.add_argument(
        "--encoder-period-s",
        type=float,
        default=0.01,
        metavar="S",
        help="cyclic encoder estimates; 0 disables, RTR requests still answered (0.01)",
    )
    odrive.add_argument(
        "--watchdog-timeout-s",
        type=float,
        metavar="S",
        help="axis watchdog: idle when no Set_Input_Pos for this long in closed loop (off)",
    )
    odrive.set_defaults(func=_cmd_odrive)


def _add_dynamixel_parser(kinds: Any) -> None:
    dynamixel = kinds.add_parser(
        "dynamixel", help="a simulated Dynamixel X-series chain on a pty (prints its path)"
    )
    _add_serial_arguments(dynamixel, MAX_DYNAMIXEL_ID)
    dynamixel.set_defaults(func=_cmd_dynamixel)


def _add_feetech_parser(kinds: Any) -> None:
    feetech = kinds.add_parser(
        "feetech", help="a simulated Feetech STS3215 chain on a pty (prints its path)"
    )
    _add_serial_arguments(feetech, MAX_FEETECH_ID)
    feetech.set_defaults(func=_cmd_feetech)


def _add_serial_arguments(parser: argparse.ArgumentParser, max_id: int) -> None:
    parser.add_argument(
        "--ids",
        nargs="+",
        type=int,
        default=[1, 2, 3, 4, 5, 6],
        metavar="ID",
        help=f"device ids, 0..{max_id} (1 2 3 4 5 6)",
    )
    parser.add_argument("--baudrate", type=int, default=1_000_000, help="baud rate (1000000)")
    parser.add_argument(
        "--link", metavar="PATH", help="also create a symlink to the pty here (removed on exit)"
    )


def register(subparsers: Any) -> None:
    """Add ``sim-device`` (``odrive``, ``dynamixel``, ``feetech``) to the CLI's subparsers."""
    parser = subparsers.add_parser(
        "sim-device",
        help="run simulated devices for a real driver (no hardware needed)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    kinds = parser.add_subparsers(dest="device_kind", metavar="KIND", parser_class=_OneLineParser)
    parser.set_defaults(func=_cmd_without_kind)
    _add_odrive_parser(kinds)
    _add_dynamixel_parser(kinds)
    _add_feetech_parser(kinds)
