"""Many arms (docs/fleet.md): two daemons, each on the Mosquitto of its own robot computer
(config/mosquitto/mosquitto.conf with config/mosquitto/bridge.conf appended, as its include_dir
would), bridged over TLS to a central Mosquitto (mosquitto.conf and armd.acl), where a client
sees and commands both arms. Every file is the shipped one: tests/system/production.py replaces
the paths and ports, `bridge_config` the bridge's placeholders, so the files cannot rot.

Each bridge logs in to the central broker with its arm's account; the ACL must keep it to its
own arm. Passwords are random per fleet, and differ between the daemon's account on its robot
computer and the bridge's on the central broker.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import signal
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from armd.api.contract import TOPICS
from tests.broker import HOST, make_password_file, make_tls_files
from tests.system.helpers import DIAGNOSTICS, Rig, attach_diagnostics
from tests.system.probe import WAIT_S, MqttProbe, at_rest, joint_positions
from tests.system.production import BRIDGE, OPERATOR, ProductionBroker, secured_arm
from tests.system.relay import Relay

ARMS = ("arm-a", "arm-b")
DISCOVERY = {"home_assistant": {"discovery": True}}  # the daemons announce their arms
TOLERANCE = 1e-3  # rad
STILL_TOLERANCE = 1e-4  # rad: an arm that was not commanded


def discovery_topics(arm: str) -> str:
    """Home Assistant's discovery topics of `arm` (docs/home-assistant.md, default prefix)."""
    return f"homeassistant/+/armd_{arm}/#"


def discovery(probe: MqttProbe) -> list[str]:
    """The discovery topics `probe` received (their full names: outside the arm's prefix)."""
    return [m.topic for m in probe.messages if m.topic.startswith("homeassistant/")]


def bridge_config(arm: str, port: int, password: str, ca_file: Path) -> str:
    """config/mosquitto/bridge.conf for `arm`, bridged to the central broker's TLS listener at
    `port` (through the arm's `Relay`)."""
    text = BRIDGE.read_text(encoding="utf-8")
    replacements = {
        "<central-broker>:8883": f"{HOST}:{port}",
        "/etc/mosquitto/certs/central-ca.crt": str(ca_file),
        "<bridge-password>": password,
        "<arm>": arm,
    }
    for placeholder, value in replacements.items():
        assert placeholder in text, f"{BRIDGE.name} no longer has {placeholder}: adapt the test"
        text = text.replace(placeholder, value)
    options = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    left = [line for line in options if re.search(r"<[a-z-]+>", line)]
    assert not left, f"placeholders the test does not replace: {left}"
    return text


def test_the_bridge_carries_every_topic_of_the_contract_its_way() -> None:
    """bridge.conf lists the arm's topics one by one: a topic added to armd/api/contract.py must be
    added there, outputs ``out`` and inputs ``in``, at the topic's QoS."""
    bridged = {}
    for line in BRIDGE.read_text(encoding="utf-8").splitlines():
        match = re.fullmatch(r"topic (\S+) (in|out|both) ([012]) armd/<arm>/ armd/<arm>/", line)
        if match:
            bridged[match[1]] = (match[2], int(match[3]))
    expected = {t.suffix: ("in" if t.inbound else "out", t.qos) for t in TOPICS}
    assert {suffix: bridged.get(suffix) for suffix in expected} == expected


@dataclass
class Fleet:
    """The central broker, and per arm: its robot computer's broker and daemon (a `Rig` whose
    probe logs in there as the operator) and an operator's probe on the central broker."""

    central: ProductionBroker
    rigs: dict[str, Rig] = field(default_factory=dict)
    central_probes: dict[str, MqttProbe] = field(default_factory=dict)
    links: dict[str, Relay] = field(default_factory=dict)  # each arm's network to the central
    passwords: dict[str, str] = field(default_factory=dict)  # the central broker's accounts

    def diagnostics(self) -> list[tuple[str, str]]:
        sections = [("central mosquitto log", self.central.log()[-8000:])]
        for arm, probe in self.central_probes.items():
            sections.append((f"MQTT messages of {arm} on the central broker", probe.summary(40)))
        return sections


@contextlib.contextmanager
def running_fleet(directory: Path) -> Iterator[Fleet]:
    """Start the central broker, then per arm its broker (bridged) and its daemon."""
    with contextlib.ExitStack() as stack:
        tls = make_tls_files(directory / "tls")
        passwords = {user: secrets.token_urlsafe(24) for user in (*ARMS, OPERATOR)}
        accounts = make_password_file(directory / "central" / "passwd", passwords)
        central = ProductionBroker(directory / "central", accounts, tls)
        central.start()
        stack.callback(central.stop)
        fleet = Fleet(central, passwords=passwords)
        for arm in ARMS:
            assert central.tls_port is not None
            fleet.links[arm] = Relay(central.tls_port)
            stack.callback(fleet.links[arm].close)
            bridge = bridge_config(arm, fleet.links[arm].port, passwords[arm], tls.ca_cert)
            robot = secured_arm(directory / arm, arm, tls, bridge, overrides=DISCOVERY)
            fleet.rigs[arm] = stack.enter_context(robot).rig
        for arm in ARMS:
            probe = MqttProbe(
                central.host, central.port, arm, username=OPERATOR, password=passwords[OPERATOR]
            )
            stack.callback(probe.close)
            probe.client.subscribe(discovery_topics(arm), qos=1)  # kept with the arm's messages
            fleet.central_probes[arm] = probe
        yield fleet


