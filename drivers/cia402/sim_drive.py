"""One simulated CiA 402 servo drive: a canopen `LocalNode` on the shipped EDS
(`cia402_drive.eds`) with the drive's behaviour around it.

canopen's `LocalNode` serves the object dictionary: its SDO server (expedited and segmented
transfers), its NMT slave (boot-up, NMT commands, the heartbeat producer started by writes to
0x1017) and its EMCY producer. This module adds what canopen leaves to the application:

- the live objects (statusword 0x6041, position / velocity / torque actual, error code 0x603F,
  error register 0x1001), read through a read callback;
- checked writes: the controlword drives the state machine (`drivers.cia402.sim_state`), 0x6060
  accepts CSP (8) only, a PDO mapping entry must name a mappable object and fit in 64 bits
  (SDO aborts 0x06040041 / 0x06040042 otherwise), 0x605A must be 0 ... 8;
- the PDOs: in NMT Operational, synchronous RPDOs are latched and applied at the next SYNC, then
  the shaft follows the target (CSP) and every TPDO of transmission type 1 ... 240 is sent;
- the shaft: a `SimulatedMotor` (`drivers.sim.motor`) in its cascade mode, counting the EDS's
  0x608F increments per revolution; velocities in increments/s, torques in per mille of 0x6076;
- monitoring: a following error beyond 0x6065 for longer than 0x6066 ms latches 0x8611.

Fault injection (hold `lock`): `inject_fault(0x2310)` (over-current, any CiA 402 error code)
latches a fault and sends its EMCY; ``motor.faults.stuck = True`` makes the following error
trip; `lose_heartbeat()` stops the heartbeat (PDOs go on); `disconnect()` makes the drive deaf
and mute. Frames the drive cannot parse are counted in `malformed_frames`.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import canopen
from canopen.objectdictionary import ODArray, ODRecord, ODVariable
from canopen.sdo.exceptions import SdoAbortedError

from drivers.base import Clock
from drivers.cia402 import sim_state
from drivers.cia402.objects import MODE_CSP, QUICK_STOP_TO_DISABLED, Obj, State
from drivers.cia402.params import GENERIC_EDS
from drivers.sim.motor import MotorParams, SimulatedMotor

__all__ = ["EDS_PATH", "SimDriveConfig", "SimDriveFaults", "SimulatedDrive"]

EDS_PATH = GENERIC_EDS
_ERROR_REGISTER_BITS = ((0xF000, 0x2000, 0x02), (0xF000, 0x3000, 0x04), (0xF000, 0x4000, 0x08))
_AT_REST = 1e-3  # rad/s: a quick stop has ended below this speed


@dataclass(frozen=True, slots=True)
class SimDriveConfig:
    """One simulated drive: its node id, shaft, identity (0x1018) and noise seed."""

    node_id: int
    motor: MotorParams = field(default_factory=lambda: MotorParams(max_velocity=6.0))
    vendor_id: int = 0x00000A4D
    product_code: int = 0x00000402
    serial_number: int = 0
    seed: int = 0


@dataclass(slots=True)
class SimDriveFaults:
    """Communication faults; tests set these fields (under the drive's lock)."""

    silent: bool = False


class SimulatedDrive:
    """A CiA 402 drive in CSP mode. Call its handlers with `lock` held (the bus does)."""

    def __init__(
        self, config: SimDriveConfig, clock: Clock = time.monotonic, *, eds: Path = EDS_PATH
    ) -> None:
        self.config = config
        self.lock = threading.RLock()
        self.node = canopen.LocalNode(config.node_id, canopen.import_od(str(eds), config.node_id))
        od = self.node.object_dictionary
        self.counts_per_rev = _position_units_per_rev(od)
        motor = dataclasses.replace(config.motor, counts_per_rev=self.counts_per_rev)
        self.motor = SimulatedMotor(motor, clock, seed=config.seed)
        self.faults = SimDriveFaults()
        self.state = State.SWITCH_ON_DISABLED
        self.controlword = 0
        self.error_code = 0
        self.malformed_frames = 0
        self.syncs = 0
        self.rpdos_applied = 0
        self.refused_commands = 0
        self._clock = clock
        self._pending: dict[int, bytes] = {}  # RPDO number → data latched since the last SYNC
        self._following_since: float | None = None
        self._layout: dict[int, list[tuple[int, int, int]]] = {}  # PDO mappings, by 0x1600 ...
        self._cob_ids: dict[int, int | None] = {}  # valid PDO COB-IDs, by 0x1400 / 0x1800 ...
        for sub, value in (
            (1, config.vendor_id),
            (2, config.product_code),
            (4, config.serial_number),
        ):
            self.node.data_store.setdefault(Obj.IDENTITY, {})[sub] = value.to_bytes(4, "little")
        self._live: dict[int, Callable[[], int]] = {
            Obj.STATUSWORD: self.statusword,
            Obj.POSITION_ACTUAL: lambda: self.to_counts(self.motor.sample().position),
            Obj.VELOCITY_ACTUAL: lambda: self.to_counts(self.motor.sample().velocity),
            Obj.TORQUE_ACTUAL: self._torque_per_mille,
            Obj.ERROR_CODE: lambda: self.error_code,
            Obj.ERROR_REGISTER: self._error_register,
            Obj.MODES_DISPLAY: lambda: self.value(Obj.MODES_OF_OPERATION),
        }
        self.node.add_read_callback(self._on_read)
        self.node.add_write_callback(self._on_write)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def nmt_state(self) -> str:
        return self.node.nmt.state

    def value(self, index: int, subindex: int = 0) -> int:
        """An object's value as the SDO server would give it."""
        entry = _entry(self.node.object_dictionary, index, subindex)
        return int(entry.decode_raw(self.node.get_data(index, subindex)))

    # -- units ------------------------------------------------------------------------------

    def to_rad(self, counts: float) -> float:
        return counts * 2.0 * math.pi / self.counts_per_rev

    def to_counts(self, rad: float) -> int:
        return round(rad * self.counts_per_rev / (2.0 * math.pi))

    # -- faults -----------------------------------------------------------------------------

    def inject_fault(self, code: int) -> None:
        """Latch error `code` (0x603F): fault reaction (torque off), then Fault; sends its EMCY."""
        self.error_code = code
        self.motor.disable()
        self.state = State.FAULT
        self._following_since = None
        if not self.faults.silent:
            self.node.emcy.send(code, self._error_register())

    def lose_heartbeat(self) -> None:
        """The heartbeat stops; everything else goes on."""
        self.node.nmt.stop_heartbeat()

    def disconnect(self) -> None:
        """The drive goes deaf and mute (a cable pulled): no heartbeat, no answer, no PDO."""
        self.faults.silent = True
        self.node.nmt.stop_heartbeat()

    def _error_register(self) -> int:
        if self.error_code == 0:
            return 0
        bits = [bit for mask, value, bit in _ERROR_REGISTER_BITS if self.error_code & mask == value]
        return 0x01 | (bits[0] if bits else 0)

    # -- SDO callbacks (canopen's SDO server) -----------------------------------------------

    def _on_read(self, index: int, subindex: int, od: ODVariable) -> int | None:
        live = self._live.get(index)
        if live is None:
            return None
        with self.lock:
            return live()

    def _on_write(self, index: int, subindex: int, od: ODVariable, data: bytes) -> None:
        with self.lock:
            if Obj.RPDO_COMM <= index < Obj.TPDO_MAP + 0x200:  # a PDO's parameters change
                self._layout.clear()
                self._cob_ids.clear()
            value = int(od.decode_raw(bytes(data))) if len(data) * 8 == len(od) else None
            if index == Obj.CONTROLWORD and value is not None:
                self._apply_controlword(value)
            elif index == Obj.MODES_OF_OPERATION and value not in (0, MODE_CSP):
                raise SdoAbortedError(0x06090030)  # invalid value: CSP only
            elif index == Obj.QUICK_STOP_OPTION and value is not None and not 0 <= value <= 8:
                raise SdoAbortedError(0x06090030)
            elif (
                Obj.RPDO_MAP <= index < Obj.RPDO_MAP + 4 or Obj.TPDO_MAP <= index < Obj.TPDO_MAP + 4
            ) and value is not None:
                self._check_mapping(index, subindex, value)

    def _check_mapping(self, index: int, subindex: int, value: int) -> None:
        od = self.node.object_dictionary
        if subindex == 0:
            entries = [self.value(index, k) for k in range(1, value + 1)]
            if sum(entry & 0xFF for entry in entries) > 64:
                raise SdoAbortedError(0x06040042)
            return
        if value == 0:
            return
        target, sub, bits = value >> 16, (value >> 8) & 0xFF, value & 0xFF
        try:
            entry = _entry(od, target, sub)
        except KeyError:
            raise SdoAbortedError(0x06040041) from None
        if not entry.pdo_mappable or len(entry) != bits:
            raise SdoAbortedError(0x06040041)
        receive = index < Obj.TPDO_MAP
        if receive and not entry.writable:
            raise SdoAbortedError(0x06040041)

    # -- the state machine --------------------------------------------------------------------

    def statusword(self) -> int:
        target = self.to_rad(self.value(Obj.TARGET_POSITION))
        motor = self.motor
        motor.advance()
        reached = abs(target - motor.position) < 4 * motor.params.resolution and (
            abs(motor.velocity) < _AT_REST
        )
        following = self._following_since is not None
        return sim_state.statusword(self.state, target_reached=reached, following_error=following)

    def _apply_controlword(self, controlword: int) -> None:
        option = self.value(Obj.QUICK_STOP_OPTION)
        before, previous = self.state, self.controlword
        after = sim_state.next_state(before, controlword, previous, option)
        self.controlword = controlword
        if after is before:
            if controlword != previous:
                self.refused_commands += 1  # no transition for this command here
            return
        self.state = after
        motor = self.motor
        if after is State.OPERATION_ENABLED:
            motor.enable()  # then follows 0x607A, whatever it holds: a host must set it first
            motor.command(self._target_rad())
        elif after is State.QUICK_STOP_ACTIVE:
            motor.advance()
            v, a = motor.velocity, motor.params.braking_deceleration
            motor.command(motor.position + v * abs(v) / (2.0 * a))
            if option == 0:
                motor.disable()
                self.state = State.SWITCH_ON_DISABLED
        elif before is State.FAULT:
            self.error_code = 0
            motor.clear_faults()
            self.node.emcy.reset()
        elif before in (State.OPERATION_ENABLED, State.QUICK_STOP_ACTIVE):
            motor.disable()  # torque off: the shaft is braked to rest
        if after is not State.OPERATION_ENABLED:
            self._following_since = None

    def _target_rad(self) -> float:
        target = self.value(Obj.TARGET_POSITION)
        low = self.value(Obj.SOFTWARE_POSITION_LIMIT, 1)
        high = self.value(Obj.SOFTWARE_POSITION_LIMIT, 2)
        return self.to_rad(min(max(target, low), high))

    def _torque_per_mille(self) -> int:
        rated_nm = self.value(Obj.RATED_TORQUE) / 1000.0
        per_mille = round(self.motor.torque / rated_nm * 1000.0) if self.motor.enabled else 0
        return max(-0x8000, min(0x7FFF, per_mille))

    # -- frames -------------------------------------------------------------------------------

    def on_rpdo(self, can_id: int, data: bytes) -> None:
        """An RPDO-range frame: latched until the next SYNC when it is one of this drive's."""
        if self.nmt_state != "OPERATIONAL":
            return
        for number in range(4):
            if Obj.RPDO_COMM + number not in self.node.object_dictionary:
                break
            if self._cob_id(Obj.RPDO_COMM + number) == can_id:
                if len(data) * 8 < self._mapped_bits(Obj.RPDO_MAP + number):
                    self.malformed_frames += 1
                    self.node.emcy.send(0x8210, 0x10)  # PDO not processed: length error
                    return
                self._pending[number] = bytes(data)
                return

    def on_sync(self) -> list[tuple[int, bytes]]:
        """A SYNC: apply the latched RPDOs, run the drive, return the TPDOs to send."""
        if self.nmt_state != "OPERATIONAL":
            return []
        self.syncs += 1
        pending, self._pending = self._pending, {}
        for number, data in sorted(pending.items()):
            self._apply_rpdo(number, data)
        self._control()
        frames = []
        for number in range(4):
            comm = Obj.TPDO_COMM + number
            if comm not in self.node.object_dictionary:
                break
            cob_id = self._cob_id(comm)
            kind = self.value(comm, 2)
            if cob_id is not None and 1 <= kind <= 240 and self.syncs % kind == 0:
                frames.append((cob_id, self._pack(Obj.TPDO_MAP + number)))
        return frames

    def _apply_rpdo(self, number: int, data: bytes) -> None:
        """Store every mapped object, the controlword last: the whole PDO counts at once."""
        self.rpdos_applied += 1
        offset, controlword = 0, None
        for index, subindex, bits in self._mapping(Obj.RPDO_MAP + number):
            chunk = data[offset // 8 : (offset + bits) // 8]
            offset += bits
            if index == Obj.CONTROLWORD:
                controlword = chunk
            else:
                self.node.set_data(index, subindex, chunk)
        if controlword is not None:
            self.node.set_data(Obj.CONTROLWORD, 0, controlword)

    def _control(self) -> None:
        motor = self.motor
        if self.state is State.OPERATION_ENABLED:
            target = self._target_rad()
            velocity_ff = self.to_rad(self.value(Obj.VELOCITY_OFFSET))
            motor.command(target, velocity_ff)
            self._monitor_following(target)
        elif self.state is State.QUICK_STOP_ACTIVE:
            motor.advance()
            option = self.value(Obj.QUICK_STOP_OPTION)
            if abs(motor.velocity) < _AT_REST and option in QUICK_STOP_TO_DISABLED:
                motor.disable()
                self.state = State.SWITCH_ON_DISABLED

    def _monitor_following(self, target: float) -> None:
        window = self.to_rad(self.value(Obj.FOLLOWING_ERROR_WINDOW))
        self.motor.advance()
        if abs(target - self.motor.position) <= window:
            self._following_since = None
            return
        now = self._clock()
        if self._following_since is None:
            self._following_since = now
        elif now - self._following_since > self.value(Obj.FOLLOWING_ERROR_TIMEOUT) / 1000.0:
            self.inject_fault(0x8611)

    def _pack(self, map_index: int) -> bytes:
        out = b""
        for index, subindex, bits in self._mapping(map_index):
            out += self.node.get_data(index, subindex)[: bits // 8]
        return out

    def _mapping(self, map_index: int) -> list[tuple[int, int, int]]:
        """(index, subindex, bits) of each mapped object; cached until a PDO object changes."""
        cached = self._layout.get(map_index)
        if cached is None:
            entries = (self.value(map_index, k) for k in range(1, self.value(map_index, 0) + 1))
            cached = [(e >> 16, (e >> 8) & 0xFF, e & 0xFF) for e in entries if e]
            self._layout[map_index] = cached
        return cached

    def _mapped_bits(self, map_index: int) -> int:
        return sum(bits for _, _, bits in self._mapping(map_index))

    def _cob_id(self, comm_index: int) -> int | None:
        if comm_index not in self._cob_ids:
            raw = self.value(comm_index, 1)
            self._cob_ids[comm_index] = None if raw & 0x80000000 else raw & 0x7FF
        return self._cob_ids[comm_index]


def _entry(od: canopen.ObjectDictionary, index: int, subindex: int) -> ODVariable:
    """The variable at index:subindex. Raises KeyError."""
    obj = od[index]
    if isinstance(obj, ODRecord | ODArray):
        return obj[subindex]
    return obj


def _position_units_per_rev(od: canopen.ObjectDictionary) -> int:
    """The drive's position units per motor revolution: its factor group (0x6092 feed constant
    over 0x6091 gear ratio) where the EDS has one, else its encoder increments (0x608F)."""
    if Obj.GEAR_RATIO in od and Obj.FEED_CONSTANT in od:
        feed = _default(od, Obj.FEED_CONSTANT, 1) / _default(od, Obj.FEED_CONSTANT, 2)
        return round(feed * _default(od, Obj.GEAR_RATIO, 2) / _default(od, Obj.GEAR_RATIO, 1))
    return _default(od, Obj.ENCODER_RESOLUTION, 1) // _default(od, Obj.ENCODER_RESOLUTION, 2)


def _default(od: canopen.ObjectDictionary, index: int, subindex: int) -> int:
    default = _entry(od, index, subindex).default
    if default is None:
        raise KeyError(f"0x{index:04X}:{subindex:02X} has no default in the EDS")
    return int(default)
