"""Every Mosquitto listener the project opens or documents listens where its configuration says,
read back from the broker's sockets (/proc, tests/system/listening.py) rather than trusted from
its configuration: Mosquitto 2.0.11 (Debian 12) binds a WebSockets listener to every address
whatever address its ``listener`` line gives, unless the listener also says ``socket_domain ipv4``
(docs/dashboard.md). An anonymous broker that commands the arm must not be reachable from the
network because of it.

- `make run`'s brokers (scripts/ensure-mosquitto.sh --websockets): the one it starts when no
  broker answers yet, and the one it bridges to a broker already running; every socket of each
  is on 127.0.0.1, the page is served, and MQTT over WebSockets reaches the MQTT port's clients
  (through the bridge) and back; a broker it started that listens beyond loopback is stopped
  (the script fails), an older one there is named in a warning;
- the tests' own brokers (tests/broker.py);
- every Mosquitto configuration shown in the documentation (README.md, docs/, examples/) or
  shipped in config/mosquitto/ (also its commented-out lines, ``#listener ...``, there for a user
  to enable): each listener that names an address is run (on a free port) and binds that address
  and no other. Listeners without an address are meant for other machines
  (TLS) and are not opened here: nothing in the tests listens beyond loopback.

``armd dashboard`` and Node-RED are checked the same way by their own tests (test_dashboard.py,
test_node_red.py).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import paho.mqtt.client as mqtt
import pytest

from tests.broker import HOST, MosquittoBroker, free_port, free_ports, make_tls_files
from tests.system.helpers import ROOT
from tests.system.listening import Endpoint, exposed, listening

ENSURE = ROOT / "scripts" / "ensure-mosquitto.sh"
PAGE = b"<!doctype html><title>armd</title>"


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _stop(pid: int) -> None:
    """SIGTERM to a broker the script daemonised (not a child of ours: wait until it is gone)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10.0
    while not _gone(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.05)


