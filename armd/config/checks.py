"""Cross-checks of a config file beyond its schema: against the robot model (joint names, limits,
tool link) and the drivers (devices) — run on the valid parts of the file even when others are
invalid, so that every problem is reported at once.

Used by `armd.config.load.load_config`; problems are collected in a `Problems` and raised together.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from armd.config.schema import (
    DEFAULT_JERK_PER_ACCELERATION,
    ArmConfig,
    DriverConfig,
    JointConfig,
    LimitsConfig,
    Loc,
    MotionConfig,
    MqttConfig,
    SafetyConfig,
)
from armd.errors import ConfigError
from drivers import CONFIG_DIR, DriverError, DriverParams, load_driver_class
from kinematics import JointLimit, JointMotor, KinematicsError, KinematicTree, load_tree

__all__ = ["Checked", "Problems", "cross_check", "params_models", "resolve_path"]

M = TypeVar("M", bound=BaseModel)


def resolve_path(base: Path, raw: str) -> Path:
    """`raw` (``~`` expanded) relative to `base`, the config file's folder; absolute stays."""
    return base / Path(raw).expanduser()


class Problems:
    """Problems found in one file, each at a path; formatted with the line of that path."""

    def __init__(self, path: Path, lines: Mapping[Loc, int]) -> None:
        self.path = path
        self.lines = lines
        self.items: list[tuple[Loc, str]] = []

    def add(self, loc: Loc, message: str) -> None:
        self.items.append((loc, message))

    def extend(self, items: list[tuple[Loc, str]]) -> None:
        self.items.extend(items)

    def _line(self, loc: Loc) -> int:
        keys = tuple(str(part) for part in loc)
        for end in range(len(keys), 0, -1):  # the nearest enclosing key that is in the file
            if keys[:end] in self.lines:
                return self.lines[keys[:end]]
        return 0

    def error(self) -> ConfigError:
        rows = sorted({(self._line(loc), ".".join(map(str, loc)), m) for loc, m in self.items})
        text = [
            f"{self.path}{f':{line}' if line else ''}: {where + ': ' if where else ''}{message}"
            for line, where, message in rows
        ]
        return ConfigError("\n".join(text))


def params_models(data: Mapping[str, object]) -> dict[str, type[BaseModel]]:
    """Each driver's `Params` model, for the drivers whose type is valid."""
    out: dict[str, type[BaseModel]] = {}
    for name, raw in _mapping(data.get("drivers")).items():
        try:
            out[name] = load_driver_class(str(_mapping(raw).get("type"))).Params
        except DriverError:  # reported at drivers.<name>.type
            continue
    return out


def _mapping(raw: object) -> dict[str, object]:
    return {k: v for k, v in raw.items() if isinstance(k, str)} if isinstance(raw, dict) else {}


def _string(raw: object) -> str | None:
    return raw if isinstance(raw, str) else None


# -- checks against the model and the drivers ---------------------------------------------------


def _quietly(model: type[M], raw: object, context: dict[str, object] | None = None) -> M | None:
    """`raw` validated as `model` (in `context`), or None (its errors were reported with the
    whole file)."""
    try:
        return model.model_validate(raw, context=context)
    except ValidationError:
        return None


@dataclass
class Parts:
    """The parts of the file that are valid, for cross-checks even when others are not."""

    model: str | None
    tool_link: str | None
    joints: dict[str, JointConfig | None]
    joints_mapping: bool  # `joints` is a mapping (its keys can be checked)
    joints_valid: bool  # ... and all its entries are valid
    fixed: dict[str, float | None]
    drivers: dict[str, DriverConfig | None]
    safety: SafetyConfig | None
    motion: MotionConfig | None
    mqtt: MqttConfig | None

    @classmethod
    def of(cls, config: ArmConfig | None, data: Mapping[str, object], base: Path) -> Parts:
        """The parts of `config`, or of the raw `data` where the file is not all valid (`base`:
        the config file's folder, where the drivers' relative paths start)."""
        if config is not None:
            return cls(
                config.model,
                config.tool_link,
                dict(config.joints),
                True,
                True,
                dict(config.fixed_joints),
                dict(config.drivers),
                config.safety,
                config.motion,
                config.mqtt,
            )
        joints = {k: _quietly(JointConfig, v) for k, v in _mapping(data.get("joints")).items()}
        fixed = {
            k: float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
            for k, v in _mapping(data.get("fixed_joints")).items()
        }
        return cls(
            _string(data.get("model")),
            _string(data.get("tool_link")),
            joints,
            isinstance(data.get("joints"), dict),
            isinstance(data.get("joints"), dict) and None not in joints.values(),
            fixed,
            {
                k: _quietly(DriverConfig, v, {CONFIG_DIR: base})
                for k, v in _mapping(data.get("drivers")).items()
            },
            _quietly(SafetyConfig, data.get("safety", {})),
            _quietly(MotionConfig, data.get("motion", {})),
            _quietly(MqttConfig, data.get("mqtt", {})),
        )


