"""`armd goal`'s wait: publish the goal, print its statuses, show its progress until a final one.

Statuses are JSON lines on stdout (as the daemon sent them). Progress goes to stderr: the
distance to the target, from the arm's ``state`` — for a joints goal the largest remaining joint
distance (rad, or m for prismatic joints), for a gripper goal the gripper's (a closing one stops
short of it, on the object), for a pose goal the TCP's distance to the target position (m) and,
with an orientation, the angle left (rad); keypoints, trajectory and stop goals show the mode and
the time only. On a terminal it is one line refreshed in place (`rich`); otherwise a
plain line every `PLAIN_INTERVAL_S`.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from armd.api.client import ArmClient
from armd.cli.common import EXIT_FAILURE, EXIT_OK, say_error
from armd.config.load import ArmSetup
from armd.link.messages import GoalStatus
from kinematics import JointMotor

__all__ = ["PLAIN_INTERVAL_S", "distance_to_target", "send_goal"]

PLAIN_INTERVAL_S = 1.0
"""Progress lines when stderr is not a terminal: at most one per interval, s."""


def distance_to_target(
    payload: Mapping[str, Any], state: Mapping[str, Any], setup: ArmSetup
) -> str | None:
    """What is left of the goal `payload` at `state` (a ``state`` message), in words with units;
    None when the state does not tell (another link than the TCP, keypoints, stop)."""
    if payload["type"] == "joints":
        joints = state.get("joints", {})
        left = [
            abs(target - joints[name]["position"])
            for name, target in payload["positions"].items()
            if name in joints
        ]
        if not left:
            return None
        units = {_unit(setup, name) for name in payload["positions"]}
        return f"{max(left):.4f} {'/'.join(sorted(units))} to go (largest joint)"
    if payload["type"] == "gripper":
        return _gripper_distance(payload, state, setup)
    if payload["type"] == "pose":
        tcp = state.get("tcp", {})
        if tcp.get("link") != payload.get("link", setup.tool_link):
            return None
        text = f"{math.dist(payload['position'], tcp['position']):.4f} m to go"
        if "orientation" in payload:
            text += f", {_angle(payload['orientation'], tcp['orientation']):.3f} rad"
        return text
    return None


def _gripper_distance(
    payload: Mapping[str, Any], state: Mapping[str, Any], setup: ArmSetup
) -> str | None:
    gripper = setup.config.gripper
    joint = state.get("joints", {}).get(gripper.joint) if gripper is not None else None
    if gripper is None or joint is None:
        return None
    opening = {"open": 1.0, "close": 0.0}.get(payload["position"], payload["position"])
    target = gripper.closed + float(opening) * (gripper.open - gripper.closed)
    left = abs(target - joint["position"])
    return f"{left:.4f} {_unit(setup, gripper.joint)} to go (gripper)"


def _unit(setup: ArmSetup, joint: str) -> str:
    link = next((link for link in setup.tree.links if link.joint_name == joint), None)
    prismatic = link is not None and isinstance(link.motor, JointMotor)
    return "m" if prismatic and link.motor.kind == "prismatic" else "rad"  # type: ignore[union-attr]


def _angle(a: list[float], b: list[float]) -> float:
    """The rotation angle between two quaternions [w, x, y, z] (either may be unnormalised), rad."""
    na, nb = math.hypot(*a), math.hypot(*b)
    dot = abs(sum(x * y for x, y in zip(a, b, strict=True))) / (na * nb)
    return 2.0 * math.acos(min(1.0, dot))


class _Progress:
    """One progress line: refreshed in place on a terminal, else printed every interval."""

    def __init__(self, goal_id: str) -> None:
        self._goal_id = goal_id
        self._console = Console(stderr=True)
        self._live: Live | None = None
        self._printed = 0.0
        self._started = time.monotonic()

    def __enter__(self) -> _Progress:
        if self._console.is_terminal:
            self._live = Live(console=self._console, transient=True, auto_refresh=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def update(self, mode: str, distance: str | None) -> None:
        elapsed = time.monotonic() - self._started
        line = f"goal {self._goal_id}: {mode}, {distance or 'running'} ({elapsed:.1f} s)"
        if self._live is not None:
            self._live.update(Text(line), refresh=True)
        elif elapsed - self._printed >= PLAIN_INTERVAL_S:
            self._printed = elapsed
            print(line, file=sys.stderr, flush=True)

    def print_status(self, status: Mapping[str, Any]) -> None:
        """A status line on stdout (above the progress line on a terminal)."""
        if self._live is not None:
            self._live.console.print(json.dumps(status), markup=False, highlight=False)
        else:
            print(json.dumps(status), flush=True)


async def send_goal(
    client: ArmClient, setup: ArmSetup, payload: dict[str, Any], timeout_s: float
) -> int:
    """Publish `payload` once the arm is online, print its statuses until a final one and the
    progress meanwhile. Exit code: 0 succeeded, 1 any other outcome or no final status in time."""
    await client.require_online()
    goal_id = payload["id"]
    await client.publish(client.topics.goal, payload)
    with _Progress(goal_id) as progress:
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    message = await client.next()
                    body = message.payload
                    if message.topic == "state" and isinstance(body, dict):
                        progress.update(
                            str(body.get("mode")), distance_to_target(payload, body, setup)
                        )
                    elif message.topic == "goal/status" and isinstance(body, dict):
                        if body.get("id") != goal_id:
                            continue
                        progress.print_status(body)
                        if body.get("status") != GoalStatus.ACCEPTED:
                            return (
                                EXIT_OK
                                if body.get("status") == GoalStatus.SUCCEEDED
                                else EXIT_FAILURE
                            )
                    elif message.topic == "availability" and body != "online":
                        say_error(f"goal {goal_id}: the arm went {body} before a final status")
                        return EXIT_FAILURE
        except TimeoutError:
            say_error(f"goal {goal_id}: no final status within {timeout_s:g} s")
            return EXIT_FAILURE
