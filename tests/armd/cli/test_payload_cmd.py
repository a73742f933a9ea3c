"""`armd payload`: the load checked with the daemon's rules, then sent on ``payload`` through a
real Mosquitto to an arm that is online."""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
import yaml

from armd.cli.main import main
from tests.broker import MosquittoBroker

CONFIG = Path(__file__).resolve().parents[3] / "config"
WAIT_S = 10.0


def sim_config(tmp_path: Path, broker: MosquittoBroker) -> Path:
    doc = yaml.safe_load((CONFIG / "sim.yaml").read_text(encoding="utf-8"))
    doc["model"] = str(CONFIG / doc["model"])
    if doc.get("collision"):  # its geometry file, relative to the config like the model
        doc["collision"]["geometry"] = str(CONFIG / doc["collision"]["geometry"])
    doc["mqtt"] = {"host": broker.host, "port": broker.port}
    path = tmp_path / "arm.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_the_load_reaches_the_payload_topic(
    mosquitto: MosquittoBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = sim_config(tmp_path, mosquitto)
    name = yaml.safe_load(config.read_text(encoding="utf-8"))["name"]
    received: queue.Queue[bytes] = queue.Queue()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="arm")
    subscribed = threading.Event()
    client.on_message = lambda _client, _userdata, message: received.put(message.payload)
    client.on_subscribe = lambda *_: subscribed.set()
    client.connect(mosquitto.host, mosquitto.port)
    client.loop_start()
    try:
        client.subscribe(f"armd/{name}/payload", qos=1)
        assert subscribed.wait(WAIT_S)
        online = client.publish(f"armd/{name}/availability", b"online", qos=1, retain=True)
        online.wait_for_publish(WAIT_S)
        argv = ["payload", "--config", str(config), "--mass", "1.2", "--com", "0", "0", "0.05"]
        code = main(argv)
        out, err = capsys.readouterr()
        assert (code, err) == (0, ""), err
        assert out == "payload sent: 1.2 kg at tool0, centre of mass (0.0, 0.0, 0.05) m\n"
        document = json.loads(received.get(timeout=WAIT_S))
    finally:
        client.loop_stop()
        client.disconnect()
    assert document == {"mass": 1.2, "com": [0.0, 0.0, 0.05], "inertia": [0.0] * 6}


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["--mass", "-1"], "payload: mass: -1.0 must be >= 0.0"),
        (["--mass", "1", "--inertia", "1", "0", "0", "0.1", "0", "0.1"], "payload: inertia"),
        (["--mass", "nan"], "payload: "),
    ],
)
def test_a_bad_load_is_one_line_exit_2_and_nothing_sent(
    capsys: pytest.CaptureFixture[str], argv: list[str], start: str
) -> None:
    code = main(["payload", "--config", "/nonexistent.yaml", *argv])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith(f"armd: error: {start}"), err
    assert err.count("\n") == 1
