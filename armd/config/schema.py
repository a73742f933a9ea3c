"""The configuration file's schema (pydantic models, frozen, unknown options are errors); how
its validation errors read is `armd.config.schema_errors`.

Units: SI everywhere (m, rad, s; Hz for rates). Relative paths are relative to the config file's
folder. `armd.config.load.load_config` validates a file against `ArmConfig`, then checks it against
the model and the drivers; `config/armd.example.yaml` documents every option with its default.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self

from pydantic import (
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from armd.config.base import Section as _Section
from armd.config.base import positive as _positive
from armd.config.collision_schema import CollisionConfig
from armd.config.dynamics_schema import STANDARD_GRAVITY, ContactConfig, PayloadConfig
from armd.config.leader_schema import LeaderConfig
from armd.reasons import Loc
from drivers import DriverError, DriverParams, load_driver_class

__all__ = [
    "DEFAULT_JERK_PER_ACCELERATION",
    "ArmConfig",
    "CollisionConfig",
    "DriverConfig",
    "GripperConfig",
    "JointConfig",
    "LimitsConfig",
    "Loc",
    "MotionConfig",
    "MqttConfig",
    "SafetyConfig",
    "StallConfig",
    "StreamConfig",
    "TlsConfig",
]

DEFAULT_JERK_PER_ACCELERATION = 20.0
"""A joint without a jerk limit gets 20 × its acceleration limit (rad/s³ per rad/s², i.e. 1/s)."""

_NAME = re.compile(r"[A-Za-z0-9_-]+")
# A named pose's name: a ``named`` goal's `name`, part of Home Assistant's button ids.
PoseName = Annotated[str, StringConstraints(pattern=f"^{_NAME.pattern}$", max_length=64)]


class LimitsConfig(_Section):
    """Overrides of one joint's model limits; they may only tighten them. Units: rad (m for
    prismatic joints), per s, s², s³."""

    lower: float | None = Field(None, description="lowest position, rad or m")
    upper: float | None = Field(None, description="highest position, rad or m")
    velocity: float | None = _positive(None, "rad/s or m/s")
    acceleration: float | None = _positive(None, "rad/s² or m/s²")
    jerk: float | None = _positive(None, "rad/s³ or m/s³; default 20 × acceleration")

    @field_validator("upper")
    @classmethod
    def _upper_above_lower(cls, upper: float | None, info: ValidationInfo) -> float | None:
        lower = info.data.get("lower")
        if upper is not None and lower is not None and upper <= lower:
            raise ValueError(f"{upper:g} must be > lower ({lower:g})")
        return upper


class StallConfig(_Section):
    """Stall protection of one joint: its device's effort at or above `effort` while the joint
    moves slower than `velocity` for `time_s` faults ``stall`` (docs/safety.md)."""

    effort: float = _positive(
        None, "|effort| that counts, in the device's effort units (feetech, sim: fraction of stall)"
    )
    time_s: float = _positive(0.5, "how long the effort may last while not moving, s")
    velocity: float = _positive(0.05, "below this speed the joint counts as not moving, rad/s")


class GripperConfig(_Section):
    """The joint that is the gripper, for ``gripper`` goals (docs/mqtt.md)."""

    joint: str = Field(description="a driven joint")
    open: float = Field(description="the joint's position when open, rad or m", allow_inf_nan=False)
    closed: float = Field(description="its position when closed, rad or m", allow_inf_nan=False)
    max_effort: float = _positive(
        1.0, "the device's effort at a full grip (goal effort 1), in its effort units"
    )
    effort: float = Field(
        0.5, gt=0.0, le=1.0, description="a goal's grip effort when it names none, 0..1"
    )

    @field_validator("closed")
    @classmethod
    def _apart(cls, closed: float, info: ValidationInfo) -> float:
        if closed == info.data.get("open"):
            raise ValueError(f"{closed:g} must differ from open")
        return closed


class HomeAssistantConfig(_Section):
    """Home Assistant's MQTT discovery (docs/home-assistant.md)."""

    discovery: bool = Field(True, description="announce the arm as a device with its entities")
    prefix: str = Field(
        "homeassistant",
        pattern=r"^[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*$",
        description="Home Assistant's discovery_prefix",
    )


