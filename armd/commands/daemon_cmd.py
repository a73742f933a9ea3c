"""`armd run` (the daemon) and `armd goal` (send one goal and wait for its outcome)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from typing import Any

import aiomqtt

from armd.config import ArmSetup, load_config
from armd.daemon import mqtt_settings, run_daemon
from armd.errors import ArmdError, ConfigError
from armd.messages import GoalStatus
from armd.mqtt import MqttSettings, Topics, connection_options

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    run = subparsers.add_parser("run", help="run the daemon")
    run.add_argument("--config", required=True, help="the arm's YAML configuration")
    run.set_defaults(func=_run)

    goal = subparsers.add_parser("goal", help="send a goal over MQTT and wait for its final status")
    goal.add_argument("--config", required=True, help="the arm's YAML configuration")
    goal.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (60)")
    goal.add_argument("--id", help="the goal id (default: a random one)")
    kinds = goal.add_subparsers(dest="kind", metavar="KIND", required=True)
    pose = kinds.add_parser("pose", help="move a link to a position (and orientation)")
    pose.add_argument("--position", type=float, nargs=3, required=True, metavar=("X", "Y", "Z"))
    pose.add_argument("--orientation", type=float, nargs=4, metavar=("W", "X", "Y", "Z"))
    pose.add_argument("--link", help="the link to move (default: the config's tool_link)")
    pose.add_argument("--linear", action="store_true", help="straight-line tool path")
    pose.add_argument("--speed", type=float, default=1.0, help="0 < speed <= 1 (1)")
    joints = kinds.add_parser("joints", help="move joints: NAME=VALUE ... (rad or m)")
    joints.add_argument("positions", nargs="+", metavar="NAME=VALUE")
    joints.add_argument("--speed", type=float, default=1.0, help="0 < speed <= 1 (1)")
    kinds.add_parser("stop", help="controlled stop, then hold")
    goal.set_defaults(func=_goal)


def _load(path: str) -> ArmSetup | None:
    try:
        return load_config(path)
    except ConfigError as exc:
        print(f"armd: error: {path}: invalid configuration:\n{exc}", file=sys.stderr)
        return None


def _run(args: argparse.Namespace) -> int:
    setup = _load(args.config)
    if setup is None:
        return 1
    try:
        asyncio.run(run_daemon(setup, log_level=args.log_level))
    except ArmdError as exc:
        print(f"armd: error: {exc}", file=sys.stderr)
        return 1
    return 0


def goal_payload(args: argparse.Namespace, goal_id: str) -> dict[str, Any]:
    """The JSON goal for the command line (validation is the daemon's: it answers `rejected`)."""
    if args.kind == "stop":
        return {"id": goal_id, "type": "stop"}
    if args.kind == "joints":
        positions: dict[str, float] = {}
        for item in args.positions:
            name, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"{item!r}: expected NAME=VALUE")
            positions[name] = float(value)
        return {"id": goal_id, "type": "joints", "positions": positions, "speed": args.speed}
    payload: dict[str, Any] = {
        "id": goal_id,
        "type": "pose",
        "position": args.position,
        "motion": "linear" if args.linear else "joint",
        "speed": args.speed,
    }
    if args.orientation is not None:
        payload["orientation"] = args.orientation
    if args.link is not None:
        payload["link"] = args.link
    return payload


def _goal(args: argparse.Namespace) -> int:
    setup = _load(args.config)
    if setup is None:
        return 1
    goal_id = args.id or uuid.uuid4().hex[:12]
    try:
        payload = goal_payload(args, goal_id)
        status = asyncio.run(send_goal(mqtt_settings(setup), payload, args.timeout))
    except ValueError as exc:
        print(f"armd: error: {exc}", file=sys.stderr)
        return 2
    except (aiomqtt.MqttError, OSError, TimeoutError) as exc:
        reason = str(exc) or "no final status in time"
        print(f"armd: error: goal {goal_id}: {reason}", file=sys.stderr)
        return 1
    return 0 if status == GoalStatus.SUCCEEDED.value else 1


async def send_goal(settings: MqttSettings, payload: dict[str, Any], timeout_s: float) -> str:
    """Publish `payload` on the arm's goal topic, print its statuses until a final one, return it.
    Raises `TimeoutError` when none arrives within `timeout_s`."""
    topics = Topics.for_arm(settings.arm_name)
    async with asyncio.timeout(timeout_s), _client(settings) as client:
        await client.subscribe(topics.goal_status, qos=1)
        await client.publish(topics.goal, json.dumps(payload), qos=1)
        async for message in client.messages:
            status = json.loads(bytes(message.payload))
            if status.get("id") != payload["id"]:
                continue
            print(json.dumps(status))
            if status.get("status") != GoalStatus.ACCEPTED.value:
                return str(status.get("status"))
    raise TimeoutError


def _client(settings: MqttSettings) -> aiomqtt.Client:
    return aiomqtt.Client(
        **connection_options(settings),
        identifier=f"armd-goal-{uuid.uuid4().hex[:8]}",
        timeout=settings.timeout_s,
    )