def _load_model(raw: str | None, base: Path, problems: Problems) -> KinematicTree | None:
    if raw is None:
        return None
    path = resolve_path(base, raw)
    if not path.is_file():
        problems.add(("model",), f"{path}: no such file (relative paths start at {base}/)")
        return None
    try:
        return load_tree(path)
    except KinematicsError as exc:
        problems.add(("model",), str(exc))
        return None


def _check_tool_link(tree: KinematicTree, link: str | None, problems: Problems) -> str | None:
    if link is None:
        if len(tree.leaves) == 1:
            return tree.leaves[0]
        problems.add(
            ("tool_link",),
            f"required: the model branches; its leaf links: {', '.join(tree.leaves)}",
        )
        return None
    if link not in tree.link_names:
        problems.add(
            ("tool_link",), f"unknown link {link!r}; model links: {', '.join(tree.link_names)}"
        )
        return None
    return link


def _joint_motors(tree: KinematicTree) -> dict[str, JointMotor]:
    return {
        str(link.joint_name): link.motor
        for link in tree.links
        if isinstance(link.motor, JointMotor)
    }


def _check_joint_names(tree: KinematicTree, parts: Parts, problems: Problems) -> None:
    motors = _joint_motors(tree)
    for section, names in (("joints", parts.joints), ("fixed_joints", parts.fixed)):
        for name in names:
            mimic = motors[name].mimic if name in motors else None
            if mimic is not None:
                problems.add(
                    (section, name),
                    f"mimic joint: it follows {mimic.joint!r} and is not configured; remove it",
                )
            elif name not in tree.joint_names:
                known = ", ".join(tree.joint_names)
                problems.add((section, name), f"unknown joint; model joints: {known}")
    for name in sorted(parts.joints.keys() & parts.fixed.keys()):
        problems.add(("fixed_joints", name), "also in joints: a joint is driven or fixed")
    for name, value in parts.fixed.items():
        limit = tree.limits[name] if name in tree.joint_names else None
        if limit is not None and value is not None and not limit.lower <= value <= limit.upper:
            unit = _UNITS[motors[name].kind][0]
            problems.add(
                ("fixed_joints", name),
                f"{value:.6g} {unit} outside the model's limits "
                f"[{limit.lower:.6g}, {limit.upper:.6g}] {unit}",
            )
    if not parts.joints_mapping:
        return
    for name in tree.joint_names:
        if name not in parts.joints and name not in parts.fixed:
            problems.add(
                ("joints", name),
                "model joint not configured: map it to a driver's device here, "
                f"or hold it still with fixed_joints: {{{name}: <position>}}",
            )


_UNITS = {
    "revolute": ("rad", "rad/s", "rad/s²", "rad/s³"),
    "prismatic": ("m", "m/s", "m/s²", "m/s³"),
}


def _effective_limits(
    tree: KinematicTree, parts: Parts, problems: Problems
) -> tuple[dict[str, JointLimit], dict[str, float]]:
    """The driven joints' limits (model limits tightened by the config) and jerk limits."""
    motors = _joint_motors(tree)
    limits: dict[str, JointLimit] = {}
    jerk: dict[str, float] = {}
    for joint, config in parts.joints.items():
        if config is None or joint not in tree.joint_names:
            continue
        units = _UNITS[motors[joint].kind]
        limit = _joint_limit(joint, units, tree.limits[joint], config.limits, problems)
        if limit is not None:
            limits[joint] = limit
            jerk[joint] = config.limits.jerk or DEFAULT_JERK_PER_ACCELERATION * limit.acceleration
    for joint, value in parts.fixed.items():
        if value is not None and joint in tree.joint_names:
            limits[joint] = _fixed_limit(tree.limits[joint], value)
    return limits, jerk


def _fixed_limit(model: JointLimit, value: float) -> JointLimit:
    """A fixed joint's limits: its position only. Planning (IK included) then never moves it, and
    its velocity and acceleration bounds are finite even where the model gives none (an
    unbounded one would turn the loop's braking arithmetic into NaN)."""
    velocity = model.velocity if math.isfinite(model.velocity) else 1.0
    acceleration = model.acceleration if math.isfinite(model.acceleration) else 1.0
    return JointLimit(value, value, velocity, acceleration)