@pytest.fixture(scope="module")
def shared_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with running_fleet(tmp_path_factory.mktemp("fleet")) as fleet:
        yield fleet


@pytest.fixture
def fleet(shared_fleet: Fleet, request: pytest.FixtureRequest) -> Fleet:
    """The module's fleet, both arms online on the central broker and at rest."""
    attach(request, shared_fleet)
    for arm, probe in shared_fleet.central_probes.items():
        assert shared_fleet.rigs[arm].daemon.running, shared_fleet.rigs[arm].daemon.output()
        probe.wait_availability("online")
        probe.wait_for(lambda p=probe: p.on("bridge") and p.on("bridge")[-1].text == "1")
        probe.wait_state(at_rest, what=f"{arm} at rest, seen on the central broker")
    return shared_fleet


def attach(request: pytest.FixtureRequest, fleet: Fleet) -> None:
    for rig in fleet.rigs.values():
        attach_diagnostics(request, rig)
    request.node.stash.setdefault(DIAGNOSTICS, []).append(fleet.diagnostics)


def test_a_client_of_the_central_broker_sees_and_commands_both_arms(fleet: Fleet) -> None:
    targets = {"arm-a": 0.4, "arm-b": -0.3}  # shoulder_pan_joint, rad
    marks = {}
    for arm, probe in fleet.central_probes.items():
        # The retained announcements crossed the bridge: the model and Home Assistant discovery.
        assert probe.wait_for(lambda p=probe: p.on("model"), what="the model")[-1].retain
        probe.wait_for(lambda p=probe: discovery(p), what=f"{arm}'s discovery configs")
        state = probe.latest_state()
        assert set(state["joints"]) >= {"shoulder_pan_joint", "elbow_joint"}, state
        goal = {
            "id": f"fleet-{arm}-{uuid.uuid4().hex[:6]}",
            "type": "joints",
            "positions": {"shoulder_pan_joint": targets[arm]},
            "speed": 0.5,
        }
        local_since = fleet.rigs[arm].probe.mark()
        marks[arm] = (goal["id"], probe.publish_goal(goal), local_since)
    for arm, probe in fleet.central_probes.items():
        goal_id, since, local_since = marks[arm]
        probe.wait_status(goal_id, since=since)
        assert [s["status"] for s in probe.statuses(goal_id, since)] == ["accepted", "succeeded"]
        # The goal crossed the bridge to its arm only, and the arm moved there.
        rig = fleet.rigs[arm]
        assert [m.json()["id"] for m in rig.probe.on("goal", local_since)] == [goal_id]
        reached = joint_positions(probe.wait_state(at_rest, what=f"{arm} at rest"))
        assert reached["shoulder_pan_joint"] == pytest.approx(targets[arm], abs=TOLERANCE)


def test_a_bridge_account_can_neither_command_nor_impersonate_the_other_arm(
    fleet: Fleet,
) -> None:
    """The account of arm-a's bridge on the central broker (named arm-a) tries everything on
    arm-b's topics: nothing reaches arm-b or the central broker's clients."""
    victim = fleet.rigs["arm-b"]
    before = joint_positions(victim.probe.latest_state())
    watched = fleet.central_probes["arm-b"].mark()
    local_since = victim.probe.mark()
    intruder = MqttProbe(HOST, fleet.central.port, "arm-b", username="arm-a",
                         password=fleet.passwords["arm-a"])  # fmt: skip
    try:
        fake = {"id": "intruder", "type": "joints", "positions": {"shoulder_pan_joint": 1.0}}
        intruder.publish_goal(fake)
        intruder.publish("estop", json.dumps({"engage": True}))
        for topic, payload in (("availability", "offline"), ("fault", '{"code": "intruder"}')):
            intruder.client.publish(f"armd/arm-b/{topic}", payload, qos=1, retain=True)
        intruder.publish("state", json.dumps({"intruder": True}))
        intruder.publish("bridge", "0")
        forged = intruder.client.publish(
            "homeassistant/button/armd_arm-b/forged/config", "{}", qos=1, retain=True
        )
        forged.wait_for_publish(WAIT_S)

        # An operator's goal sent afterwards crosses the central broker and the bridge, after
        # anything the broker would have let through.
        sentinel = {"id": f"sentinel-{uuid.uuid4().hex[:6]}", "type": "stop"}
        assert fleet.central_probes["arm-b"].run_goal(sentinel)["status"] == "succeeded"
        assert intruder.messages == [], "arm-a's account read arm-b's topics"
    finally:
        intruder.close()

    assert [m.json()["id"] for m in victim.probe.on("goal", local_since)] == [sentinel["id"]]
    assert victim.probe.on("estop", local_since) == []
    for state in victim.probe.states(local_since):
        assert state["mode"] == "holding", state
        moved = max(abs(p - before[joint]) for joint, p in joint_positions(state).items())
        assert moved < STILL_TOLERANCE, f"arm-b moved by {moved:.6f} rad"
    seen = fleet.central_probes["arm-b"]
    assert [m.text for m in seen.on("availability", watched)] == []
    assert [m.text for m in seen.on("fault", watched)] == []
    assert [m.text for m in seen.on("bridge", watched)] == []
    assert all("intruder" not in state for state in seen.states(watched))
    assert not [topic for topic in discovery(seen) if "forged" in topic]


