"""config/cia402_arm.yaml end to end with real processes: ``armd sim-device cia402`` (six simulated
CiA 402 drives on ``udp_multicast``, hop limit 0), the daemon on the shipped config, and goals of
every kind that moves the arm, then a clean stop (every drive walked down by quick stop).

What the test changes in the shipped config, and why: the broker is one it starts on a free port,
the lock file is in the test's folder, the model path is absolute (the control process runs at
its configured real-time priority and the drives at tests/realtime.py's, as on a robot computer),
and the multicast group and node ids are this test's own (other runs use the same port; each
udp_multicast bus hears its own group only, `drivers.can_bus.link.make_bus`). Nothing asserts
speed.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.armd.cli.test_sim_device_cmd import read_line
from tests.broker import MosquittoBroker
from tests.realtime import UdpStallProbe
from tests.system.helpers import ROOT
from tests.system.probe import WAIT_S, MqttProbe, joint_positions, run_goal_through_stalls
from tests.system.test_sim_device_walkthrough import spawn, start_daemon

__all__ = ["spawn"]  # the fixture

SHIPPED = ROOT / "config" / "cia402_arm.yaml"
DRIVES = 6
STALE_HOLD_S, STALE_FAULT_S = 0.05, 0.25  # the shipped config's (the defaults)
PERIOD_S = 1 / 250  # its loop_hz


def own_config(tmp_path: Path, broker_port: int, group: str, first: int) -> Path:
    config = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    config["model"] = str((SHIPPED.parent / config["model"]).resolve())
    geometry = config["collision"]["geometry"]
    config["collision"]["geometry"] = str((SHIPPED.parent / geometry).resolve())
    config["mqtt"]["port"] = broker_port
    config["lock_file"] = str(tmp_path / "armd.lock")
    params = config["drivers"]["can"]["params"]
    params["channel"] = group
    for index, device in enumerate(params["devices"].values()):
        device["node_id"] = first + index
    path = tmp_path / "armd.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def udp_stalls() -> Iterator[UdpStallProbe]:
    """The kernel's loopback path the drives' frames cross, timed beside the test (stalls of
    10 ms or more): a stall longer than the config's `stale_hold_s` (50 ms, the default) holds
    the arm, longer than its `stale_fault_s` (250 ms) faults it, as on a real bus gone quiet."""
    with UdpStallProbe(late_s=0.01, cpus=True) as probe:
        yield probe


def succeeded(probe: MqttProbe, goal: dict[str, Any], output: str, stalls: UdpStallProbe) -> None:
    """The goal succeeds (`run_goal_through_stalls`: sent again where the loopback path was
    measured quiet past the stale-feedback bounds while it ran)."""
    status = run_goal_through_stalls(
        probe, {"id": uuid.uuid4().hex[:12], **goal}, stalls,
        hold_s=STALE_HOLD_S, period_s=PERIOD_S, fault_s=STALE_FAULT_S, timeout_s=2 * WAIT_S,
    )  # fmt: skip
    assert status["status"] == "succeeded", f"{goal}: {status}\n{output[-6000:]}"


def test_the_shipped_cia402_arm_takes_every_goal(
    tmp_path: Path, spawn: Any, udp_stalls: UdpStallProbe
) -> None:
    a, b, c, d = uuid.uuid4().bytes[:4]
    group, first = f"239.{a}.{b}.{max(c, 1)}", 1 + (c << 8 | d) % (127 - DRIVES)
    ids = [str(first + i) for i in range(DRIVES)]
    drives = spawn("sim-device", "cia402", "--channel", group, "--ids", *ids)
    read_line(drives)  # the drives are on the bus (their config lines): the daemon may start
    with MosquittoBroker(tmp_path / "mosquitto") as broker:
        config = own_config(tmp_path, broker.port, group, first)
        probe = MqttProbe(broker.host, broker.port, arm="cia402-arm")
        daemon = start_daemon(config, tmp_path / "armd.out", probe)
        try:
            start = joint_positions(probe.latest_state())
            succeeded(
                probe,
                {"type": "joints", "positions": {"shoulder_lift_joint": -1.2, "elbow_joint": 1.4}},
                daemon.output(),
                udp_stalls,
            )
            tcp = probe.latest_state()["tcp"]
            x, y, z = tcp["position"]
            for position, motion in (([x, y + 0.05, z], "joint"), ([x, y, z - 0.05], "linear")):
                pose = {"position": position, "orientation": tcp["orientation"], "motion": motion}
                succeeded(probe, {"type": "pose", **pose}, daemon.output(), udp_stalls)
            succeeded(
                probe,
                {"type": "trajectory", "joints": ["wrist_1_joint"], "points": [
                    {"t": 1.0, "positions": [-1.0]}, {"t": 2.0, "positions": [-1.4]},
                ]},
                daemon.output(),
                udp_stalls,
            )  # fmt: skip
            succeeded(probe, {"type": "joints", "positions": start}, daemon.output(), udp_stalls)
        finally:
            daemon.stop()
            probe.close()
        assert daemon.returncode == 0, daemon.output()
    drives.send_signal(signal.SIGTERM)
    _, err = drives.communicate(timeout=10.0)
    assert drives.returncode == 0, err
