"""``armd calibrate --import-lerobot``: a LeRobot so101_follower calibration (the hand-written
sample in data/) converted to armd's, value by value against a hand computation; motors matched
by servo id or by ``--map``; bad files and mappings."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from armd.cli.main import main
from armd.config.calibration import read_calibration
from armd.config.load import load_config
from tests.system.helpers import write_config

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "lerobot_so101_follower.json"
MAP = [
    "shoulder_pan=shoulder_pan_joint",
    "shoulder_lift=shoulder_lift_joint",
    "elbow_flex=elbow_joint",
    "wrist_flex=wrist_1_joint",
    "wrist_roll=wrist_2_joint",
    "gripper=wrist_3_joint",
]
# By hand: a motor's zero is the middle of its range, mid = (range_min + range_max) / 2 counts,
# and half = (range_max - range_min) / 2 counts; one count is 2π/4096 rad at the shaft. Then
# offset = -(2π·mid/4096) / (sign × gear) and range = ±(2π·half/4096) / gear.
#   shoulder_pan  760..3340  mid 2050    half 1290    gear 1
#   shoulder_lift 840..3200  mid 2020    half 1180    gear 4
#   elbow_flex    880..3072  mid 1976    half 1096
#   wrist_flex    900..3150  mid 2025    half 1125
#   wrist_roll    0..4095    mid 2047.5  half 2047.5  sign -1
#   gripper       2020..3410 mid 2715    half 695
EXPECTED_SIM = {  # joint: (offset, half range), rad
    "shoulder_pan_joint": (-3.1446606151655643, 1.9788352163724772),
    "shoulder_lift_joint": (-0.7746602978822488, 0.45252433242626416),
    "elbow_joint": (-3.031146036862027, 1.6812429435226628),
    "wrist_1_joint": (-3.106311095468423, 1.7257283863713464),
    "wrist_2_joint": (3.14082566319585, 3.14082566319585),
    "wrist_3_joint": (-4.164757839109516, 1.0661166475805206),
}


def dynamixel_config(tmp_path: Path) -> Path:
    """The UR5 of config/sim.yaml on a servo bus with ids 1 to 6; the shoulder lift's device
    turns the other way (direction -1), the elbow's reads 0.5 rad at 0 counts."""
    config = write_config(tmp_path, 1883, {"poses": None})  # the imported ranges are narrower
    doc = yaml.safe_load(config.read_text())
    names = list(doc["joints"])
    devices: dict[str, Any] = {f"s{i}": {"id": i} for i in range(1, 7)}
    devices["s2"]["direction"] = -1
    devices["s3"]["offset_rad"] = 0.5
    params = {"port": "/dev/null", "devices": devices}
    doc["drivers"] = {"bus": {"type": "dynamixel", "params": params}}
    for i, joint in enumerate(names, 1):
        doc["joints"][joint].update(driver="bus", device=f"s{i}", gear_ratio=1.0, sign=1)
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    return config


def calibrate(config: Path, *argv: str) -> int:
    return main(["calibrate", "--config", str(config), *argv])


def test_import_with_a_map_on_the_sim_arm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, 1883, {"poses": None})  # the imported ranges are narrower
    args = [arg for pair in MAP for arg in ("--map", pair)]
    assert calibrate(config, "--import-lerobot", str(SAMPLE), *args) == 0
    out = capsys.readouterr().out
    out_file = tmp_path / "armd.calibration.yaml"
    assert f"wrote {out_file} (6 joint(s) calibrated, 0 kept)" in out
    assert f"add this line to {config} to use it: calibration: armd.calibration.yaml" in out
    file, _ = read_calibration(out_file)
    assert list(file.joints) == list(EXPECTED_SIM)
    for joint, (offset, half) in EXPECTED_SIM.items():
        entry = file.joints[joint]
        assert entry.offset == pytest.approx(offset, abs=1e-12), joint
        assert entry.range == pytest.approx([-half, half], abs=1e-12), joint
        assert entry.device_id is None
    assert file.joints["elbow_joint"].source == (
        "lerobot import: lerobot_so101_follower.json, motor elbow_flex (id 3)"
    )
    # the config that names it: the ranges narrow the limits (the wrist roll's full turn is
    # wider than the model's ±2π / 1: the intersection)
    doc = yaml.safe_load(config.read_text())
    doc["calibration"] = "armd.calibration.yaml"
    config.write_text(yaml.safe_dump(doc))
    setup = load_config(config, kernels=False)
    assert setup.limits["elbow_joint"].upper == pytest.approx(1.6812429435226628, abs=1e-12)
    lift = setup.joints["shoulder_lift_joint"]
    assert lift.offset == pytest.approx(-0.7746602978822488, abs=1e-12)

    # one joint again (another LeRobot file): the others are kept
    other = json.loads(SAMPLE.read_text())
    other["elbow_flex"].update(range_min=1000, range_max=3000)  # mid 2000, half 1000
    lerobot = tmp_path / "other.json"
    lerobot.write_text(json.dumps(other))
    code = calibrate(config, "--import-lerobot", str(lerobot), "--joint", "elbow_joint", *args)
    assert code == 0
    assert "(1 joint(s) calibrated, 5 kept)" in capsys.readouterr().out
    file, _ = read_calibration(out_file)
    elbow = file.joints["elbow_joint"]
    assert elbow.offset == pytest.approx(-2 * math.pi * 2000 / 4096, abs=1e-12)
    assert elbow.range[1] == pytest.approx(2 * math.pi * 1000 / 4096, abs=1e-12)
    assert file.joints["wrist_1_joint"].offset == pytest.approx(-3.106311095468423, abs=1e-12)


