"""The MQTT bridge against a real Mosquitto on a free loopback port (tests/broker.py): the topics,
payloads, QoS and retain flags of docs/mqtt.md, the Last Will, broker loss, credentials and TLS.

Conditions are awaited with generous timeouts; nothing asserts speed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from pydantic import SecretStr

from armd.api.bridge import MqttBridge
from armd.api.contract import STATE, Topics
from armd.api.session import MqttSession
from armd.config.broker import MqttSettings, reconnect_delay_s
from armd.errors import ConfigError
from armd.link.messages import (
    EstopCommand,
    Fault,
    Goal,
    GoalStatus,
    JointsGoal,
    Mode,
    PoseGoal,
    StatusUpdate,
    StopGoal,
    Telemetry,
)
from tests.broker import MosquittoBroker, make_password_file, make_tls_files

WAIT_S = 10.0
ARM = "test"
TOPICS = Topics.for_arm(ARM)
ROOT = Path(__file__).resolve().parents[3]


# -- helpers --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    topic: str
    payload: bytes
    retain: bool
    qos: int

    def json(self) -> Any:
        return json.loads(self.payload)


class Probe:
    """A plain MQTT client that records everything under ``armd/test/`` (a dashboard)."""

    def __init__(self, client: aiomqtt.Client) -> None:
        self.client = client
        self.messages: list[Received] = []
        self._changed = asyncio.Event()

    async def collect(self) -> None:
        async for message in self.client.messages:
            payload = message.payload
            assert isinstance(payload, bytes)
            self.messages.append(
                Received(message.topic.value, payload, message.retain, message.qos)
            )
            self._changed.set()

    def on(self, topic: str) -> list[Received]:
        return [m for m in self.messages if m.topic == topic]

    async def wait_for(self, predicate: Callable[[list[Received]], bool]) -> None:
        async with asyncio.timeout(WAIT_S):
            while not predicate(self.messages):
                self._changed.clear()
                await self._changed.wait()

    async def wait_message(self, topic: str, payload: bytes | None = None) -> Received:
        await self.wait_for(
            lambda ms: any(m.topic == topic and payload in (None, m.payload) for m in ms)
        )
        return next(m for m in self.messages if m.topic == topic and payload in (None, m.payload))

    async def publish(self, topic: str, payload: bytes | str, *, retain: bool = False) -> None:
        await self.client.publish(topic, payload, qos=1, retain=retain)


@contextlib.asynccontextmanager
async def probe(
    broker: MosquittoBroker, *topics: str, client_id: str = "probe", clean_session: bool = True
) -> AsyncIterator[Probe]:
    """Subscribes to `topics` (default: everything of the arm), one SUBSCRIBE each, in order."""
    client = aiomqtt.Client(
        broker.host, broker.port, identifier=client_id, clean_session=clean_session, timeout=WAIT_S
    )
    async with client, asyncio.TaskGroup() as tasks:
        recorder = Probe(client)
        for topic in topics or (f"armd/{ARM}/#",):
            await client.subscribe(topic, qos=1)
        collector = tasks.create_task(recorder.collect())
        yield recorder
        collector.cancel()


@dataclass
class Daemon:
    """What the daemon's side of the bridge sees."""

    goals: list[Goal] = field(default_factory=list)
    estops: list[EstopCommand] = field(default_factory=list)
    connection: list[bool] = field(default_factory=list)


def settings_for(broker: MosquittoBroker, **overrides: Any) -> MqttSettings:
    base = MqttSettings(
        ARM,
        host=broker.host,
        port=broker.port,
        reconnect_min_s=0.05,
        reconnect_max_s=0.5,
        timeout_s=WAIT_S,
    )
    return replace(base, **overrides)


def make_bridge(settings: MqttSettings, daemon: Daemon) -> MqttBridge:
    return MqttBridge(
        settings,
        joint_names=("shoulder", "elbow"),
        link_names=("base", "tool"),
        default_link="tool",
        on_goal=daemon.goals.append,
        on_estop=daemon.estops.append,
        on_connection_change=daemon.connection.append,
        rng=random.Random(0),
    )


