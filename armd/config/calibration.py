"""The calibration file: per joint, the offset and the range measured on the arm itself
(``armd calibrate``, or imported from LeRobot), in joint units (rad, m). The format, and how it
changes the config, are in docs/calibration.md.

A config names it with ``calibration: FILE`` (relative to the config's folder). At load
(`apply_calibration`) each calibrated joint's offset replaces its transmission offset
(``motor = sign × gear_ratio × (joint − offset)``), and its range narrows the joint's position
limits to their intersection with the range, so the planner and the safety monitor enforce it.
Every problem is a `ConfigError` naming the file, the line, the joint, the field and the value.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from armd.config.checks import Problems, resolve_path
from armd.config.schema import ArmConfig
from armd.config.schema_errors import describe_errors
from armd.config.yaml_doc import read_yaml
from armd.control.transmission import Transmission
from kinematics import JointLimit, JointMotor, KinematicTree

__all__ = [
    "FORMAT_VERSION",
    "Calibrated",
    "CalibrationFile",
    "JointCalibration",
    "apply_calibration",
    "default_path",
    "device_id",
    "joint_calibration",
    "now_utc",
    "position_units",
    "read_calibration",
    "write_calibration",
]

FORMAT_VERSION: Literal[1] = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class JointCalibration(_Strict):
    """One joint: `offset` (rad or m, the joint position where its motor reads 0) and `range`
    ([min, max], rad or m, in joint units after that offset), with where and when it was taken."""

    offset: float = Field(description="rad or m: the joint position where the motor reads 0")
    range: list[float] = Field(description="[min, max], rad or m")
    recorded: str = Field(description="when it was recorded, ISO 8601 (UTC)")
    driver: str = Field(min_length=1, description="the driver it was recorded on")
    device: str = Field(min_length=1, description="the device of that driver")
    device_id: int | None = Field(None, description="the servo id of that device, if it has one")
    source: str = Field("armd calibrate", description="how: armd calibrate, lerobot import")

    @field_validator("recorded", mode="before")
    @classmethod
    def _timestamp(cls, value: object) -> object:
        if isinstance(value, datetime):  # YAML reads an unquoted timestamp as one
            return value.isoformat()
        if isinstance(value, str):
            try:
                datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(
                    f"{value!r} must be an ISO 8601 date and time, e.g. 2026-11-25T18:50:00+00:00"
                ) from None
        return value

    @field_validator("range")
    @classmethod
    def _ordered(cls, value: list[float]) -> list[float]:
        if len(value) != 2:
            shown = ", ".join(f"{v:g}" for v in value)
            raise ValueError(f"[{shown}] must be two numbers: [min, max]")
        low, high = value
        if not low < high:
            raise ValueError(f"[{low:g}, {high:g}]: min {low:g} must be < max {high:g}")
        return value


class CalibrationFile(_Strict):
    """The whole file: its format `version` and the calibrated joints by name."""

    version: Literal[1] = Field(description="the format version: 1")
    joints: dict[str, JointCalibration] = Field(description="joint name: its calibration")


@dataclass(frozen=True, slots=True)
class Calibrated:
    """A calibration applied to a config: the file, each calibrated joint's offset, and the
    driven joints' limits narrowed by the calibrated ranges (all of them, by name)."""

    path: Path
    file: CalibrationFile
    offsets: Mapping[str, float]
    limits: Mapping[str, JointLimit]


def now_utc() -> str:
    """The current time, ISO 8601 in UTC, to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def default_path(config_path: Path, config: ArmConfig) -> Path:
    """Where ``armd calibrate`` writes: the config's calibration file, else
    ``<config stem>.calibration.yaml`` next to the config."""
    if config.calibration is not None:
        return resolve_path(config_path.parent, config.calibration)
    return config_path.with_name(f"{config_path.stem}.calibration.yaml")


def device_id(config: ArmConfig, driver: str, device: str) -> int | None:
    """The servo id in the device's params (Dynamixel, Feetech), None for devices without one."""
    devices = getattr(config.drivers[driver].params, "devices", {})
    value = getattr(devices.get(device), "id", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def position_units(tree: KinematicTree) -> dict[str, str]:
    """Each joint's position unit: rad, or m for a prismatic joint."""
    return {
        str(link.joint_name): "m" if link.motor.kind == "prismatic" else "rad"
        for link in tree.links
        if isinstance(link.motor, JointMotor)
    }


def joint_calibration(
    transmission: Transmission,
    motor_min: float,
    motor_max: float,
    motor_reference: float,
    reference: float = 0.0,
) -> tuple[float, tuple[float, float]]:
    """The offset (joint units) at which the motor reading `motor_reference` (the reference pose)
    reads `reference` (the model's zero by default), and the range [min, max] in joint units,
    after that offset, of the motor readings `motor_min` to `motor_max` (motor units), through the
    transmission's sign and gear ratio (``joint = motor / (sign × gear_ratio) + offset``)."""
    scale = transmission.scale
    offset = reference - motor_reference / scale
    low, high = sorted((motor_min / scale + offset, motor_max / scale + offset))
    return offset, (low, high)


def read_calibration(path: Path) -> tuple[CalibrationFile, Problems]:
    """The file at `path`, validated; its `Problems` (empty) carry its key lines for later checks.
    Raises `ConfigError` naming the file, line, joint, field and value of every problem."""
    data, lines = read_yaml(path)
    problems = Problems(path, lines)
    try:
        return CalibrationFile.model_validate(data), problems
    except ValidationError as exc:
        problems.extend(describe_errors(exc, CalibrationFile, {}))
        raise problems.error() from None


def write_calibration(path: Path, calibration: CalibrationFile) -> None:
    """Write `calibration` to `path` atomically (a temporary file renamed over it)."""
    data = calibration.model_dump()
    text = (
        "# armd calibration (docs/calibration.md): per joint, offset (the joint position where\n"
        "# its motor reads 0) and range [min, max], in joint units: rad (m for prismatic joints).\n"
        + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, allow_unicode=True)
    )
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- applying a calibration to a config ---------------------------------------------------------


