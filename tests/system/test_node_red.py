"""The Node-RED example flow (examples/node-red/flow.json) against the daemon on the simulated arm.

Node-RED is the version pinned by examples/node-red/package-lock.json, installed by
scripts/ensure-node-red.sh (`make test` runs it; this module runs it once per session when the
install is missing or stale). It runs headless with the shipped settings.js (127.0.0.1 only) and
the shipped flow, whose broker node alone is pointed at the test's Mosquitto, configured as in
production (config/mosquitto/, tests/system/production.py): the flow logs in as the ACL's
operator, its password given as the README says. The test presses the flow's buttons through
Node-RED's admin API (``POST /inject/<node id>``, what a click in the editor does) and reads what
the editor would show (node statuses, debug messages) from its comms WebSocket
(tests/system/node_red_comms.js); the arm's side is read on MQTT by the probe.

Skipped, saying so, only where Node.js or npm are not installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker import HOST, MosquittoBroker, free_port, make_tls_files
from tests.system.helpers import ROOT, Rig, attach_diagnostics
from tests.system.listening import exposed, listening
from tests.system.probe import ARM, WAIT_S, at_rest, joint_positions
from tests.system.production import OPERATOR, secured_arm

EXAMPLE = ROOT / "examples" / "node-red"
FLOW = EXAMPLE / "flow.json"
SETTINGS = EXAMPLE / "settings.js"
LOCK = EXAMPLE / "package-lock.json"
MODULES = EXAMPLE / "node_modules"
STAMP = MODULES / ".package-lock.sha256"  # written by the install script
INSTALL = ROOT / "scripts" / "ensure-node-red.sh"
COMMS = Path(__file__).with_name("node_red_comms.js")
START_S = 60.0  # Node-RED starts in 2-5 s; generous for a loaded machine
TOLERANCE = 1e-3  # rad: the arm at its target (the daemon's own tolerance is tighter)
CONNECTED = "node-red:common.status.connected"  # an MQTT node's status text once connected

# The flow's inject nodes the test presses, by id.
JOINTS_GOAL, HOME_GOAL, STOP, ESTOP, RESET = (
    "armd-inject-joints-a",
    "armd-inject-joints-home",
    "armd-inject-stop",
    "armd-inject-estop",
    "armd-inject-reset",
)
JOINTS_TARGET = {"shoulder_pan_joint": 0.5, "elbow_joint": 1.2}  # what JOINTS_GOAL sends


@pytest.fixture(scope="session")
def node_red() -> Path:
    """Node-RED's start script, installed with npm ci if the install is missing or stale."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.skip(
            f"{' and '.join(missing)} not installed: `make test` installs Node.js and Node-RED "
            "(scripts/ensure-node-red.sh)"
        )
    wanted = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    if not STAMP.exists() or STAMP.read_text(encoding="ascii").strip() != wanted:
        done = subprocess.run([INSTALL], capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{INSTALL.name} failed:\n{done.stdout}\n{done.stderr}"
    script = MODULES / "node-red" / "red.js"
    assert script.exists(), f"{INSTALL.name} did not install Node-RED into {MODULES}"
    return script


def flow_for(broker: MosquittoBroker, user_dir: Path) -> Path:
    """The shipped flow with its broker node pointed at `broker` and logged in as the operator
    the way the README says (the password from ``${ARMD_MQTT_PASSWORD}``, in the userDir's
    credentials file); nothing else changes. Returns the flow's path."""
    nodes: list[dict[str, Any]] = json.loads(FLOW.read_text(encoding="utf-8"))
    (config,) = [node for node in nodes if node["type"] == "mqtt-broker"]
    assert (config["broker"], config["port"]) == ("127.0.0.1", "1883"), (
        "the example's broker is documented as 127.0.0.1:1883"
    )
    config["broker"], config["port"] = broker.host, str(broker.port)
    user_dir.mkdir(parents=True, exist_ok=True)
    path = user_dir / "flow.json"
    path.write_text(json.dumps(nodes, indent=4), encoding="utf-8")
    login = {config["id"]: {"user": OPERATOR, "password": "${ARMD_MQTT_PASSWORD}"}}
    (user_dir / "flow_cred.json").write_text(json.dumps(login), encoding="utf-8")
    return path


class NodeRed:
    """Node-RED running a flow headless, and the editor's view of it (statuses, debug messages)
    as the events of its comms WebSocket."""

    def __init__(
        self, script: Path, flow: Path, directory: Path, env: dict[str, str] | None = None
    ) -> None:
        self.port = free_port()
        self.log_path = directory / "node-red.log"
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        directory.mkdir(parents=True, exist_ok=True)
        argv = ["node", str(script), "--settings", str(SETTINGS), "--userDir", str(directory)]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [*argv, "--port", str(self.port), str(flow)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=directory,
                env={**os.environ, **(env or {})},
            )
        self.comms: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """Wait until the flow runs and its broker node is connected, then watch the editor."""
        self.wait(lambda: "Connected to broker" in self.log(), START_S, "connected to the broker")
        url = f"ws://{HOST}:{self.port}/comms"
        self.comms = subprocess.Popen(
            ["node", str(COMMS), str(MODULES), url], stdout=subprocess.PIPE, text=True
        )
        threading.Thread(target=self._read_comms, args=(self.comms,), daemon=True).start()
        self.wait(lambda: any(e["topic"] == "open" for e in self.events), WAIT_S, "the comms")

    def _read_comms(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            with self._changed:
                self.events.append(json.loads(line))
                self._changed.notify_all()

    def wait(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not condition():
                if self.process.poll() is not None:
                    raise AssertionError(
                        f"Node-RED exited ({self.process.returncode}):\n{self.log()}"
                    )
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"Node-RED: no {what} within {timeout_s:g} s:\n{self.log()}\n"
                        f"editor events:\n{self.summary()}"
                    )
                self._changed.wait(0.1)

    def inject(self, node_id: str) -> None:
        """Press an inject node's button, as the editor does."""
        url = f"http://{HOST}:{self.port}/inject/{node_id}"
        with urllib.request.urlopen(urllib.request.Request(url, b"", method="POST")) as reply:
            assert reply.status == 200, f"POST {url}: {reply.status}"

    def status(self, node_id: str) -> str | None:
        """The latest status text under a node."""
        texts = [e["data"].get("text") for e in self.events if e["topic"] == f"status/{node_id}"]
        return texts[-1] if texts else None

    def wait_status(self, node_id: str, text: str) -> None:
        self.wait(lambda: self.status(node_id) == text, WAIT_S, f"status {text!r} on {node_id}")

    def debug(self, node_id: str) -> list[Any]:
        """The messages a debug node showed in the editor's debug sidebar (JSON objects)."""
        shown = [e["data"] for e in self.events if e["topic"] == "debug"]
        return [
            json.loads(d["msg"]) for d in shown if d["id"] == node_id and d["format"] == "Object"
        ]

    def wait_debug(self, node_id: str, message: Any) -> None:
        self.wait(lambda: message in self.debug(node_id), WAIT_S, f"{message} in the sidebar")

    def summary(self) -> str:
        latest = {e["topic"]: e.get("data") for e in self.events if e["topic"] != "debug"}
        return "\n".join(f"  {topic}: {data}" for topic, data in latest.items()) or "  (none)"

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        for process in (self.comms, self.process):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(10.0)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10.0)


@pytest.fixture
def flow(
    node_red: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[Rig, NodeRed]]:
    """The daemon on the simulated arm behind a broker configured for production, and Node-RED
    running the example flow on that broker as the operator."""
    with secured_arm(tmp_path / "arm", ARM, make_tls_files(tmp_path / "tls")) as arm:
        attach_diagnostics(request, arm.rig)
        password = arm.passwords[OPERATOR]
        user_dir = tmp_path / "node-red"
        flow = flow_for(arm.rig.broker, user_dir)
        red = NodeRed(node_red, flow, user_dir, {"ARMD_MQTT_PASSWORD": password})
        try:
            red.start()
            # settings.js's uiHost: the editor, its admin API and its WebSocket on 127.0.0.1 only.
            sockets = listening(red.process.pid)
            assert exposed(sockets) == [], f"Node-RED listens beyond loopback: {sockets}"
            yield arm.rig, red
        finally:
            red.stop()
        assert password not in red.log(), "Node-RED logged the broker password"


def test_the_flows_buttons_drive_the_arm_and_its_nodes_show_it(
    flow: tuple[Rig, NodeRed],
) -> None:
    rig, red = flow
    for node in ("armd-in-state", "armd-in-status", "armd-out-goal", "armd-out-estop"):
        red.wait_status(node, CONNECTED)
    red.wait_status("armd-show-availability", "online")
    red.wait_status("armd-show-mode", "holding")

    # A joints goal from its button: accepted, then succeeded, and the arm moved there.
    since = rig.probe.mark()
    red.inject(JOINTS_GOAL)
    goal = rig.probe.wait_for(
        lambda: next((m.json() for m in rig.probe.on("goal", since)), None),
        what="the flow's goal on armd/<arm>/goal",
    )
    assert goal["id"].startswith("node-red-"), goal
    assert (goal["type"], goal["positions"]) == ("joints", JOINTS_TARGET), goal
    rig.probe.wait_status(goal["id"], since=since)
    assert [s["status"] for s in rig.probe.statuses(goal["id"], since)] == [
        "accepted",
        "succeeded",
    ]
    assert any(s["mode"] == "moving" for s in rig.probe.states(since)), "the arm never moved"
    state = rig.probe.wait_state(at_rest, what="the arm at rest after the goal")
    reached = joint_positions(state)
    for joint, target in JOINTS_TARGET.items():
        assert reached[joint] == pytest.approx(target, abs=TOLERANCE), joint

    # The editor shows the goal's outcome, the joint and the TCP as the arm reports them.
    red.wait_status("armd-show-status", "succeeded")
    red.wait_debug("armd-show-status", {"id": goal["id"], "status": "succeeded"})
    red.wait_status("armd-show-joint", f"{JOINTS_TARGET['elbow_joint']:.3f}")
    red.wait(lambda: red.status("armd-show-tcp") == tcp_text(rig), WAIT_S, "the TCP position")

    # The e-stop latches the arm; its reset releases it.
    red.inject(ESTOP)
    rig.probe.wait_mode("estop")
    red.wait_status("armd-show-mode", "estop")
    red.inject(RESET)
    rig.probe.wait_mode("holding")
    red.wait_status("armd-show-mode", "holding")

    # Stop ends a goal in progress.
    since = rig.probe.mark()
    red.inject(HOME_GOAL)
    home = rig.probe.wait_for(
        lambda: next((m.json() for m in rig.probe.on("goal", since)), None), what="the home goal"
    )
    rig.probe.wait_status(home["id"], status="accepted", since=since)
    red.inject(STOP)
    assert rig.probe.wait_status(home["id"], since=since)["status"] == "aborted"
    (stop,) = [m.json() for m in rig.probe.on("goal", since) if m.json()["type"] == "stop"]
    assert stop["id"].startswith("node-red-stop-"), stop
    assert rig.probe.wait_status(stop["id"], since=since)["status"] == "succeeded"
    red.wait_debug("armd-show-status", {"id": stop["id"], "status": "succeeded"})


def tcp_text(rig: Rig) -> str:
    """The TCP position of the latest state as the flow's "TCP position" node formats it."""
    position = rig.probe.latest_state()["tcp"]["position"]
    return "[" + ", ".join(f"{value:.3f}" for value in position) + "]"