def _ensure(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    """``ensure-mosquitto.sh --websockets ARGS``, its folders in `tmp_path` (TMPDIR): how it
    ended, and the pids of the brokers it started (from their pid files)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp_path), **(env or {})}
    argv = [ENSURE, "--websockets", *args]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    pids = [int(path.read_text(encoding="ascii")) for path in tmp_path.glob("*/mosquitto.pid")]
    return done, pids


@contextlib.contextmanager
def _ensured(tmp_path: Path, *args: str) -> Iterator[int]:
    """`_ensure`, which must succeed and start one broker: its pid, stopped on exit."""
    done, pids = _ensure(tmp_path, *args)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(pids) == 1, (pids, done.stderr)
        yield pids[0]
    finally:
        for pid in pids:
            _stop(pid)


def _ss_showing_every_address(directory: Path, port: int) -> dict[str, str]:
    """An environment whose ``ss`` shows `port` listening on every address (``*:port``, what
    Mosquitto 2.0.11 does without socket_domain ipv4), whatever really listens: the script's
    answer to that, without opening anything beyond loopback."""
    directory.mkdir(parents=True)
    ss = directory / "ss"
    ss.write_text(f"#!/bin/sh\necho 'LISTEN 0 4096 *:{port} *:*'\n", encoding="ascii")
    ss.chmod(0o755)
    return {"PATH": f"{directory}{os.pathsep}{os.environ['PATH']}"}


def _shown(endpoints: list[Endpoint]) -> list[str]:
    return [str(endpoint) for endpoint in endpoints]


def _client(port: int, transport: Literal["tcp", "websockets"]) -> mqtt.Client:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, transport=transport)
    client.connect(HOST, port)
    client.loop_start()
    return client


def _carried(tcp_port: int, ws_port: int, timeout_s: float = 30.0) -> None:
    """A message published on the MQTT port reaches a client on the WebSockets port (a browser's
    way in; through the bridge when there is one), and one published there comes back: sent
    again every half second until it arrives (a bridge connects within a few seconds)."""
    tcp, ws = _client(tcp_port, "tcp"), _client(ws_port, "websockets")
    try:
        for sender, receiver, topic in ((tcp, ws, "armd/test/in"), (ws, tcp, "armd/test/out")):
            arrived = threading.Event()
            receiver.on_message = lambda _client, _data, _message, done=arrived: done.set()
            receiver.subscribe(topic, qos=1)
            deadline = time.monotonic() + timeout_s
            while True:
                sender.publish(topic, b"1", qos=1)
                if arrived.wait(0.5):
                    break
                assert time.monotonic() < deadline, f"{topic}: not carried within {timeout_s:g} s"
    finally:
        for client in (tcp, ws):
            client.disconnect()
            client.loop_stop()


def _page(port: int) -> bytes:
    with urllib.request.urlopen(f"http://{HOST}:{port}/", timeout=10) as response:
        body: bytes = response.read()
        return body


@pytest.fixture
def http_dir(tmp_path: Path) -> Path:
    """A stand-in for the dashboard's build (dashboard/dist)."""
    directory = tmp_path / "dist"
    directory.mkdir()
    (directory / "index.html").write_bytes(PAGE)
    return directory


def test_make_runs_broker_listens_on_loopback_only(tmp_path: Path, http_dir: Path) -> None:
    """No broker on the MQTT port yet: the script starts one with MQTT and WebSockets (the page
    from http_dir) on 127.0.0.1, and nothing else."""
    port, ws_port = free_ports(2)
    with _ensured(tmp_path, HOST, str(port), str(ws_port), str(http_dir)) as pid:
        assert _shown(listening(pid)) == [f"tcp {HOST}:{p}" for p in sorted((port, ws_port))]
        assert _page(ws_port) == PAGE
        _carried(port, ws_port)


def test_make_runs_bridged_broker_listens_on_loopback_only(tmp_path: Path, http_dir: Path) -> None:
    """A broker already answers (the system's): the script's second broker, bridged to it, has
    its WebSockets listener on 127.0.0.1 and only a Unix socket besides."""
    ws_port = free_port()
    with MosquittoBroker(tmp_path / "system") as system:
        args = (system.host, str(system.port), str(ws_port), str(http_dir))
        with _ensured(tmp_path / "ensure", *args) as pid:
            assert _shown(listening(pid)) == [f"tcp {HOST}:{ws_port}"]
            assert _page(ws_port) == PAGE
            _carried(system.port, ws_port)


def test_make_run_stops_its_broker_when_it_listens_beyond_loopback(tmp_path: Path) -> None:
    """Fail closed: a Mosquitto that ignored socket_domain would leave an anonymous broker open
    to the network; the script stops the one it started and fails."""
    port, ws_port = free_ports(2)
    env = _ss_showing_every_address(tmp_path / "bin", ws_port)
    done, pids = _ensure(tmp_path / "ensure", HOST, str(port), str(ws_port), env=env)
    try:
        assert done.returncode == 1, done.stdout + done.stderr
        assert "(not only 127.0.0.1): stopped" in done.stderr, done.stderr
        assert len(list((tmp_path / "ensure").glob("*/mosquitto.conf"))) == 1, done.stderr
        # Mosquitto removes its pid file as it exits: read after the script, it is gone already
        # or names a broker on its way out.
        assert len(pids) <= 1, done.stderr
        deadline = time.monotonic() + 10.0
        while not all(map(_gone, pids)):
            assert time.monotonic() < deadline, "the broker was not stopped"
            time.sleep(0.05)
    finally:
        for pid in pids:
            _stop(pid)


def test_make_run_warns_of_an_older_broker_listening_beyond_loopback(tmp_path: Path) -> None:
    """A broker of an older `make run` (every address) already on WS_PORT: the script starts
    nothing, says so, and goes on."""
    with MosquittoBroker(tmp_path / "older", websockets=True) as older:
        assert older.websockets_port is not None
        env = _ss_showing_every_address(tmp_path / "bin", older.websockets_port)
        args = (older.host, str(older.port), str(older.websockets_port))
        done, pids = _ensure(tmp_path / "ensure", *args, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert pids == []
        assert f"WARNING: port {older.websockets_port} " in done.stderr, done.stderr
        assert "reachable from other machines" in done.stderr, done.stderr


def test_the_tests_brokers_listen_on_loopback_only(tmp_path: Path, http_dir: Path) -> None:
    tls = make_tls_files(tmp_path / "tls")
    broker = MosquittoBroker(tmp_path / "broker", tls=tls, websockets=True, http_dir=http_dir)
    with broker:
        assert broker.pid is not None
        ports = sorted(p for p in (broker.port, broker.tls_port, broker.websockets_port) if p)
        assert _shown(listening(broker.pid)) == [f"tcp {HOST}:{p}" for p in ports]


# -- the configurations of the documentation and config/mosquitto/ ---------------------------------

DOCUMENTS = ["README.md", "docs/**/*.md", "examples/*/*.md", "config/mosquitto/*.md"]
CONFIGS = ["config/mosquitto/*.conf"]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
LISTENER = re.compile(r"^listener\s+(\d+)(?:\s+(\S+))?\s*$")


@dataclass(frozen=True)
class Documented:
    """One Mosquitto configuration of the documentation: where, and its listeners' sections
    (the ``listener`` line and the lines up to the next listener or bridge)."""

    where: str
    sections: tuple[tuple[str, ...], ...]


def _sections(text: str) -> list[tuple[str, ...]]:
    sections: list[list[str]] = []
    current: list[str] | None = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if LISTENER.match(line):
            current = [line]
            sections.append(current)
        elif line.startswith(("connection ", "include_dir ")):  # a bridge, other files
            current = None
        elif current is not None:
            current.append(line)
    return [tuple(section) for section in sections]


def _commented_out(text: str) -> str:
    """The configuration lines a file has commented out (``#option value``; prose has a space
    after its ``#``)."""
    return "\n".join(line[1:] for line in text.splitlines() if re.match(r"#[a-z]", line))


def _documented() -> list[Documented]:
    found = []
    for pattern in DOCUMENTS:
        for path in sorted(ROOT.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            for block in FENCE.finditer(text):
                sections = _sections(block.group(1))
                if sections:
                    line = text.count("\n", 0, block.start()) + 1
                    where = f"{path.relative_to(ROOT)}:{line}"
                    found.append(Documented(where, tuple(sections)))
    for pattern in CONFIGS:
        for path in sorted(ROOT.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            name = str(path.relative_to(ROOT))
            for where, lines in ((name, text), (f"{name} (commented out)", _commented_out(text))):
                sections = _sections(lines)
                if sections:
                    found.append(Documented(where, tuple(sections)))
    return found


DOCUMENTED = _documented()


def test_the_documentation_shows_listeners() -> None:
    """The parsing above finds what it must check (a change of layout would skip it silently)."""
    wheres = [documented.where for documented in DOCUMENTED]
    assert any(where.startswith("docs/dashboard.md:") for where in wheres), wheres
    assert "config/mosquitto/mosquitto.conf" in wheres, wheres
    assert "config/mosquitto/mosquitto.conf (commented out)" in wheres, wheres
    websockets = [s for d in DOCUMENTED for s in d.sections if "protocol websockets" in s]
    assert len(websockets) >= 3, DOCUMENTED


@pytest.mark.parametrize("documented", DOCUMENTED, ids=[d.where for d in DOCUMENTED])
def test_each_documented_listener_binds_the_address_it_names(
    documented: Documented, tmp_path: Path, http_dir: Path
) -> None:
    tls = None
    wanted: list[Endpoint] = []
    config: list[str] = []
    for section in documented.sections:
        match = LISTENER.match(section[0])
        assert match is not None
        address = match.group(2)
        if address is None:  # every address: for other machines, not opened here
            continue
        if match.group(1) == "0":  # a Unix socket: nothing on TCP (checked below by exposed)
            config.append(f"listener 0 {tmp_path / f'{len(config)}.sock'}")
        else:
            port = free_port()
            config.append(f"listener {port} {address}")
            wanted.append(Endpoint("tcp", address, port))
        for line in section[1:]:
            option, _, value = line.partition(" ")
            if option == "http_dir":
                value = str(http_dir)
            elif option in ("cafile", "certfile", "keyfile"):
                tls = tls or make_tls_files(tmp_path / "tls")
                files = {"cafile": tls.ca_cert, "certfile": tls.server_cert}
                value = str(files.get(option, tls.server_key))
            else:
                assert not value.startswith("/"), f"{line!r}: a path the test does not replace"
            config.append(f"{option} {value}")
    if not config:
        pytest.skip(f"{documented.where}: no listener on a given address")
    # The broker's own listener (MQTT on 127.0.0.1, opened last) besides: Mosquitto 2.0.11 does
    # not start with WebSockets listeners alone.
    with MosquittoBroker(tmp_path / "broker", extra_config=config) as broker:
        for endpoint in wanted:
            _wait_listening(endpoint, broker)
        assert broker.pid is not None
        found = listening(broker.pid)
        assert exposed(found) == [], f"{documented.where}: {config}"
        for endpoint in wanted:
            on_port = [str(e) for e in found if e.port == endpoint.port]
            assert on_port == [str(endpoint)], f"{documented.where}: {config}"


def _wait_listening(endpoint: Endpoint, broker: MosquittoBroker) -> None:
    deadline = time.monotonic() + 10.0
    while True:
        try:
            with socket.create_connection((endpoint.address, endpoint.port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"nothing listens on {endpoint}:\n{broker.log()}")
            time.sleep(0.05)
