"""`load_config`: the schema, the checks against the model and the drivers, how every problem is
reported (all at once, each with its line and path), and the resolved `ArmSetup`."""

from __future__ import annotations

import logging
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from armd.config.load import build_drivers, load_config
from armd.config.schema import DEFAULT_JERK_PER_ACCELERATION
from armd.errors import ConfigError
from drivers import DRIVERS
from drivers.sim.driver import ManualClock, SimDriver, SimDriverParams

ROBOTS = Path(__file__).resolve().parents[3] / "config" / "robots"
UR5 = ROBOTS / "ur5.urdf"
PANDA = ROBOTS / "panda.urdf"
ONE_JOINT = Path(__file__).resolve().parents[2] / "kinematics/data/design_example.kinematic.json"
UR5_JOINTS = [
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
]
SECRET = "s3cr3t-Hunter2"

Doc = dict[str, Any]


def ur5_config() -> Doc:
    """A minimal valid config: the UR5 on one sim driver, devices m0 ... m5."""
    return {
        "name": "arm",
        "model": str(UR5),
        "tool_link": "tool0",
        "joints": {
            joint: {"driver": "sim", "device": f"m{i}", "limits": {"acceleration": 5.0}}
            for i, joint in enumerate(UR5_JOINTS)
        },
        "drivers": {"sim": {"type": "sim", "params": {"devices": {f"m{i}": {} for i in range(6)}}}},
    }


def write(tmp_path: Path, doc: Doc, name: str = "arm.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def problems(path: Path) -> list[str]:
    """The lines of the ConfigError raised loading `path`."""
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value).splitlines()


def problems_of(tmp_path: Path, doc: Doc) -> list[str]:
    return problems(write(tmp_path, doc))


def _set(*keys: str, value: object) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        node = doc
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value

    return mutate


def _delete(*keys: str) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        node = doc
        for key in keys[:-1]:
            node = node[key]
        del node[keys[-1]]

    return mutate


ELBOW = ("joints", "elbow_joint")
M0 = ("drivers", "sim", "params", "devices", "m0")