@contextlib.asynccontextmanager
async def running(bridge: MqttBridge, *, wait_connected: bool = True) -> AsyncIterator[None]:
    """Runs the bridge; on exit requests a clean stop and waits for `run` to return."""
    async with asyncio.TaskGroup() as tasks:
        task = tasks.create_task(bridge.run())
        try:
            if wait_connected:
                await wait_connected_or_fail(bridge)
            yield
        finally:
            bridge.request_stop()
            async with asyncio.timeout(WAIT_S):
                await task


async def wait_connected_or_fail(bridge: MqttBridge) -> None:
    async with asyncio.timeout(WAIT_S):
        await bridge.connected.wait()


async def wait_until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(WAIT_S):
        while not condition():
            await asyncio.sleep(0.01)


def telemetry(t: float) -> Telemetry:
    return Telemetry(
        t=t,
        mode=Mode.HOLDING,
        joints={"shoulder": (0.1, 0.0, 0.25), "elbow": (-0.2, 0.0, float("nan"))},
        tcp_link="tool",
        tcp_position=(0.3, 0.0, 0.5),
        tcp_orientation=(1.0, 0.0, 0.0, 0.0),
    )


# -- availability and the Last Will ---------------------------------------------------------------


async def test_online_is_retained_on_connect_and_no_fault_is_retained(
    mosquitto: MosquittoBroker,
) -> None:
    daemon = Daemon()
    bridge = make_bridge(settings_for(mosquitto), daemon)
    async with running(bridge):
        assert daemon.connection == [True]
        # A dashboard that subscribes later gets the retained state: fault first, then availability
        # (separate SUBSCRIBEs: a retained fault would arrive before the availability message).
        async with probe(mosquitto, TOPICS.fault, TOPICS.availability) as dashboard:
            online = await dashboard.wait_message(TOPICS.availability)
            assert (online.payload, online.retain, online.qos) == (b"online", True, 1)
            assert dashboard.on(TOPICS.fault) == []
    assert daemon.connection == [True, False]


async def test_request_stop_flushes_statuses_then_publishes_offline(
    mosquitto: MosquittoBroker,
) -> None:
    bridge = make_bridge(settings_for(mosquitto), Daemon())
    async with probe(mosquitto) as dashboard:
        async with running(bridge):
            await dashboard.wait_message(TOPICS.availability, b"online")
            bridge.publish_status(StatusUpdate("g1", GoalStatus.ABORTED, "shutting down"))
        # running() returned: run() is done; the status went out before offline
        offline = await dashboard.wait_message(TOPICS.availability, b"offline")
        assert offline.qos == 1
        tail = [(m.topic, m.payload) for m in dashboard.messages[-2:]]
        assert tail == [
            (TOPICS.goal_status, b'{"id":"g1","status":"aborted","reason":"shutting down"}'),
            (TOPICS.availability, b"offline"),
        ]
    assert bridge.pending_statuses == 0
    # a clean DISCONNECT ("closed its connection" would mean a lost socket and the Last Will)
    await wait_until(lambda: "Client armd-test disconnected" in mosquitto.log())


async def test_cancelling_run_publishes_offline(mosquitto: MosquittoBroker) -> None:
    bridge = make_bridge(settings_for(mosquitto), Daemon())
    async with probe(mosquitto) as dashboard:
        task = asyncio.create_task(bridge.run())
        await wait_connected_or_fail(bridge)
        await dashboard.wait_message(TOPICS.availability, b"online")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(WAIT_S):
                await task
        offline = await dashboard.wait_message(TOPICS.availability, b"offline")
        assert offline.topic == TOPICS.availability


@contextlib.asynccontextmanager
async def silent_broker() -> AsyncIterator[tuple[int, list[asyncio.StreamWriter]]]:
    """A listener that accepts TCP connections but never sends a CONNACK: its port, and the
    connections it holds (closed on exit)."""
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    async with server:
        try:
            yield server.sockets[0].getsockname()[1], held
        finally:
            for writer in held:
                writer.close()


@pytest.mark.parametrize("how", ["cancel", "request_stop"])
async def test_stopping_while_the_broker_never_answers_ends_within_the_budget(how: str) -> None:
    async with silent_broker() as (port, held):
        settings = MqttSettings(ARM, host="127.0.0.1", port=port, shutdown_timeout_s=0.2)
        bridge = make_bridge(settings, Daemon())
        task = asyncio.create_task(bridge.run())
        await wait_until(lambda: bool(held))  # connecting
        if how == "cancel":
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                async with asyncio.timeout(WAIT_S):  # instead of settings.timeout_s = 10 s
                    await task
        else:
            bridge.request_stop()
            async with asyncio.timeout(WAIT_S):
                await task
        assert not bridge.connected.is_set()


