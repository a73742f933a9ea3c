"""The daemon's configuration: `load_config(path) -> ArmSetup` reads a YAML file, validates it
against its schema (`armd.config.schema`), checks it against the robot model and the drivers, and
resolves it into everything the daemon constructs itself from (`ArmSetup`).

Every problem is collected and reported at once in one `ConfigError`, one line per problem, in
file order: ``<file>:<line>: <path>: <message>``, e.g.
``arm.yaml:14: joints.elbow.gear_ratio: -3 must be > 0``.
Relative paths in the file (model, calibration, collision geometry, password and TLS files, lock
file) start at its folder. A calibration file, if named, is applied: see `armd.config.calibration`;
the ``mqtt`` section's password and TLS files are read in `armd.config.mqtt_setup`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import SecretStr, ValidationError

from armd.config.broker import MqttSettings
from armd.config.calibration import Calibrated, apply_calibration, position_units
from armd.config.checks import Problems, cross_check, params_models, resolve_path
from armd.config.collision import collision_spec
from armd.config.dynamics_schema import contact_problems
from armd.config.mqtt_setup import TlsSetup, mqtt_files, mqtt_settings
from armd.config.schema import (
    DEFAULT_JERK_PER_ACCELERATION,
    ArmConfig,
    MotionConfig,
    SafetyConfig,
    StreamConfig,
)
from armd.config.schema_errors import describe_errors
from armd.config.yaml_doc import read_yaml
from armd.control.transmission import ArmTransmission, Transmission
from armd.control.wiring import DriverSetup
from drivers import CONFIG_DIR, Clock, Driver, DriverError, LoopContext, load_driver_class
from kinematics import JointLimits, KinematicTree
from kinematics.collision import CollisionModel, CollisionSpec
from kinematics.compiled import load_kernels

__all__ = ["ArmSetup", "DriverSetup", "build_drivers", "load_config"]


Array = NDArray[np.float64]


# -- the result ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ArmSetup:
    """A validated configuration, resolved (see `load_config`).

    tree: the model with the config's limit overrides applied (`tree.limits` are the limits the
        daemon enforces: finite velocity and acceleration for every driven joint).
    jerk: (dof,) read-only jerk limits in q order, rad/s³ (m/s³): the configured ones, else
        `DEFAULT_JERK_PER_ACCELERATION` × the acceleration limit.
    transmission: joint ↔ motor mapping of every driven joint; fixed joints are held there.
    calibration: the calibration applied (its offsets are in `transmission`, its ranges in
        `tree.limits`), or None.
    drivers: by name, in file order. `build_drivers` constructs them.
    collision_spec: the ``collision:`` section resolved (None: no collision checking); the model
        built from it is `collision`.
    """

    path: Path
    config: ArmConfig
    model_path: Path
    tree: KinematicTree
    tool_link: str
    jerk: Array
    transmission: ArmTransmission
    drivers: Mapping[str, DriverSetup]
    mqtt: MqttSettings
    lock_file: Path
    calibration: Calibrated | None = None
    collision_spec: CollisionSpec | None = None

    @property
    def name(self) -> str:
        return self.config.name

    @cached_property
    def collision(self) -> CollisionModel | None:
        """The collision model of `tree` (docs/collision.md), or None when the config has no
        ``collision:`` section. Built on first use: its pair selection runs the compiled
        collision kernels (`load_config(kernels=True)` builds it at once)."""
        if self.collision_spec is None:
            return None
        return CollisionModel(self.tree, self.collision_spec)

    @property
    def limits(self) -> JointLimits:
        return self.tree.limits

    @cached_property
    def joints(self) -> Mapping[str, Transmission]:
        """The driven joints' transmissions by joint name, in q order."""
        return {t.joint: t for t in self.transmission.joints}

    @cached_property
    def fixed_joints(self) -> Mapping[str, float]:
        """The fixed joints' positions (rad or m) by name, in q order."""
        names = [self.tree.joint_names[i] for i in self.transmission.fixed]
        return dict(zip(names, self.transmission.fixed_positions.tolist(), strict=True))

    @property
    def loop_hz(self) -> float:
        return self.config.loop_hz

    @property
    def realtime_priority(self) -> int:
        return self.config.realtime_priority

    @property
    def telemetry_hz(self) -> float:
        return self.config.telemetry_hz

    @property
    def safety(self) -> SafetyConfig:
        return self.config.safety

    @property
    def motion(self) -> MotionConfig:
        return self.config.motion

    @property
    def stream(self) -> StreamConfig:
        return self.config.stream

    @property
    def broker_loss(self) -> Literal["finish", "stop"]:
        return self.config.broker_loss

    def __repr__(self) -> str:
        return (
            f"ArmSetup(name={self.name!r}, path={str(self.path)!r}, model={self.tree!r}, "
            f"tool_link={self.tool_link!r}, drivers={list(self.drivers)})"
        )


