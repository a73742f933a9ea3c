"""Security: the daemon against Mosquitto configured as in production — passwords, the ACL of
config/mosquitto/armd.acl, TLS — and what unauthorised clients and wrong credentials get.

The production broker config (config/mosquitto/mosquitto.conf) and ACL are loaded as they are
(tests/system/production.py replaces only the paths and the ports). Passwords are
random per test so that a leak into a log or a message is unambiguous. The daemon logs at DEBUG: no
level may show a secret.
"""

from __future__ import annotations

import contextlib
import json
import queue
import secrets
import signal
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from tests.broker import HOST, MosquittoBroker, make_password_file, make_tls_files
from tests.system.helpers import (
    ArmdProcess,
    Rig,
    armd_command,
    attach_diagnostics,
    start_rig,
    write_config,
)
from tests.system.probe import ARM, WAIT_S, at_rest, joint_positions
from tests.system.production import ACL, ProductionBroker, password_file

OPERATOR, DASHBOARD = "operator", "dashboard"  # the accounts of armd.acl; the daemon's is ARM
RECONNECT = {"reconnect_min_s": 0.2, "reconnect_max_s": 1.0}  # s: quick retries for the test
# The daemon's command line with ``--log-level DEBUG`` before the subcommand.
DEBUG_LOGGING = (
    "sh",
    "-c",
    'python=$1 m=$2 module=$3; shift 3; exec "$python" "$m" "$module" --log-level DEBUG "$@"',
    "armd-debug",
)
STILL_TOLERANCE = 1e-4  # rad


@pytest.fixture
def cleanup() -> Iterator[contextlib.ExitStack]:
    """Callbacks run at teardown, last registered first."""
    with contextlib.ExitStack() as stack:
        yield stack


@pytest.fixture
def passwords() -> dict[str, str]:
    """A unique random password per account of armd.acl."""
    return {user: secrets.token_urlsafe(24) for user in (ARM, OPERATOR, DASHBOARD)}


def daemon_mqtt(tmp_path: Path, password: str, tls: dict[str, str] | None) -> dict[str, Any]:
    """Config overrides: log in as the arm's account (armd.acl), with TLS when `tls` is given."""
    mqtt_options = {
        "username": ARM,
        "password_file": str(password_file(tmp_path / "secrets", password)),
        **RECONNECT,
    }
    return {"mqtt": {**mqtt_options, "tls": tls} if tls is not None else mqtt_options}


# -- other clients ------------------------------------------------------------------------------


class Client:
    """A paho client that records the outcome of its connection attempt."""

    def __init__(
        self,
        port: int,
        username: str | None = None,
        password: str | None = None,
        ca_file: Path | None = None,
    ) -> None:
        self.outcome: queue.Queue[str] = queue.Queue()
        self.received: list[tuple[str, bytes]] = []  # (topic, payload) of subscriptions
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=f"security-test-{uuid.uuid4().hex[:8]}"
        )
        self.client.reconnect_delay_set(min_delay=60, max_delay=120)  # one attempt is enough
        if username is not None:
            self.client.username_pw_set(username, password)
        if ca_file is not None:
            self.client.tls_set(ca_certs=str(ca_file))
        self.client.on_connect = lambda c, u, flags, code, p: self.outcome.put(str(code))
        self.client.on_disconnect = lambda c, u, flags, code, p: self.outcome.put(f"lost: {code}")
        self.client.on_message = lambda c, u, m: self.received.append((m.topic, bytes(m.payload)))
        try:
            self.client.connect(HOST, port)
        except (OSError, ssl.SSLError) as exc:  # e.g. a TLS handshake refused at once
            self.outcome.put(f"refused: {exc}")
        self.client.loop_start()

    def result(self) -> str:
        """ "Success", or why the connection failed."""
        try:
            return self.outcome.get(timeout=WAIT_S)
        except queue.Empty:
            raise AssertionError(f"no outcome of the connection within {WAIT_S:g} s") from None

    def subscribe(self, topic: str) -> None:
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *args: subscribed.set()
        self.client.subscribe(topic, qos=1)
        assert subscribed.wait(WAIT_S), f"no SUBACK for {topic}"

    def publish(self, topic: str, payload: str) -> None:
        info = self.client.publish(topic, payload, qos=1)
        info.wait_for_publish(WAIT_S)
        assert info.is_published(), f"the broker did not acknowledge the message on {topic}"

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def assert_goals_not_delivered(rig: Rig, goal_ids: list[str]) -> None:
    """The broker dropped these goals: after a goal of the operator, sent later and served, the
    arm has not moved, no status names them and nobody received them on ``goal``."""
    before = joint_positions(rig.probe.wait_state(at_rest, what="the arm at rest"))
    sentinel = f"sentinel-{uuid.uuid4().hex[:8]}"
    assert rig.probe.run_goal({"id": sentinel, "type": "stop"})["status"] == "succeeded"
    since = rig.probe.mark()
    rig.probe.wait_for(lambda: len(rig.probe.on("state", since)) >= 10, what="telemetry")
    for state in rig.probe.states(since):
        moved = max(abs(p - before[name]) for name, p in joint_positions(state).items())
        assert moved < STILL_TOLERANCE, f"the arm moved by {moved:.6f} rad: {state}"
        assert state["mode"] == "holding", state
    for goal_id in goal_ids:
        assert rig.probe.statuses(goal_id) == [], goal_id
        assert not any(goal_id in m.text for m in rig.probe.on("goal")), goal_id