BRIDGE_PROCESS = textwrap.dedent(
    """
    import asyncio, sys
    from armd.config.broker import MqttSettings
    from armd.api.bridge import MqttBridge

    async def main() -> None:
        settings = MqttSettings("test", host=sys.argv[1], port=int(sys.argv[2]), keepalive_s=60)
        bridge = MqttBridge(settings, joint_names=["a"], link_names=["tool"], default_link="tool",
                            on_goal=print, on_estop=print)
        await bridge.run()

    asyncio.run(main())
    """
)


@pytest.fixture
def bridge_process(mosquitto: MosquittoBroker) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [sys.executable, "-c", BRIDGE_PROCESS, mosquitto.host, str(mosquitto.port)], cwd=ROOT
    )
    yield process
    if process.poll() is None:
        process.kill()
    process.wait(WAIT_S)


async def test_last_will_says_offline_when_the_daemon_dies(
    mosquitto: MosquittoBroker, bridge_process: subprocess.Popen[bytes]
) -> None:
    async with probe(mosquitto) as dashboard:
        await dashboard.wait_message(TOPICS.availability, b"online")
        bridge_process.send_signal(signal.SIGKILL)  # no DISCONNECT, no goodbye
        will = await dashboard.wait_message(TOPICS.availability, b"offline")
        assert will.qos == 1
    async with probe(mosquitto, TOPICS.availability) as late:  # and it is retained
        retained = await late.wait_message(TOPICS.availability)
        assert (retained.payload, retained.retain) == (b"offline", True)


# -- inbound --------------------------------------------------------------------------------------


async def test_goals_and_estop_commands_are_delivered_parsed(mosquitto: MosquittoBroker) -> None:
    daemon = Daemon()
    bridge = make_bridge(settings_for(mosquitto), daemon)
    async with running(bridge), probe(mosquitto) as client:
        await client.publish(TOPICS.goal, '{"id": "p", "type": "pose", "position": [0.3, 0, 0.5]}')
        await client.publish(
            TOPICS.goal, '{"id": "j", "type": "joints", "positions": {"elbow": 1}}'
        )
        await client.publish(TOPICS.goal, '{"type": "stop"}')
        await client.publish(TOPICS.estop, '{"engage": true}')
        await client.publish(TOPICS.estop, '{"reset": true}')
        await wait_until(lambda: len(daemon.goals) == 3 and len(daemon.estops) == 2)
    assert daemon.goals == [
        PoseGoal("p", (0.3, 0.0, 0.5), link="tool"),
        JointsGoal("j", {"elbow": 1.0}),
        StopGoal(None),
    ]
    assert daemon.estops == [EstopCommand(engage=True), EstopCommand(engage=False)]


async def test_bad_payloads_get_a_rejected_status_with_the_id_and_change_nothing(
    mosquitto: MosquittoBroker, caplog: pytest.LogCaptureFixture
) -> None:
    daemon = Daemon()
    bridge = make_bridge(settings_for(mosquitto), daemon)
    async with running(bridge), probe(mosquitto) as client:
        await client.publish(TOPICS.goal, '{"id": "g7", "type": "pose", "position": [1, NaN, 3]}')
        await client.publish(TOPICS.goal, b"\xff not json")
        await client.publish(TOPICS.goal, '{"id": "g8", "type": "joints", "positions": {"x": 1}}')
        await client.publish(TOPICS.estop, '{"engage": "yes"}')
        await client.wait_for(lambda ms: len([m for m in ms if m.topic == TOPICS.goal_status]) == 4)
        statuses = [m.json() for m in client.on(TOPICS.goal_status)]
    assert statuses == [
        {"id": "g7", "status": "rejected", "reason": "position[1]: nan must be a finite number"},
        {
            "id": None,
            "status": "rejected",
            "reason": "payload is not valid UTF-8: byte 0 (invalid start byte)",
        },
        {
            "id": "g8",
            "status": "rejected",
            "reason": "positions.x: unknown joint; joints: [shoulder, elbow]",
        },
        {
            "id": None,
            "status": "rejected",
            "reason": (
                "estop: engage: 'yes' must be true or false; the e-stop is engaged (fail-safe)"
            ),
        },
    ]
    assert daemon.goals == []
    # Fail-safe: the malformed e-stop command engaged the e-stop all the same.
    assert daemon.estops == [
        EstopCommand(engage=True, problem="engage: 'yes' must be true or false")
    ]
    rejections = [r for r in caplog.records if "rejected" in r.getMessage()]
    assert len(rejections) == 4  # each logged once
    assert "g7" in rejections[0].getMessage()