def test_import_matches_motors_to_joints_by_servo_id(tmp_path: Path) -> None:
    config = dynamixel_config(tmp_path)
    assert calibrate(config, "--import-lerobot", str(SAMPLE)) == 0
    file, _ = read_calibration(tmp_path / "armd.calibration.yaml")
    lift, elbow = file.joints["shoulder_lift_joint"], file.joints["elbow_joint"]
    # lift: motor = -2π·counts/4096, so offset = +2π·2020/4096, range ±2π·1180/4096
    assert lift.offset == pytest.approx(3.098641191528995, abs=1e-12)
    assert lift.range == pytest.approx([-1.8100973297050567, 1.8100973297050567], abs=1e-12)
    # elbow: motor = 2π·counts/4096 + 0.5, so offset = -(2π·1976/4096 + 0.5)
    assert elbow.offset == pytest.approx(-3.531146036862027, abs=1e-12)
    assert elbow.range == pytest.approx([-1.6812429435226628, 1.6812429435226628], abs=1e-12)
    assert [e.device_id for e in file.joints.values()] == [1, 2, 3, 4, 5, 6]
    assert [e.device for e in file.joints.values()] == [f"s{i}" for i in range(1, 7)]


def test_drive_mode_1_is_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(SAMPLE.read_text())
    data["gripper"]["drive_mode"] = 1
    lerobot = tmp_path / "l.json"
    lerobot.write_text(json.dumps(data))
    assert calibrate(dynamixel_config(tmp_path), "--import-lerobot", str(lerobot)) == 0
    assert (
        "note: motor 'gripper': drive_mode 1 (LeRobot inverts its normalised values); armd's "
        "direction is the config's joints.wrist_3_joint.sign, unchanged by the import"
    ) in capsys.readouterr().out


def _edited(tmp_path: Path, motor: str, **fields: Any) -> Path:
    data = json.loads(SAMPLE.read_text())
    data[motor].update(fields)
    path = tmp_path / "lerobot.json"
    path.write_text(json.dumps(data, indent=4))
    return path


@pytest.mark.parametrize(
    ("edit", "extra", "message"),
    [
        (
            {"range_min": 3000, "range_max": 2000},
            [],
            "{lerobot}: elbow_flex: range_min 3000 must be < range_max 2000 (counts)",
        ),
        ({"range_max": 4096}, [], "{lerobot}: elbow_flex.range_max: 4096 must be <= 4095"),
        ({"homing_offset": 2048}, [], "{lerobot}: elbow_flex.homing_offset: 2048 must be <= 2047"),
        ({"drive_mode": 2}, [], "{lerobot}: elbow_flex.drive_mode: 2 must be 0 or 1"),
        ({"id": 9}, [], "{lerobot}: motor 'elbow_flex' (id 9): no joint's device has id 9 in "
         "{config}; map it with --map elbow_flex=JOINT"),
        ({"id": 9}, ["--map", "elbow_flex=elbow_joint"],
         "{lerobot}: motor 'elbow_flex': id 9, but joint 'elbow_joint''s device has id 3: "
         "another servo"),
        ({}, ["--map", "elbow=elbow_joint"], "{lerobot}: --map names motors ['elbow'] that are "
         "not in {lerobot}: ['shoulder_pan', 'shoulder_lift', 'elbow_flex', 'wrist_flex', "
         "'wrist_roll', 'gripper']"),
        ({}, ["--map", "elbow_flex=elbow"], "{lerobot}: --map elbow_flex=elbow: no driven joint "
         "'elbow'; joints: shoulder_pan_joint, shoulder_lift_joint, elbow_joint, wrist_1_joint, "
         "wrist_2_joint, wrist_3_joint"),
    ],
)  # fmt: skip
def test_bad_files_and_mappings_name_the_file_the_motor_and_the_value(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: dict[str, Any],
    extra: list[str],
    message: str,
) -> None:
    config = dynamixel_config(tmp_path)
    lerobot = _edited(tmp_path, "elbow_flex", **edit)
    assert calibrate(config, "--import-lerobot", str(lerobot), *extra) == 1
    expected = message.format(lerobot=lerobot, config=config)
    assert capsys.readouterr().err == f"armd: error: {expected}\n"
    assert not (tmp_path / "armd.calibration.yaml").exists()


def test_files_that_are_not_lerobot_calibrations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = dynamixel_config(tmp_path)
    lerobot = tmp_path / "l.json"
    for text, error in [
        (
            '{"a": 1,}',
            f"{lerobot}:1:9: invalid JSON: Expecting property name enclosed in double quotes",
        ),
        ("[1, 2]", f"{lerobot}: a LeRobot calibration is a JSON object of motors by name"),
        ('{"gripper": {"id": 6}}', f"{lerobot}: gripper.drive_mode: required option is missing"),
    ]:
        lerobot.write_text(text)
        assert calibrate(config, "--import-lerobot", str(lerobot)) == 1
        assert capsys.readouterr().err.startswith(f"armd: error: {error}")
    assert calibrate(config, "--import-lerobot", str(tmp_path / "none.json")) == 1
    assert capsys.readouterr().err.startswith(f"armd: error: {tmp_path}/none.json: cannot read")
    assert calibrate(config, "--map", "a=b") == 2
    assert "--map goes with --import-lerobot" in capsys.readouterr().err
