"""`armd goal`, `armd estop` and `armd watch`: the MQTT API from the command line.

Each reads the arm's name and broker from its config, connects, and first makes sure the arm is
online (its retained ``availability``): an offline arm fails at once, not after a timeout.

- ``goal pose|joints|keypoints|gripper|named|trajectory|stop`` publishes one goal (every type of
  the API's, `armd.api.contract.GOAL_TYPES`), prints each of its statuses as a JSON line on stdout
  and, while it runs, its progress on stderr (the distance to the target: m for a pose, rad or m
  for joints and the gripper); exit 0 only when it succeeded. A gripper or trajectory goal is
  checked first as the daemon parses it (`armd.api.payloads`): a wrong one is a usage error, not
  a round trip.
- ``estop engage|reset`` publishes the command and waits until the state's mode shows it.
- ``watch`` shows the arm's mode, joints against their limits, TCP pose, fault, goal statuses and
  missed ticks (when the state reports them), refreshed in place on a terminal, as plain lines
  otherwise.

Exit codes: 0 done (the goal succeeded); 1 the goal did not succeed, the arm is offline, the
broker is unreachable, or no answer came in time; 2 a wrong argument (one line naming it).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from armd.api.contract import encode, goal_json
from armd.cli import interrupt
from armd.cli.client.trajectory_args import named_values, trajectory_fields
from armd.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError, say_error
from armd.link.messages import Goal, JointsGoal, KeypointsGoal, NamedGoal, PoseGoal, StopGoal

if TYPE_CHECKING:
    from armd.api.client import ArmClient
    from armd.config.load import ArmSetup

__all__ = ["connected", "goal_payload", "load_setup", "register"]

ESTOP_CONFIRM_S = 5.0
"""Longest wait for the state's mode to show an e-stop command, s."""


def register(subparsers: Any) -> None:
    """Add ``goal``, ``estop`` and ``watch`` to the CLI's subparsers."""
    _add_goal_parser(subparsers)
    estop = subparsers.add_parser(
        "estop",
        help="engage or reset the e-stop over MQTT",
        description="Engage the e-stop (a controlled stop, latched) or reset it (also clears a "
        "latched fault whose cause is gone); waits until the arm's mode shows it.",
    )
    _config_argument(estop)
    estop.add_argument("action", choices=("engage", "reset"))
    estop.set_defaults(func=_estop)
    watch = subparsers.add_parser(
        "watch",
        help="a live view of an arm's state over MQTT",
        description="Show the arm's mode, joints against their limits (rad, m), TCP pose, fault, "
        "goal statuses and missed ticks. Refreshes in place on a terminal; prints plain lines "
        "(a summary every --interval seconds, and every change) when piped. Ctrl-C ends it.",
    )
    _config_argument(watch)
    watch.add_argument(
        "--interval", type=float, default=1.0, metavar="S", help="plain mode: seconds (1)"
    )
    watch.add_argument("--once", action="store_true", help="show one state, then exit")
    watch.set_defaults(func=_watch)


def _config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="the arm's YAML configuration")


def _add_goal_parser(subparsers: Any) -> None:
    goal = subparsers.add_parser(
        "goal",
        help="send a goal over MQTT, show its progress, wait for its outcome",
        description="Send one goal, print its statuses (JSON lines on stdout) and its progress "
        "(stderr), and exit 0 only if it succeeded.",
    )
    _config_argument(goal)
    goal.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (60)")
    goal.add_argument("--id", help="the goal id (default: a random one)")
    kinds = goal.add_subparsers(dest="kind", metavar="KIND", required=True)
    pose = kinds.add_parser("pose", help="move a link to a position (and orientation)")
    pose.add_argument("--position", type=float, nargs=3, required=True, metavar=("X", "Y", "Z"))
    pose.add_argument("--orientation", type=float, nargs=4, metavar=("W", "X", "Y", "Z"))
    pose.add_argument("--link", help="the link to move (default: the config's tool_link)")
    pose.add_argument("--linear", action="store_true", help="straight-line tool path")
    _speed_argument(pose)
    joints = kinds.add_parser("joints", help="move joints: NAME=VALUE ... (rad or m)")
    joints.add_argument("positions", nargs="+", metavar="NAME=VALUE")
    _speed_argument(joints)
    keypoints = kinds.add_parser(
        "keypoints", help="put the arm in the shape of a chain file (as `armd map --chain`)"
    )
    keypoints.add_argument("chain", type=Path, help='{"points": {link: [x, y, z], ...}} (m)')
    _speed_argument(keypoints)
    _add_gripper_parser(kinds)
    named = kinds.add_parser("named", help="move to a named pose of the config's `poses`")
    named.add_argument("name", help="the pose's name, e.g. home")
    _speed_argument(named)
    _add_trajectory_parser(kinds)
    kinds.add_parser("stop", help="controlled stop, then hold")
    goal.set_defaults(func=_goal)