class JointConfig(_Section):
    """How one model joint is driven: ``motor = sign * gear_ratio * (joint - offset)``."""

    driver: str = Field(description="a driver name from 'drivers'")
    device: str = Field(description="a device name from that driver's params.devices")
    gear_ratio: float = _positive(1.0, "motor turns per joint turn")
    sign: Literal[1, -1] = 1
    offset: float = Field(0.0, description="joint position (rad or m) where the motor reads 0")
    limits: LimitsConfig = LimitsConfig()
    stall: StallConfig | None = Field(None, description="stall protection; null: none")
    contact: ContactConfig | None = Field(None, description="contact detection; null: none")
    calibrated: bool = Field(
        True,
        description="with a calibration file: it must give this joint's offset and range "
        "(false: the joint keeps its configured offset, e.g. an absolute encoder)",
    )


class DriverConfig(_Section):
    """One bus: its driver `type` and the parameters that driver's `Params` model validates."""

    type: str = Field(description="the driver: sim, odrive, mit, cia402, dynamixel or feetech")
    params: DriverParams = Field(description="the driver's parameters, with its devices")
    gravity_compensation: bool = Field(
        False, description="send each device the torque that holds the arm (mit, odrive)"
    )

    @field_validator("type")
    @classmethod
    def _known_type(cls, kind: str) -> str:
        try:
            load_driver_class(kind)
        except DriverError as exc:  # unknown name (lists the known ones) or import failure
            raise ValueError(str(exc)) from None
        return kind

    @field_validator("params", mode="plain")
    @classmethod
    def _driver_params(cls, value: object, info: ValidationInfo) -> DriverParams:
        kind = info.data.get("type")
        if kind is None:  # the type is invalid and reported; its params cannot be checked
            return DriverParams()
        return load_driver_class(kind).Params.model_validate(value, context=info.context)

    @field_validator("gravity_compensation")
    @classmethod
    def _has_torque_input(cls, wanted: bool, info: ValidationInfo) -> bool:
        kind = info.data.get("type")
        if wanted and kind is not None and not load_driver_class(kind).torque_feedforward:
            raise ValueError(
                f"driver type {kind!r} takes no torque feed-forward: gravity compensation "
                "needs a driver that does (mit, odrive)"
            )
        return wanted


class SafetyConfig(_Section):
    """Safety thresholds (docs/safety.md). Positions in rad (m for prismatic)."""

    stale_hold_ticks: int = Field(3, ge=1, description="missed reads before holding")
    stale_hold_s: float = _positive(0.05, "feedback older than this holds the arm, s")
    stale_fault_s: float = _positive(0.25, "feedback older than this faults, s")
    following_error: float = _positive(0.05, "base following-error bound, rad")
    following_error_per_velocity: float = Field(
        0.1, ge=0.0, description="extra bound per rad/s of commanded speed, s"
    )
    limit_tolerance: float = Field(0.02, ge=0.0, description="measured overshoot that faults, rad")
    on_fault: Literal["hold", "disable"] = "hold"
    joint_tolerance: float = _positive(0.005, "a joint goal succeeds within this, rad")
    pose_position_tolerance: float = _positive(1e-3, "a pose goal succeeds within this, m")
    pose_rotation_tolerance: float = _positive(0.01, "a pose goal succeeds within this, rad")
    settle_timeout_s: float = _positive(2.0, "time to reach tolerance after a trajectory, s")

    @field_validator("stale_fault_s")
    @classmethod
    def _fault_after_hold(cls, fault_s: float, info: ValidationInfo) -> float:
        hold_s = info.data.get("stale_hold_s")
        if hold_s is not None and fault_s <= hold_s:
            raise ValueError(f"{fault_s:g} s must be > stale_hold_s ({hold_s:g} s)")
        return fault_s


class MotionConfig(_Section):
    """Motion planning: Cartesian speeds, linear-path sampling and inverse kinematics."""

    max_linear_speed: float = _positive(0.25, "tool speed of linear moves, m/s")
    max_angular_speed: float = _positive(1.0, "tool angular speed of linear moves, rad/s")
    linear_step: float = _positive(0.005, "path sampling of linear moves, m")
    ik_max_joint_change: float | None = _positive(
        1.0, "largest joint change of an IK solution from the measured state, rad; null: off"
    )
    ik_position_tolerance: float = _positive(1e-5, "m")
    ik_rotation_tolerance: float = _positive(1e-4, "rad")
    ik_time_budget_s: float = _positive(0.05, "s")


class StreamConfig(_Section):
    """Streaming targets on ``armd/<name>/stream`` (docs/mqtt.md#stream): off unless enabled, so
    that a client cannot drive the arm at loop rate without the operator opting in."""

    enabled: bool = Field(False, description="accept stream messages")
    timeout_s: float = Field(
        0.1, gt=0.0, le=10.0, description="no message for this long stops the arm, s"
    )


