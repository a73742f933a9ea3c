"""``armd leader --config LEADER.yaml --follower NAME``: teleoperate the arm NAME from a leader arm.

The leader is any arm armd can read (its config: model, joints, drivers; any driver), with a
``leader:`` section saying how it maps onto the follower (docs/teleoperation.md). Its drivers are
opened and never enabled (torque off: the arm moves by hand; no command is ever written to it),
read at ``leader.rate_hz`` (default its ``loop_hz``, or ``--rate``), and each reading is
published on the follower's ``stream`` topic over MQTT, so the two arms can sit on different
machines. Ctrl-C (or SIGTERM) sends the stream's ``end``: the follower comes to rest.

Exit codes: 130 after Ctrl-C, 0 after SIGTERM; 1 an invalid config, leader devices that cannot
be opened or read, an offline follower, an unreachable broker; 2 a wrong argument.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import signal
from pathlib import Path
from typing import Any

from armd.cli import interrupt
from armd.cli.common import EXIT_FAILURE, EXIT_OK, UsageError, guarded

__all__ = ["register"]

log = logging.getLogger("armd.tools.leader")
EXIT_INTERRUPTED = 130
_NAME = re.compile(r"[A-Za-z0-9_-]+")  # as a config's name


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "leader",
        help="teleoperate a follower arm from a leader arm (torque off, read-only) over MQTT",
        description="Read a leader arm (torque off, never written to) and stream it to the "
        "follower's armd/<NAME>/stream topic: joint to joint, Cartesian (the leader's tool "
        "pose) or the chain's shape, as the config's leader: section says. Ctrl-C ends the "
        "stream (the follower comes to rest).",
        epilog="exit codes: 0 ended by SIGTERM, 130 by Ctrl-C, 1 failure, 2 wrong argument",
    )
    parser.add_argument(
        "--config", required=True, type=Path, help="the leader arm's YAML config with leader:"
    )
    parser.add_argument("--follower", required=True, help="the follower arm's name (its config)")
    parser.add_argument(
        "--broker", metavar="HOST[:PORT]", help="the broker (default: the config's mqtt)"
    )
    parser.add_argument(
        "--rate", type=float, metavar="HZ", help="readings per s, 1..1000 (leader.rate_hz)"
    )
    parser.add_argument(
        "--id", help="the stream's id in the follower's statuses (default: the leader's name)"
    )
    parser.set_defaults(func=_leader)


def _broker(text: str | None) -> tuple[str | None, int | None]:
    if text is None:
        return None, None
    host, sep, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not sep:
        return text, None
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UsageError(f"--broker: {text!r}: expected HOST or HOST:PORT (port 1..65535)")
    return host, int(port)


def _arguments(args: argparse.Namespace) -> tuple[str | None, int | None]:
    if args.rate is not None and not 1.0 <= args.rate <= 1000.0:
        raise UsageError(f"--rate: {args.rate:g} Hz must be in [1, 1000]")
    if not _NAME.fullmatch(args.follower):  # a topic level: armd/<name>/stream
        raise UsageError(
            f"--follower: {args.follower!r}: an arm name has only letters, digits, '_' and '-'"
        )
    if args.id is not None and not 1 <= len(args.id) <= 128:
        raise UsageError(f"--id: {len(args.id)} characters; a stream id has 1 to 128")
    return _broker(args.broker)


def _failures() -> tuple[type[BaseException], ...]:
    import aiomqtt

    from armd.errors import ArmdError
    from drivers import DriverError

    return ArmdError, DriverError, aiomqtt.MqttError, OSError


def _leader(args: argparse.Namespace) -> int:
    try:
        return guarded(*_failures(), context=lambda a: "leader")(_run)(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    host, port = _arguments(args)
    from armd.config.load import load_config
    from armd.control.timing import raise_priority
    from armd.lock import InstanceLock
    from armd.tools.leader import follower_joint_names, leader_setup
    from armd.tools.teleop import follower_settings, run_leader

    arm = load_config(args.config, kernels=False)
    setup = leader_setup(arm, args.follower, args.rate)
    if setup.mapping != "joint":  # FK and the chain mapping: compiled before the first reading
        from kinematics.compiled import load_kernels

        load_kernels()
    settings = follower_settings(setup, host, port)
    stream_id = args.id or arm.name
    interrupted: list[int] = []

    async def main() -> int:
        raise_priority(arm.realtime_priority, "leader")  # regular reads on a busy machine
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(signum: int) -> None:
            interrupted.append(signum)
            stop.set()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_signal, signum)
        log.info(
            "leader %r (%s mapping, %g Hz) -> follower %r on %s: %s; torque off, Ctrl-C ends",
            arm.name,
            setup.mapping,
            setup.rate_hz,
            setup.follower,
            settings.address,
            ", ".join(follower_joint_names(setup)) or "its tool pose",
        )
        stats = await run_leader(setup, settings, stop, stream_id)
        log.info(
            "stream ended: %d messages, %d stale readings skipped, %d read slots missed",
            stats.published,
            stats.stale,
            stats.missed,
        )
        return EXIT_OK

    with InstanceLock(arm.lock_file, arm.name):  # one reader of the leader's bus
        code = interrupt.run(main())
    if interrupted and interrupted[0] == signal.SIGINT:
        return EXIT_INTERRUPTED
    return code if code == EXIT_OK else EXIT_FAILURE
