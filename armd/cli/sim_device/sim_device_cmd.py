"""``armd sim-device odrive|mit|cia402|dynamixel|feetech``: simulated devices in their own
process, so that the daemon (or ``armd check --probe``) can run its real ``odrive``, ``mit``,
``cia402``, ``dynamixel`` or ``feetech`` driver without hardware.

- ``odrive``: simulated ODrive axes (firmware 0.6 CAN Simple) on a python-can bus, by default
  nodes 0 1 2 on ``udp_multicast`` group 239.74.163.2 (reachable from other processes on this
  host only); give the driver the same ``interface`` and ``channel``.
- ``mit``: simulated MIT-mode actuators of one model (Damiao DM-J, CubeMars AK) on a python-can
  bus, answering from master id = id + 0x10 unless ``--master-ids`` says otherwise. On
  ``udp_multicast`` the frames never leave this host (hop limit 0); give the driver the same
  ``interface`` and ``channel`` and ``reply_margin_s: 0.01`` or more.
- ``cia402``: simulated CiA 402 drives (CANopen, cyclic synchronous position) on a python-can
  bus (`armd.cli.sim_device.cia402_cmd`), by default nodes 1..6 on ``udp_multicast`` group
  239.74.163.9.
- ``dynamixel``: a simulated X-series chain on a pseudo-terminal. Its path is printed on the first
  line of stdout (``--link`` also makes a symlink to it); give the driver that port and the same
  baud rate, its other defaults fit.

- ``feetech``: a simulated Feetech STS3215 chain on a pseudo-terminal, printed the same way; the
  ``feetech`` driver's defaults work with it (same baud rate). Its motors have the SO-101's end
  stops unless ``--end-stops`` says otherwise (`armd.cli.sim_device.sim_device_feetech`).

``odrive``, ``dynamixel`` and ``feetech`` take the motors' limits and initial positions as options
(`armd.cli.sim_device.sim_device_config`) and, once they serve, print on stdout the config lines
that drive them (``type`` and ``params`` of a ``drivers.<name>`` entry, and the motor limits);
the serial ones print their pty alone on the first line, before those.

All serve until SIGINT or SIGTERM, then exit 0. Exit codes: 1 the bus or pty cannot be opened,
2 bad arguments; errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, NoReturn

from armd.cli.common import EXIT_OK, EXIT_USAGE, UsageError, say_error
from armd.cli.sim_device import cia402_cmd
from armd.cli.sim_device.running import add_priority_argument, guarded_kind, interrupt_on
from armd.cli.sim_device.sim_device_args import (
    check_ids,
    check_multicast_group,
    check_positive,
    check_return_delay,
    check_seconds,
    check_serial_args,
)
from armd.cli.sim_device.sim_device_config import (
    DYNAMIXEL_MOTOR,
    FEETECH_MOTOR,
    ODRIVE_MOTOR,
    add_motor_arguments,
    dynamixel_config_lines,
    feetech_config_lines,
    motor_options,
    odrive_config_lines,
)
from armd.cli.sim_device.sim_device_feetech import add_end_stops_argument, end_stops, end_stops_line
from armd.cli.sim_device.sim_device_feetech import serve as serve_feetech

__all__ = ["register"]

MAX_ODRIVE_NODE_ID = 0x3F  # CAN Simple: 6-bit node ids
MAX_DYNAMIXEL_ID = 0xFC  # Protocol 2.0: 253 and 255 would look like a header, 254 is broadcast
MAX_FEETECH_ID = 0xFD  # SCS/STS: 254 is broadcast
MAX_MIT_ID = 0x7EF  # 11-bit ids, and the default master id (id + 0x10) must fit too


class _OneLineParser(argparse.ArgumentParser):
    """Reports argument errors as one line, ``armd: error: <command>: <message>``, exit code 2."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("armd").strip()
        self.exit(EXIT_USAGE, f"armd: error: {command}: {message}\n")


# -- odrive -------------------------------------------------------------------------------------