def apply_calibration(
    config_problems: Problems,
    config: ArmConfig,
    limits: Mapping[str, JointLimit],
    units: Mapping[str, str],
) -> Calibrated | None:
    """The config's calibration file read and checked against the config; None without one.

    `limits` are the driven joints' effective limits (model and config), `units` each joint's
    position unit. A missing file is reported in `config_problems` (at the config's
    ``calibration`` line); an unreadable one, and problems in the file, at the calibration file's
    lines. Raises `ConfigError` with every problem.
    """
    if config.calibration is None:
        return None
    base = config_problems.path.parent
    path = resolve_path(base, config.calibration)
    if not path.is_file():
        where = "" if path.parent.is_dir() else f"; no folder {path.parent}"
        config_problems.add(
            ("calibration",),
            f"{path}: no such file{where} (relative paths start at {base}/); record one with "
            f"armd calibrate --config {config_problems.path}",
        )
        raise config_problems.error()
    file, problems = read_calibration(path)
    checks = _Checks(problems, config, config_problems.path, units)
    narrowed = dict(limits)
    for joint, entry in file.joints.items():
        if checks.known(joint) and checks.same_device(joint, entry):
            limit = checks.narrowed(joint, entry, limits[joint])
            if limit is not None:
                narrowed[joint] = limit
    checks.complete(file)
    if problems.items:
        raise problems.error()
    offsets = {joint: entry.offset for joint, entry in file.joints.items()}
    return Calibrated(path, file, offsets, narrowed)


@dataclass
class _Checks:
    problems: Problems
    config: ArmConfig
    config_path: Path
    units: Mapping[str, str]

    def known(self, joint: str) -> bool:
        joints = self.config.joints
        if joint not in joints:
            self.problems.add(
                ("joints", joint),
                f"unknown joint: {self.config_path} drives no joint {joint!r}; its driven "
                f"joints: {', '.join(joints)}",
            )
            return False
        if not joints[joint].calibrated:
            self.problems.add(
                ("joints", joint),
                f"{self.config_path} says joints.{joint}.calibrated: false (the joint keeps "
                "its configured offset); remove the joint from this file or set it to true",
            )
            return False
        return True

    def same_device(self, joint: str, entry: JointCalibration) -> bool:
        wanted = self.config.joints[joint]
        loc = ("joints", joint)
        if (entry.driver, entry.device) != (wanted.driver, wanted.device):
            field = "driver" if entry.driver != wanted.driver else "device"
            self.problems.add(
                (*loc, field),
                f"recorded on device {entry.device!r} of driver {entry.driver!r}, but "
                f"{self.config_path} drives {joint!r} with device {wanted.device!r} of driver "
                f"{wanted.driver!r}: calibrate it again ({self._hint(joint)})",
            )
            return False
        expected = device_id(self.config, wanted.driver, wanted.device)
        if entry.device_id != expected:
            self.problems.add(
                (*loc, "device_id"),
                f"{_show_id(entry.device_id)} but device {wanted.device!r} of driver "
                f"{wanted.driver!r} has id {_show_id(expected)} in {self.config_path}: recorded "
                f"on another servo; calibrate it again ({self._hint(joint)})",
            )
            return False
        return True

    def narrowed(self, joint: str, entry: JointCalibration, limit: JointLimit) -> JointLimit | None:
        low, high = entry.range
        unit = self.units.get(joint, "rad")
        lower, upper = max(limit.lower, low), min(limit.upper, high)
        if lower >= upper:
            self.problems.add(
                ("joints", joint, "range"),
                f"[{low:.6g}, {high:.6g}] {unit} does not overlap the joint's limits "
                f"[{limit.lower:.6g}, {limit.upper:.6g}] {unit} (model and config): is it the "
                f"calibration of this arm? ({self._hint(joint)})",
            )
            return None
        return JointLimit(lower, upper, limit.velocity, limit.acceleration)

    def complete(self, file: CalibrationFile) -> None:
        missing = [
            joint
            for joint, j in self.config.joints.items()
            if j.calibrated and joint not in file.joints
        ]
        for joint in missing:
            self.problems.add(
                ("joints", joint),
                f"missing: {self.config_path} requires a calibration of joint {joint!r} "
                f"(joints.{joint}.calibrated is true); record it with {self._hint(joint)}",
            )

    def _hint(self, joint: str) -> str:
        return f"armd calibrate --config {self.config_path} --joint {joint}"


def _show_id(value: int | None) -> str:
    return "null" if value is None else str(value)
