"""The calibration file (`armd.config.calibration`): its offsets replace the transmission offsets,
its
ranges narrow the limits (down to the control process's loop and the goal planner), and every bad
or missing calibration is a `ConfigError` naming the file, the joint, the field and the value."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from armd.api.statuses import StatusLedger
from armd.cli.main import main
from armd.config.calibration import (
    CalibrationFile,
    JointCalibration,
    joint_calibration,
    read_calibration,
    write_calibration,
)
from armd.config.load import load_config
from armd.control.transmission import Transmission
from armd.daemon.process import plan_settings
from armd.errors import ConfigError
from armd.link.messages import GoalStatus, JointsGoal
from armd.link.protocol import MoveTo
from armd.motion.trajectory import MotionLimits
from armd.planning.goals import GoalPipeline, Rejected
from tests.armd.config.test_calibration_lerobot import dynamixel_config
from tests.armd.control.test_control_process import start_control, until
from tests.system.helpers import write_config

Doc = dict[str, Any]
WHEN = "2026-11-25T18:00:00+00:00"
DEVICES = {  # config/sim.yaml's joints and devices
    "shoulder_pan_joint": "base",
    "shoulder_lift_joint": "shoulder",
    "elbow_joint": "elbow",
    "wrist_1_joint": "wrist1",
    "wrist_2_joint": "wrist2",
    "wrist_3_joint": "wrist3",
}
# sim.yaml starts at q = [0, -π/2, π/2, -π/2, -π/2, 0]: every range below contains it, after
# the pan joint's offset of 0.1 rad (its motor at 0 reads 0.1).
RANGES = {
    "shoulder_pan_joint": [-0.5, 1.0],
    "shoulder_lift_joint": [-2.5, 0.5],
    "elbow_joint": [1.0, 2.0],
    "wrist_1_joint": [-2.5, 2.5],
    "wrist_2_joint": [-7.0, 7.0],  # wider than the model's ±2π: the model's stay
    "wrist_3_joint": [-2.5, 2.5],
}


def calibration_doc() -> Doc:
    return {
        "version": 1,
        "joints": {
            joint: {
                "offset": 0.1 if joint == "shoulder_pan_joint" else 0.0,
                "range": RANGES[joint],
                "recorded": WHEN,
                "driver": "sim",
                "device": device,
                "device_id": None,
            }
            for joint, device in DEVICES.items()
        },
    }


def calibrated_config(tmp_path: Path, doc: Doc | None = None, **overrides: Any) -> Path:
    (tmp_path / "arm.calibration.yaml").write_text(
        yaml.safe_dump(calibration_doc() if doc is None else doc, sort_keys=False),
        encoding="utf-8",
    )
    return write_config(tmp_path, 1883, {"calibration": "arm.calibration.yaml", **overrides})


def problems(config: Path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(config, kernels=False)
    return str(info.value).splitlines()


def test_offsets_replace_the_transmission_offsets_and_ranges_narrow_the_limits(
    tmp_path: Path,
) -> None:
    setup = load_config(calibrated_config(tmp_path), kernels=False)
    assert setup.joints["shoulder_pan_joint"].offset == pytest.approx(0.1, abs=1e-12)
    assert setup.joints["elbow_joint"].offset == pytest.approx(0.0, abs=1e-12)
    limits = setup.limits
    assert (limits["elbow_joint"].lower, limits["elbow_joint"].upper) == pytest.approx(
        (1.0, 2.0), abs=1e-12
    )
    two_pi = 2 * math.pi
    assert (limits["wrist_2_joint"].lower, limits["wrist_2_joint"].upper) == pytest.approx(
        (-two_pi, two_pi), abs=1e-9
    )  # the intersection with the model's limits
    assert limits["elbow_joint"].velocity == pytest.approx(3.15, abs=1e-9)  # untouched
    assert setup.calibration is not None
    assert setup.calibration.path == tmp_path / "arm.calibration.yaml"
    uncalibrated = load_config(calibrated_config(tmp_path), kernels=False, calibration=False)
    assert uncalibrated.limits["elbow_joint"].upper == pytest.approx(math.pi, abs=1e-9)
    assert uncalibrated.joints["shoulder_pan_joint"].offset == 0.0


def test_check_shows_the_calibration_and_the_calibrated_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = calibrated_config(tmp_path)
    assert main(["check", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"calibration {tmp_path}/arm.calibration.yaml: offsets and ranges of " in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if "_joint " in line}
    #                          driver/device  gear sign offset lower upper
    assert rows["elbow_joint"][1:7] == ["sim/elbow", "1", "+1", "0", "1", "2"]
    assert rows["shoulder_pan_joint"][4:7] == ["0.1", "-0.5", "1"]


def test_a_joint_that_is_not_calibrated_keeps_its_configured_offset(tmp_path: Path) -> None:
    doc = calibration_doc()
    del doc["joints"]["wrist_3_joint"]
    config = calibrated_config(
        tmp_path, doc, joints={"wrist_3_joint": {"calibrated": False, "offset": 0.25}}
    )
    setup = load_config(config, kernels=False)
    assert setup.joints["wrist_3_joint"].offset == pytest.approx(0.25, abs=1e-12)


def test_the_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    entry = JointCalibration(
        offset=0.123456789012345,
        range=[-1e-05, 2.5],
        recorded=WHEN,
        driver="bus",
        device="elbow",
        device_id=3,
    )
    write_calibration(path, CalibrationFile(version=1, joints={"elbow": entry}))
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# armd calibration")
    assert "range: [-1.0e-05, 2.5]" in text  # a YAML 1.1 number, not text
    back, _ = read_calibration(path)
    assert back.joints["elbow"] == entry
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]  # no temporary file left


def test_joint_calibration_goes_through_the_sign_and_the_gear_ratio() -> None:
    t = Transmission("j", "d", "m", gear_ratio=4.0, sign=-1)
    # motor readings 2 .. 10 with the reference at 6: joint = motor / -4 + offset
    offset, (low, high) = joint_calibration(t, 2.0, 10.0, 6.0)
    assert offset == pytest.approx(1.5, abs=1e-12)  # -6 / -4
    assert (low, high) == pytest.approx((-1.0, 1.0), abs=1e-12)  # (10 - 6) / -4, (2 - 6) / -4
    calibrated = Transmission("j", "d", "m", gear_ratio=4.0, sign=-1, offset=offset)
    assert calibrated.joint_position(6.0) == pytest.approx(0.0, abs=1e-12)  # the reference


# -- bad and missing calibrations -----------------------------------------------------------------


def _joint(doc: Doc, joint: str, **fields: Any) -> Doc:
    doc["joints"][joint].update(fields)
    return doc


@pytest.mark.parametrize(
    ("doc", "where", "message"),
    [
        (
            _joint(calibration_doc(), "elbow_joint", offset=float("nan")),
            "joints.elbow_joint.offset",
            "nan must be a finite number",
        ),
        (
            _joint(calibration_doc(), "elbow_joint", range=[1.0, float("inf")]),
            "joints.elbow_joint.range.1",
            "inf must be a finite number",
        ),
        (
            _joint(calibration_doc(), "elbow_joint", range=[2.0, 1.0]),
            "joints.elbow_joint.range",
            "[2, 1]: min 2 must be < max 1",
        ),
        (
            _joint(calibration_doc(), "elbow_joint", range=[1.5, 1.5]),
            "joints.elbow_joint.range",
            "[1.5, 1.5]: min 1.5 must be < max 1.5",
        ),
        (
            _joint(calibration_doc(), "elbow_joint", range=[1.5]),
            "joints.elbow_joint.range",
            "[1.5] must be two numbers: [min, max]",
        ),
        (
            _joint(calibration_doc(), "elbow_joint", recorded="yesterday"),
            "joints.elbow_joint.recorded",
            "'yesterday' must be an ISO 8601 date and time, e.g. 2026-11-25T18:50:00+00:00",
        ),
        (
            _joint(calibration_doc(), "elbow_joint", offset="0.1"),
            "joints.elbow_joint.offset",
            "'0.1' must be a number (YAML reads it as text; write 0.1)",
        ),
        (
            {**calibration_doc(), "version": 2},
            "version",
            "2 must be 1",
        ),
    ],
)
def test_invalid_values_name_the_file_the_joint_the_field_and_the_value(
    tmp_path: Path, doc: Doc, where: str, message: str
) -> None:
    config = calibrated_config(tmp_path, doc)
    path = tmp_path / "arm.calibration.yaml"
    lines = path.read_text().splitlines()
    key = where.split(".")[2] if where.startswith("joints.") else where
    start = lines.index("  elbow_joint:") if where.startswith("joints.") else 0
    line = 1 + next(i for i in range(start, len(lines)) if lines[i].strip().startswith(key + ":"))
    assert problems(config) == [f"{path}:{line}: {where}: {message}"]


def test_a_joint_unknown_to_the_config(tmp_path: Path) -> None:
    doc = calibration_doc()
    doc["joints"]["elbow"] = doc["joints"]["elbow_joint"]
    config = calibrated_config(tmp_path, doc)
    (line,) = problems(config)
    assert line.startswith(f"{tmp_path}/arm.calibration.yaml:")
    assert line.endswith(
        f"joints.elbow: unknown joint: {config} drives no joint 'elbow'; its driven joints: "
        + ", ".join(DEVICES)
    )


def test_a_joint_the_config_requires_is_missing(tmp_path: Path) -> None:
    doc = calibration_doc()
    del doc["joints"]["elbow_joint"]
    config = calibrated_config(tmp_path, doc)
    assert problems(config) == [
        f"{tmp_path}/arm.calibration.yaml:2: joints.elbow_joint: missing: {config} requires a "
        "calibration of joint 'elbow_joint' (joints.elbow_joint.calibrated is true); record it "
        f"with armd calibrate --config {config} --joint elbow_joint"
    ]


def test_a_joint_the_config_does_not_calibrate_must_not_be_in_the_file(tmp_path: Path) -> None:
    config = calibrated_config(tmp_path, joints={"elbow_joint": {"calibrated": False}})
    (line,) = problems(config)
    assert "joints.elbow_joint: " in line
    assert "says joints.elbow_joint.calibrated: false" in line


def test_recorded_on_another_device(tmp_path: Path) -> None:
    doc = _joint(calibration_doc(), "elbow_joint", device="wrist1")
    (line,) = problems(calibrated_config(tmp_path, doc))
    assert "joints.elbow_joint.device: recorded on device 'wrist1' of driver 'sim', but" in line
    assert "drives 'elbow_joint' with device 'elbow' of driver 'sim': calibrate it again" in line


def test_recorded_on_another_servo_id(tmp_path: Path) -> None:
    doc = _joint(calibration_doc(), "elbow_joint", device_id=7)
    (line,) = problems(calibrated_config(tmp_path, doc))
    assert "joints.elbow_joint.device_id: 7 but device 'elbow' of driver 'sim' has id null" in line
    assert "recorded on another servo" in line


def test_recorded_on_another_servo_id_of_a_servo_bus(tmp_path: Path) -> None:
    config = dynamixel_config(tmp_path)  # the UR5 on servos s1 ... s6, ids 1 ... 6
    doc = calibration_doc()
    for i, entry in enumerate(doc["joints"].values(), 1):
        entry.update(driver="bus", device=f"s{i}", device_id=i)
    doc["joints"]["elbow_joint"]["device_id"] = 7
    path = tmp_path / "arm.calibration.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    text = config.read_text() + "calibration: arm.calibration.yaml\n"
    config.write_text(text)
    line = 1 + path.read_text().splitlines().index("    device_id: 7")
    assert problems(config) == [
        f"{path}:{line}: joints.elbow_joint.device_id: 7 but device 's3' of driver 'bus' has "
        f"id 3 in {config}: recorded on another servo; calibrate it again (armd calibrate "
        f"--config {config} --joint elbow_joint)"
    ]
    doc["joints"]["elbow_joint"]["device_id"] = 3
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    limits = load_config(config, kernels=False).limits
    assert limits["elbow_joint"].upper == pytest.approx(2.0, abs=1e-12)


def test_a_range_outside_the_limits(tmp_path: Path) -> None:
    doc = _joint(calibration_doc(), "elbow_joint", range=[3.5, 4.0])
    (line,) = problems(calibrated_config(tmp_path, doc))
    assert line.endswith(
        "joints.elbow_joint.range: [3.5, 4] rad does not overlap the joint's limits "
        "[-3.14159, 3.14159] rad (model and config): is it the calibration of this arm? "
        f"(armd calibrate --config {tmp_path}/armd.yaml --joint elbow_joint)"
    )


def test_a_missing_file_is_reported_at_the_config_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, 1883, {"calibration": "nowhere.yaml"})
    line_of = 1 + config.read_text().splitlines().index("calibration: nowhere.yaml")
    assert problems(config) == [
        f"{config}:{line_of}: calibration: {tmp_path}/nowhere.yaml: no such file (relative "
        f"paths start at {tmp_path}/); record one with armd calibrate --config {config}"
    ]


def test_an_unreadable_or_broken_file(tmp_path: Path) -> None:
    config = calibrated_config(tmp_path)
    path = tmp_path / "arm.calibration.yaml"
    path.write_text("version: 1\njoints: [\n", encoding="utf-8")
    (line,) = problems(config)
    assert line.startswith(f"{path}:3:1: invalid YAML")
    path.write_bytes(b"version: 1\n\xff\n")
    assert problems(config) == [f"{path}: not UTF-8 text (byte 11)"]
    path.write_text("- 1\n", encoding="utf-8")
    assert problems(config) == [f"{path}: the top level must be a mapping of options, got a list"]
    if os.geteuid() != 0:  # root reads every file
        path.write_text("version: 1\n", encoding="utf-8")
        path.chmod(0)
        (line,) = problems(config)
        assert line.startswith(f"{path}: cannot read: Permission denied")


# -- the narrowed limits reach the control process's loop and the planner -------------------------


async def test_the_control_loop_and_the_planner_enforce_the_calibrated_range(
    tmp_path: Path,
) -> None:
    config = calibrated_config(tmp_path)
    control = await start_control(config)
    try:
        port = control.client.port
        measured = port.latest.measured_position
        assert measured is not None
        assert measured[0] == pytest.approx(0.1, abs=1e-3)  # the pan motor at 0 reads the offset
        np.testing.assert_allclose(control.setup.upper[2], 2.0, atol=1e-12)
        # the loop refuses a move beyond the calibrated range (inside the model's ±π)
        target = measured.copy()
        target[2] = 2.5
        port.send(MoveTo("beyond", target, control.setup.limits.scaled(1.0)))
        await until(lambda: control.reports.final("beyond") is not None, "beyond final")
        final = control.reports.final("beyond")
        assert final is not None
        assert final.status is GoalStatus.ABORTED
        assert "outside" in (final.reason or "")
        # the planner, built as the daemon builds it, rejects it first
        setup = load_config(config, kernels=False)
        limits = setup.tree.limits
        statuses: list[Any] = []
        pipeline = GoalPipeline(
            setup.tree,
            setup.tool_link,
            port,
            MotionLimits(limits.velocity, limits.acceleration, setup.jerk),
            plan_settings(setup),
            StatusLedger(statuses.append),
        )
        with pytest.raises(Rejected) as info:
            pipeline.plan(JointsGoal("g", {"elbow_joint": 2.5}))
        assert str(info.value) == "joint 'elbow_joint': 2.5 outside [1, 2]"
    finally:
        control.runner.cancel()
        await control.client.close()