def build_drivers(setup: ArmSetup, clock: Clock = time.monotonic) -> dict[str, Driver]:
    """Every configured driver, constructed (not opened) on `clock`, by name."""
    return {name: driver.build(clock) for name, driver in setup.drivers.items()}


# -- loading -------------------------------------------------------------------------------------


def load_config(path: str | Path, *, kernels: bool = True, calibration: bool = True) -> ArmSetup:
    """Read, validate and resolve the config file at `path`.

    Raises `ConfigError` listing every problem, one line each (see the module docstring). Files
    the config names are checked (model, password, TLS); devices are not: see ``armd check``.
    With `kernels` the compiled kinematics kernels are loaded too (`kinematics.compiled`; compiled
    first when numba's cache is cold), so that the control loop's first FK does not wait for
    them; commands that only read the config (``check``, ``goal``) pass False and start fast.
    With `calibration` (the default) the config's calibration file, if it names one, is read and
    applied (`armd.config.calibration`); ``armd calibrate`` passes False to record a new one.
    """
    path = Path(path)
    data, lines = read_yaml(path)
    problems = Problems(path, lines)
    config: ArmConfig | None = None
    try:
        config = ArmConfig.model_validate(data, context={CONFIG_DIR: path.parent})
    except ValidationError as exc:
        problems.extend(describe_errors(exc, ArmConfig, params_models(data)))
    checked = cross_check(config, data, path.parent, problems)
    password, tls = mqtt_files(checked.mqtt, path.parent, problems)
    if problems.items or config is None or checked.tree is None or checked.tool_link is None:
        raise problems.error()
    limits, calibrated = checked.limits, None
    if calibration:
        units = position_units(checked.tree)
        calibrated = apply_calibration(problems, config, checked.limits, units)
        limits = {**limits, **calibrated.limits} if calibrated else limits
    tree = checked.tree.with_limits(limits)
    _check_gripper(config, tree, problems)
    _check_poses(config, tree, problems)
    kinds = {name: driver.type for name, driver in config.drivers.items()}
    joints = config.joints.items()
    problems.extend(contact_problems((n, j.contact, j.driver, kinds[j.driver]) for n, j in joints))
    spec = None
    if config.collision is not None:
        spec, found = collision_spec(config.collision, path.parent, tree)
        problems.extend(found)
    if problems.items:
        raise problems.error()
    if kernels:
        load_kernels()
    setup = _setup(path, config, tree, checked.tool_link, checked.jerk, password, tls, calibrated)
    setup = dataclasses.replace(setup, collision_spec=spec)
    drivers = _driver_setups(config, setup.transmission, tree, problems)
    if problems.items:
        raise problems.error()
    setup = dataclasses.replace(setup, drivers=drivers)
    if kernels:
        _ = setup.collision  # its kernels loaded and its pairs chosen before the daemon starts
    return setup


def _check_gripper(config: ArmConfig, tree: KinematicTree, problems: Problems) -> None:
    """The gripper is a driven joint whose open and closed positions are within its limits."""
    gripper = config.gripper
    if gripper is None:
        return
    if gripper.joint not in config.joints:
        problems.add(
            ("gripper", "joint"),
            f"{gripper.joint!r} is not a driven joint; joints: {', '.join(config.joints)}",
        )
        return
    limit = tree.limits[gripper.joint]
    for option in ("open", "closed"):
        value = getattr(gripper, option)
        if not limit.lower <= value <= limit.upper:
            problems.add(
                ("gripper", option),
                f"{value:g} is outside the joint's limits [{limit.lower:g}, {limit.upper:g}]",
            )


