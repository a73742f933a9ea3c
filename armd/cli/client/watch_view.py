"""`armd watch`: the arm's state as a person reads it.

The view: availability, mode, the daemon's clock and missed ticks (when the ``state`` payload
carries ``missed_ticks``), every joint's position against its limits (the config's effective
limits, rad or m) with its velocity, the TCP pose, the active fault and the latest goal status.
On a terminal it is redrawn in place (`rich`, at most `REFRESH_HZ`); otherwise plain lines: each
change of availability, fault or goal status as it comes, and the state every `interval_s`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from armd.api.client import ArmClient
from armd.cli.common import EXIT_FAILURE, EXIT_OK, say_error
from armd.config.load import ArmSetup
from kinematics import JointMotor

__all__ = ["ONCE_WAIT_S", "REFRESH_HZ", "View", "plain_state", "watch"]

REFRESH_HZ = 10.0
ONCE_WAIT_S = 5.0
"""`--once`: longest wait for a state message, s."""
NEAR_LIMIT = 0.05
"""A joint within this fraction of its range from a limit is marked."""


@dataclass
class View:
    """What the watcher knows: the latest of each topic."""

    setup: ArmSetup
    availability: str | None = None
    state: Mapping[str, Any] | None = None
    fault: Mapping[str, Any] | None = None
    status: Mapping[str, Any] | None = None
    units: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for link in self.setup.tree.links:
            if isinstance(link.motor, JointMotor) and link.joint_name is not None:
                self.units[link.joint_name] = "m" if link.motor.kind == "prismatic" else "rad"


def _fault_text(fault: Mapping[str, Any] | None) -> str:
    if not fault:
        return "none"
    joint = f" (joint {fault['joint']})" if fault.get("joint") else ""
    return f"{fault.get('code')}: {fault.get('message')}{joint}"


def _status_text(status: Mapping[str, Any] | None) -> str:
    if status is None:
        return "none"
    reason = f": {status['reason']}" if status.get("reason") else ""
    return f"{status.get('id')} {status.get('status')}{reason}"


def _header(view: View) -> str:
    state = view.state or {}
    parts = [f"arm {view.setup.name}", f"availability {view.availability or 'unknown'}"]
    parts.append(f"mode {state.get('mode', 'unknown')}")
    if "t" in state:
        parts.append(f"t {state['t']:.2f} s")
    if "missed_ticks" in state:
        parts.append(f"missed ticks {state['missed_ticks']}")
    return "  ".join(parts)


def _joint_rows(view: View) -> list[tuple[str, float, float, float, float, float | None, str]]:
    """(joint, position, velocity, lower, upper, fraction of the range or None, unit)."""
    joints = (view.state or {}).get("joints", {})
    rows = []
    for name in view.setup.tree.joint_names:
        if name not in joints:
            continue
        p, v = float(joints[name]["position"]), float(joints[name]["velocity"])
        limit = view.setup.limits[name]
        span = limit.upper - limit.lower
        fraction = (p - limit.lower) / span if math.isfinite(span) and span > 0 else None
        rows.append((name, p, v, limit.lower, limit.upper, fraction, view.units.get(name, "")))
    return rows


def _tcp_text(view: View) -> str:
    tcp = (view.state or {}).get("tcp")
    if not tcp:
        return "tcp unknown"
    position = " ".join(f"{c:+.4f}" for c in tcp["position"])
    orientation = " ".join(f"{c:+.4f}" for c in tcp["orientation"])
    return f"tcp {tcp['link']}  position {position} m  orientation {orientation} [w x y z]"


def _mark(fraction: float | None) -> str:
    if fraction is None:
        return ""
    return "  AT LIMIT" if min(fraction, 1.0 - fraction) <= NEAR_LIMIT else ""


def plain_state(view: View) -> list[str]:
    """The state as plain lines (what `watch` prints when stdout is not a terminal)."""
    width = max((len(name) for name in view.setup.tree.joint_names), default=0)
    lines = [_header(view)]
    for name, p, v, lower, upper, fraction, unit in _joint_rows(view):
        where = "" if fraction is None else f"{100.0 * fraction:5.1f} %"
        lines.append(
            f"  {name:<{width}}  {p:+.4f} {unit:<3} in [{lower:+.4f}, {upper:+.4f}] {where}"
            f"  velocity {v:+.4f}{_mark(fraction)}"
        )
    lines.append(f"  {_tcp_text(view)}")
    lines.append(f"  fault {_fault_text(view.fault)}")
    return lines


def _bar(fraction: float | None, width: int = 11) -> Text:
    if fraction is None:
        return Text("continuous", style="dim")
    i = round(min(max(fraction, 0.0), 1.0) * (width - 1))
    style = "bold red" if _mark(fraction) else "green"
    return (
        Text("[", style="dim")
        + Text("-" * i)
        + Text("|", style=style)
        + Text("-" * (width - 1 - i))
        + Text("]", style="dim")
    )


def _renderable(view: View) -> RenderableType:
    table = Table(box=None, pad_edge=False)
    for column in ("joint", "position", "lower", "", "upper", "velocity"):
        table.add_column(column, justify="left" if column == "joint" else "right")
    for name, p, v, lower, upper, fraction, unit in _joint_rows(view):
        table.add_row(
            name, f"{p:+.4f} {unit}", f"{lower:+.4f}", _bar(fraction), f"{upper:+.4f}", f"{v:+.4f}"
        )
    fault_style = "bold red" if view.fault else "green"
    return Group(
        Text(_header(view), style="bold"),
        table,
        Text(_tcp_text(view)),
        Text(f"fault {_fault_text(view.fault)}", style=fault_style),
        Text(f"last goal {_status_text(view.status)}"),
    )


def _apply(view: View, topic: str, payload: Any) -> str | None:
    """Update `view` with a message; returns the plain line for an event (None for state)."""
    if topic == "availability":
        view.availability = payload if isinstance(payload, str) else None
        return f"availability {view.availability}"
    if topic == "fault":
        view.fault = payload if isinstance(payload, dict) else None
        return f"fault {_fault_text(view.fault)}"
    if topic == "goal/status" and isinstance(payload, dict):
        view.status = payload
        return f"goal {_status_text(payload)}"
    if topic == "state" and isinstance(payload, dict):
        view.state = payload
    return None


async def watch(client: ArmClient, setup: ArmSetup, *, interval_s: float, once: bool) -> int:
    """Show the arm until cancelled (Ctrl-C), or one state with `once`."""
    view = View(setup)
    console = Console()
    if once:
        return await _once(client, view)
    if not console.is_terminal:
        return await _plain(client, view, interval_s)
    with Live(_renderable(view), console=console, auto_refresh=False) as live:
        drawn = 0.0
        while True:
            message = await client.next()
            _apply(view, message.topic, message.payload)
            now = time.monotonic()
            if message.topic != "state" or now - drawn >= 1.0 / REFRESH_HZ:
                drawn = now
                live.update(_renderable(view), refresh=True)


async def _plain(client: ArmClient, view: View, interval_s: float) -> int:
    printed = -math.inf
    while True:
        message = await client.next()
        event = _apply(view, message.topic, message.payload)
        if event is not None:
            print(event, flush=True)
        now = time.monotonic()
        if message.topic == "state" and now - printed >= interval_s:
            printed = now
            print("\n".join(plain_state(view)), flush=True)


async def _once(client: ArmClient, view: View) -> int:
    try:
        async with asyncio.timeout(ONCE_WAIT_S):
            while view.state is None:
                message = await client.next()
                _apply(view, message.topic, message.payload)
    except TimeoutError:
        say_error(
            f"watch: no state from arm {view.setup.name!r} within {ONCE_WAIT_S:g} s "
            f"(availability: {view.availability or 'never online on this broker'})"
        )
        return EXIT_FAILURE
    print("\n".join(plain_state(view)), flush=True)
    return EXIT_OK
