"""`armd watch`: the arm's state as a person reads it.

The view: availability, mode, how long the daemon has been up (the state's ``uptime``, when the
daemon sends it), how old the state is (since this viewer received it: a daemon gone quiet shows
as an age that grows), missed ticks (when the ``state`` payload carries ``missed_ticks``), every
joint's position against its limits (the config's effective limits, rad or m) with its velocity,
the TCP pose, the active fault and the latest goal status. Not the state's ``t``: the robot
computer's monotonic clock, seconds since it booted, which means nothing to a person.
On a terminal it is redrawn in place (`rich`, at most `REFRESH_HZ`, and every `AGE_REDRAW_S`
without a message); otherwise plain lines: each change of availability, fault or goal status as
it comes, and the state every `interval_s`.
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

from armd.api.client import ArmClient, Message
from armd.cli.common import EXIT_FAILURE, EXIT_OK, say_error
from armd.config.load import ArmSetup
from kinematics import JointMotor

__all__ = [
    "AGE_REDRAW_S",
    "ONCE_WAIT_S",
    "REFRESH_HZ",
    "View",
    "duration_text",
    "plain_state",
    "watch",
]

REFRESH_HZ = 10.0
AGE_REDRAW_S = 0.5
"""On a terminal, the view is redrawn this often without a message (the state's age grows), s."""
STALE_S = 1.0
"""A state older than this is marked (a daemon sends several per second), s."""
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
    received: float | None = None  # when the state arrived (this viewer's monotonic clock, s)
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


def duration_text(seconds: float) -> str:
    """A duration as a person reads it: ``42 s``, ``12 min 05 s``, ``3 h 07 min``, ``2 d 05 h``."""
    s = max(0, math.floor(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600:02d} h"


def _age(view: View, now: float) -> float | None:
    return None if view.received is None else max(0.0, now - view.received)


def _header(view: View, now: float) -> str:
    """The first line; `now` is this viewer's monotonic clock (s)."""
    state = view.state or {}
    parts = [f"arm {view.setup.name}", f"availability {view.availability or 'unknown'}"]
    parts.append(f"mode {state.get('mode', 'unknown')}")
    uptime = state.get("uptime")
    if isinstance(uptime, int | float) and math.isfinite(uptime):
        parts.append(f"up {duration_text(uptime)}")
    age = _age(view, now)
    if age is not None:
        parts.append(f"state {age:.1f} s old" + (" (no newer state)" if age > STALE_S else ""))
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


def plain_state(view: View, now: float | None = None) -> list[str]:
    """The state as plain lines (what `watch` prints when stdout is not a terminal); `now`:
    this viewer's monotonic clock (s), by default the current time."""
    width = max((len(name) for name in view.setup.tree.joint_names), default=0)
    lines = [_header(view, time.monotonic() if now is None else now)]
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


def _renderable(view: View, now: float) -> RenderableType:
    table = Table(box=None, pad_edge=False)
    for column in ("joint", "position", "lower", "", "upper", "velocity"):
        table.add_column(column, justify="left" if column == "joint" else "right")
    for name, p, v, lower, upper, fraction, unit in _joint_rows(view):
        table.add_row(
            name, f"{p:+.4f} {unit}", f"{lower:+.4f}", _bar(fraction), f"{upper:+.4f}", f"{v:+.4f}"
        )
    fault_style = "bold red" if view.fault else "green"
    age = _age(view, now)
    return Group(
        Text(_header(view, now), style="bold red" if age is not None and age > STALE_S else "bold"),
        table,
        Text(_tcp_text(view)),
        Text(f"fault {_fault_text(view.fault)}", style=fault_style),
        Text(f"last goal {_status_text(view.status)}"),
    )


def _apply(view: View, topic: str, payload: Any, now: float) -> str | None:
    """Update `view` with a message received at `now` (this viewer's monotonic clock, s);
    returns the plain line for an event (None for state)."""
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
        view.received = now
    return None


class _Ticking:
    """The client's messages, or None when none came for `period_s` (time to redraw the age).
    The message awaited across ticks is one task, never cancelled but by `close`."""

    def __init__(self, client: ArmClient, period_s: float) -> None:
        self._client = client
        self._period_s = period_s
        self._pending: asyncio.Task[Message] | None = None

    async def next(self) -> Message | None:
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._client.next())
        done, _ = await asyncio.wait({self._pending}, timeout=self._period_s)
        if not done:
            return None
        task, self._pending = self._pending, None
        return task.result()

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()


async def watch(client: ArmClient, setup: ArmSetup, *, interval_s: float, once: bool) -> int:
    """Show the arm until cancelled (Ctrl-C), or one state with `once`."""
    view = View(setup)
    console = Console()
    if once:
        return await _once(client, view)
    if not console.is_terminal:
        return await _plain(client, view, interval_s)
    messages = _Ticking(client, AGE_REDRAW_S)
    try:
        with Live(_renderable(view, time.monotonic()), console=console, auto_refresh=False) as live:
            drawn = 0.0
            while True:
                message = await messages.next()
                now = time.monotonic()
                if message is not None:
                    _apply(view, message.topic, message.payload, now)
                if message is None or message.topic != "state" or now - drawn >= 1 / REFRESH_HZ:
                    drawn = now
                    live.update(_renderable(view, now), refresh=True)
    finally:
        messages.close()


async def _plain(client: ArmClient, view: View, interval_s: float) -> int:
    printed = -math.inf
    while True:
        message = await client.next()
        now = time.monotonic()
        event = _apply(view, message.topic, message.payload, now)
        if event is not None:
            print(event, flush=True)
        if message.topic == "state" and now - printed >= interval_s:
            printed = now
            print("\n".join(plain_state(view, now)), flush=True)


async def _once(client: ArmClient, view: View) -> int:
    try:
        async with asyncio.timeout(ONCE_WAIT_S):
            while view.state is None:
                message = await client.next()
                _apply(view, message.topic, message.payload, time.monotonic())
    except TimeoutError:
        say_error(
            f"watch: no state from arm {view.setup.name!r} within {ONCE_WAIT_S:g} s "
            f"(availability: {view.availability or 'never online on this broker'})"
        )
        return EXIT_FAILURE
    print("\n".join(plain_state(view)), flush=True)
    return EXIT_OK
