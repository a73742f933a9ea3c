"""The retained documents the daemon announces on connecting: the arm's ``model`` (what the
dashboard draws) and, opted in, Home Assistant's discovery configs; named poses driven through
them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from armd.api.contract import MAX_PAYLOAD_BYTES, encode
from armd.api.homeassistant import discovery_messages
from armd.api.model_topic import model_json
from armd.config.load import load_config
from kinematics.models.kinematic_json import tree_from_dict
from tests.armd.config.test_config import write
from tests.system.helpers import Rig
from tests.system.probe import joint_positions
from tests.system.test_broker_loss import retained

ROOT = Path(__file__).resolve().parents[2]


def retained_on(rig: Rig, topic: str) -> list[tuple[str, bytes]]:
    """Every retained message under `topic` (a filter) as a client subscribing now gets them."""
    since = rig.probe.mark()
    rig.probe.client.subscribe(topic, qos=1)
    count = len(discovery_messages(load_config(rig.config, kernels=False), "homeassistant"))

    def got() -> list[tuple[str, bytes]]:  # the probe's other topics (state) arrive meanwhile
        return [(m.topic, m.payload) for m in rig.probe.messages[since:] if m.retain]

    rig.probe.wait_for(lambda: len(got()) >= count, what=f"retained {topic}")
    return got()


def test_the_model_is_retained_and_describes_the_arm_as_the_daemon_runs_it(arm: Rig) -> None:
    model = json.loads(retained(arm.broker, "model"))
    setup = load_config(arm.config, kernels=False)
    assert model["format"] == "armd-model/1"
    assert model["name"] == setup.name
    assert model["tool_link"] == "tool0"
    assert model["joints"] == list(setup.tree.joint_names)
    assert set(model["poses"]) == {"home", "ready"}
    # The tree is a .kinematic.json document with the enforced limits: it loads, and its forward
    # kinematics at the measured state is the pose `state` reports.
    tree = tree_from_dict(model["model"])
    assert tree.limits["elbow_joint"] == setup.tree.limits["elbow_joint"]
    state = arm.probe.latest_state()
    q = [joint_positions(state)[name] for name in tree.joint_names]
    pose = tree.fk(q, model["tool_link"])
    np.testing.assert_allclose(pose.translation, state["tcp"]["position"], atol=1e-6)


@pytest.mark.parametrize("config", ["sim.yaml", "so101.yaml", "armd.example.yaml"])
def test_the_model_of_every_shipped_config_fits_a_payload(config: str) -> None:
    setup = load_config(ROOT / "config" / config, kernels=False, calibration=False)
    assert len(encode(model_json(setup))) < MAX_PAYLOAD_BYTES


def test_the_panda_model_fits_the_64_kib_the_issue_allows(tmp_path: Path) -> None:
    """The largest shipped model, on a config of its own."""
    panda = ROOT / "config" / "robots" / "panda.urdf"
    joints = [f"panda_joint{i}" for i in range(1, 8)]
    doc = {
        "name": "panda",
        "model": str(panda),
        "tool_link": "panda_hand",
        "joints": {
            j: {"driver": "sim", "device": f"m{i}", "limits": {"acceleration": 5.0}}
            for i, j in enumerate(joints)
        },
        "fixed_joints": {"panda_finger_joint1": 0.02},
        "drivers": {"sim": {"type": "sim", "params": {"devices": {f"m{i}": {} for i in range(7)}}}},
    }
    setup = load_config(write(tmp_path, doc), kernels=False)
    assert len(encode(model_json(setup))) <= 64 * 1024


def test_home_assistant_discovery_is_retained_and_its_pose_button_moves_the_arm(
    start_arm: Callable[..., Rig],
) -> None:
    rig = start_arm(overrides={"home_assistant": {"discovery": True}})
    setup = load_config(rig.config, kernels=False)
    expected = dict(discovery_messages(setup, "homeassistant"))
    got = dict(retained_on(rig, "homeassistant/#"))
    assert got == expected
    # Press "Go to ready" as Home Assistant does: publish the button's payload on its topic (the
    # rendered command template; tests/armd/api/test_homeassistant.py renders it with Home
    # Assistant itself).
    button = json.loads(expected["homeassistant/button/armd_ur5-sim/pose_ready/config"])
    payload = button["command_template"].replace(
        "{{ (now().timestamp() * 1000000) | int }}", "1795642337982998"
    )
    since = rig.probe.mark()
    rig.probe.client.publish(button["command_topic"], payload, qos=1)
    final = rig.probe.wait_status("ha-1795642337982998", since=since)
    assert final["status"] == "succeeded", final
    reached = joint_positions(rig.probe.latest_state())
    for joint, value in setup.config.poses["ready"].items():
        assert reached[joint] == pytest.approx(value, abs=0.01)
