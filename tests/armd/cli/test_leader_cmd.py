"""``armd leader`` as a user runs it (``python -m armd leader``, config/sim_leader.yaml on a real
Mosquitto, a test client in the follower's place): how it ends (Ctrl-C sends the stream's end,
exit 130; SIGTERM, exit 0), and its refusals, each one line with exit code 1 or 2."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker import MosquittoBroker
from tests.system.helpers import ROOT, write_leader_config
from tests.system.probe import WAIT_S, MqttProbe

FOLLOWER = "ur5-sim"


def leader_command(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "armd", "leader", "--config", str(config), *args]


def run_leader(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        leader_command(config, *args),
        capture_output=True,
        text=True,
        timeout=2 * WAIT_S,
        cwd=ROOT,
        check=False,
    )


@pytest.fixture
def config(tmp_path: Path, mosquitto: MosquittoBroker) -> Path:
    path, _ = write_leader_config(tmp_path, mosquitto.port)
    return path


@pytest.fixture
def follower(mosquitto: MosquittoBroker) -> Iterator[MqttProbe]:
    probe = MqttProbe(mosquitto.host, mosquitto.port, FOLLOWER)
    probe.client.publish(f"armd/{FOLLOWER}/availability", "online", qos=1, retain=True)
    yield probe
    probe.close()


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_ctrl_c_or_sigterm_ends_the_stream(
    config: Path, follower: MqttProbe, signum: int, code: int
) -> None:
    process = subprocess.Popen(
        leader_command(config, "--follower", FOLLOWER, "--rate", "50"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        follower.wait_for(lambda: len(follower.on("stream")) >= 5, what="5 stream messages")
        process.send_signal(signum)
        out, err = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == code, err
    assert out == ""
    messages = follower.wait_for(
        lambda: (m := [x.json() for x in follower.on("stream")]) and m[-1]["type"] == "end" and m,
        what="the end of the stream",
    )
    seqs = [m["seq"] for m in messages]
    assert seqs == list(range(seqs[0], seqs[0] + len(messages)))
    assert {m["id"] for m in messages} == {"ur5-leader"}  # the leader's name by default
    assert "leader 'ur5-leader' (joint mapping, 50 Hz) -> follower 'ur5-sim'" in err
    assert f"stream ended: {len(messages)} messages" in err


def test_refusals_are_one_line_with_their_exit_code(
    tmp_path: Path, config: Path, mosquitto: MosquittoBroker
) -> None:
    for args, code, message in [
        (("--follower", FOLLOWER, "--rate", "0"), 2, "--rate: 0 Hz must be in [1, 1000]"),
        (("--follower", "arm/1"), 2, "--follower: 'arm/1': an arm name has only letters"),
        (("--follower", FOLLOWER, "--broker", "host:x"), 2, "--broker: 'host:x': expected HOST"),
        (("--follower", FOLLOWER, "--id", "x" * 129), 2, "--id: 129 characters"),
        (("--follower", FOLLOWER), 1, "arm 'ur5-sim' has never been online on this broker"),
    ]:
        done = run_leader(config, *args)
        assert (done.returncode, done.stdout) == (code, ""), done.stderr
        last = done.stderr.splitlines()[-1]
        assert last.startswith("armd: error: "), done.stderr
        assert message in last, done.stderr

    follower_config = ROOT / "config" / "sim.yaml"  # a config without leader:
    done = run_leader(follower_config, "--follower", FOLLOWER)
    assert done.returncode == 1
    assert "sim.yaml: no leader: section" in done.stderr

    closed = MosquittoBroker(tmp_path / "closed")  # never started: nothing listens on its port
    done = run_leader(config, "--follower", FOLLOWER, "--broker", f"127.0.0.1:{closed.port}")
    assert done.returncode == 1
    assert "armd: error:" in done.stderr
