"""``armd collision --config FILE [--q NAME=VALUE ... | --pose NAME | --measured] [--json]``: the
signed distance of every pair the config's collision model checks (docs/collision.md), closest
first, at a configuration: the commanded one of `--q` (joints not named at 0, fixed joints where
the config holds them), a named pose, or the arm's measured state read over MQTT. ``--json``
prints ``{"q": {joint: value}, "margin", "pairs": [{"a", "b", "distance", "points"}, ...],
"excluded": [[a, b, why], ...]}`` with the witness points in the root frame (m).

Also home to what ``armd check`` says about collisions: the checked and excluded pairs, and the
named poses and start configuration found in contact.

Exit codes: 0 (whether or not a pair is in contact), 1 an invalid config, no collision section,
an offline arm; 2 a wrong argument.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from armd.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, say_error
from armd.config.load import ArmSetup, load_config
from armd.errors import ConfigError
from kinematics.collision import CollisionModel

__all__ = ["collision_lines", "configuration_problems", "register", "start_configuration"]

Array = NDArray[np.float64]
MEASURED_WAIT_S = 5.0


def register(subparsers: Any) -> None:
    """Add ``collision`` to the CLI's subparsers."""
    parser = subparsers.add_parser(
        "collision",
        help="the distances of the pairs the collision model checks, closest first",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--config", required=True, type=Path, metavar="FILE", help="YAML config")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--q", nargs="+", default=[], metavar="NAME=VALUE", help="joint positions (rad or m)"
    )
    where.add_argument("--pose", metavar="NAME", help="a named pose of the config")
    where.add_argument(
        "--measured", action="store_true", help="the arm's measured state (over MQTT)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        setup = load_config(args.config, kernels=False)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_FAILURE
    model = setup.collision
    if model is None:
        say_error(f"{args.config}: no collision section: nothing is checked (docs/collision.md)")
        return EXIT_FAILURE
    try:
        q = _configuration(args, setup)
    except ValueError as exc:
        say_error(f"collision: {exc}")
        return EXIT_USAGE
    if q is None:
        return EXIT_FAILURE
    report = model.distances(q)
    pairs = sorted(report.pairs, key=lambda p: p.distance)
    if args.json:
        document = {
            "q": dict(zip(setup.tree.joint_names, q.tolist(), strict=True)),
            "margin": model.margin,
            "pairs": [pair.to_dict() for pair in pairs],
            "excluded": [pair.to_list() for pair in model.excluded_pairs],
        }
        print(json.dumps(document))
        return EXIT_OK
    print(f"margin {model.margin:g} m; {len(pairs)} pairs checked, closest first (m):")
    width = max((len(f"{p.a} - {p.b}") for p in pairs), default=0)
    for pair in pairs:
        flag = "  IN CONTACT" if pair.distance < model.margin else ""
        print(f"  {f'{pair.a} - {pair.b}':<{width}}  {pair.distance:+.4f}{flag}")
    return EXIT_OK


def _configuration(args: argparse.Namespace, setup: ArmSetup) -> Array | None:
    """The configuration the arguments name (None: could not be read; said on stderr). Raises
    `ValueError` for a wrong argument."""
    tree = setup.tree
    base = np.zeros(tree.dof)
    for name, value in setup.fixed_joints.items():
        base[tree.joint_names.index(name)] = value
    if args.pose is not None:
        poses = setup.config.poses
        if args.pose not in poses:
            raise ValueError(f"--pose: {args.pose!r} is not a named pose; poses: {list(poses)}")
        return tree.q_from_mapping(dict(poses[args.pose]), base)
    if args.measured:
        return _measured(setup)
    positions: dict[str, float] = {}
    for item in args.q:
        name, equals, value = item.partition("=")
        if not equals or name not in tree.joint_names:
            raise ValueError(
                f"--q: {item!r} must be NAME=VALUE with NAME one of {tree.joint_names}"
            )
        try:
            positions[name] = float(value)
        except ValueError:
            raise ValueError(f"--q: {item!r}: {value!r} is not a number") from None
    return tree.q_from_mapping(positions, base)


def _measured(setup: ArmSetup) -> Array | None:
    """The joints of the arm's next ``state`` (as ``armd watch --once`` reads it)."""
    from armd.cli.client.client_cmd import connected

    found: list[Array] = []

    async def read(client: Any) -> int:
        await client.require_online()
        try:
            async with asyncio.timeout(MEASURED_WAIT_S):
                while True:
                    message = await client.next()
                    if message.topic == "state" and isinstance(message.payload, dict):
                        joints = message.payload.get("joints", {})
                        values = {name: float(j["position"]) for name, j in joints.items()}
                        found.append(setup.tree.q_from_mapping(values))
                        return EXIT_OK
        except TimeoutError:
            say_error(f"collision: no state from arm {setup.name!r} in {MEASURED_WAIT_S:g} s")
            return EXIT_FAILURE

    if connected(setup, read) != EXIT_OK or not found:
        return None
    return found[0]


# -- what `armd check` says ----------------------------------------------------------------------


def collision_lines(model: CollisionModel) -> list[str]:
    """The checked pairs and the excluded ones with why, for `armd check`."""
    lines = [f"collision margin {model.margin:g} m, {len(model.checked_pairs)} pairs checked:"]
    lines += [f"  {p.a} - {p.b}" for p in model.checked_pairs]
    lines.append(f"          {len(model.excluded_pairs)} pairs excluded:")
    lines += [f"  {p.a} - {p.b}: {p.reason} ({p.detail})" for p in model.excluded_pairs]
    return lines


def start_configuration(setup: ArmSetup) -> Array | None:
    """Where the arm starts when every driven joint is on a simulated (`sim`) driver: its
    devices' initial positions through the transmission; None for real hardware (its start is
    the measured state, checked by the daemon as it comes)."""
    motors: dict[str, dict[str, float]] = {}
    for name, driver in setup.drivers.items():
        if driver.type_name != "sim":
            return None
        devices = getattr(driver.params, "devices", {})
        motors[name] = {d: float(p.initial_position) for d, p in devices.items()}
    return setup.transmission.joint_positions(setup.transmission.from_devices(motors))


def configuration_problems(setup: ArmSetup) -> list[str]:
    """The named poses, and the simulated start configuration, that are in contact."""
    model = setup.collision
    if model is None:
        return []
    problems = []
    start = start_configuration(setup)
    base = (
        start
        if start is not None
        else setup.transmission.joint_positions(np.zeros(len(setup.transmission.joints)))
    )  # the joints a pose does not name stay where they are: here, at the start
    for name, positions in setup.config.poses.items():
        contact = model.first_contact(setup.tree.q_from_mapping(dict(positions), base))
        if contact is not None:
            a, b, distance = contact
            problems.append(f"poses.{name}: in collision: {a} with {b} ({distance:+.4f} m)")
    if start is not None and (contact := model.first_contact(start)) is not None:
        a, b, distance = contact
        problems.append(
            f"the start configuration (the sim devices' initial_position) is in collision: "
            f"{a} with {b} ({distance:+.4f} m)"
        )
    return problems