CASES = [
    # unknown options, at every level
    pytest.param(
        _set("colour", value="red"),
        "colour: unknown option; options: name, model",
        id="top-level",
    ),
    pytest.param(
        _set(*ELBOW, "gear", value=3),
        f"{'.'.join(ELBOW)}.gear: unknown option; did you mean 'gear_ratio'?",
        id="in-joint",
    ),
    pytest.param(
        _set(*ELBOW, "limits", "effort", value=3),
        "joints.elbow_joint.limits.effort: unknown option",
        id="in-limits",
    ),
    pytest.param(
        _set("safety", "stale_hold_tick", value=3),
        "safety.stale_hold_tick: unknown option; did you mean 'stale_hold_ticks'?",
        id="in-safety",
    ),
    pytest.param(
        _set("mqtt", "hostname", value="x"),
        "mqtt.hostname: unknown option; did you mean 'host'?",
        id="in-mqtt",
    ),
    pytest.param(
        _set("drivers", "sim", "params", "timeout", value=1),
        "drivers.sim.params.timeout: unknown option; did you mean 'reply_timeout_s'?",
        id="in-params",
    ),
    pytest.param(
        _set(*M0, "max_velocty", value=1),
        "drivers.sim.params.devices.m0.max_velocty: unknown option; did you mean 'max_velocity'?",
        id="in-device-params",
    ),
    pytest.param(
        _set("drivers", "sim", "kind", value="sim"),
        "drivers.sim.kind: unknown option; options: type, params",
        id="in-driver",
    ),
    pytest.param(
        _set("mqtt", "password", value=SECRET),
        "mqtt.password: unknown option; the password is read from a file: set mqtt.password_file",
        id="password-in-file",
    ),
    # ranges and types
    pytest.param(
        _set(*ELBOW, "gear_ratio", value=-3),
        "joints.elbow_joint.gear_ratio: -3 must be > 0",
        id="gear-ratio",
    ),
    pytest.param(
        _set(*ELBOW, "gear_ratio", value=math.inf),
        "joints.elbow_joint.gear_ratio: inf must be a finite number",
        id="gear-ratio-inf",
    ),
    pytest.param(
        _set(*ELBOW, "sign", value=2),
        "joints.elbow_joint.sign: 2 must be 1 or -1",
        id="sign",
    ),
    pytest.param(
        _set(*ELBOW, "offset", value="zero"),
        "joints.elbow_joint.offset: 'zero' must be a number",
        id="offset-type",
    ),
    pytest.param(
        _set("loop_hz", value=5),
        "loop_hz: 5 must be >= 10",
        id="loop-low",
    ),
    pytest.param(
        _set("loop_hz", value=2000),
        "loop_hz: 2000 must be <= 1000",
        id="loop-high",
    ),
    pytest.param(
        _set("loop_hz", value="fast"),
        "loop_hz: 'fast' must be a number",
        id="loop-type",
    ),
    pytest.param(
        _set("telemetry_hz", value=0),
        "telemetry_hz: 0 must be > 0",
        id="telemetry-zero",
    ),
    pytest.param(
        _set("telemetry_hz", value=300),
        "telemetry_hz: 300 Hz must be <= loop_hz (250 Hz)",
        id="telemetry-above-loop",
    ),
    pytest.param(
        _set("name", value="my arm"),
        "name: 'my arm' may contain only letters, digits, '_' and '-'",
        id="bad-name",
    ),
    pytest.param(
        _set("name", value="arms/1"),
        "name: 'arms/1' may contain only",
        id="slash-name",
    ),
    pytest.param(
        _delete("name"),
        "name: required option is missing (the arm's name, used in MQTT topics",
        id="missing-name",
    ),
    pytest.param(
        _delete("drivers", "sim", "params", "devices"),
        "drivers.sim.params.devices: required option is missing",
        id="missing-devices",
    ),
    pytest.param(
        _set("drivers", value={}),
        "drivers: must have at least 1 entry",
        id="no-drivers",
    ),
    pytest.param(
        _set("joints", value=[]),
        "joints: [] must be a mapping",
        id="joints-list",
    ),
    pytest.param(
        _set("safety", "on_fault", value="explode"),
        "safety.on_fault: 'explode' must be 'hold' or 'disable'",
        id="on-fault",
    ),
    pytest.param(
        _set("broker_loss", value="panic"),
        "broker_loss: 'panic' must be 'finish' or 'stop'",
        id="broker-loss",
    ),
    pytest.param(
        _set("safety", "stale_fault_s", value=0.01),
        "safety.stale_fault_s: 0.01 s must be > stale_hold_s (0.05 s)",
        id="stale",
    ),
    pytest.param(
        _set("safety", "stale_hold_ticks", value=0),
        "safety.stale_hold_ticks: 0 must be >= 1",
        id="stale-ticks",
    ),
    pytest.param(
        _set("safety", "following_error", value=-0.1),
        "safety.following_error: -0.1 must be > 0",
        id="following",
    ),
    pytest.param(
        _set("mqtt", "reconnect_max_s", value=0.1),
        "mqtt.reconnect_max_s: 0.1 s must be >= reconnect_min_s (0.5 s)",
        id="reconnect",
    ),
    pytest.param(
        _set("mqtt", "port", value=70000),
        "mqtt.port: 70000 must be <= 65535",
        id="port",
    ),
    pytest.param(
        _set("motion", "ik_position_tolerance", value=0.01),
        (
            "motion.ik_position_tolerance: 0.01 m must be <= "
            "safety.pose_position_tolerance (0.001 m)"
        ),
        id="ik-tolerance",
    ),
    pytest.param(
        _set("motion", "ik_max_joint_change", value=0),
        "motion.ik_max_joint_change: 0 must be > 0",
        id="jump",
    ),
    pytest.param(
        _set("mqtt", "password_file", value="pw"),
        "mqtt.password_file: a password needs a user name: set mqtt.username too",
        id="password-without-user",
    ),
    pytest.param(
        _set("mqtt", "tls", value={"cert_file": "c.pem"}),
        "mqtt.tls: cert_file and key_file go together",
        id="tls-cert-without-key",
    ),
    pytest.param(
        _set(*M0, "velocity_gain", value=10.0),
        "drivers.sim.params.devices.m0: velocity_gain 10.0 1/s must be > position_gain 60.0 1/s",
        id="driver-validator",
    ),
    # the model
    pytest.param(
        _delete("joints", "wrist_3_joint"),
        (
            "joints.wrist_3_joint: model joint not configured: map it to a "
            "driver's device here, or hold it still with fixed_joints: "
            "{wrist_3_joint: <position>}"
        ),
        id="unmapped-joint",
    ),
    pytest.param(
        _set("joints", "wrist", value={"driver": "sim", "device": "m5"}),
        (
            "joints.wrist: unknown joint; model joints: shoulder_pan_joint, "
            "shoulder_lift_joint, elbow_joint"
        ),
        id="unknown-joint",
    ),
    pytest.param(
        _set("fixed_joints", "gripper", value=0.0),
        "fixed_joints.gripper: unknown joint; model joints:",
        id="unknown-fixed-joint",
    ),
    pytest.param(
        _set("fixed_joints", "elbow_joint", value=0.0),
        "fixed_joints.elbow_joint: also in joints: a joint is driven or fixed",
        id="driven-and-fixed",
    ),
    pytest.param(
        _set("tool_link", value="tool9"),
        "tool_link: unknown link 'tool9'; model links: world, base_link",
        id="tool-link",
    ),
    pytest.param(
        _delete("tool_link"),
        "tool_link: required: the model branches; its leaf links: ee_link, tool0, base",
        id="tool-link-branching",
    ),
    pytest.param(
        _set("model", value="nofile.urdf"),
        "nofile.urdf: no such file (relative paths start at",
        id="missing-model",
    ),
    pytest.param(
        _set("model", value=str(ROBOTS / "README.md")),
        "model: " + str(ROBOTS / "README.md") + ": unsupported model file suffix",
        id="model-suffix",
    ),
    # limits
    pytest.param(
        _set(*ELBOW, "limits", "upper", value=4.0),
        (
            "joints.elbow_joint.limits.upper: 4 rad is beyond the model's upper "
            "limit 3.14159 rad: a config may only tighten the model's limits"
        ),
        id="widen-upper",
    ),
    pytest.param(
        _set(*ELBOW, "limits", "lower", value=-4.0),
        "joints.elbow_joint.limits.lower: -4 rad is beyond the model's lower limit -3.14159 rad",
        id="widen-lower",
    ),
    pytest.param(
        _set(*ELBOW, "limits", "velocity", value=10.0),
        (
            "joints.elbow_joint.limits.velocity: 10 rad/s is beyond the model's "
            "velocity limit 3.15 rad/s"
        ),
        id="widen-velocity",
    ),
    pytest.param(
        _set(*ELBOW, "limits", "lower", value=3.2),
        "joints.elbow_joint.limits.lower: lower 3.2 must be < upper 3.14159 rad",
        id="lower-above-model-upper",
    ),
    pytest.param(
        _set(*ELBOW, "limits", value={"lower": 1.0, "upper": 0.5, "acceleration": 5.0}),
        "joints.elbow_joint.limits.upper: 0.5 must be > lower (1)",
        id="lower-above-upper",
    ),
    pytest.param(
        _set(*ELBOW, "limits", "velocity", value=-1.0),
        "joints.elbow_joint.limits.velocity: -1 must be > 0",
        id="negative-velocity",
    ),
    pytest.param(
        _set(*ELBOW, "limits", "jerk", value=0),
        "joints.elbow_joint.limits.jerk: 0 must be > 0",
        id="zero-jerk",
    ),
    pytest.param(
        _set(*ELBOW, "limits", value={}),
        (
            "joints.elbow_joint.limits.acceleration: required: the model gives "
            "joint 'elbow_joint' no acceleration limit, and a joint cannot be "
            "driven safely without one; set "
            "joints.elbow_joint.limits.acceleration (rad/s²)"
        ),
        id="no-acceleration",
    ),
    # drivers and devices
    pytest.param(
        _set("drivers", "sim", "type", value="canopen"),
        (f"drivers.sim.type: unknown driver 'canopen'; expected one of {sorted(DRIVERS)}"),
        id="unknown-driver-type",
    ),
    pytest.param(
        _set(*ELBOW, "driver", value="bus9"),
        "joints.elbow_joint.driver: unknown driver 'bus9'; drivers: sim",
        id="unknown-driver",
    ),
    pytest.param(
        _set(*ELBOW, "device", value="m9"),
        (
            "joints.elbow_joint.device: 'm9' is not a device of driver 'sim'; "
            "its devices: m0, m1, m2, m3, m4, m5"
        ),
        id="unknown-device",
    ),
    pytest.param(
        _set(*ELBOW, "device", value="m0"),
        (
            "joints.elbow_joint.device: device 'm0' of driver 'sim' already "
            "drives joint 'shoulder_pan_joint'; a device serves one joint"
        ),
        id="device-twice",
    ),
    pytest.param(
        _set("drivers", "sim", "params", "devices", "m6", value={}),
        "drivers.sim.params.devices.m6: not used by any joint: map a joint to it or remove it",
        id="unused-device",
    ),
    pytest.param(
        _set("drivers", "sim", "params", value=[1]),
        "drivers.sim.params: [1] must be a mapping",
        id="params-not-mapping",
    ),
    pytest.param(
        _set(
            "drivers",
            "can",
            value={
                "type": "odrive",
                "params": {"channel": "can0", "devices": {"a": {"node_id": 99}}},
            },
        ),
        "drivers.can.params.devices.a.node_id: 99 must be <= 63",
        id="odrive-node",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), CASES)