def _joint_limit(
    joint: str, units: tuple[str, ...], model: JointLimit, config: LimitsConfig, problems: Problems
) -> JointLimit | None:
    loc = ("joints", joint, "limits")
    keys = ("lower", "upper", "velocity", "acceleration")
    unit = dict(zip(keys, (units[0], units[0], units[1], units[2]), strict=True))
    merged = {key: getattr(model, key) for key in keys}
    valid = True
    for key in keys:
        value, bound = getattr(config, key), getattr(model, key)
        if value is None:
            continue
        merged[key] = value
        if value < bound if key == "lower" else value > bound:
            valid = False
            problems.add(
                (*loc, key),
                f"{value:.6g} {unit[key]} is beyond the model's {key} limit "
                f"{bound:.6g} {unit[key]}: a config may only tighten the model's limits",
            )
    if valid and merged["lower"] >= merged["upper"]:
        valid = False
        key = "lower" if config.lower is not None else "upper"
        problems.add(
            (*loc, key),
            f"lower {merged['lower']:.6g} must be < upper {merged['upper']:.6g} {unit[key]}",
        )
    for key in ("velocity", "acceleration"):
        if math.isinf(merged[key]):
            valid = False
            problems.add(
                (*loc, key),
                f"required: the model gives joint {joint!r} no {key} limit, and a joint "
                f"cannot be driven safely without one; set joints.{joint}.limits.{key} "
                f"({unit[key]})",
            )
    return JointLimit(**merged) if valid else None


def _devices(params: DriverParams) -> tuple[str, ...]:
    devices = getattr(params, "devices", None)
    return tuple(devices) if isinstance(devices, Mapping) else ()


def _check_devices(parts: Parts, model_joints: Collection[str] | None, problems: Problems) -> None:
    """Every joint's (driver, device) exists and serves that joint only; every device is used.
    Joints that are invalid or not in the model (if loaded) are reported already: skipped."""
    users: dict[tuple[str, str], str] = {}
    for joint, config in parts.joints.items():
        if config is None or (model_joints is not None and joint not in model_joints):
            continue
        loc = ("joints", joint)
        if config.driver not in parts.drivers:
            problems.add(
                (*loc, "driver"),
                f"unknown driver {config.driver!r}; drivers: {', '.join(parts.drivers) or 'none'}",
            )
            continue
        driver = parts.drivers[config.driver]
        if driver is None:  # invalid: reported
            continue
        key = (config.driver, config.device)
        devices = _devices(driver.params)
        if config.device not in devices:
            problems.add(
                (*loc, "device"),
                f"{config.device!r} is not a device of driver {config.driver!r}; "
                f"its devices: {', '.join(devices)}",
            )
        elif key in users:
            problems.add(
                (*loc, "device"),
                f"device {config.device!r} of driver {config.driver!r} already drives "
                f"joint {users[key]!r}; a device serves one joint",
            )
        else:
            users[key] = joint
    if parts.joints_valid:  # else a device's joint may be among the invalid ones
        _check_unused_devices(parts, set(users), problems)


def _check_unused_devices(parts: Parts, used: set[tuple[str, str]], problems: Problems) -> None:
    for name, driver in parts.drivers.items():
        for device in _devices(driver.params) if driver is not None else ():
            if (name, device) not in used:
                problems.add(
                    ("drivers", name, "params", "devices", device),
                    "not used by any joint: map a joint to it or remove it "
                    "(a device that nobody commands would hold, then fault)",
                )


def _check_tolerances(parts: Parts, problems: Problems) -> None:
    """IK must solve more precisely than a pose goal is judged, or a goal could never succeed."""
    if parts.safety is None or parts.motion is None:
        return
    for kind, unit in (("position", "m"), ("rotation", "rad")):
        ik = getattr(parts.motion, f"ik_{kind}_tolerance")
        goal = getattr(parts.safety, f"pose_{kind}_tolerance")
        if ik > goal:
            problems.add(
                ("motion", f"ik_{kind}_tolerance"),
                f"{ik:g} {unit} must be <= safety.pose_{kind}_tolerance ({goal:g} {unit})",
            )


@dataclass(frozen=True, slots=True)
class Checked:
    """What the cross-checks resolved; None where they found a problem.

    tree: the model as loaded (without the config's overrides); limits: the driven joints'
    effective limits; jerk: their jerk limits, rad/s³ (m/s³); mqtt: the section, if valid.
    """

    tree: KinematicTree | None
    tool_link: str | None
    limits: dict[str, JointLimit]
    jerk: dict[str, float]
    mqtt: MqttConfig | None


def cross_check(
    config: ArmConfig | None, data: Mapping[str, object], base: Path, problems: Problems
) -> Checked:
    """Check the valid parts of the file (`config` if it is all valid, else `data`, the raw
    document) against the model and the drivers; add to `problems`."""
    parts = Parts.of(config, data, base)
    tree = _load_model(parts.model, base, problems)
    tool_link = None
    limits: dict[str, JointLimit] = {}
    jerk: dict[str, float] = {}
    if tree is not None:
        tool_link = _check_tool_link(tree, parts.tool_link, problems)
        _check_joint_names(tree, parts, problems)
        limits, jerk = _effective_limits(tree, parts, problems)
    _check_devices(parts, None if tree is None else tree.joint_names, problems)
    _check_tolerances(parts, problems)
    return Checked(tree, tool_link, limits, jerk, parts.mqtt)
