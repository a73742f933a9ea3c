"""Home Assistant discovery (`armd.api.homeassistant`), checked by Home Assistant itself.

Home Assistant 2024.3, installed by ``make ha-peer`` (``make test`` does it) in a virtual
environment of its own, reads every discovery config exactly as its MQTT discovery does (topic
matcher, abbreviations, the component's schema: tests/peers/ha_discovery.py) and renders the
value templates against real ``state`` and ``fault`` payloads and the buttons' command templates.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from armd.api.contract import encode, fault_json, telemetry_json
from armd.api.homeassistant import discovery_messages
from armd.api.payloads import parse_estop, parse_goal
from armd.config.load import ArmSetup, load_config
from armd.link.messages import Fault, GripperGoal, Mode, NamedGoal, StopGoal, Telemetry

ROOT = Path(__file__).resolve().parents[3]
HA_PYTHON = Path(os.environ.get("ARMD_HA_PYTHON", ROOT / ".venv-ha" / "bin" / "python"))
PEER = ROOT / "tests" / "peers" / "ha_discovery.py"

pytestmark = pytest.mark.skipif(
    not HA_PYTHON.exists(), reason=f"Home Assistant peer not installed ({HA_PYTHON}): make ha-peer"
)


def home_assistant_reads(setup: ArmSetup, states: list[bytes], faults: list[bytes]) -> Any:
    """What Home Assistant makes of `setup`'s discovery messages (see tests/peers)."""
    request = {
        "prefix": "homeassistant",
        "messages": [[t, p.decode()] for t, p in discovery_messages(setup, "homeassistant")],
        "states": [s.decode() for s in states],
        "faults": [f.decode() for f in faults],
    }
    done = subprocess.run(
        [str(HA_PYTHON), str(PEER)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def state_of(setup: ArmSetup, positions: list[float]) -> bytes:
    joints = {
        n: (p, 0.0, float("nan")) for n, p in zip(setup.tree.joint_names, positions, strict=True)
    }
    telemetry = Telemetry(
        1.5, Mode.HOLDING, joints, setup.tool_link, (0.1, -0.2, 0.3), (1, 0, 0, 0)
    )
    return encode(telemetry_json(telemetry))


@pytest.fixture(scope="module")
def so101() -> ArmSetup:
    return load_config(ROOT / "config" / "so101.yaml", kernels=False, calibration=False)


@pytest.fixture(scope="module")
def answers(so101: ArmSetup) -> dict[str, Any]:
    positions = [0.1 * (i + 1) for i in range(so101.tree.dof)]
    faults = [encode(fault_json(Fault("stall", "gripper strained", "gripper"))), b""]
    read = home_assistant_reads(so101, [state_of(so101, positions)], faults)
    return {answer["topic"].split("/")[-2]: answer for answer in read}


def test_home_assistant_accepts_every_config_without_dropping_a_key(
    answers: dict[str, Any],
) -> None:
    for object_id, answer in answers.items():
        assert "error" not in answer, (object_id, answer)
        assert answer["dropped"] == [], (object_id, answer["dropped"])


def test_one_device_with_unique_entities_wired_to_availability(
    answers: dict[str, Any], so101: ArmSetup
) -> None:
    configs = [answer["config"] for answer in answers.values()]
    assert len({c["unique_id"] for c in configs}) == len(configs)
    assert {tuple(c["device"]["identifiers"]) for c in configs} == {(f"armd_{so101.name}",)}
    assert {c["availability_topic"] for c in configs} == {f"armd/{so101.name}/availability"}


def test_sensors_read_the_state_as_home_assistant_renders_it(
    answers: dict[str, Any], so101: ArmSetup
) -> None:
    assert answers["mode"]["values"] == ["holding"]
    assert [answers[f"tcp_{axis}"]["values"] for axis in "xyz"] == [["0.1"], ["-0.2"], ["0.3"]]
    for i, joint in enumerate(so101.tree.joint_names):
        assert float(answers[f"joint_{joint}"]["values"][0]) == pytest.approx(0.1 * (i + 1))
    assert answers["missed_ticks"]["values"] == ["0"]


def test_the_fault_sensors_follow_the_retained_fault_and_its_clearing(
    answers: dict[str, Any],
) -> None:
    assert answers["fault"]["component"] == "binary_sensor"
    assert answers["fault"]["values"] == ["ON", "OFF"]
    assert answers["fault_code"]["values"] == ["stall", "none"]


def test_buttons_send_what_armd_accepts(answers: dict[str, Any], so101: ArmSetup) -> None:
    def goal(object_id: str) -> object:
        payload = answers[object_id]["command"].encode()
        return parse_goal(
            payload,
            joint_names=so101.tree.joint_names,
            link_names=so101.tree.link_names,
            default_link=so101.tool_link,
        )

    assert goal("stop") == StopGoal()
    assert parse_estop(answers["estop"]["command"].encode()).engage
    reset = parse_estop(answers["reset"]["command"].encode())
    assert not reset.engage
    assert reset.problem is None
    for name in so101.config.poses:
        named = goal(f"pose_{name}")
        assert isinstance(named, NamedGoal)
        assert named.name == name
        assert named.goal_id.startswith("ha-")
    opened, closed = goal("gripper_open"), goal("gripper_close")
    assert isinstance(opened, GripperGoal)
    assert opened.opening == 1.0
    assert isinstance(closed, GripperGoal)
    assert closed.opening == 0.0