def test_each_problem_is_reported_with_its_path(
    tmp_path: Path, mutate: Callable[[Doc], None], expected: str
) -> None:
    doc = ur5_config()
    mutate(doc)
    lines = problems_of(tmp_path, doc)
    assert any(expected in line for line in lines), "\n".join(lines)
    assert all(line.startswith(f"{tmp_path / 'arm.yaml'}") for line in lines)


def test_the_base_config_loads(tmp_path: Path) -> None:
    setup = load_config(write(tmp_path, ur5_config()))
    assert setup.name == "arm"
    assert setup.tree.dof == 6


def test_several_problems_are_reported_together_in_file_order(tmp_path: Path) -> None:
    doc = ur5_config()
    doc["joints"]["elbow_joint"]["gear_ratio"] = -3
    doc["safety"] = {"stale_hold_tick": 3}
    doc["joints"]["wrist"] = {"driver": "sim", "device": "m1"}
    del doc["joints"]["wrist_3_joint"]
    doc["colour"] = "red"
    lines = problems_of(tmp_path, doc)
    assert len(lines) == 5, lines
    for key in (
        "gear_ratio: -3",
        "joints.wrist_3_joint: model joint not configured",
        "joints.wrist: unknown joint",
        "safety.stale_hold_tick",
        "colour",
    ):
        assert sum(key in line for line in lines) == 1, (key, lines)
    line_numbers = [int(line.split(":")[1]) for line in lines]
    assert line_numbers == sorted(line_numbers)