def _check_poses(config: ArmConfig, tree: KinematicTree, problems: Problems) -> None:
    """Every named pose names driven joints, within their limits: a pose is a goal checked once,
    when the config is read, and again (as any goal) when it is sent."""
    for name, positions in config.poses.items():
        for joint, value in positions.items():
            if joint not in config.joints:
                known = ", ".join(config.joints)
                problems.add(("poses", name, joint), f"is not a driven joint; joints: {known}")
                continue
            limit = tree.limits[joint]
            if not limit.lower <= value <= limit.upper:
                problems.add(
                    ("poses", name, joint),
                    f"{value:g} is outside the joint's limits [{limit.lower:g}, {limit.upper:g}]",
                )


def _setup(
    path: Path,
    config: ArmConfig,
    tree: KinematicTree,
    tool_link: str,
    jerk_limits: Mapping[str, float],
    password: SecretStr | None,
    tls: TlsSetup | None,
    calibrated: Calibrated | None,
) -> ArmSetup:
    """The setup of a config that passed every check; `tree` has its effective limits, and the
    calibrated offsets, if any, replace the configured ones."""
    offsets = calibrated.offsets if calibrated else {}
    transmission = ArmTransmission(
        tree.joint_names,
        [
            Transmission(
                joint, j.driver, j.device, j.gear_ratio, j.sign, offsets.get(joint, j.offset)
            )
            for joint, j in config.joints.items()
        ],
        config.fixed_joints,
    )
    jerk = np.array(
        [
            jerk_limits.get(n, DEFAULT_JERK_PER_ACCELERATION * tree.limits[n].acceleration)
            for n in tree.joint_names
        ]
    )
    jerk.flags.writeable = False
    return ArmSetup(
        path=path,
        config=config,
        model_path=resolve_path(path.parent, config.model),
        tree=tree,
        tool_link=tool_link,
        jerk=jerk,
        transmission=transmission,
        drivers={},  # completed for the loop by load_config (`_driver_setups`)
        mqtt=mqtt_settings(config, password, tls),
        lock_file=(
            Path(f"/run/armd/{config.name}.lock")
            if config.lock_file is None
            else resolve_path(path.parent, config.lock_file)
        ),
        calibration=calibrated,
    )


def _driver_setups(
    config: ArmConfig, transmission: ArmTransmission, tree: KinematicTree, problems: Problems
) -> dict[str, DriverSetup]:
    """Each driver's class and params, completed with what the loop decides (`Driver.with_loop`:
    its period, the devices' limits at the motor); a driver that cannot take them is a problem
    of its section."""
    setups = {}
    for name, d in config.drivers.items():
        cls = load_driver_class(d.type)
        served = [t for t in transmission.joints if t.driver == name]
        try:
            params = cls.with_loop(d.params, _loop_context(config, tree, served))
        except DriverError as exc:
            problems.add(("drivers", name), str(exc))
            continue
        setups[name] = DriverSetup(
            name=name,
            type_name=d.type,
            cls=cls,
            params=params,
            joints=tuple(t.joint for t in served),
        )
    return setups


def _loop_context(
    config: ArmConfig, tree: KinematicTree, served: list[Transmission]
) -> LoopContext:
    """What drives that program their own limits are given: the loop's period and each device's
    position range at the motor, the joint's enforced limits (calibrated) widened by the safety
    tolerance, through its transmission."""
    tolerance = config.safety.limit_tolerance
    limits = {}
    for t in served:
        joint = tree.limits[t.joint]
        ends = (
            t.motor_position(joint.lower - tolerance),
            t.motor_position(joint.upper + tolerance),
        )
        limits[t.device] = (min(ends), max(ends))
    return LoopContext(period_s=1.0 / config.loop_hz, position_limits=limits)