def assert_secret_kept(rig: Rig, password: str, capture: Client | None = None) -> None:
    """Stop the daemon (its shutdown logs count too); the password is in none of its output and
    none of the messages the probe (armd/<arm>/#) or `capture` received."""
    rig.daemon.signal(signal.SIGTERM)
    assert rig.daemon.wait() == 0, rig.daemon.output()
    output = rig.daemon.output()
    assert "DEBUG" in output, "the daemon did not log at DEBUG"
    assert password not in output, "the MQTT password appears in the daemon's output"
    messages = [(m.topic, m.payload) for m in rig.probe.messages]
    messages += capture.received if capture is not None else []
    leaked = [topic for topic, payload in messages if password.encode() in payload]
    assert not leaked, f"the MQTT password appears in messages on {leaked}"
    assert rig.probe.messages, "nothing was captured"


# -- tests --------------------------------------------------------------------------------------


def test_production_broker_serves_the_daemon_over_tls_and_keeps_intruders_out(
    tmp_path: Path,
    passwords: dict[str, str],
    cleanup: contextlib.ExitStack,
    request: pytest.FixtureRequest,
) -> None:
    tls = make_tls_files(tmp_path / "tls")
    accounts = make_password_file(tmp_path / "mosquitto" / "passwd", passwords)
    broker = ProductionBroker(tmp_path / "mosquitto", accounts, tls)
    broker.start()
    cleanup.callback(broker.stop)
    capture = Client(broker.port, OPERATOR, passwords[OPERATOR])  # everything under armd/
    assert capture.result() == "Success"
    capture.subscribe("armd/#")
    cleanup.callback(capture.close)
    rig = start_rig(
        tmp_path / "arm",
        broker,
        overrides=daemon_mqtt(tmp_path, passwords[ARM], {"ca_file": str(tls.ca_cert)}),
        wrapper=DEBUG_LOGGING,
        probe_options={"username": OPERATOR, "password": passwords[OPERATOR]},
        daemon_port=broker.tls_port,
    )
    cleanup.callback(rig.close)
    attach_diagnostics(request, rig)
    assert f"online at {HOST}:{broker.tls_port} as armd-{ARM}" in rig.daemon.output(), (
        "the daemon is not on the TLS listener"
    )

    # The operator commands the arm.
    current = joint_positions(rig.probe.latest_state())["wrist_3_joint"]
    goal = {"id": "operator-goal", "type": "joints", "positions": {"wrist_3_joint": current + 0.3}}
    assert rig.probe.run_goal(goal)["status"] == "succeeded"

    # Anonymous clients are turned away on both listeners, and so is a wrong password.
    for port, ca_file in ((broker.port, None), (broker.tls_port, tls.ca_cert)):
        anonymous = Client(port, ca_file=ca_file)
        assert anonymous.result() == "Not authorized", port
        anonymous.close()
    guess = Client(broker.port, OPERATOR, passwords[DASHBOARD])
    assert guess.result() == "Not authorized"
    guess.close()

    # Logged-in users without goal rights: the broker drops what they publish on goal and estop.
    intruders = []
    for user in (DASHBOARD, ARM):  # the daemon's own account may not command its arm either
        client = Client(broker.port, user, passwords[user])
        assert client.result() == "Success", user
        goal_id = f"intruder-{user}"
        goal = {"id": goal_id, "type": "joints", "positions": {"wrist_3_joint": current - 0.5}}
        client.publish(f"armd/{ARM}/goal", json.dumps(goal))
        client.publish(f"armd/{ARM}/estop", json.dumps({"engage": True}))
        client.close()
        intruders.append(goal_id)
    assert_goals_not_delivered(rig, intruders)
    assert rig.probe.on("estop") == [], "an e-stop command got through"
    assert {t for t, _ in capture.received} >= {f"armd/{ARM}/state", f"armd/{ARM}/goal/status"}

    assert_secret_kept(rig, passwords[ARM], capture)