def test_lines_point_at_the_offending_key(tmp_path: Path) -> None:
    path = tmp_path / "arm.yaml"
    text = yaml.safe_dump(ur5_config(), sort_keys=False).replace(
        "  elbow_joint:\n    driver: sim\n", "  elbow_joint:\n    driver: sim\n    gear_ratio: -3\n"
    )
    path.write_text(text, encoding="utf-8")
    (line,) = problems(path)
    number = text.splitlines().index("    gear_ratio: -3") + 1
    assert line == f"{path}:{number}: joints.elbow_joint.gear_ratio: -3 must be > 0"


def test_yaml_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "arm.yaml"
    path.write_text("name: arm\nmodel: x.urdf\njoints: {elbow: {driver: sim}\nloop_hz: 250\n")
    (line,) = problems(path)
    assert line.startswith(f"{path}:4:1: invalid YAML: expected ',' or '}}'")
    assert "flow mapping at line 3" in line


def test_duplicate_keys_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "arm.yaml"
    path.write_text("name: arm\nloop_hz: 250\nname: other\n")
    assert problems(path) == [f"{path}:3:1: invalid YAML: duplicate key 'name' (first at line 1)"]


@pytest.mark.parametrize(
    ("text", "got"), [("", "an empty file"), ("- a\n- b\n", "a list"), ("42\n", "a int")]
)
def test_the_top_level_must_be_a_mapping(tmp_path: Path, text: str, got: str) -> None:
    path = tmp_path / "arm.yaml"
    path.write_text(text)
    assert problems(path) == [f"{path}: the top level must be a mapping of options, got {got}"]


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    (line,) = problems(tmp_path / "nope.yaml")
    assert line.startswith(f"{tmp_path / 'nope.yaml'}: cannot read: ")