async def test_a_retained_goal_is_not_replayed_on_connect(mosquitto: MosquittoBroker) -> None:
    async with probe(mosquitto) as client:
        goal = '{"id": "old", "type": "joints", "positions": {"elbow": 1}}'
        await client.publish(TOPICS.goal, goal, retain=True)
        daemon = Daemon()
        async with running(make_bridge(settings_for(mosquitto), daemon)):
            status = await client.wait_message(TOPICS.goal_status)
            await client.publish(TOPICS.goal, b"", retain=True)  # clear it for good measure
    assert status.json() == {
        "id": "old",
        "status": "rejected",
        "reason": (
            "retain: retained messages are not accepted on armd/test/goal; publish without retain"
        ),
    }
    assert daemon.goals == []


async def test_a_failing_handler_does_not_stop_the_bridge(mosquitto: MosquittoBroker) -> None:
    seen: list[Goal] = []

    def on_goal(goal: Goal) -> None:
        seen.append(goal)
        if len(seen) == 1:
            raise RuntimeError("daemon bug")

    bridge = MqttBridge(
        settings_for(mosquitto),
        joint_names=("elbow",),
        link_names=("tool",),
        default_link="tool",
        on_goal=on_goal,
        on_estop=lambda _: None,
    )
    async with running(bridge), probe(mosquitto) as client:
        await client.publish(TOPICS.goal, '{"id": "a", "type": "stop"}')
        await client.publish(TOPICS.goal, '{"id": "b", "type": "stop"}')
        await wait_until(lambda: len(seen) == 2)
        assert bridge.connected.is_set()


@pytest.mark.skipif(shutil.which("mosquitto_pub") is None, reason="needs mosquitto_pub")
async def test_a_flood_of_goals_is_delivered_in_order(
    mosquitto_factory: Callable[..., MosquittoBroker],
) -> None:
    """Nothing queues up in the bridge (messages are handled as they are read), so every goal
    arrives; Mosquitto itself drops QoS 1 messages beyond `max_queued_messages` per client."""
    broker = mosquitto_factory(extra_config=["max_queued_messages 100000"])
    daemon = Daemon()
    count = 5000
    lines = "".join(f'{{"id": "{i}", "type": "stop"}}\n' for i in range(count))
    async with running(make_bridge(settings_for(broker), daemon)):
        publisher = await asyncio.create_subprocess_exec(
            *("mosquitto_pub", "-h", broker.host, "-p", str(broker.port)),
            *("-t", TOPICS.goal, "-q", "1", "-l"),
            stdin=subprocess.PIPE,
        )
        async with asyncio.timeout(WAIT_S):
            await publisher.communicate(lines.encode())
        await wait_until(lambda: len(daemon.goals) == count)
    assert [g.goal_id for g in daemon.goals] == [str(i) for i in range(count)]


# -- outbound -------------------------------------------------------------------------------------


async def test_statuses_are_published_in_order_with_qos_1(mosquitto: MosquittoBroker) -> None:
    bridge = make_bridge(settings_for(mosquitto), Daemon())
    async with running(bridge), probe(mosquitto) as dashboard:
        for i in range(200):
            bridge.publish_status(StatusUpdate(f"g{i}", GoalStatus.ACCEPTED))
        await dashboard.wait_for(
            lambda ms: len([m for m in ms if m.topic == TOPICS.goal_status]) == 200
        )
        received = dashboard.on(TOPICS.goal_status)
        assert [m.json()["id"] for m in received] == [f"g{i}" for i in range(200)]
        assert {(m.qos, m.retain) for m in received} == {(1, False)}
        await wait_until(lambda: bridge.pending_statuses == 0)


