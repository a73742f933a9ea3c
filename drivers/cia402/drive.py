"""What the cia402 driver knows of one drive: its canopen node, the objects read at start-up, and
what its TPDOs, heartbeat and EMCYs last said. Bookkeeping and unit conversions, no waiting: the
canopen notifier thread stores (`on_status`, `on_motion`, `on_heartbeat`, `on_emcy`) and the
driver's coroutines read, both under the driver's lock.

Units: positions in increments (`counts_per_rev` per revolution), velocities in increments/s,
torques in per mille of the rated torque 0x6076 (mN·m); SI at the motor shaft outside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import canopen
from canopen.emcy import EmcyError
from canopen.pdo import PdoMap, PdoVariable
from canopen.sdo.client import SdoClient
from canopen.sdo.exceptions import SdoAbortedError, SdoCommunicationError

from drivers.base import DeviceFault, DeviceState
from drivers.cia402.objects import STATUS_FAULT, State, describe_error, state_of
from drivers.cia402.params import GENERIC_EDS, CiA402DeviceParams
from drivers.errors import DriverConfigError

__all__ = ["DriveRecord", "ObjectAbortError", "ObjectTimeoutError", "TrackedNode"]

INT32 = (-(2**31), 2**31 - 1)


class ObjectAbortError(SdoAbortedError):
    """An SDO abort that names the object it was about (canopen's names only the code)."""

    def __init__(self, code: int, index: int, subindex: int) -> None:
        super().__init__(code)
        self.index, self.subindex = index, subindex


class ObjectTimeoutError(SdoCommunicationError):
    """No (or no valid) SDO answer about an object."""

    def __init__(self, message: str, index: int, subindex: int) -> None:
        super().__init__(message)
        self.index, self.subindex = index, subindex


class _NamingSdoClient(SdoClient):
    """canopen's SDO client, whose errors name the object (index, subindex)."""

    def upload(self, index: int, subindex: int) -> bytes:
        try:
            return bytes(super().upload(index, subindex))
        except SdoAbortedError as exc:
            raise ObjectAbortError(exc.code, index, subindex) from exc
        except SdoCommunicationError as exc:
            raise ObjectTimeoutError(str(exc), index, subindex) from exc

    def download(self, index: int, subindex: int, data: bytes, force_segment: bool = False) -> None:
        try:
            super().download(index, subindex, data, force_segment)
        except SdoAbortedError as exc:
            raise ObjectAbortError(exc.code, index, subindex) from exc
        except SdoCommunicationError as exc:
            raise ObjectTimeoutError(str(exc), index, subindex) from exc


class TrackedNode(canopen.RemoteNode):
    """A canopen `RemoteNode` whose SDO client names the object in its errors."""

    def add_sdo(self, rx_cobid: int, tx_cobid: int) -> SdoClient:
        client = _NamingSdoClient(rx_cobid, tx_cobid, self.object_dictionary)
        self.sdo_channels.append(client)
        if self.has_network():
            self.network.subscribe(client.tx_cobid, client.on_response)
        return client


@dataclass(eq=False)
class DriveRecord:
    """One drive: configuration, start-up results, and the latest readings (under the lock)."""

    name: str
    params: CiA402DeviceParams
    node: TrackedNode
    counts_per_rev: float = math.nan
    rated_torque_nm: float | None = None
    status_pdo: PdoMap | None = None  # carries 0x6041, 0x6064 (and 0x603F)
    motion_pdo: PdoMap | None = None  # carries 0x606C (and 0x6077)
    command_pdos: list[PdoMap] = field(default_factory=list)
    variables: dict[int, PdoVariable] = field(default_factory=dict)  # index → mapped variable
    statusword: int | None = None
    position: int = 0
    velocity: int = 0
    torque: int | None = None
    error_code: int = 0
    status_time: float = -math.inf
    motion_time: float = -math.inf
    status_seq: int = 0
    heartbeat_time: float = -math.inf
    heartbeat_state: int | None = None
    emcy_code: int | None = None
    lost: bool = False  # the heartbeat stopped

    @classmethod
    def load(cls, name: str, params: CiA402DeviceParams) -> DriveRecord:
        """A record with its node on the device's EDS (or the generic one). Raises
        DriverConfigError when the EDS cannot be loaded."""
        eds = Path(params.eds) if params.eds is not None else GENERIC_EDS
        try:
            od = canopen.import_od(str(eds), params.node_id)
        except (OSError, ValueError, KeyError) as exc:
            raise DriverConfigError(f"device {name!r}: cannot load EDS {eds}: {exc}") from exc
        return cls(name, params, TrackedNode(params.node_id, od))

    @property
    def node_id(self) -> int:
        return int(self.params.node_id)

    @property
    def label(self) -> str:
        return f"node {self.node_id} (device {self.name!r})"

    # -- units ------------------------------------------------------------------------------

    def to_rad(self, counts: float) -> float:
        return counts * 2.0 * math.pi / self.counts_per_rev

    def to_counts(self, rad: float) -> int:
        """Raises ValueError beyond the int32 range of the position objects."""
        counts = round(rad * self.counts_per_rev / (2.0 * math.pi))
        if not INT32[0] <= counts <= INT32[1]:
            raise ValueError(f"{rad:.4f} rad is {counts} increments, outside int32")
        return counts

    # -- on the notifier thread -------------------------------------------------------------

    def on_status(self, now: float) -> None:
        """The status TPDO arrived (its variables hold the new values)."""
        self.statusword = int(self._raw(0x6041, self.statusword or 0))
        self.position = int(self._raw(0x6064, self.position))
        self.error_code = int(self._raw(0x603F, self.error_code))
        if self.motion_pdo is None or self.motion_pdo is self.status_pdo:
            self.on_motion(now)
        self.status_time = now
        self.status_seq += 1

    def on_motion(self, now: float) -> None:
        """The motion TPDO arrived."""
        self.velocity = int(self._raw(0x606C, self.velocity))
        torque = self._raw(0x6077, None)
        self.torque = None if torque is None else int(torque)
        self.motion_time = now

    def on_heartbeat(self, nmt_state: int, now: float) -> None:
        self.heartbeat_time, self.heartbeat_state = now, nmt_state
        self.lost = False

    def on_emcy(self, error: EmcyError) -> None:
        self.emcy_code = None if error.code & 0xFF00 == 0 else int(error.code)

    def _raw(self, index: int, default: Any) -> Any:
        variable = self.variables.get(index)
        return default if variable is None else variable.raw

    # -- meaning ----------------------------------------------------------------------------

    @property
    def state(self) -> State | None:
        word = self.statusword
        return None if word is None else state_of(word)

    @property
    def fault(self) -> DeviceFault | None:
        """The drive's fault: the statusword's fault bit or an active EMCY, with the error code
        0x603F (the EMCY's when 0x603F says nothing) and its text."""
        word = self.statusword
        faulted = word is not None and bool(word & STATUS_FAULT)
        if not faulted and self.emcy_code is None:
            return None
        code = self.error_code or self.emcy_code or 0
        return DeviceFault(code, f"{self.label}: {describe_error(code)}")

    def state_at(self, now: float, heartbeat_timeout_s: float) -> DeviceState | None:
        """The latest reading; its time is no later than the last heartbeat's (a drive whose
        heartbeat stopped more than `heartbeat_timeout_s` ago gives stale feedback)."""
        if self.statusword is None:
            return None
        self.lost = now - self.heartbeat_time > heartbeat_timeout_s
        timestamp = min(self.status_time, self.motion_time)
        if self.lost:
            timestamp = min(timestamp, self.heartbeat_time)
        effort = None
        if self.torque is not None and self.rated_torque_nm is not None:
            effort = self.torque / 1000.0 * self.rated_torque_nm
        return DeviceState(
            position=self.to_rad(self.position),
            velocity=self.to_rad(self.velocity),
            timestamp=timestamp,
            fault=self.fault,
            enabled=self.state is State.OPERATION_ENABLED,
            effort=effort,
        )