class TlsConfig(_Section):
    """TLS to the broker: present means on. No `ca_file`: the system's CA certificates."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @model_validator(mode="after")
    def _cert_and_key_together(self) -> Self:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together: set both or neither")
        return self


class MqttConfig(_Section):
    """The MQTT broker connection."""

    host: str = Field("127.0.0.1", min_length=1)
    port: int = Field(1883, ge=1, le=65535)
    client_id: str | None = Field(None, min_length=1, description="default: armd-<name>")
    keepalive_s: int = Field(30, ge=1, le=65535)
    username: str | None = Field(None, min_length=1)
    password_file: str | None = Field(None, min_length=1)
    tls: TlsConfig | None = None
    reconnect_min_s: float = _positive(0.5, "first reconnection delay, s")
    reconnect_max_s: float = _positive(30.0, "longest reconnection delay, s")

    @field_validator("password_file")
    @classmethod
    def _needs_username(cls, password_file: str | None, info: ValidationInfo) -> str | None:
        # A username that failed validation is missing from info.data and reported already.
        if password_file is not None and info.data.get("username", "") is None:
            raise ValueError("a password needs a user name: set mqtt.username too")
        return password_file

    @field_validator("reconnect_max_s")
    @classmethod
    def _max_above_min(cls, max_s: float, info: ValidationInfo) -> float:
        min_s = info.data.get("reconnect_min_s")
        if min_s is not None and max_s < min_s:
            raise ValueError(f"{max_s:g} s must be >= reconnect_min_s ({min_s:g} s)")
        return max_s


class ArmConfig(_Section):
    """The whole file. Cross-checks against the model and drivers are in `armd.config.load`."""

    name: str = Field(description="the arm's name, used in MQTT topics armd/<name>/...")
    model: str = Field(description="path to the .urdf or .kinematic.json model")
    tool_link: str | None = Field(None, description="the default TCP link")
    loop_hz: float = Field(250.0, ge=10.0, le=1000.0)
    realtime_priority: int = Field(50, ge=0, le=99, description="control process SCHED_FIFO")
    telemetry_hz: float = _positive(25.0, "must be <= loop_hz")
    joints: dict[str, JointConfig] = Field(description="model joint name: its driver and device")
    fixed_joints: dict[str, float] = Field({})
    drivers: dict[str, DriverConfig] = Field(min_length=1, description="driver name: type, params")
    safety: SafetyConfig = SafetyConfig()
    motion: MotionConfig = MotionConfig()
    stream: StreamConfig = StreamConfig()
    broker_loss: Literal["finish", "stop"] = "stop"
    mqtt: MqttConfig = MqttConfig()
    lock_file: str | None = Field(None, description="default: /run/armd/<name>.lock")
    calibration: str | None = Field(
        None, min_length=1, description="the calibration file (docs/calibration.md)"
    )
    gripper: GripperConfig | None = Field(None, description="the gripper joint; null: none")
    home_assistant: HomeAssistantConfig | None = Field(
        None, description="Home Assistant MQTT discovery; null: none"
    )
    poses: dict[PoseName, dict[str, Annotated[float, Field(allow_inf_nan=False)]]] = Field(
        {}, description="named poses: name: {joint: position}, for ``named`` goals"
    )
    leader: LeaderConfig | None = Field(
        None, description="as a leader arm for `armd leader` (docs/teleoperation.md); null: none"
    )
    gravity: list[float] = Field(
        STANDARD_GRAVITY,
        min_length=3,
        max_length=3,
        description="gravity acceleration in the model's root frame, m/s²",
    )
    payload: PayloadConfig | None = Field(None, description="a load at the tool link; null: none")
    collision: CollisionConfig | None = Field(
        None, description="collision geometry and surroundings (docs/collision.md); null: none"
    )

    @field_validator("fixed_joints", "safety", "motion", "stream", "mqtt", "poses", mode="before")
    @classmethod
    def _empty_section(cls, value: object) -> object:
        """A section whose options are all commented out reads as null: use its defaults."""
        return {} if value is None else value

    @field_validator("name")
    @classmethod
    def _topic_safe(cls, name: str) -> str:
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"{name!r} may contain only letters, digits, '_' and '-' "
                "(it is used in MQTT topics armd/<name>/...)"
            )
        return name

    @field_validator("telemetry_hz")
    @classmethod
    def _not_above_loop(cls, telemetry_hz: float, info: ValidationInfo) -> float:
        loop_hz = info.data.get("loop_hz")
        if loop_hz is not None and telemetry_hz > loop_hz:
            raise ValueError(f"{telemetry_hz:g} Hz must be <= loop_hz ({loop_hz:g} Hz)")
        return telemetry_hz