async def test_fault_is_retained_and_cleared(mosquitto: MosquittoBroker) -> None:
    bridge = make_bridge(settings_for(mosquitto), Daemon())
    fault = Fault("device_fault", "ODrive axis error 0x40", joint="elbow")
    async with running(bridge), probe(mosquitto) as dashboard:
        bridge.set_fault(fault)
        live = await dashboard.wait_message(TOPICS.fault)
        assert live.json() == {
            "code": "device_fault",
            "message": "ODrive axis error 0x40",
            "joint": "elbow",
        }
        async with probe(mosquitto, TOPICS.fault, client_id="late") as late:
            retained = await late.wait_message(TOPICS.fault)
            assert (retained.payload, retained.retain, retained.qos) == (live.payload, True, 1)
        bridge.set_fault(None)
        cleared = await dashboard.wait_message(TOPICS.fault, b"")
        assert cleared.qos == 1
        async with probe(mosquitto, TOPICS.fault, TOPICS.availability, client_id="later") as later:
            await later.wait_message(TOPICS.availability)
            assert later.on(TOPICS.fault) == []


async def test_a_qos_0_message_is_written_in_the_publish_call(mosquitto: MosquittoBroker) -> None:
    """Telemetry costs the daemon one `send`, not a round through the event loop."""
    session = MqttSession(settings_for(mosquitto), TOPICS, print, logging.getLogger("test"))
    assert await session.connect(asyncio.Event())
    try:
        async with probe(mosquitto, TOPICS.state) as dashboard:
            publication = session.publish(STATE, b'{"t": 1.0}')
            with pytest.raises(StopIteration):
                publication.send(None)  # completed without suspending: the socket took it
            message = await dashboard.wait_message(TOPICS.state)
            assert message.payload == b'{"t": 1.0}'
    finally:
        await session.close()


async def test_telemetry_mailbox_keeps_only_the_latest(mosquitto: MosquittoBroker) -> None:
    bridge = make_bridge(settings_for(mosquitto), Daemon())
    for t in range(1000):  # while not yet connected
        bridge.publish_telemetry(telemetry(float(t)))
    async with probe(mosquitto) as dashboard, running(bridge):
        first = await dashboard.wait_message(TOPICS.state)
        assert (first.qos, first.retain) == (0, False)
        assert first.json() == {
            "t": 999.0,
            "mode": "holding",
            "missed_ticks": 0,
            "joints": {
                "shoulder": {"position": 0.1, "velocity": 0.0, "effort": 0.25},
                "elbow": {"position": -0.2, "velocity": 0.0},
            },
            "tcp": {"link": "tool", "position": [0.3, 0.0, 0.5], "orientation": [1.0, 0, 0, 0]},
        }
        for t in range(1000, 2000):  # a burst while connected, without yielding to the bridge
            bridge.publish_telemetry(telemetry(float(t)))
        await dashboard.wait_for(
            lambda ms: any(m.json()["t"] == 1999.0 for m in ms if m.topic == TOPICS.state)
        )
        assert [m.json()["t"] for m in dashboard.on(TOPICS.state)] == [999.0, 1999.0]


def test_the_status_queue_is_bounded_and_drops_the_oldest(caplog: pytest.LogCaptureFixture) -> None:
    bridge = make_bridge(MqttSettings(ARM, status_queue_max=100), Daemon())
    for i in range(250):
        bridge.publish_status(StatusUpdate(f"g{i}", GoalStatus.ACCEPTED))
    assert bridge.pending_statuses == 100
    assert bridge.dropped_statuses == 150
    warnings = [r for r in caplog.records if "queue full" in r.getMessage()]
    assert 1 <= len(warnings) <= 10  # rate-limited


# -- broker loss ----------------------------------------------------------------------------------


