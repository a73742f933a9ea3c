"""Gravity compensation end to end with real processes: ``config/armd.example.yaml`` on
``armd sim-device odrive`` and ``dynamixel`` (the README's walk-through), its ODrive bus with
``gravity_compensation: true``. While the arm holds a pose, the Set_Input_Pos frames on the bus,
decoded by cantools with ODrive's DBC, carry in Torque_FF each joint's gravity torque at the
commanded position (``state``'s ``command``) through its 50:1 gear and sign. The simulated ODrive
follows positions and ignores Torque_FF (it has no arm to hold up), so the goals run as without
compensation.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import can
import numpy as np
import pytest
import yaml

from armd.config.load import load_config
from drivers.can_bus.link import make_bus
from kinematics.dynamics import Dynamics
from tests.broker import MosquittoBroker
from tests.drivers.odrive_dbc import load_dbc
from tests.realtime import PtyStallProbe
from tests.system.probe import MqttProbe, at_rest, joint_positions
from tests.system.test_sim_device_walkthrough import (
    ARM,
    example_config,
    printed_config,
    pty_stalls,
    run_goal,
    spawn,
    start_daemon,
)

__all__ = ["pty_stalls", "spawn"]  # the fixtures

SET_INPUT_POS = 0x0C
LISTEN_S = 0.5
MAP_MAX_AGE_S = 0.2  # the loop's limit on a torque map's age at 250 Hz (armd/control/loop.py)


def set_input_pos_frames(group: str, seconds: float) -> list[can.Message]:
    with make_bus("udp_multicast", group) as bus:  # this group's frames only
        frames, deadline = [], time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            message = bus.recv(timeout=left)
            if message is not None and message.arbitration_id & 0x1F == SET_INPUT_POS:
                frames.append(message)
        return frames


def test_torque_ff_carries_the_gravity_torque_of_the_held_pose(
    tmp_path: Path, spawn: Any, pty_stalls: PtyStallProbe
) -> None:
    dbc: Any = load_dbc()
    message = dbc.get_message_by_frame_id(SET_INPUT_POS)
    a, b, c, d = uuid.uuid4().bytes[:4]
    group, first = f"239.{a}.{b}.{max(c, 1)}", 3 + d % 58
    odrive = spawn(
        "sim-device", "odrive", "--channel", group,
        "--node-ids", str(first), str(first + 1), str(first + 2),
    )  # fmt: skip
    dynamixel = spawn("sim-device", "dynamixel", "--ids", "1", "2", "3")
    config = example_config(
        tmp_path, 0, printed_config(odrive), printed_config(dynamixel, skip_first=True)
    )
    with MosquittoBroker(tmp_path / "mosquitto") as broker:
        doc = yaml.safe_load(config.read_text(encoding="utf-8"))
        doc["mqtt"]["port"] = broker.port
        doc["drivers"]["can0"]["gravity_compensation"] = True
        config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        setup = load_config(config)
        probe = MqttProbe(broker.host, broker.port, arm=ARM)
        daemon = start_daemon(config, tmp_path / "armd.out", probe)
        try:
            start = joint_positions(probe.latest_state())
            pose = {"shoulder_lift_joint": -1.0, "elbow_joint": 1.2}
            run_goal(probe, daemon, pose, pty_stalls)
            # The loop evaluates the daemon's map of the torques linearised at a recent sample:
            # once the arm is at rest and the map in use is younger than that (the loop drops an
            # older one), it was taken at the held pose.
            probe.wait_state(at_rest, what="the arm at rest at the pose")
            time.sleep(MAP_MAX_AGE_S)
            state = probe.latest_state()
            frames = set_input_pos_frames(group, LISTEN_S)
            run_goal(probe, daemon, {name: start[name] for name in pose}, pty_stalls)
        finally:
            daemon.stop()
            probe.close()
        assert daemon.returncode == 0, daemon.output()
    names = setup.tree.joint_names
    q = np.array([state["joints"][name]["command"] for name in names])
    gravity = Dynamics(setup.tree).gravity(q)
    devices = setup.config.drivers["can0"].params.devices  # type: ignore[attr-defined]
    by_node = {}
    for name in names:
        joint = setup.config.joints[name]
        if joint.driver == "can0":
            node = devices[joint.device].node_id
            by_node[node] = (name, joint.sign * gravity[names.index(name)] / joint.gear_ratio)
    assert len(by_node) == 3
    seen: dict[int, list[float]] = {node: [] for node in by_node}
    for frame in frames:
        node = frame.arbitration_id >> 5
        if node in seen:
            seen[node].append(message.decode(bytes(frame.data))["Torque_FF"])
    for node, (name, expected) in by_node.items():
        assert seen[node], f"no Set_Input_Pos to node {node} ({name})"
        # the DBC's 0.001 N·m step, and the commanded position's last digits in `state`
        assert seen[node] == pytest.approx([expected] * len(seen[node]), abs=0.0015), name
    lift = by_node[devices[setup.config.joints["shoulder_lift_joint"].device].node_id][1]
    assert abs(lift) > 0.2  # the upper arm's weight, at the motor: the test is not vacuous