def _add_gripper_parser(kinds: Any) -> None:
    gripper = kinds.add_parser(
        "gripper",
        help="open or close the config's gripper, or set its opening",
        description="Move the config's gripper (`gripper:`): open, close (it stops where its "
        "effort reaches --effort and holds the object, through later goals, until a gripper "
        "goal changes it), or an opening in [0, 1] (0 closed, 1 open).",
    )
    gripper.add_argument("position", metavar="open|close|OPENING", help="OPENING in [0, 1]")
    gripper.add_argument(
        "--effort",
        type=float,
        metavar="E",
        help="the grip when closing, in [0, 1] of the config's gripper.max_effort "
        "(default: the config's gripper.effort)",
    )
    _speed_argument(gripper)


def _add_trajectory_parser(kinds: Any) -> None:
    trajectory = kinds.add_parser(
        "trajectory",
        help="follow timed points of some joints: from a FILE or --point ...",
        description="Follow timed points of some joints (the others keep their position): the "
        'arm first moves to the first point. FILE.json holds the goal\'s fields {"joints": '
        '[NAME, ...], "points": [{"t": S, "positions": [...], "velocities": [...]}, ...]} '
        "(velocities optional); FILE.csv a header t,NAME,... and one row per point: its time "
        "(s) and each joint's position (rad or m). Or give each point as --point t=S "
        "NAME=VALUE ..., the same joints in every point. (`armd replay` sends the recordings "
        "of `armd record`.)",
    )
    trajectory.add_argument("file", nargs="?", type=Path, metavar="FILE", help=".json or .csv")
    trajectory.add_argument(
        "--point",
        action="append",
        nargs="+",
        metavar="NAME=VALUE",
        help="one point: t=S, its time (s), then NAME=VALUE for each joint (rad or m); once per "
        "point, in time order",
    )
    _speed_argument(trajectory)


def _speed_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--speed", type=float, default=1.0, help="0 < speed <= 1 (1)")


# -- payloads -------------------------------------------------------------------------------------


def _gripper_position(word: str) -> str | float:
    if word in ("open", "close"):
        return word
    try:
        return float(word)
    except ValueError:
        raise UsageError(
            f"gripper: position: {word!r} must be open, close or an opening in [0, 1]"
        ) from None


def _checked(document: dict[str, Any], setup: ArmSetup) -> dict[str, Any]:
    """`document` as the daemon reads it (`armd.api.payloads.parse_goal`), re-encoded; a goal it
    would reject is a `UsageError` with the daemon's reason."""
    from armd.api.payloads import parse_goal
    from armd.link.messages import Rejection

    try:
        payload = encode(document)
    except ValueError:  # NaN or infinity: not JSON
        raise UsageError(f"{document['type']}: values must be finite numbers") from None
    goal = parse_goal(
        payload,
        joint_names=[j for j in setup.tree.joint_names if j not in setup.fixed_joints],
        link_names=setup.tree.link_names,
        default_link=setup.tool_link,
    )
    if isinstance(goal, Rejection):
        raise UsageError(f"{document['type']}: {goal.reason}")
    return goal_json(goal)