def test_model_without_limits_needs_velocity_and_acceleration(tmp_path: Path) -> None:
    doc: Doc = {
        "name": "one",
        "model": str(ONE_JOINT),
        "joints": {"joint1": {"driver": "sim", "device": "m"}},
        "drivers": {"sim": {"type": "sim", "params": {"devices": {"m": {}}}}},
    }
    lines = problems_of(tmp_path, doc)
    assert [line.split(": ", 2)[1] for line in lines] == [
        "joints.joint1.limits.acceleration",
        "joints.joint1.limits.velocity",
    ]
    doc["joints"]["joint1"]["limits"] = {"velocity": 1.0, "acceleration": 2.0}
    setup = load_config(write(tmp_path, doc))
    assert setup.tool_link == "joint1"  # the only leaf
    limit = setup.limits["joint1"]
    assert (limit.lower, limit.upper, limit.velocity, limit.acceleration) == (
        -math.inf,
        math.inf,
        1.0,
        2.0,
    )


# -- the resolved setup -----------------------------------------------------------------------


def test_setup_applies_overrides_jerk_and_transmission(tmp_path: Path) -> None:
    doc = ur5_config()
    elbow = doc["joints"]["elbow_joint"]
    elbow.update(gear_ratio=50.0, sign=-1, offset=0.25)
    elbow["limits"] = {"lower": -1.5, "upper": 2.0, "velocity": 1.0, "acceleration": 3.0}
    doc["joints"]["wrist_1_joint"]["limits"]["jerk"] = 7.0
    setup = load_config(write(tmp_path, doc))
    i = setup.tree.joint_names.index("elbow_joint")
    assert setup.limits.lower[i] == -1.5
    assert setup.limits.upper[i] == 2.0
    assert setup.limits.velocity[i] == 1.0
    assert setup.limits.acceleration[i] == 3.0
    assert setup.limits["shoulder_pan_joint"].velocity == pytest.approx(3.15, abs=1e-12)
    expected_jerk = [DEFAULT_JERK_PER_ACCELERATION * a for a in setup.limits.acceleration]
    expected_jerk[setup.tree.joint_names.index("wrist_1_joint")] = 7.0
    np.testing.assert_allclose(setup.jerk, expected_jerk, rtol=1e-12)
    assert not setup.jerk.flags.writeable
    t = setup.joints["elbow_joint"]
    assert (t.driver, t.device, t.gear_ratio, t.sign, t.offset) == ("sim", "m2", 50.0, -1, 0.25)
    assert setup.transmission.joint_names == setup.tree.joint_names
    assert setup.drivers["sim"].joints == tuple(UR5_JOINTS)


def test_setup_defaults(tmp_path: Path) -> None:
    setup = load_config(write(tmp_path, ur5_config()))
    config = setup.config
    assert (config.loop_hz, config.telemetry_hz, config.broker_loss) == (250.0, 25.0, "stop")
    assert config.safety.stale_hold_ticks == 3
    assert config.safety.stale_hold_s == 0.05
    assert config.safety.stale_fault_s == 0.25
    assert config.safety.on_fault == "hold"
    assert config.motion.ik_max_joint_change == 1.0
    assert config.motion.max_linear_speed == 0.25
    assert setup.mqtt.host == "127.0.0.1"
    assert setup.mqtt.port == 1883
    assert setup.mqtt.client_id == "armd-arm"
    assert setup.mqtt.password is None
    assert not setup.mqtt.uses_tls
    assert setup.lock_file == Path("/run/armd/arm.lock")
    assert setup.model_path == UR5
    assert setup.tool_link == "tool0"


def test_relative_paths_start_at_the_config_folder(tmp_path: Path) -> None:
    (tmp_path / "robots").mkdir()
    shutil.copy(UR5, tmp_path / "robots" / "ur5.urdf")
    doc = ur5_config()
    doc.update(model="robots/ur5.urdf", lock_file="run/arm.lock")
    setup = load_config(write(tmp_path, doc))
    assert setup.model_path == tmp_path / "robots" / "ur5.urdf"
    assert setup.lock_file == tmp_path / "run" / "arm.lock"


def test_values_are_frozen(tmp_path: Path) -> None:
    setup = load_config(write(tmp_path, ur5_config()))
    with pytest.raises(ValueError, match="frozen"):
        setup.config.safety.on_fault = "disable"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        setup.tool_link = "ee_link"  # type: ignore[misc]


