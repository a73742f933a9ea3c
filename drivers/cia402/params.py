"""The cia402 driver's configuration, validated when the config file is loaded (times in s unless
a name says ms, angles in rad at the motor shaft).

One bus (any python-can interface: ``socketcan`` on Linux, ``virtual`` in-process,
``udp_multicast`` to reach ``armd sim-device cia402``, with ``hop_limit: 0``), several CANopen
nodes, each one CiA 402 drive serving one joint. Two fields are not the user's to write but the
control loop's: `loop_period_s` (written to the drives' interpolation period 0x60C2) and each
device's `position_limits` (written to 0x607D); `CiA402Driver.with_loop` fills them from the
loop's period and the joint limits through the transmission.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drivers.base import DriverParams

__all__ = ["GENERIC_EDS", "CiA402DeviceParams", "CiA402Params", "Identity"]

GENERIC_EDS = Path(__file__).with_name("cia402_drive.eds")
"""The EDS of a generic CiA 402 CSP drive (and of the simulated drive), used when none is given."""


class Identity(BaseModel):
    """The drive's identity object 0x1018 as the vendor documents it; `open()` refuses another."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vendor_id: int = Field(ge=0, le=0xFFFFFFFF)
    product_code: int = Field(ge=0, le=0xFFFFFFFF)


class CiA402DeviceParams(BaseModel):
    """One drive (one CANopen node).

    node_id: 1 ... 127.
    identity: checked against 0x1018:1 and :2 at `open()`; None: not checked.
    eds: the drive's EDS file (absolute, or relative to the working directory); None: the generic
        CiA 402 EDS shipped with armd (`drivers/cia402/cia402_drive.eds`), which maps the PDOs
        itself. With a vendor EDS whose PDO mapping is read-only, the drive's fixed mapping is
        read and used when it carries the objects the driver needs.
    counts_per_rev: position units per motor revolution; None: read from the drive (its factor
        group, 0x6092 feed constant over 0x6091 gear ratio, where it has one; else 0x608F).
    torque_limit: N·m at the motor, written to 0x6072 in per mille of the rated torque 0x6076;
        None: the drive's own.
    following_error_window: rad, written to 0x6065; None: the drive's own.
    quick_stop_option: 0x605A, 0 ... 8 (2: stop on the quick stop ramp, then switch on disabled;
        5 ... 8 stay in Quick Stop Active at standstill).
    disable: how `disable()` stops the drive before switching it off: ``quick_stop`` (controlword
        quick stop, 0x605A's reaction) or ``disable_operation`` (0x605C's reaction).
    velocity_offset: send armd's velocity feed-forward in the velocity offset 0x60B1, in a second
        RPDO (when the EDS has the object); false: one RPDO per tick, the drive differentiates
        the targets itself (less bus load: see docs/drivers/cia402.md).
    position_limits: (lower, upper) rad at the motor, written to 0x607D; filled by the control
        loop's wiring (`CiA402Driver.with_loop`), None: the drive's own.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_id: int = Field(ge=1, le=127)
    identity: Identity | None = None
    eds: str | None = None
    counts_per_rev: int | None = Field(default=None, ge=1)
    torque_limit: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    following_error_window: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    quick_stop_option: int = Field(default=2, ge=0, le=8)
    disable: Literal["quick_stop", "disable_operation"] = "quick_stop"
    velocity_offset: bool = True
    position_limits: tuple[float, float] | None = None

    @model_validator(mode="after")
    def _ordered_limits(self) -> Self:
        limits = self.position_limits
        if limits is not None and not limits[0] < limits[1]:
            raise ValueError(f"position_limits {list(limits)}: lower must be below upper")
        return self


class CiA402Params(DriverParams):
    """The cia402 driver's configuration.

    bitrate: bit/s; None leaves the interface's own (SocketCAN: ``ip link``).
    hop_limit: udp_multicast only: the IP TTL; 0 (default) keeps the frames on this host.
    heartbeat_ms: written to every drive's producer heartbeat time 0x1017.
    heartbeat_timeout_ms: a drive whose heartbeat is older than this is lost (its feedback is
        stale from then on); None: 3 × heartbeat_ms.
    sync: ``produce``: the driver sends one SYNC per control tick after its RPDOs; ``external``:
        another station produces SYNC at the loop period (the driver then sends RPDOs only).
    sdo_timeout_s: how long one SDO answer may take.
    state_timeout_s: how long a drive may take to reach the next state of the CiA 402 state
        machine (and to stop during `disable()`); longer: an error naming the drive and its state.
    open_timeout_s: opening the bus, and the first heartbeat after NMT start.
    loop_period_s: the control loop's period, written to 0x60C2; filled by `with_loop`.
    """

    interface: str = "socketcan"
    channel: str
    bitrate: int | None = Field(default=None, gt=0)
    hop_limit: int = Field(default=0, ge=0, le=255)
    heartbeat_ms: int = Field(default=100, ge=1, le=0xFFFF)
    heartbeat_timeout_ms: int | None = Field(default=None, ge=1)
    sync: Literal["produce", "external"] = "produce"
    sdo_timeout_s: float = Field(default=0.3, gt=0.0, allow_inf_nan=False)
    state_timeout_s: float = Field(default=1.0, gt=0.0, allow_inf_nan=False)
    open_timeout_s: float = Field(default=2.0, gt=0.0, allow_inf_nan=False)
    loop_period_s: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    devices: dict[str, CiA402DeviceParams] = Field(min_length=1)

    @model_validator(mode="after")
    def _checks(self) -> Self:
        by_id: dict[int, str] = {}
        for name, device in self.devices.items():
            other = by_id.setdefault(device.node_id, name)
            if other != name:
                raise ValueError(f"devices {other!r} and {name!r} have the same node_id")
        timeout = self.heartbeat_timeout_ms
        if timeout is not None and timeout <= self.heartbeat_ms:
            raise ValueError(
                f"heartbeat_timeout_ms {timeout} must exceed heartbeat_ms {self.heartbeat_ms}"
            )
        return self

    def for_loop(
        self, period_s: float, position_limits: Mapping[str, tuple[float, float]]
    ) -> CiA402Params:
        """These params with `loop_period_s` and every device's `position_limits` (None for a
        device not in `position_limits`). Raises ValueError (pydantic's) for invalid values."""
        data = self.model_dump() | {"loop_period_s": period_s}
        for name, device in data["devices"].items():
            device["position_limits"] = position_limits.get(name)
        return CiA402Params.model_validate(data)

    @property
    def heartbeat_timeout_s(self) -> float:
        timeout_ms = self.heartbeat_timeout_ms
        return (3 * self.heartbeat_ms if timeout_ms is None else timeout_ms) / 1000.0
