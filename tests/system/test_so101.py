"""The shipped SO-101 config as its README comment says to run it without the arm: the simulated
STS3215 chain (``armd sim-device feetech``) in its own process, ``armd run`` on
``config/so101.yaml`` with its real ``feetech`` driver, on a real Mosquitto: the arm comes up
holding, a joints goal and gripper goals (close, open) succeed, and each joint's Feetech load
reaches ``state`` as its effort."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.armd.cli.test_sim_device_cmd import Spawn, read_line, spawn
from tests.broker import MosquittoBroker
from tests.realtime import PtyStallProbe
from tests.system.helpers import ROOT, START_S, ArmdProcess
from tests.system.probe import MqttProbe, joint_positions, run_goal_through_stalls

__all__ = ["spawn"]  # the fixture

SO101 = ROOT / "config" / "so101.yaml"
STALE_HOLD_S = 0.05  # its safety.stale_hold_s (the default)
PERIOD_S = 1 / 100  # its loop_hz


@pytest.fixture
def pty_stalls() -> Iterator[PtyStallProbe]:
    """The kernel's pty path timed beside the test, which the chain's servos answer through."""
    with PtyStallProbe(late_s=0.01, cpus=True) as probe:
        yield probe


@pytest.fixture
def so101(spawn: Spawn, tmp_path: Path) -> Iterator[MqttProbe]:
    link = tmp_path / "so101-bus"
    chain = spawn("sim-device", "feetech", "--ids", *"123456", "--link", str(link))
    read_line(chain)  # the pty: the chain is up
    broker = MosquittoBroker(tmp_path / "mosquitto")
    broker.start()
    config = yaml.safe_load(SO101.read_text(encoding="utf-8"))
    assert config["drivers"]["bus"]["params"]["port"] == "/tmp/armd-so101", "update this test"
    config["drivers"]["bus"]["params"]["port"] = str(link)
    config["model"] = str((SO101.parent / config["model"]).resolve())
    geometry = config["collision"]["geometry"]
    config["collision"]["geometry"] = str((SO101.parent / geometry).resolve())
    config["mqtt"]["port"] = broker.port
    config["lock_file"] = str(tmp_path / "armd.lock")
    path = tmp_path / "so101.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    daemon = ArmdProcess(path, tmp_path / "armd.out").start()
    probe = MqttProbe(broker.host, broker.port, arm="so101")
    try:
        probe.wait_for(
            lambda: probe.availability() == "online" and bool(probe.on("state")),
            START_S,
            f"the SO-101 daemon online\n{daemon.output()}",
        )
        probe.wait_mode("holding")
        yield probe
    finally:
        probe.close()
        daemon.stop()
        broker.stop()


def test_the_so101_config_drives_the_simulated_arm_and_its_gripper(
    so101: MqttProbe, pty_stalls: PtyStallProbe
) -> None:
    def run(goal: dict[str, object]) -> dict[str, object]:
        return run_goal_through_stalls(
            so101, goal, pty_stalls, hold_s=STALE_HOLD_S, period_s=PERIOD_S
        )

    final = run({"id": "j", "type": "joints", "positions": {"elbow_flex": 0.5}})
    assert final["status"] == "succeeded", final
    state = so101.latest_state()
    assert joint_positions(state)["elbow_flex"] == pytest.approx(0.5, abs=0.01)
    assert all(-1.0 <= joint["effort"] <= 1.0 for joint in state["joints"].values()), state

    close = run({"id": "close", "type": "gripper", "position": "close"})
    assert close["status"] == "succeeded", close  # nothing between the fingers: fully closed
    assert joint_positions(so101.latest_state())["gripper"] == pytest.approx(0.0, abs=0.01)
    opened = run({"id": "open", "type": "gripper", "position": 0.5, "speed": 0.5})
    assert opened["status"] == "succeeded", opened
    assert joint_positions(so101.latest_state())["gripper"] == pytest.approx(0.75, abs=0.01)