@guarded_kind
def _cmd_odrive(args: argparse.Namespace) -> int:
    check_multicast_group(args.interface, args.channel)
    check_ids("--node-ids", args.node_ids, MAX_ODRIVE_NODE_ID)
    check_positive("--bitrate", args.bitrate)
    check_seconds("--heartbeat-period-s", args.heartbeat_period_s, zero_ok=True)
    check_seconds("--encoder-period-s", args.encoder_period_s, zero_ok=True)
    check_seconds("--watchdog-timeout-s", args.watchdog_timeout_s, zero_ok=False)
    motors = motor_options(args, args.node_ids)
    from drivers.odrive import sim as odrive_sim  # python-can only when asked for
    from drivers.sim.motor import MotorParams

    def ready() -> None:
        lines = odrive_config_lines(args.interface, args.channel, args.node_ids, motors)
        print(lines, flush=True)

    with interrupt_on(signal.SIGTERM):
        # `run` handles SIGINT and SIGTERM itself once its bus is open; it returns after one.
        odrive_sim.run(
            args.interface,
            args.channel,
            args.node_ids,
            bitrate=args.bitrate,
            heartbeat_period_s=args.heartbeat_period_s,
            encoder_period_s=args.encoder_period_s,
            watchdog_timeout_s=args.watchdog_timeout_s,
            motor=MotorParams(
                max_velocity=motors.max_velocity, max_acceleration=motors.max_acceleration
            ),
            initial_positions=motors.initial_positions,
            on_ready=ready,
        )
    return EXIT_OK


# -- mit ----------------------------------------------------------------------------------------


@guarded_kind
def _cmd_mit(args: argparse.Namespace) -> int:
    check_multicast_group(args.interface, args.channel)
    check_ids("--ids", args.ids, MAX_MIT_ID)
    check_positive("--bitrate", args.bitrate)
    from drivers.mit import sim as mit_sim  # python-can only when asked for
    from drivers.mit.models import MODELS

    model = MODELS.get(args.model)
    if model is None:
        raise UsageError(f"--model: {args.model!r} unknown; known: {', '.join(MODELS)}")
    master_ids = args.master_ids or [mit_sim.default_master_id(i) for i in args.ids]
    if len(master_ids) != len(args.ids):
        raise UsageError(f"--master-ids: {len(master_ids)} ids for {len(args.ids)} --ids")
    check_ids("--ids and --master-ids", [*args.ids, *master_ids], 0x7FE)
    with interrupt_on(signal.SIGTERM):
        mit_sim.run(
            args.interface,
            args.channel,
            model,
            args.ids,
            master_ids=master_ids,
            bitrate=args.bitrate,
        )
    return EXIT_OK


# -- dynamixel ----------------------------------------------------------------------------------


@guarded_kind
def _cmd_dynamixel(args: argparse.Namespace) -> int:
    check_ids("--ids", args.ids, MAX_DYNAMIXEL_ID)
    check_serial_args(args)
    check_return_delay(args.return_delay_s)
    from drivers.dynamixel.table import BAUD_RATES

    if args.baudrate not in BAUD_RATES.values():
        rates = " ".join(str(rate) for rate in BAUD_RATES.values())
        raise UsageError(f"--baudrate: {args.baudrate} is not an X-series rate ({rates})")
    motors = motor_options(args, args.ids)
    from drivers.dynamixel import sim as dynamixel_sim  # pyserial only when asked for
    from drivers.dynamixel.table import COUNTS_PER_REV
    from drivers.sim.motor import MotorParams

    def ready(port: str) -> None:
        print(port, flush=True)
        print(dynamixel_config_lines(port, args.baudrate, args.ids, motors), flush=True)

    motor = MotorParams(
        max_velocity=motors.max_velocity,
        max_acceleration=motors.max_acceleration,
        counts_per_rev=COUNTS_PER_REV,
    )
    return _serve_until_signal(
        dynamixel_sim.run, args, motor_params=motor, initial_positions=motors.initial_positions,
        return_delay_s=args.return_delay_s, on_ready=ready,
    )  # fmt: skip


# -- feetech ------------------------------------------------------------------------------------


@guarded_kind
def _cmd_feetech(args: argparse.Namespace) -> int:
    check_ids("--ids", args.ids, MAX_FEETECH_ID)
    check_serial_args(args)
    check_return_delay(args.return_delay_s)
    motors = motor_options(args, args.ids)
    stops = end_stops(args.end_stops, args.ids, motors.initial_positions)
    from drivers.feetech.sim import STS3215_MOTOR  # pyserial only when asked for

    def ready(port: str) -> None:
        print(port, flush=True)
        stops_line = end_stops_line(args.end_stops, stops)
        print(feetech_config_lines(port, args.baudrate, args.ids, motors, stops_line), flush=True)

    motor = dataclasses.replace(
        STS3215_MOTOR, max_velocity=motors.max_velocity, max_acceleration=motors.max_acceleration
    )
    return _serve_until_signal(
        serve_feetech, args, motor_params=motor, initial_positions=motors.initial_positions,
        end_stops=stops, return_delay_s=args.return_delay_s, on_ready=ready,
    )  # fmt: skip