def test_build_drivers_constructs_without_opening(tmp_path: Path) -> None:
    setup = load_config(write(tmp_path, ur5_config()))
    params = setup.drivers["sim"].params
    assert isinstance(params, SimDriverParams)
    drivers = build_drivers(setup, ManualClock())
    assert list(drivers) == ["sim"]
    driver = drivers["sim"]
    assert isinstance(driver, SimDriver)
    assert driver.device_names == tuple(f"m{i}" for i in range(6))
    assert driver.lifecycle.value == "closed"


def panda_config() -> Doc:
    joints = {
        f"panda_joint{i}": {"driver": "sim", "device": f"m{i}", "limits": {"acceleration": 10.0}}
        for i in range(1, 8)
    }
    return {
        "name": "panda",
        "model": str(PANDA),
        "tool_link": "panda_hand_tcp",
        "joints": joints,
        "fixed_joints": {"panda_finger_joint1": 0.02},
        "drivers": {
            "sim": {"type": "sim", "params": {"devices": {f"m{i}": {} for i in range(1, 8)}}}
        },
    }


def test_fixed_joints_are_held_and_never_commanded(tmp_path: Path) -> None:
    setup = load_config(write(tmp_path, panda_config()))
    assert setup.fixed_joints == {"panda_finger_joint1": 0.02}
    assert len(setup.transmission) == 7
    q = setup.transmission.joint_positions(np.zeros(7))
    assert q[setup.tree.joint_names.index("panda_finger_joint1")] == 0.02
    assert all(joint != "panda_finger_joint1" for joint in setup.joints)


def test_a_mimic_joint_is_not_configured(tmp_path: Path) -> None:
    doc = panda_config()
    doc["fixed_joints"]["panda_finger_joint2"] = 0.02
    (line,) = problems_of(tmp_path, doc)
    assert line.endswith(
        "fixed_joints.panda_finger_joint2: mimic joint: it follows 'panda_finger_joint1' and is "
        "not configured; remove it"
    )


def test_a_fixed_joint_must_be_within_its_limits(tmp_path: Path) -> None:
    doc = panda_config()
    doc["fixed_joints"]["panda_finger_joint1"] = 0.05
    (line,) = problems_of(tmp_path, doc)
    assert line.endswith(
        "fixed_joints.panda_finger_joint1: 0.05 m outside the model's limits [0, 0.04] m"
    )


# -- secrets ------------------------------------------------------------------------------------


def _with_password(tmp_path: Path, doc: Doc) -> Doc:
    secret = tmp_path / "mqtt-password"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    doc["mqtt"] = {"username": "armd", "password_file": "mqtt-password"}
    return doc


def test_the_password_is_read_from_its_file_and_never_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    setup = load_config(write(tmp_path, _with_password(tmp_path, ur5_config())))
    assert setup.mqtt.password is not None
    assert setup.mqtt.password.get_secret_value() == SECRET
    assert setup.mqtt.username == "armd"
    for text in (repr(setup), str(setup), repr(setup.mqtt), repr(setup.config), caplog.text):
        assert SECRET not in text


def test_the_password_never_appears_in_errors_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    doc = _with_password(tmp_path, ur5_config())
    (tmp_path / "mqtt-password").chmod(0o644)  # readable by others: warned about, by path
    doc["joints"]["elbow_joint"]["gear_ratio"] = -3
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, doc))
    assert SECRET not in str(info.value)
    assert SECRET not in caplog.text
    warning = f"{tmp_path / 'mqtt-password'}: the MQTT password file is readable by every user"
    assert warning in caplog.text


def test_a_password_written_in_the_config_is_not_echoed(tmp_path: Path) -> None:
    doc = ur5_config()
    doc["mqtt"] = {"username": "armd", "password": SECRET}
    (line,) = problems_of(tmp_path, doc)
    assert line.endswith(
        "mqtt.password: unknown option; the password is read from a file: set mqtt.password_file"
    )
    assert SECRET not in line