async def test_broker_killed_and_restarted(mosquitto: MosquittoBroker) -> None:
    """Connection loss is reported, statuses queue up, and after the restart the bridge is
    online again, republishes the retained fault and sends the queued statuses."""
    daemon = Daemon()
    bridge = make_bridge(settings_for(mosquitto), daemon)
    bridge.set_fault(Fault("stale_feedback", "no reply from elbow for 250 ms", joint="elbow"))
    async with running(bridge):
        mosquitto.kill()
        await wait_until(lambda: not bridge.connected.is_set())
        assert daemon.connection == [True, False]
        for i in range(5):
            bridge.publish_status(StatusUpdate(f"q{i}", GoalStatus.ABORTED, "broker lost"))
        assert bridge.pending_statuses == 5
        mosquitto.start()  # a fresh broker: it remembers nothing retained
        async with probe(mosquitto, TOPICS.fault, TOPICS.availability) as dashboard:
            await wait_connected_or_fail(bridge)
            await wait_until(lambda: bridge.pending_statuses == 0)  # acknowledged by the broker
            await dashboard.wait_message(TOPICS.availability, b"online")
            fault = await dashboard.wait_message(TOPICS.fault)
            assert fault.json()["code"] == "stale_feedback"
    assert daemon.connection == [True, False, True, False]


