"""The ODrive driver's configuration, validated when the config file is loaded (times in s).

Each device is one ODrive axis, addressed by its CAN node id (``<axis>.config.can.node_id``). The
bus is any python-can interface: ``socketcan`` on Linux, ``virtual`` in-process, ``udp_multicast``
to reach ``armd sim-device odrive`` in another process.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drivers.base import check_distinct
from drivers.can_bus.driver import CanBusParams
from drivers.odrive import protocol as proto

__all__ = ["EndstopHoming", "IndexSearchHoming", "ODriveAxisParams", "ODriveParams"]


class IndexSearchHoming(BaseModel):
    """``homing: {method: index_search, timeout_s: 10}``: Set_Axis_State ENCODER_INDEX_SEARCH,
    then wait (at most `timeout_s`) for the heartbeat to show the procedure finished: the axis
    back in IDLE with procedure result SUCCESS. Needs an encoder with an index pulse, and its
    ``use_index`` setting enabled on the ODrive."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["index_search"]
    timeout_s: float = Field(default=10.0, gt=0.0, allow_inf_nan=False)


class EndstopHoming(BaseModel):
    """``homing: {method: endstop, ...}``: closed-loop velocity control towards a hard end stop
    at `velocity` (turns/s, > 0) in `direction` (-1 or 1), with the motor current limited to
    `current_limit` (A); the stop is reached when the encoder velocity stays below a tenth of
    `velocity` for `dwell_s`. The encoder is then set (Set_Absolute_Position) to read `offset`
    (turns) there, and the axis's configured limits and position control are restored. All in the
    ODrive's turns and sense (the device's `direction` and `scale` do not apply). `timeout_s`
    bounds the whole routine; `dwell_s` must exceed the time the axis takes to get moving."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["endstop"]
    direction: Literal[1, -1]
    velocity: float = Field(gt=0.0, allow_inf_nan=False)
    current_limit: float = Field(gt=0.0, allow_inf_nan=False)
    offset: float = Field(default=0.0, allow_inf_nan=False)
    dwell_s: float = Field(default=0.2, gt=0.0, allow_inf_nan=False)
    timeout_s: float = Field(default=10.0, gt=0.0, allow_inf_nan=False)


Homing = Annotated[IndexSearchHoming | EndstopHoming, Field(discriminator="method")]


class ODriveAxisParams(BaseModel):
    """One ODrive axis. `scale`: motor-shaft turns per ODrive turn (1 unless the encoder is
    not on the motor shaft); `direction`: -1 flips the sign. `current_limit` (A) and
    `velocity_limit` (ODrive turns/s), set together or not at all, are sent with Set_Limits at
    every enable (the axis's torque limit: the motor current it may draw); unset, the ODrive
    keeps its own configuration. `torque_limit` (N·m at the ODrive's motor): the largest
    torque feed-forward (Set_Input_Pos.Torque_FF, gravity compensation) sent; None: the frame's
    range, the ODrive then clamping the torque at its own current limit. `homing` (None:
    none): a homing routine run once per `open()`, at the first `enable()` of the axis, before
    closed loop (`IndexSearchHoming`, `EndstopHoming`; end-stop homing needs `current_limit` and
    `velocity_limit`, restored after it). A failed homing makes `enable()` raise a
    `DriverError` naming the axis."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_id: int = Field(ge=0, le=proto.MAX_NODE_ID)
    direction: Literal[1, -1] = 1
    scale: float = Field(default=1.0, gt=0.0, allow_inf_nan=False)
    current_limit: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    velocity_limit: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    torque_limit: float | None = Field(default=None, gt=0.0, le=32.0, allow_inf_nan=False)
    homing: Homing | None = None

    @model_validator(mode="after")
    def _limits_together(self) -> Self:
        if (self.current_limit is None) != (self.velocity_limit is None):
            raise ValueError(
                "current_limit and velocity_limit go together (one Set_Limits frame sets both): "
                "set both or neither"
            )
        return self

    @model_validator(mode="after")
    def _homing_within_the_limits(self) -> Self:
        homing = self.homing
        if isinstance(homing, EndstopHoming):
            if self.current_limit is None or self.velocity_limit is None:
                raise ValueError(
                    "homing.method endstop needs current_limit and velocity_limit "
                    "(restored after homing)"
                )
            if homing.velocity > self.velocity_limit:
                raise ValueError(
                    f"homing.velocity {homing.velocity} turns/s above velocity_limit "
                    f"{self.velocity_limit}"
                )
            if homing.current_limit > self.current_limit:
                raise ValueError(
                    f"homing.current_limit {homing.current_limit} A above current_limit "
                    f"{self.current_limit}"
                )
        return self


class ODriveParams(CanBusParams):
    """The ODrive driver's configuration (times in s): the bus (`interface`, `channel`,
    `bitrate`), its axes and:

    open_timeout_s: `open()` waits this long for a heartbeat and an encoder estimate of each axis.
    enable_timeout_s: enable / disable / clear_faults wait this long for confirming heartbeats.
    reply_timeout_s: an RTR request (``feedback="rtr"``, Get_Version) waits this long.
    feedback_timeout_s: an older encoder estimate counts as missing at `read()`, and `enable()`
        refuses to start closed loop from it.
    heartbeat_timeout_s: an older heartbeat counts as a timeout at `read()`.
    vel_ff_scale: turns/s per LSB of Set_Input_Pos.Vel_FF; must match the ODrive's CAN
        velocity scale (default 0.001).
    torque_ff_scale: N·m per LSB of Set_Input_Pos.Torque_FF; must match the ODrive's CAN
        torque scale (default 0.001, as ODrive's DBC has it).
    """

    devices: dict[str, ODriveAxisParams] = Field(min_length=1)
    feedback: Literal["cyclic", "rtr"] = "cyclic"
    input_mode: Literal["passthrough", "pos_filter", "trap_traj"] = "passthrough"
    vel_ff_scale: float = Field(default=proto.DEFAULT_VEL_FF_SCALE, gt=0.0)
    torque_ff_scale: float = Field(default=proto.DEFAULT_TORQUE_FF_SCALE, gt=0.0)
    open_timeout_s: float = Field(default=1.0, gt=0.0)
    enable_timeout_s: float = Field(default=1.0, gt=0.0)
    reply_timeout_s: float = Field(default=0.02, gt=0.0)
    feedback_timeout_s: float = Field(default=0.05, gt=0.0)
    heartbeat_timeout_s: float = Field(default=0.5, gt=0.0)

    @model_validator(mode="after")
    def _unique_node_ids(self) -> Self:
        check_distinct({name: device.node_id for name, device in self.devices.items()}, "node_id")
        return self