def _serve_until_signal(run: Callable[..., None], args: argparse.Namespace, **options: Any) -> int:
    """Run a pty simulation's `run(ids, baudrate, link=, stop=, **options)` until SIGINT or
    SIGTERM."""
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    handlers = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        run(args.ids, args.baudrate, link=args.link, stop=stop, **options)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return EXIT_OK


# -- registration -------------------------------------------------------------------------------


def _cmd_without_kind(args: argparse.Namespace) -> int:
    say_error("sim-device: choose the device kind: odrive, mit, cia402, dynamixel or feetech")
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
        "--channel",
        default="239.74.163.2",
        help="python-can channel: for udp_multicast an IPv4 multicast group (239.74.163.2)",
    )
    odrive.add_argument(
        "--node-ids",
        nargs="+",
        type=int,
        default=[0, 1, 2],
        metavar="ID",
        help="CAN node ids, 0..63 (0 1 2)",
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
    add_motor_arguments(odrive, ODRIVE_MOTOR)
    odrive.set_defaults(func=_cmd_odrive)


def _add_mit_parser(kinds: Any) -> None:
    mit = kinds.add_parser(
        "mit",
        help="simulated MIT-mode actuators (Damiao DM-J, CubeMars AK) on a python-can bus",
    )
    mit.add_argument(
        "--interface",
        default="udp_multicast",
        help="python-can interface (udp_multicast, hop limit 0: reachable from this host only)",
    )
    mit.add_argument(
        "--channel", required=True, help="python-can channel, e.g. a multicast group 239.74.163.7"
    )
    mit.add_argument("--model", default="DM4310", help="actuator model (DM4310)")
    mit.add_argument(
        "--ids",
        nargs="+",
        type=int,
        default=[1, 2, 3, 4, 5, 6],
        metavar="ID",
        help=f"CAN ids, 0..{MAX_MIT_ID} (1 2 3 4 5 6)",
    )
    mit.add_argument(
        "--master-ids",
        nargs="+",
        type=int,
        metavar="ID",
        help="the ids the replies come from, one per --ids (default: id + 0x10)",
    )
    mit.add_argument("--bitrate", type=int, help="bit rate (default: the interface's)")
    mit.set_defaults(func=_cmd_mit)


def _add_dynamixel_parser(kinds: Any) -> None:
    dynamixel = kinds.add_parser(
        "dynamixel", help="a simulated Dynamixel X-series chain on a pty (prints its path)"
    )
    _add_serial_arguments(dynamixel, MAX_DYNAMIXEL_ID)
    dynamixel.add_argument(
        "--return-delay-s",
        type=float,
        default=0.0005,
        metavar="S",
        help="Return Delay Time of every servo, 0..0.000508 s (0.0005, the factory setting)",
    )
    add_motor_arguments(dynamixel, DYNAMIXEL_MOTOR)
    dynamixel.set_defaults(func=_cmd_dynamixel)


def _add_feetech_parser(kinds: Any) -> None:
    feetech = kinds.add_parser(
        "feetech", help="a simulated Feetech STS3215 chain on a pty (prints its path)"
    )
    _add_serial_arguments(feetech, MAX_FEETECH_ID)
    feetech.add_argument(
        "--return-delay-s",
        type=float,
        default=0.0005,
        metavar="S",
        help="Return Delay Time of every servo, 0..0.000508 s (0.0005, the factory setting; "
        "the feetech driver sets it to 0 when it opens)",
    )
    add_motor_arguments(feetech, FEETECH_MOTOR)
    add_end_stops_argument(feetech)
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
    """Add ``sim-device`` (``odrive``, ``mit``, ``cia402``, ``dynamixel``, ``feetech``) to the CLI's
    subparsers."""
    parser = subparsers.add_parser(
        "sim-device",
        help="run simulated devices for a real driver (no hardware needed)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    kinds = parser.add_subparsers(dest="device_kind", metavar="KIND", parser_class=_OneLineParser)
    parser.set_defaults(func=_cmd_without_kind)
    _add_odrive_parser(kinds)
    _add_mit_parser(kinds)
    cia402_cmd.add_parser(kinds)
    _add_dynamixel_parser(kinds)
    _add_feetech_parser(kinds)
    for kind in kinds.choices.values():
        add_priority_argument(kind)
