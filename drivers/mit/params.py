"""The MIT driver's configuration, validated when the config file is loaded (times in s).

Each device is one actuator, addressed by its CAN id (Damiao: ESC_ID, the "slave id"; CubeMars:
the driver id) and answering from its master id (Damiao: MST_ID; default id + 0x10, as OpenArm
configures its motors). The position loop runs in the actuator: with ``kp`` (N·m/rad) and ``kd``
(N·m·s/rad) it applies ``τ = kp·(p* - p) + kd·(v* - v)`` where p* is armd's position setpoint and
v* its velocity feed-forward, plus armd's torque feed-forward τ_ff (``t_ff``: gravity
compensation, 0 without). ``torque_limit`` (N·m) bounds τ_ff and then the spring and damping
torque beside it from armd's side (see `drivers.mit.driver`); the actuator itself clamps at the
model's T max. The bus is any python-can interface: ``socketcan`` on Linux, ``virtual`` in-process,
``udp_multicast`` to reach ``armd sim-device mit`` (with ``hop_limit: 0``, the default).
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from drivers.can_bus.driver import CanBusParams
from drivers.mit import protocol as proto
from drivers.mit.models import MODELS, MotorModel, Vendor, lookup

__all__ = ["MitDeviceParams", "MitParams"]


class MitDeviceParams(BaseModel):
    """One actuator.

    id: its CAN id, 1 ... 0x7FE (Damiao ESC_ID; CubeMars driver id).
    master_id: the id its replies come from (Damiao MST_ID); None: id + 0x10.
    model: its model (`drivers.mit.models.MODELS`): the mapping ranges and the vendor.
    p_max, v_max, t_max: override the model's ranges (rad, rad/s, N·m); on Damiao they must
        equal the motor's PMAX/VMAX/TMAX registers, which open() checks.
    kp: stiffness, N·m/rad, in [0, 500]; kd: damping, N·m·s/rad, in [0, 5].
    torque_limit: N·m, > 0; None: the model's t_max.
    direction: -1 flips the sign of positions, velocities and torques.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int = Field(ge=1, le=0x7FE)
    master_id: int | None = Field(default=None, ge=0, le=0x7FE)
    model: str
    p_max: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    v_max: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    t_max: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    kp: float = Field(default=20.0, ge=0.0, le=proto.KP_MAX, allow_inf_nan=False)
    kd: float = Field(default=1.0, ge=0.0, le=proto.KD_MAX, allow_inf_nan=False)
    torque_limit: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    direction: Literal[1, -1] = 1

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in MODELS:
            raise ValueError(f"unknown model {value!r}; known: {', '.join(MODELS)}")
        return value

    @model_validator(mode="after")
    def _limit_within_range(self) -> Self:
        t_max = self.ranges.t_max
        if self.torque_limit is not None and self.torque_limit > t_max:
            raise ValueError(f"torque_limit {self.torque_limit} N·m exceeds t_max {t_max} N·m")
        if self.resolved_master_id == self.id:
            raise ValueError(f"master_id {self.resolved_master_id} equals id")
        return self

    @property
    def motor_model(self) -> MotorModel:
        return lookup(self.model)

    @property
    def ranges(self) -> proto.Ranges:
        """The model's ranges with this device's overrides."""
        r = self.motor_model.ranges
        return proto.Ranges(
            p_max=self.p_max if self.p_max is not None else r.p_max,
            v_max=self.v_max if self.v_max is not None else r.v_max,
            t_max=self.t_max if self.t_max is not None else r.t_max,
        )

    @property
    def resolved_master_id(self) -> int:
        return self.master_id if self.master_id is not None else self.id + 0x10

    @property
    def resolved_torque_limit(self) -> float:
        return self.torque_limit if self.torque_limit is not None else self.ranges.t_max


class MitParams(CanBusParams):
    """The MIT driver's configuration (times in s): the bus (`interface`, `channel`, `bitrate`),
    its actuators and:

    bitrate: bit/s. None leaves the interface's own (SocketCAN: ``ip link``); the reply deadline
        then assumes 1 Mbit/s.
    hop_limit: udp_multicast only: the IP TTL; 0 (default) keeps the frames on this host.
    reply_margin_s: added to the wire time of a cycle (every command and reply at the bit rate)
        to make the deadline by which `read()` expects the replies to the last `write()`.
    open_timeout_s: open() waits this long for each answer (register reads, first feedback);
        enable / disable / clear_faults wait this long for the confirming replies.
    check_ranges: on Damiao, open() refuses a motor whose PMAX/VMAX/TMAX registers differ from
        the configured ranges (positions would be scaled wrongly).
    can_timeout_s: on Damiao, open() writes this CAN timeout (register TIMEOUT, 50 µs units, not
        saved to flash): a motor that receives no command for this long drops torque and
        reports lost communication. None leaves the motor's own setting (open() warns when it is
        0, off). Keep it above the control period.
    """

    hop_limit: int = Field(default=0, ge=0, le=255)
    devices: dict[str, MitDeviceParams] = Field(min_length=1)
    reply_margin_s: float = Field(default=0.002, gt=0.0, allow_inf_nan=False)
    open_timeout_s: float = Field(default=0.5, gt=0.0, allow_inf_nan=False)
    check_ranges: bool = True
    can_timeout_s: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _distinct_ids(self) -> Self:
        """Ids are unique and no id is another device's master id. A master id may be shared by
        Damiao motors (their replies then name the motor in byte 0's low 4 bits, which must
        differ), as with Damiao's factory MST_ID 0."""
        by_id = {device.id: name for name, device in self.devices.items()}
        if len(by_id) != len(self.devices):
            raise ValueError(f"two devices have the same id: {_ids(self.devices)}")
        sharing: dict[int, list[tuple[str, MitDeviceParams]]] = {}
        for name, device in self.devices.items():
            master = device.resolved_master_id
            if master in by_id:
                raise ValueError(
                    f"device {name!r}: master_id {master} is the id of device {by_id[master]!r}"
                )
            sharing.setdefault(master, []).append((name, device))
        for master, group in sharing.items():
            if len(group) < 2:
                continue
            names = [name for name, _ in group]
            if any(d.motor_model.vendor is not Vendor.DAMIAO for _, d in group):
                raise ValueError(f"devices {names}: master_id {master} shared, Damiao only")
            nibbles = {d.id & 0xF for _, d in group}
            if len(nibbles) != len(group):
                raise ValueError(
                    f"devices {names} share master_id {master}: their ids must differ in the low "
                    "4 bits, which name the motor in a shared reply"
                )
        return self


def _ids(devices: dict[str, MitDeviceParams]) -> dict[str, int]:
    return {name: device.id for name, device in devices.items()}
