"""The ``leader:`` section of a config file: how ``armd leader`` maps a leader arm onto a follower
(docs/teleoperation.md). Its references to links and joints are checked against both models by
`armd.tools.leader.leader_setup`, every problem at once, like the rest of the file."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from armd.config.base import Section, positive

__all__ = ["CartesianMapConfig", "JointMapConfig", "LeaderConfig", "ShapeMapConfig"]


class JointMapConfig(Section):
    """One leader joint driving one follower joint: ``follower = offset + sign × scale ×
    leader`` (rad or m)."""

    follower: str | None = Field(None, description="the follower's joint; default: the same name")
    scale: float = positive(1.0, "follower per leader rad (or m)")
    sign: Literal[1, -1] = 1
    offset: float = Field(0.0, description="the follower's position at the leader's 0, rad or m")


class CartesianMapConfig(Section):
    """The leader's tool pose as the follower's tool target: ``position = offset + scale ×
    leader position`` (both in their root frames), the orientation as it is."""

    link: str | None = Field(None, description="the leader's link; default: its tool_link")
    follower_link: str | None = Field(
        None, min_length=1, description="the follower's link; default: the follower's tool_link"
    )
    scale: float = positive(1.0, "workspace scale, follower m per leader m")
    offset: list[float] = Field(
        [0.0, 0.0, 0.0], min_length=3, max_length=3, description="m, in the follower's root frame"
    )
    orientation: bool = Field(True, description="false: the position only")


class ShapeMapConfig(Section):
    """The follower in the leader's shape (the keypoints mapping, docs/mqtt.md#keypoints): the
    positions of the leader's `links`, each under the name of the follower's link it matches."""

    links: dict[str, str] = Field(
        min_length=2, description="leader link: follower link, root first, on one chain"
    )


class LeaderConfig(Section):
    """How ``armd leader`` reads this arm and what it streams to the follower."""

    mapping: Literal["joint", "cartesian", "shape"] = Field(
        "joint", description="joint: joints streams; cartesian: pose streams; shape: keypoints"
    )
    follower_model: str | None = Field(
        None,
        min_length=1,
        description="the follower's .urdf or .kinematic.json: needed by shape; with it, follower "
        "joint and link names are checked and joint targets kept within its limits",
    )
    rate_hz: float | None = Field(
        None, ge=1.0, le=1000.0, description="reads and messages per s; default: loop_hz"
    )
    velocities: bool = Field(
        True,
        description="send each joint target's velocity (estimated from the readings), which "
        "the follower extrapolates at: a smaller lag on a moving leader",
    )
    joints: dict[str, JointMapConfig] = Field(
        {},
        description="leader joint: its follower joint; the joints streamed by `joint`, and with "
        "`cartesian` and `shape` those streamed beside them (the gripper)",
    )
    cartesian: CartesianMapConfig = CartesianMapConfig()
    shape: ShapeMapConfig | None = None

    @field_validator("joints", mode="before")
    @classmethod
    def _empty_joints(cls, value: object) -> object:
        """A joint listed without options (``gripper:``) maps to the same name, 1:1."""
        if isinstance(value, dict):
            return {k: {} if v is None else v for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _mapping_has_its_section(self) -> Self:
        if self.mapping == "joint" and not self.joints:
            raise ValueError("mapping 'joint' needs joints: the leader joints to stream")
        if self.mapping == "shape" and (self.shape is None or self.follower_model is None):
            raise ValueError(
                "mapping 'shape' needs shape.links and follower_model (the mapping runs here, "
                "on the follower's model)"
            )
        return self