def test_a_missing_password_file_names_the_path(tmp_path: Path) -> None:
    doc = ur5_config()
    doc["mqtt"] = {"username": "armd", "password_file": "nowhere/password"}
    (line,) = problems_of(tmp_path, doc)
    assert line.endswith(f"mqtt.password_file: {tmp_path / 'nowhere/password'}: no such file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_password_file_names_the_path_not_the_content(tmp_path: Path) -> None:
    doc = _with_password(tmp_path, ur5_config())
    (tmp_path / "mqtt-password").chmod(0o000)
    (line,) = problems_of(tmp_path, doc)
    assert f"mqtt.password_file: {tmp_path / 'mqtt-password'}: cannot read: " in line
    assert SECRET not in line


def test_an_empty_password_file_is_an_error(tmp_path: Path) -> None:
    doc = _with_password(tmp_path, ur5_config())
    (tmp_path / "mqtt-password").write_text("\n")
    (line,) = problems_of(tmp_path, doc)
    assert line.endswith(
        "mqtt.password_file: " + str(tmp_path / "mqtt-password") + ": the file is empty"
    )


def test_tls_files_must_exist(tmp_path: Path) -> None:
    doc = ur5_config()
    (tmp_path / "ca.pem").write_text("ca")
    doc["mqtt"] = {"tls": {"ca_file": "ca.pem", "cert_file": "armd.pem", "key_file": "armd.key"}}
    lines = problems_of(tmp_path, doc)
    assert [line.split(": ", 1)[1] for line in lines] == [
        f"mqtt.tls.cert_file: {tmp_path / 'armd.pem'}: no such file",
        f"mqtt.tls.key_file: {tmp_path / 'armd.key'}: no such file",
    ]
    (tmp_path / "armd.pem").write_text("cert")
    (tmp_path / "armd.key").write_text("key")
    mqtt = load_config(write(tmp_path, doc)).mqtt
    assert mqtt.uses_tls
    assert (mqtt.tls_ca_file, mqtt.tls_cert_file, mqtt.tls_key_file) == (
        tmp_path / "ca.pem",
        tmp_path / "armd.pem",
        tmp_path / "armd.key",
    )


def test_a_section_with_every_option_commented_out_takes_the_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, ur5_config())
    path.write_text(path.read_text() + "safety:\n#  on_fault: disable\nmqtt:\nfixed_joints:\n")
    setup = load_config(path)
    assert setup.config.safety.on_fault == "hold"
    assert setup.mqtt.port == 1883


def test_a_yaml_number_read_as_text_gets_a_hint(tmp_path: Path) -> None:
    path = write(tmp_path, ur5_config())
    path.write_text(path.read_text() + "motion: {ik_position_tolerance: 1e-6}\n")
    (line,) = problems(path)
    assert line.endswith(
        "motion.ik_position_tolerance: '1e-6' must be a number (YAML reads it as text; "
        "write 1.0e-06)"
    )


def test_fixed_joints_get_finite_limits_pinned_at_their_position(tmp_path: Path) -> None:
    """Issue 10, item 7: the UR5 gives no acceleration limits; a fixed joint kept the model's
    (infinite) ones, and the loop's braking arithmetic turned them into NaN commands."""
    doc = ur5_config()
    del doc["joints"]["wrist_1_joint"]
    del doc["drivers"]["sim"]["params"]["devices"]["m3"]
    doc["fixed_joints"] = {"wrist_1_joint": -1.5}
    setup = load_config(write(tmp_path, doc))
    limit = setup.tree.limits["wrist_1_joint"]
    assert (limit.lower, limit.upper) == (-1.5, -1.5)
    assert math.isfinite(limit.velocity)
    assert math.isfinite(limit.acceleration)
    assert np.all(np.isfinite(setup.jerk))


def test_a_drivers_relative_path_starts_at_the_config_files_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader gives every driver's params the config file's folder (`drivers.CONFIG_DIR`):
    the shipped physics config's ``urdf: robots/so101.urdf`` is found from a working directory
    without ``robots/``, and a missing one is named with the folder it started at."""
    pytest.importorskip("mujoco", reason="the physics extra: pip install -e '.[physics]'")
    shipped = Path(__file__).parents[3] / "config" / "so101_physics.yaml"
    monkeypatch.chdir(tmp_path)
    (driver,) = load_config(shipped, kernels=False).config.drivers.values()
    assert driver.params.urdf == str(shipped.parent / "robots" / "so101.urdf")

    text = shipped.read_text(encoding="utf-8")
    text = text.replace("urdf: robots/so101.urdf", "urdf: robots/nowhere.urdf")
    config = tmp_path / "arm.yaml"
    config.write_text(text.replace("model: robots/", f"model: {shipped.parent}/robots/"))
    with pytest.raises(ConfigError) as error:
        load_config(config, kernels=False)
    message = str(error.value)
    assert "drivers.physics.params.urdf" in message, message
    assert "no such file 'robots/nowhere.urdf'" in message, message
    assert str(tmp_path) in message, message
