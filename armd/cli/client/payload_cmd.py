"""``armd payload``: tell a running arm the load at its tool link over MQTT (the ``payload``
topic, docs/mqtt.md#payload), e.g. after its gripper took a part:

    armd payload --config config/sim.yaml --mass 1.2 --com 0 0 0.05

The load is checked here with the daemon's own rules (a wrong one is one line naming the field,
exit 2, nothing sent); the daemon uses it from its next sample on for gravity compensation and
contact detection. ``--mass 0`` takes the load off. Exit codes: 0 sent, 1 the arm is offline or
the broker unreachable, 2 a wrong argument.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from armd.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, say_error

if TYPE_CHECKING:
    from armd.api.client import ArmClient

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``payload`` to the CLI's subparsers."""
    parser = subparsers.add_parser(
        "payload",
        help="set the load at an arm's tool link over MQTT",
        description="Send the arm the load at its tool link (mass, centre of mass and inertia "
        "in the tool link's frame), used by gravity compensation and contact detection.",
    )
    parser.add_argument("--config", type=Path, required=True, help="the arm's config file")
    parser.add_argument("--mass", type=float, required=True, metavar="KG", help="kg (0: none)")
    parser.add_argument(
        "--com",
        nargs=3,
        type=float,
        default=[0.0, 0.0, 0.0],
        metavar=("X", "Y", "Z"),
        help="centre of mass in the tool link's frame, m (default 0 0 0)",
    )
    parser.add_argument(
        "--inertia",
        nargs=6,
        type=float,
        default=[0.0] * 6,
        metavar=("IXX", "IXY", "IXZ", "IYY", "IYZ", "IZZ"),
        help="about the centre of mass, tool link axes, kg·m² (default 0: a point mass)",
    )
    parser.set_defaults(func=_payload)


def _payload(args: argparse.Namespace) -> int:
    from armd.api.contract import encode
    from armd.api.load_payloads import load_json, parse_load
    from armd.cli.client.client_cmd import connected, load_setup
    from armd.link.messages import Rejection

    document: dict[str, Any] = {"mass": args.mass, "com": args.com, "inertia": args.inertia}
    try:
        load = parse_load(encode(document))
    except ValueError:  # NaN or infinity: not JSON
        load = Rejection(None, f"payload: {document} must be finite numbers")
    if isinstance(load, Rejection):
        say_error(load.reason)
        return EXIT_USAGE
    setup = load_setup(args.config)
    if setup is None:
        return EXIT_FAILURE

    async def run(client: ArmClient) -> int:
        await client.require_online()
        await client.publish(client.topics.payload, load_json(load))
        print(f"payload sent: {load.mass:g} kg at {setup.tool_link}, centre of mass {load.com} m")
        return EXIT_OK

    return connected(setup, run)