def test_daemon_presents_its_client_certificate_when_the_listener_requires_one(
    tmp_path: Path,
    passwords: dict[str, str],
    cleanup: contextlib.ExitStack,
    request: pytest.FixtureRequest,
) -> None:
    tls = make_tls_files(tmp_path / "tls")
    accounts = make_password_file(tmp_path / "mosquitto" / "passwd", passwords)
    broker = MosquittoBroker(
        tmp_path / "mosquitto",
        password_file=accounts,
        tls=tls,
        require_client_certificate=True,
        extra_config=[f"acl_file {ACL}"],
    )
    broker.start()
    cleanup.callback(broker.stop)
    assert broker.tls_port is not None

    # Without a certificate, even the right password does not get in.
    uncertified = Client(broker.tls_port, OPERATOR, passwords[OPERATOR], ca_file=tls.ca_cert)
    outcome = uncertified.result()  # TLS 1.3: the server's refusal comes after the handshake
    assert outcome.startswith(("lost", "refused")), outcome
    uncertified.close()

    files = {
        "ca_file": str(tls.ca_cert),
        "cert_file": str(tls.client_cert),
        "key_file": str(tls.client_key),
    }
    rig = start_rig(
        tmp_path / "arm",
        broker,
        overrides=daemon_mqtt(tmp_path, passwords[ARM], files),
        wrapper=DEBUG_LOGGING,
        probe_options={"username": OPERATOR, "password": passwords[OPERATOR]},
        daemon_port=broker.tls_port,
    )
    cleanup.callback(rig.close)
    attach_diagnostics(request, rig)
    current = joint_positions(rig.probe.latest_state())["wrist_3_joint"]
    goal = {"id": "certified", "type": "joints", "positions": {"wrist_3_joint": current - 0.3}}
    assert rig.probe.run_goal(goal)["status"] == "succeeded"
    assert_secret_kept(rig, passwords[ARM])


def wait_until(condition: Callable[[], bool], what: str, details: Callable[[], str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {WAIT_S:g} s waiting for {what}:\n{details()}")
        time.sleep(0.05)


def test_wrong_credentials_are_reported_and_retried_without_revealing_the_password(
    tmp_path: Path, passwords: dict[str, str], cleanup: contextlib.ExitStack
) -> None:
    accounts = make_password_file(tmp_path / "mosquitto" / "passwd", passwords)
    broker = MosquittoBroker(tmp_path / "mosquitto", password_file=accounts)
    broker.start()
    cleanup.callback(broker.stop)
    wrong = secrets.token_urlsafe(24)
    config = write_config(tmp_path / "arm", broker.port, daemon_mqtt(tmp_path, wrong, None))
    argv = [*DEBUG_LOGGING, *armd_command("run", "--config", config)]
    daemon = ArmdProcess(config, tmp_path / "arm" / "armd.out", argv=argv).start()
    cleanup.callback(daemon.stop)

    def details() -> str:
        return f"--- armd\n{daemon.output()}\n--- mosquitto\n{broker.log()[-4000:]}"

    # Refused, again and again (with backoff), while the daemon stays up.
    wait_until(
        lambda: broker.log().count("disconnected, not authorised") >= 3,
        "three refused connection attempts",
        details,
    )
    assert daemon.running, details()
    output = daemon.output()
    assert f"MQTT broker {HOST}:{broker.port} refused the credentials of user '{ARM}'" in output, (
        details()
    )
    assert "Not authorized" in output, details()
    assert "ready: arm" in output, "the arm is served (held) while the broker refuses the daemon"

    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0, details()
    assert wrong not in daemon.output(), "the MQTT password appears in the daemon's output"
    assert "Traceback" not in daemon.output(), details()
