"""The ``payload`` topic: the load at the tool link, parsed (`armd.api.load_payloads`) and
delivered through a real Mosquitto; a bad one is rejected on ``goal/status`` and changes
nothing."""

from __future__ import annotations

import random

import pytest

from armd.api.bridge import MqttBridge
from armd.api.contract import encode
from armd.api.load_payloads import load_json, parse_load
from armd.link.messages import Rejection, ToolLoad
from tests.armd.api.test_mqtt import TOPICS, Daemon, probe, running, settings_for, wait_until
from tests.broker import MosquittoBroker


def test_a_load_with_its_inertia_reads_back() -> None:
    load = ToolLoad(1.5, (0.0, 0.01, 0.05), (0.002, 0.0, 0.0, 0.002, 0.0, 0.001))
    assert parse_load(encode(load_json(load))) == load


def test_mass_alone_is_a_point_mass_at_the_origin() -> None:
    assert parse_load(b'{"mass": 0.4}') == ToolLoad(0.4)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b'{"mass": -1}', "payload: mass: -1 must be >= 0"),
        (b'{"mass": 2000}', "payload: mass: 2000 must be <= 1000"),
        (b'{"mass": true}', "payload: mass: true must be a number"),
        (b'{"mass": 1, "com": [0, 0, NaN]}', "payload: com[2]: nan must be a finite number"),
        (b'{"mass": 1, "com": [0, 0]}', "payload: com"),
        (b'{"mass": 1, "com": [0, 0, 11]}', "payload: com[2]: 11 must be <= 10"),
        (b'{"mass": 1, "masss": 2}', "payload: masss"),
        (b'{"com": [0, 0, 0]}', "payload: mass"),
        (b"[1]", "payload: payload must be a JSON object"),
        (
            b'{"mass": 1, "inertia": [1, 0, 0, 0.1, 0, 0.1]}',
            "payload: inertia [1.0, 0.0, 0.0, 0.1, 0.0, 0.1] kg·m² (principal moments",
        ),
        (b'{"mass": 1, "inertia": [-1, 0, 0, 1, 0, 1]}', "must be positive semi-definite"),
    ],
)
def test_a_bad_load_is_refused_naming_the_field(payload: bytes, reason: str) -> None:
    result = parse_load(payload)
    assert isinstance(result, Rejection)
    assert result.goal_id is None
    assert result.reason.startswith(reason) or reason in result.reason, result.reason


async def test_loads_are_delivered_and_bad_ones_rejected_through_the_broker(
    mosquitto: MosquittoBroker,
) -> None:
    daemon = Daemon()
    loads: list[ToolLoad] = []
    bridge = MqttBridge(
        settings_for(mosquitto),
        joint_names=("shoulder", "elbow"),
        link_names=("base", "tool"),
        default_link="tool",
        on_goal=daemon.goals.append,
        on_estop=daemon.estops.append,
        on_load=loads.append,
        rng=random.Random(0),
    )
    async with probe(mosquitto) as client:  # retained before the daemon connects: not applied
        await client.publish(TOPICS.payload, '{"mass": 2.0}', retain=True)
    async with running(bridge), probe(mosquitto) as client:
        await client.publish(TOPICS.payload, '{"mass": 1.5, "com": [0, 0, 0.05]}')
        await client.publish(TOPICS.payload, '{"mass": -3}')
        await client.publish(TOPICS.payload, '{"mass": 0}')
        await wait_until(lambda: len(loads) == 2)
        await client.wait_for(lambda ms: len([m for m in ms if m.topic == TOPICS.goal_status]) == 2)
        statuses = [m.json() for m in client.on(TOPICS.goal_status)]
        await client.publish(TOPICS.payload, "", retain=True)  # clear the retained message
    assert loads == [ToolLoad(1.5, (0.0, 0.0, 0.05)), ToolLoad(0.0)]
    assert statuses[0]["status"] == "rejected"
    assert statuses[0]["reason"].startswith("retain: retained messages are not accepted on")
    assert statuses[1] == {
        "id": None,
        "status": "rejected",
        "reason": "payload: mass: -3 must be >= 0.0",
    }
    assert daemon.goals == []
