"""``armd sim-device cia402``: simulated CiA 402 servo drives (CANopen, cyclic synchronous
position) on a python-can bus, each node one drive answering SDO, NMT, SYNC-driven PDOs, heartbeat
and EMCY byte for byte (`drivers.cia402.sim`). On ``udp_multicast`` the frames never leave this
host (hop limit 0); give the ``cia402`` driver the same interface and channel."""

from __future__ import annotations

import argparse
import signal
from typing import Any

from armd.cli.common import EXIT_OK, UsageError
from armd.cli.sim_device.running import guarded_kind, interrupt_on
from armd.cli.sim_device.sim_device_args import check_ids, check_multicast_group, check_positive

__all__ = ["DEFAULT_CHANNEL", "add_parser"]

MAX_NODE_ID = 127  # CANopen node ids 1..127
DEFAULT_CHANNEL = "239.74.163.9"  # a multicast group of its own: config/cia402_arm.yaml's


def config_lines(interface: str, channel: str, ids: list[int]) -> str:
    """The ``drivers`` entry a config needs to reach these drives (printed once they serve)."""
    devices = "\n".join(f"        j{node}: {{node_id: {node}}}" for node in ids)
    return (
        f"simulated CiA 402 drives {ids} on {interface} channel {channel!r}; a config reaches "
        f"them with:\n  drives:\n    type: cia402\n    params:\n"
        f"      interface: {interface}\n      channel: {channel!r}\n      devices:\n{devices}"
    )


@guarded_kind
def _cmd_cia402(args: argparse.Namespace) -> int:
    check_multicast_group(args.interface, args.channel)
    check_ids("--ids", args.ids, MAX_NODE_ID)
    if 0 in args.ids:
        raise UsageError(f"--ids: {args.ids} includes 0; CANopen node ids are 1..{MAX_NODE_ID}")
    check_positive("--bitrate", args.bitrate)
    from drivers.cia402 import sim  # python-can and canopen only when asked for

    def ready() -> None:
        print(config_lines(args.interface, args.channel, args.ids), flush=True)

    with interrupt_on(signal.SIGTERM):
        # `run` handles SIGINT and SIGTERM itself once its bus is open; it returns after one.
        sim.run(args.interface, args.channel, args.ids, bitrate=args.bitrate, on_ready=ready)
    return EXIT_OK


def add_parser(kinds: Any) -> None:
    parser = kinds.add_parser(
        "cia402",
        help="simulated CiA 402 servo drives (CANopen, cyclic synchronous position)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "--interface",
        default="udp_multicast",
        help="python-can interface (udp_multicast, hop limit 0: reachable from this host only)",
    )
    parser.add_argument(
        "--channel",
        default=DEFAULT_CHANNEL,
        help=f"python-can channel, e.g. a multicast group ({DEFAULT_CHANNEL})",
    )
    parser.add_argument(
        "--ids",
        nargs="+",
        type=int,
        default=[1, 2, 3, 4, 5, 6],
        metavar="ID",
        help=f"CANopen node ids, 1..{MAX_NODE_ID} (1 2 3 4 5 6)",
    )
    parser.add_argument("--bitrate", type=int, help="bit rate (default: the interface's)")
    parser.set_defaults(func=_cmd_cia402)