@pytest.fixture
def fresh_fleet(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    """A fleet of its own, for a test that kills or restarts parts of it; both arms online on
    the central broker through live bridges."""
    with running_fleet(tmp_path) as fleet:
        attach(request, fleet)
        for probe in fleet.central_probes.values():
            probe.wait_availability("online")
            probe.wait_for(lambda p=probe: latest(p, "bridge") == "1", what="the bridge up")
        yield fleet


def test_the_central_broker_tells_a_dead_daemon_from_a_dead_link(fresh_fleet: Fleet) -> None:
    """docs/fleet.md's failure table: the daemon's Last Will crosses the bridge; the bridge's own
    Last Will (`bridge` = `0`) is all the central broker can say when the link dies. While it is
    down, a goal sent on the central broker is dropped (not served once the link is back), and
    the statuses of a goal served on the robot computer are kept there and delivered later."""
    a, b = (fresh_fleet.central_probes[arm] for arm in ARMS)

    # arm-a's daemon dies: its Last Will on its broker reaches the central broker.
    since = a.mark()
    fresh_fleet.rigs["arm-a"].daemon.signal(signal.SIGKILL)
    a.wait_availability("offline", since=since)
    assert latest(a, "bridge") == "1", "the link of arm-a is fine"

    # arm-b's network goes down: the central broker publishes the bridge's Last Will; the arm's
    # availability keeps its last value.
    since = b.mark()
    fresh_fleet.links["arm-b"].cut()
    b.wait_for(lambda: latest(b, "bridge", since) == "0", what="arm-b's bridge 0")
    lost = {"id": "sent-while-the-link-was-down", "type": "joints",
            "positions": {"shoulder_pan_joint": 0.6}}  # fmt: skip
    b.publish_goal(lost)
    local = fresh_fleet.rigs["arm-b"].probe  # an operator on arm-b's robot computer
    local.wait_for(lambda: latest(local, "bridge") == "0", what="the bridge down, seen locally")
    served = {"id": "served-locally", "type": "joints", "positions": {"shoulder_pan_joint": -0.2}}
    assert local.run_goal(served)["status"] == "succeeded"
    assert b.on("availability", since) == []
    assert latest(b, "availability") == "online", "stale, as documented"
    assert b.statuses(served["id"]) == []

    # The network back: the bridge reconnects and delivers what it kept; the dropped goal is gone.
    since = b.mark()
    fresh_fleet.links["arm-b"].restore()
    b.wait_for(lambda: latest(b, "bridge", since) == "1", what="arm-b's bridge 1 again")
    b.wait_status(served["id"])
    assert [s["status"] for s in b.statuses(served["id"])] == ["accepted", "succeeded"]
    sentinel = {"id": f"sentinel-{uuid.uuid4().hex[:6]}", "type": "stop"}
    assert b.run_goal(sentinel)["status"] == "succeeded"
    assert b.statuses(lost["id"]) == [], "a goal sent while the link was down was served"
    assert lost["id"] not in [m.json()["id"] for m in local.on("goal")]


def test_statuses_published_while_the_central_broker_is_away_reach_it_later(
    fresh_fleet: Fleet,
) -> None:
    """The bridge keeps its session on the robot computer's broker: a goal served there while
    the central broker restarts has its statuses delivered to the central broker afterwards
    (here to a client whose session the central broker keeps, as a dashboard's would be)."""
    central = fresh_fleet.central
    rig = fresh_fleet.rigs["arm-b"]
    login = {"username": OPERATOR, "password": fresh_fleet.passwords[OPERATOR]}
    kept = MqttProbe(central.host, central.port, "arm-b", **login, session="fleet-dashboard")
    try:
        central.stop()
        rig.probe.wait_for(lambda: latest(rig.probe, "bridge") == "0", what="the link down")
        goal = {"id": "served-locally", "type": "joints", "positions": {"shoulder_pan_joint": -0.2}}
        assert rig.probe.run_goal(goal)["status"] == "succeeded"

        central.start()  # its persistence keeps the session and the retained messages
        kept.wait_status(goal["id"])
        assert [s["status"] for s in kept.statuses(goal["id"])] == ["accepted", "succeeded"]
        assert latest(kept, "availability") == "online"
        assert latest(kept, "bridge") == "1"
    finally:
        kept.close()


def latest(probe: MqttProbe, topic: str, since: int = 0) -> str | None:
    found = probe.on(topic, since)
    return found[-1].text if found else None