def goal_payload(args: argparse.Namespace, goal_id: str, setup: ArmSetup) -> dict[str, Any]:
    """The JSON goal for the command line (`armd.api.contract.goal_json`). Raises `UsageError` for
    an
    argument that cannot make a goal (the daemon validates the rest and answers ``rejected``
    with the reason)."""
    goal: Goal
    if args.kind == "gripper":
        effort = {} if args.effort is None else {"effort": args.effort}
        position = _gripper_position(args.position)
        document = {"id": goal_id, "type": "gripper", "position": position, **effort}
        return _checked(document | {"speed": args.speed}, setup)
    if args.kind == "trajectory":
        fields = trajectory_fields(args.file, args.point)
        return _checked({"id": goal_id, "type": "trajectory", **fields, "speed": args.speed}, setup)
    if args.kind == "stop":
        goal = StopGoal(goal_id)
    elif args.kind == "joints":
        goal = JointsGoal(goal_id, named_values(args.positions, "joints"), args.speed)
    elif args.kind == "named":
        goal = NamedGoal(goal_id, args.name, args.speed)
    elif args.kind == "keypoints":
        from armd.cli.map_cmd import ChainFileError, load_chain

        try:
            links, points = load_chain(args.chain, setup.tree)
        except (ChainFileError, OSError) as exc:
            raise UsageError(f"keypoints: {exc}") from None
        xyz = tuple((float(x), float(y), float(z)) for x, y, z in points.tolist())
        goal = KeypointsGoal(goal_id, tuple(links), xyz, args.speed)
    else:
        goal = PoseGoal(
            goal_id,
            tuple(args.position),
            None if args.orientation is None else tuple(args.orientation),
            args.link,
            "linear" if args.linear else "joint",
            args.speed,
        )
    return goal_json(goal)


# -- commands -------------------------------------------------------------------------------------


def load_setup(path: Path) -> ArmSetup | None:
    from armd.config.load import load_config
    from armd.errors import ConfigError

    try:
        return load_config(path, kernels=False)
    except ConfigError as exc:
        print(f"armd: error: {path}: invalid configuration:\n{exc}", file=sys.stderr)
        return None


def connected(setup: ArmSetup, run: Callable[[ArmClient], Awaitable[int]]) -> int:
    """asyncio.run(run(client)) on a client connected to `setup`'s arm; broker and availability
    problems are one line and exit 1."""
    import aiomqtt

    from armd.api.client import ArmOfflineError, connect

    async def main() -> int:
        async with connect(setup.mqtt) as client:
            return await run(client)

    try:
        return interrupt.run(main())
    except ArmOfflineError as exc:
        say_error(str(exc))
    except (aiomqtt.MqttError, OSError) as exc:
        say_error(f"MQTT broker {setup.mqtt.host}:{setup.mqtt.port}: {exc}")
    return EXIT_FAILURE


def _goal(args: argparse.Namespace) -> int:
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        say_error(f"goal: --timeout: {args.timeout} must be > 0 seconds")
        return EXIT_USAGE
    setup = load_setup(args.config)
    if setup is None:
        return EXIT_FAILURE
    goal_id = args.id or uuid.uuid4().hex[:12]
    try:
        payload = goal_payload(args, goal_id, setup)
    except UsageError as exc:
        say_error(f"goal {exc}")
        return EXIT_USAGE
    from armd.cli.client.goal_progress import send_goal

    async def run(client: ArmClient) -> int:
        return await send_goal(client, setup, payload, args.timeout)

    return connected(setup, run)


def _estop(args: argparse.Namespace) -> int:
    setup = load_setup(args.config)
    if setup is None:
        return EXIT_FAILURE
    from armd.link.messages import Mode

    engage = args.action == "engage"

    async def run(client: ArmClient) -> int:
        await client.require_online()
        await client.publish(client.topics.estop, {"engage": True} if engage else {"reset": True})
        try:
            async with asyncio.timeout(ESTOP_CONFIRM_S):
                while True:
                    message = await client.next()
                    if message.topic != "state" or not isinstance(message.payload, dict):
                        continue
                    mode = message.payload.get("mode")
                    if (mode == Mode.ESTOP) == engage:
                        print(f"e-stop {'engaged' if engage else 'reset'}: mode {mode}")
                        return EXIT_OK
        except TimeoutError:
            say_error(f"estop {args.action}: the arm's mode did not show it in {ESTOP_CONFIRM_S} s")
            return EXIT_FAILURE

    return connected(setup, run)


def _watch(args: argparse.Namespace) -> int:
    if not (args.interval > 0 and math.isfinite(args.interval)):
        say_error(f"watch: --interval: {args.interval} must be > 0 seconds")
        return EXIT_USAGE
    setup = load_setup(args.config)
    if setup is None:
        return EXIT_FAILURE
    from armd.cli.client.watch_view import watch

    async def run(client: ArmClient) -> int:
        return await watch(client, setup, interval_s=args.interval, once=args.once)

    return connected(setup, run)
