"""Importing a LeRobot calibration (``so101_follower`` / ``so100_follower``, Feetech STS3215
servos) as armd calibration entries. The reasoning is in docs/calibration.md; in short:

- LeRobot's file is JSON, per motor name: ``id``, ``drive_mode``, ``homing_offset``,
  ``range_min``, ``range_max``, in raw STS3215 counts (4096 per turn).
- ``homing_offset`` is what LeRobot wrote into the servo's Homing_Offset EEPROM register (so
  that the pose the user held, the middle of the range, reads 2047). The servo subtracts it
  itself: Present_Position already includes it, so the import never applies it again.
- ``range_min`` / ``range_max`` are Present_Position counts (recorded after the homing).
- LeRobot's angle (its ``degrees`` mode) is zero at the middle of the range,
  ``(range_min + range_max) / 2``; the so101_new_calib model's zero is there too. The import
  puts armd's joint zero there, for every motor (the gripper included).

The motor position armd's drivers report for a Present_Position of ``counts`` is taken as
``direction · 2π · counts / 4096 + offset_rad`` (rad at the shaft), with the device's
``direction`` and ``offset_rad`` params when it has them (1 and 0 otherwise), as the Dynamixel
driver does; the transmission then gives joint units.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from armd.config.calibration import JointCalibration, device_id, joint_calibration, now_utc
from armd.config.checks import Problems
from armd.config.load import ArmSetup
from armd.config.schema_errors import describe_errors
from armd.errors import ConfigError

__all__ = ["COUNTS_PER_TURN", "LeRobotMotor", "import_lerobot", "motor_position", "read_lerobot"]

COUNTS_PER_TURN = 4096
MAX_HOMING_OFFSET = 2047  # 11-bit magnitude with a sign bit (bit 11), as the register holds it


class LeRobotMotor(BaseModel):
    """One motor of a LeRobot calibration file (raw STS3215 counts)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    id: int = Field(ge=0, le=253, description="the servo's bus id")
    drive_mode: Literal[0, 1] = Field(description="1: LeRobot inverts its normalised values")
    homing_offset: int = Field(
        ge=-MAX_HOMING_OFFSET, le=MAX_HOMING_OFFSET, description="counts, in the servo's EEPROM"
    )
    range_min: int = Field(ge=0, le=COUNTS_PER_TURN - 1, description="Present_Position counts")
    range_max: int = Field(ge=0, le=COUNTS_PER_TURN - 1, description="Present_Position counts")

    @model_validator(mode="after")
    def _ordered(self) -> LeRobotMotor:
        if self.range_min >= self.range_max:
            raise ValueError(
                f"range_min {self.range_min} must be < range_max {self.range_max} (counts)"
            )
        return self


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    motors: dict[str, LeRobotMotor]


@dataclass(frozen=True, slots=True)
class Imported:
    """The armd entries by joint, and notes for the user (one line each)."""

    joints: dict[str, JointCalibration]
    notes: list[str]


def read_lerobot(path: Path) -> dict[str, LeRobotMotor]:
    """The motors of the LeRobot calibration file at `path`. Raises `ConfigError` naming the
    file, the motor, the field and the value of every problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict) or not data:
        raise ConfigError(
            f"{path}: a LeRobot calibration is a JSON object of motors by name, "
            '{"shoulder_pan": {"id": 1, ...}, ...}'
        )
    try:
        return dict(_File.model_validate({"motors": data}).motors)
    except ValidationError as exc:
        problems = Problems(path, {})
        problems.extend([(loc[1:], message) for loc, message in describe_errors(exc, _File, {})])
        raise problems.error() from None


def motor_position(counts: float, direction: int = 1, offset_rad: float = 0.0) -> float:
    """The motor position (rad at the shaft) armd's driver reports for Present_Position
    `counts` (see the module docstring)."""
    return direction * 2.0 * math.pi * counts / COUNTS_PER_TURN + offset_rad


def import_lerobot(
    path: Path, setup: ArmSetup, mapping: Mapping[str, str] | None = None
) -> Imported:
    """The armd calibration of the joints that the motors of LeRobot file `path` drive.

    Each motor goes to the joint `mapping` names (LeRobot name → joint), else to the joint whose
    device has the motor's id in the config (the sim driver's devices have none: map them).
    Raises `ConfigError` for a bad file, a motor that maps to no joint or to the wrong servo id,
    or a mapping that names an unknown motor or joint.
    """
    motors = read_lerobot(path)
    mapping = dict(mapping or {})
    problems: list[str] = []
    unknown = sorted(set(mapping) - set(motors))
    if unknown:
        problems.append(f"--map names motors {unknown} that are not in {path}: {list(motors)}")
    joints, notes = {}, []
    recorded = now_utc()
    for name, motor in motors.items():
        joint = _joint_of(name, motor, setup, mapping, problems)
        if joint is None:
            continue
        t = setup.joints[joint]
        params = setup.config.drivers[t.driver].params.devices[t.device]  # type: ignore[attr-defined]
        direction = getattr(params, "direction", 1)
        offset_rad = getattr(params, "offset_rad", 0.0)
        offset, (low, high) = joint_calibration(
            t,
            motor_position(motor.range_min, direction, offset_rad),
            motor_position(motor.range_max, direction, offset_rad),
            motor_position((motor.range_min + motor.range_max) / 2, direction, offset_rad),
        )
        joints[joint] = JointCalibration(
            offset=offset,
            range=[low, high],
            recorded=recorded,
            driver=t.driver,
            device=t.device,
            device_id=device_id(setup.config, t.driver, t.device),
            source=f"lerobot import: {path.name}, motor {name} (id {motor.id})",
        )
        if motor.drive_mode:
            notes.append(
                f"motor {name!r}: drive_mode 1 (LeRobot inverts its normalised values); armd's "
                f"direction is the config's joints.{joint}.sign, unchanged by the import"
            )
    if problems:
        raise ConfigError("\n".join(f"{path}: {p}" for p in problems))
    return Imported(joints, notes)


def _joint_of(
    name: str,
    motor: LeRobotMotor,
    setup: ArmSetup,
    mapping: Mapping[str, str],
    problems: list[str],
) -> str | None:
    ids = {joint: device_id(setup.config, t.driver, t.device) for joint, t in setup.joints.items()}
    if name in mapping:
        joint = mapping[name]
        if joint not in setup.joints:
            problems.append(
                f"--map {name}={joint}: no driven joint {joint!r}; joints: {', '.join(ids)}"
            )
            return None
        if ids[joint] is not None and ids[joint] != motor.id:
            problems.append(
                f"motor {name!r}: id {motor.id}, but joint {joint!r}'s device has id "
                f"{ids[joint]}: another servo"
            )
            return None
        return joint
    matches = [joint for joint, i in ids.items() if i == motor.id]
    if not matches:
        problems.append(
            f"motor {name!r} (id {motor.id}): no joint's device has id {motor.id} in "
            f"{setup.path}; map it with --map {name}=JOINT"
        )
        return None
    return matches[0]
