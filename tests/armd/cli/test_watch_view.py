"""`armd watch`'s view of a state as a person reads it: the daemon's uptime and the state's age
(never the robot computer's monotonic clock), and, against a real Mosquitto, that the view is
redrawn while no message comes (a daemon gone quiet shows as an age that grows)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from armd.api.client import connect
from armd.cli.client.watch_view import (
    AGE_REDRAW_S,
    View,
    _apply,
    _Ticking,
    duration_text,
    plain_state,
)
from armd.config.broker import MqttSettings
from armd.config.load import ArmSetup, load_config
from tests.broker import MosquittoBroker

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def setup() -> ArmSetup:
    return load_config(ROOT / "config" / "sim.yaml", kernels=False)


def state(**extra: object) -> dict[str, object]:
    joints = {"elbow_joint": {"position": 1.0, "velocity": 0.0}}
    tcp = {"link": "tool0", "position": [0.4, 0.2, 0.4], "orientation": [1.0, 0.0, 0.0, 0.0]}
    return {"t": 1339.1, "mode": "holding", "joints": joints, "tcp": tcp} | extra


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0 s"),
        (59.99, "59 s"),
        (60.0, "1 min 00 s"),
        (75.3, "1 min 15 s"),
        (3599.0, "59 min 59 s"),
        (3600.0, "1 h 00 min"),
        (11_220.0, "3 h 07 min"),
        (2 * 86400 + 5 * 3600 + 59, "2 d 05 h"),
        (-1.0, "0 s"),
    ],
)
def test_durations_read_as_a_person_says_them(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_the_header_shows_uptime_and_age_never_the_monotonic_clock(setup: ArmSetup) -> None:
    view = View(setup, availability="online")
    assert _apply(view, "state", state(uptime=75.3, missed_ticks=0), now=100.0) is None
    assert view.received == pytest.approx(100.0, abs=1e-12)
    header = plain_state(view, now=100.3)[0]
    assert header == (
        "arm ur5-sim  availability online  mode holding  up 1 min 15 s  state 0.3 s old  "
        "missed ticks 0"
    )
    assert "1339" not in header
    stale = plain_state(view, now=103.5)[0]
    assert "  state 3.5 s old (no newer state)  " in stale
    # Another topic leaves the state's age alone.
    _apply(view, "goal/status", {"id": "g", "status": "accepted"}, now=104.0)
    assert view.received == pytest.approx(100.0, abs=1e-12)


def test_a_state_without_uptime_shows_its_age_only(setup: ArmSetup) -> None:
    view = View(setup, availability="online")
    _apply(view, "state", state(), now=5.0)
    assert plain_state(view, now=5.0)[0] == (
        "arm ur5-sim  availability online  mode holding  state 0.0 s old"
    )
    _apply(view, "state", state(uptime=math.nan), now=6.0)
    assert "up " not in plain_state(view, now=6.0)[0]


async def test_the_view_ticks_while_no_message_comes(
    mosquitto: MosquittoBroker, setup: ArmSetup
) -> None:
    """`watch` on a terminal redraws every `AGE_REDRAW_S` without a message; the message
    awaited meanwhile is not lost."""
    settings = MqttSettings(setup.name, host="127.0.0.1", port=mosquitto.port)
    async with connect(settings) as client:
        ticking = _Ticking(client, AGE_REDRAW_S)
        try:
            assert await ticking.next() is None  # nothing retained on this broker
            await client.client.publish(client.topics.availability, b"online")
            message = None
            async with asyncio.timeout(30.0):
                while message is None:
                    message = await ticking.next()
            assert (message.topic, message.payload) == ("availability", "online")
        finally:
            ticking.close()