async def test_a_frozen_broker_is_noticed_by_the_keepalive_and_left_for_a_new_connection(
    mosquitto: MosquittoBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """The connection stays open but nothing answers: the missing PINGRESP ends it within 1.5
    keepalive periods, and CONNACKs that never come end each new attempt; once the broker
    answers again the bridge is back online and sends what queued up meanwhile."""
    daemon = Daemon()
    bridge = make_bridge(settings_for(mosquitto, keepalive_s=1, timeout_s=0.5), daemon)
    async with running(bridge):
        mosquitto.freeze()
        try:
            loop = asyncio.get_running_loop()
            frozen_at = loop.time()
            await wait_until(lambda: not bridge.connected.is_set())
            assert loop.time() - frozen_at < 3.5  # keepalive 1 s: PINGREQ, then 1 s for PINGRESP
            bridge.publish_status(StatusUpdate("while-frozen", GoalStatus.ABORTED, "broker hung"))
            await wait_until(lambda: "no CONNACK within 0.5 s" in caplog.text)
        finally:
            mosquitto.freeze(False)
        await wait_connected_or_fail(bridge)
        await wait_until(lambda: bridge.pending_statuses == 0)  # acknowledged by the broker
        assert daemon.connection[:2] == [True, False]


async def test_no_connack_is_a_clear_warning_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    async with silent_broker() as (port, accepted):
        settings = MqttSettings(
            ARM, host="127.0.0.1", port=port, timeout_s=0.2, reconnect_min_s=0.05,
            reconnect_max_s=0.1,
        )  # fmt: skip
        bridge = make_bridge(settings, Daemon())
        async with running(bridge, wait_connected=False):
            await wait_until(lambda: len(accepted) >= 3)  # each attempt ends, the next one comes
            assert not bridge.connected.is_set()
    message = f"cannot connect to MQTT broker 127.0.0.1:{port}: no CONNACK within 0.2 s"
    assert message in caplog.text


async def test_statuses_queued_during_an_outage_reach_the_dashboard(tmp_path: Path) -> None:
    """The dashboard keeps a persistent session, so it sees what the bridge sends after the
    restart whichever of the two reconnects first."""
    with MosquittoBroker(tmp_path / "broker", persistence=True) as broker:
        async with probe(broker, TOPICS.goal_status, client_id="dashboard", clean_session=False):
            pass  # the subscription lives on in the broker
        bridge = make_bridge(settings_for(broker), Daemon())
        async with running(bridge):
            bridge.publish_status(StatusUpdate("before", GoalStatus.ACCEPTED))
            await wait_until(lambda: bridge.pending_statuses == 0)
            broker.stop()  # saves the dashboard's session
            await wait_until(lambda: not bridge.connected.is_set())
            for i in range(3):
                bridge.publish_status(StatusUpdate(f"during{i}", GoalStatus.PREEMPTED))
            broker.start()
            await wait_connected_or_fail(bridge)
            await wait_until(lambda: bridge.pending_statuses == 0)
            async with probe(
                broker, TOPICS.goal_status, client_id="dashboard", clean_session=False
            ) as dashboard:
                await dashboard.wait_for(lambda ms: len(ms) == 4)
                ids = [m.json()["id"] for m in dashboard.messages]
        assert ids == ["before", "during0", "during1", "during2"]


def test_reconnect_delay_grows_exponentially_with_jitter_within_bounds() -> None:
    rng = random.Random(1)
    for attempt in range(20):
        ceiling = min(30.0, 0.5 * 2**attempt)
        for _ in range(50):
            delay = reconnect_delay_s(attempt, 0.5, 30.0, rng)
            assert max(0.5, ceiling / 2) <= delay <= ceiling
    delays = {reconnect_delay_s(10, 0.5, 30.0, rng) for _ in range(20)}
    assert len(delays) > 1  # jittered


# -- credentials and TLS --------------------------------------------------------------------------


async def test_wrong_password_is_a_clear_error_and_retried(
    tmp_path: Path,
    mosquitto_factory: Callable[..., MosquittoBroker],
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "correct horse battery staple"
    passwords = make_password_file(tmp_path / "passwd", {"armd": secret})
    broker = mosquitto_factory(password_file=passwords)
    wrong = settings_for(broker, username="armd", password=SecretStr("wrong-password"))
    bridge = make_bridge(wrong, Daemon())
    async with running(bridge, wait_connected=False):
        await wait_until(lambda: broker.log().count("not authorised") >= 3)  # retries
        assert not bridge.connected.is_set()
    errors = [
        r for r in caplog.records if r.name == "armd.api.bridge" and r.levelno == logging.ERROR
    ]
    assert len(errors) == 1, [r.getMessage() for r in errors]  # rate-limited
    message = errors[0].getMessage()
    assert f"{broker.host}:{broker.port}" in message
    assert "'armd'" in message
    assert "password" in message
    assert "wrong-password" not in caplog.text
    assert "wrong-password" not in repr(wrong)

    right = settings_for(broker, username="armd", password=secret)
    async with running(make_bridge(right, Daemon())):
        pass
    assert secret not in caplog.text


@pytest.mark.parametrize("client_certificate", [False, True])
async def test_tls(
    tmp_path: Path,
    mosquitto_factory: Callable[..., MosquittoBroker],
    client_certificate: bool,
) -> None:
    tls = make_tls_files(tmp_path / "tls")
    broker = mosquitto_factory(tls=tls, require_client_certificate=client_certificate)
    assert broker.tls_port is not None
    settings = settings_for(
        broker,
        port=broker.tls_port,
        tls_ca_file=tls.ca_cert,
        tls_cert_file=tls.client_cert if client_certificate else None,
        tls_key_file=tls.client_key if client_certificate else None,
    )
    bridge = make_bridge(settings, Daemon())
    async with probe(broker) as dashboard, running(bridge):
        await dashboard.wait_message(TOPICS.availability, b"online")
        bridge.publish_status(StatusUpdate("tls", GoalStatus.ACCEPTED))
        await dashboard.wait_message(TOPICS.goal_status)


async def test_tls_without_the_required_client_certificate_is_refused_and_retried(
    tmp_path: Path,
    mosquitto_factory: Callable[..., MosquittoBroker],
    caplog: pytest.LogCaptureFixture,
) -> None:
    tls = make_tls_files(tmp_path / "tls")
    broker = mosquitto_factory(tls=tls, require_client_certificate=True)
    # The broker's TLS alert ends the attempt at once, with its reason: no wait for a CONNACK.
    # TLS 1.3 sends it after the client's side of the handshake is done: an attempt reads the
    # alert or, when the broker's close overtakes it, an EOF; either is retried with backoff.
    settings = settings_for(broker, port=broker.tls_port, tls_ca_file=tls.ca_cert, timeout_s=60.0)
    bridge = make_bridge(settings, Daemon())
    async with running(bridge, wait_connected=False):
        await wait_until(lambda: "certificate required" in caplog.text)
        assert not bridge.connected.is_set()
    warnings = [r.getMessage() for r in caplog.records if r.name == "armd.api.bridge"]
    attempts = [message for message in warnings if "cannot connect" in message]
    refused = f"cannot connect to MQTT broker {broker.host}:{broker.tls_port}"
    assert attempts, warnings
    assert all(refused in message for message in attempts), attempts
    assert any("certificate required" in message for message in attempts), attempts


def test_settings_validate_the_arm_name() -> None:
    for bad in ("", "a/b", "a+", "#"):
        with pytest.raises(ConfigError, match="arm name"):
            MqttSettings(bad)
    assert MqttSettings("arm1").uses_tls is False
    assert MqttSettings("arm1", tls_ca_file=Path("ca.crt")).uses_tls is True
