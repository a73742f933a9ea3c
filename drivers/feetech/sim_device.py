"""One simulated Feetech servo (an STS3215 by default, or an SCS0009): a `SimulatedMotor` behind
its memory table, serving the SCS/STS instructions one packet at a time, byte for byte.

- Ping, Read, Write, Reg Write + Action, Reset, Sync Read and Sync Write. Response Status Level
  (8) = 0 answers only Read and Ping. A broadcast instruction is never answered, except Ping (as
  the protocol document says) and the addressed replies of a Sync Read; a packet with a bad
  checksum is never seen (the parser drops it), so it is not answered either.
- Writes to read-only or unknown addresses are ignored (the status error byte has no bit for
  them). EEPROM items take effect at once; they are kept across `power_cycle()` only when written
  while Lock (55) = 0, as Feetech's table documents Lock. `eeprom_writes` counts those writes.
- Position: 4096 counts per turn, ``Present_Position = 2048 + counts(motor) - Homing_Offset``,
  Goal Position clamped to the position limits; torque on drives to the stored goal. An SCS0009
  has 1024 counts (512 in the middle), big-endian words, no Sync Read (it ignores one), Lock at
  48, and Max_Torque_Limit (16) as its only torque limit.
- Load (`Present_Load`, 0.1 % of stall torque, sign bit 10): the injected external load
  (`faults.external_load`, a fraction of stall torque) plus a viscous term, plus the push of a
  shaft held by an obstacle (`motor.faults.block_at` or `end_stops`: `obstacle_effort`), clamped
  to Torque Limit (48). A load beyond the limit stalls the shaft. While |load| ≥ Overload_Torque
  (36, %) for Protection_Time (35, 10 ms) the OVERLOAD bit latches (cleared by a write to Torque
  Enable).
- Temperature: ambient + heating × load² (a steady-state model), or `faults.temperature_c`;
  above Max_Temperature_Limit (13) the OVERHEAT bit is set. Voltage: `faults.supply_v` outside
  Min/Max_Voltage_Limit (15/14) sets the VOLTAGE bit. `faults.sensor_error` sets SENSOR.
- Every status packet carries the status bits (65); the bits also in Unloading_Condition (19,
  default 44: overheat, overcurrent, overload) switch torque off and keep it off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from drivers.feetech import protocol as ft
from drivers.feetech import table as tb
from drivers.feetech.protocol import ErrorBit, Instruction, Packet
from drivers.feetech.table import MODELS, SIGN_BITS, Addr, Item
from drivers.serial_bus.framing import sync_write_data
from drivers.serial_bus.pty_chain import LinkFaults
from drivers.sim.motor import SimulatedMotor

__all__ = ["TABLE_SIZE", "FeetechFaults", "SimulatedServo"]

TABLE_SIZE = 256
_VISCOUS_LOAD = 0.05  # fraction of stall torque at the motor's maximum velocity
_HEATING_C = 40.0  # °C above ambient at full stall torque (steady state)
_STALL_CURRENT_UNITS = 415  # Present_Current (6.5 mA) at stall: ~2.7 A


@dataclass
class FeetechFaults(LinkFaults):
    """Injected faults of one servo; tests set these fields directly (under the chain's lock).

    The communication faults of `LinkFaults`, and: external_load: a load torque on the shaft,
    fraction of stall torque (signed).
    supply_v: the supply voltage, V. ambient_c: °C. temperature_c: overrides the temperature model.
    sensor_error: the magnetic encoder reports an error.
    """

    external_load: float = 0.0
    supply_v: float = 12.0
    ambient_c: float = 25.0
    temperature_c: float | None = None
    sensor_error: bool = False


class SimulatedServo:
    """One servo of `model` (a key of `drivers.feetech.table.MODELS`): memory table, motor and
    protections. Not thread-safe; the chain locks."""

    def __init__(
        self,
        device_id: int,
        motor: SimulatedMotor,
        *,
        return_delay: int = 0,
        model: str = "sts3215",
    ) -> None:
        self.motor = motor
        self.spec = MODELS[model]
        self.faults = FeetechFaults(supply_v=_NOMINAL_V[model])
        self.eeprom_writes = 0
        self._items = self.spec.items
        self._item_at = {a: item for item in self._items.values() for a in _span(item)}
        self._table = bytearray(TABLE_SIZE)
        for item in self._items.values():
            self._set(item.address, item.size, item.default)
        self._set(Addr.ID, 1, device_id)
        self._set(Addr.RETURN_DELAY_TIME, 1, return_delay)
        self._saved = bytes(self._table)  # what the EEPROM keeps across a power cycle
        self._pending: tuple[int, bytes] | None = None  # Reg Write, until Action
        self._overload_since: float | None = None
        self._overloaded = False
        self._boot()

    # -- state ----------------------------------------------------------------------------------

    @property
    def id(self) -> int:
        return self._table[Addr.ID]

    @property
    def status(self) -> int:
        return self._table[Addr.STATUS]

    @property
    def return_delay_s(self) -> float:
        return self._table[Addr.RETURN_DELAY_TIME] * 2e-6

    def get(self, address: int) -> int:
        """The value of the item at `address` (signed where it is sign-magnitude)."""
        size = self._items[address].size
        raw = int.from_bytes(self._table[address : address + size], self.spec.byteorder)
        return ft.decode_signed(raw, SIGN_BITS[address]) if address in SIGN_BITS else raw

    def _set(self, address: int, size: int, value: int) -> None:
        raw = ft.encode_signed(value, SIGN_BITS[address]) if address in SIGN_BITS else value
        self._table[address : address + size] = raw.to_bytes(size, self.spec.byteorder)

    def _boot(self) -> None:
        """Power-on: RAM items to their defaults, Torque_Limit from Max_Torque_Limit."""
        for item in self._items.values():
            if not item.eeprom:
                self._set(item.address, item.size, item.default)
        if self.spec.torque_limit_address is not None:
            self._set(self.spec.torque_limit_address, 2, self.get(Addr.MAX_TORQUE_LIMIT))
        self.motor.disable()
        self._overloaded = False
        self._pending = None
        self._refresh(0.0)
        self._set(Addr.GOAL_POSITION, 2, self.get(Addr.PRESENT_POSITION))

    def power_cycle(self, now: float) -> None:
        """Switch off and on: EEPROM items not saved (written under Lock = 1) are lost."""
        eeprom = [a for item in self._items.values() if item.eeprom for a in _span(item)]
        for address in eeprom:
            self._table[address] = self._saved[address]
        self._boot()
        self._refresh(now)

    # -- positions ------------------------------------------------------------------------------

    def _homing_offset(self) -> int:
        address = self.spec.homing_offset_address
        return 0 if address is None else self.get(address)

    def _counts(self, rad: float) -> int:
        return tb.rad_to_counts(rad, self.spec.counts_per_rev) - self._homing_offset()

    def _goal_rad(self) -> float:
        low, high = self.get(Addr.MIN_POSITION_LIMIT), self.get(Addr.MAX_POSITION_LIMIT)
        goal = min(max(self.get(Addr.GOAL_POSITION), low), high)
        return tb.counts_to_rad(goal + self._homing_offset(), self.spec.counts_per_rev)

    # -- packet handling ------------------------------------------------------------------------

    def handle(self, packet: Packet, now: float) -> bytes | None:
        """Serve one instruction addressed to this servo (or broadcast); returns the reply."""
        self._refresh(now)
        handlers: dict[int, Callable[[Packet, float], bytes | None]] = {
            Instruction.PING: self._ping,
            Instruction.READ: self._read,
            Instruction.WRITE: self._write,
            Instruction.REG_WRITE: self._reg_write,
            Instruction.ACTION: self._action,
            Instruction.RESET: self._reset,
            Instruction.SYNC_READ: self._sync_read,
            Instruction.SYNC_WRITE: self._sync_write,
        }
        serve = handlers.get(packet.code)
        reply = serve(packet, now) if serve is not None else None
        self._refresh(now)
        if packet.id == ft.BROADCAST_ID and packet.code not in (
            Instruction.PING,
            Instruction.SYNC_READ,
        ):
            return None
        return reply

    def _ping(self, packet: Packet, now: float) -> bytes | None:
        return self._reply()

    def _read(self, packet: Packet, now: float) -> bytes | None:
        if len(packet.params) != 2:
            return None
        return self._read_reply(packet.params[0], packet.params[1])

    def _read_reply(self, address: int, length: int) -> bytes | None:
        if length == 0 or address + length > TABLE_SIZE:
            return None  # nothing documented; a real servo's behaviour is unknown here
        return self._reply(bytes(self._table[address : address + length]))

    def _write(self, packet: Packet, now: float) -> bytes | None:
        if len(packet.params) < 2:
            return None
        self.write_range(packet.params[0], packet.params[1:], now)
        return self._reply(level=1)

    def _reg_write(self, packet: Packet, now: float) -> bytes | None:
        if len(packet.params) < 2:
            return None
        self._pending = (packet.params[0], bytes(packet.params[1:]))
        self._table[64] = 1
        return self._reply(level=1)

    def _action(self, packet: Packet, now: float) -> bytes | None:
        if self._pending is not None:
            address, data = self._pending
            self._pending = None
            self._table[64] = 0
            self.write_range(address, data, now)
        return self._reply(level=1)

    def _reset(self, packet: Packet, now: float) -> bytes | None:
        """Factory values (the ID is kept), saved to EEPROM."""
        device_id = self.id
        for item in self._items.values():
            if item.eeprom:
                self._set(item.address, item.size, item.default)
        self._set(Addr.ID, 1, device_id)
        self._saved = bytes(self._table)
        self._boot()
        return self._reply(level=1)

    def _sync_read(self, packet: Packet, now: float) -> bytes | None:
        params = packet.params
        if not self.spec.sync_read or len(params) < 3 or self.id not in params[2:]:
            return None
        return self._read_reply(params[0], params[1])

    def _sync_write(self, packet: Packet, now: float) -> bytes | None:
        params = packet.params
        if len(params) < 2:
            return None
        address, length = params[0], params[1]
        for data in sync_write_data(params, 2, length, self.id):
            self.write_range(address, data, now)
        return None

    def _reply(self, data: bytes = b"", *, level: int = 0) -> bytes | None:
        if self._table[Addr.RESPONSE_STATUS_LEVEL] < level:
            return None
        return ft.make_status(self.id, self._table[Addr.STATUS], data)

    # -- the memory table -----------------------------------------------------------------------

    def read_range(self, address: int, length: int, now: float) -> bytes:
        self._refresh(now)
        return bytes(self._table[address : address + length])

    def write_range(self, address: int, data: bytes, now: float) -> None:
        """Store the writable bytes of `data` at `address`, then act on each item touched."""
        persist = self._table[self.spec.lock_address] == 0
        touched: dict[int, None] = {}
        for offset, byte in enumerate(data):
            a = address + offset
            item = self._item_at.get(a)
            if item is None or not item.writable:
                continue
            self._table[a] = byte
            touched[item.address] = None
        for item_address in touched:
            if self._items[item_address].eeprom and persist:
                saved = bytearray(self._saved)
                for a in _span(self._items[item_address]):
                    saved[a] = self._table[a]
                self._saved = bytes(saved)
                self.eeprom_writes += 1
            self._apply(item_address, now)

    def _apply(self, address: int, now: float) -> None:
        if address == Addr.TORQUE_ENABLE:
            self._overloaded = False  # a Torque Enable write clears the overload latch
            self._overload_since = None
            if self._table[Addr.TORQUE_ENABLE] != 1:
                self._table[Addr.TORQUE_ENABLE] = 0  # 128 (set the middle) is not modelled
                self.motor.disable()
            else:
                self._refresh(now)
                if self._table[Addr.TORQUE_ENABLE] == 1:
                    self.motor.enable()
                    self.motor.command(self._goal_rad())
        elif address in _GOAL_ITEMS and self._table[Addr.TORQUE_ENABLE] == 1:
            self.motor.command(self._goal_rad())

    # -- physics and protections ----------------------------------------------------------------

    def tick(self, now: float) -> None:
        self._refresh(now)

    def _refresh(self, now: float) -> None:
        """Bring the feedback items and the protections up to date."""
        f = self.faults
        torque_on = self._table[Addr.TORQUE_ENABLE] == 1
        limit = self.get(self.spec.torque_limit_address or Addr.MAX_TORQUE_LIMIT) / 1000.0
        sample = self.motor.sample()
        load = 0.0
        if torque_on:
            viscous = _VISCOUS_LOAD * sample.velocity / self.motor.params.max_velocity
            demand = f.external_load + viscous + self.motor.obstacle_effort  # e.g. an end stop
            load = max(-limit, min(limit, demand))
            self.motor.faults.stuck = abs(f.external_load) > limit
        else:
            self.motor.faults.stuck = False
        temperature = f.ambient_c + _HEATING_C * load * load
        if f.temperature_c is not None:
            temperature = f.temperature_c
        self._track_overload(abs(load), torque_on, now)
        voltage = round(f.supply_v * 10.0)
        bits = self._status_bits(voltage, temperature)
        self._table[Addr.STATUS] = bits
        if torque_on and bits & self._table[Addr.UNLOADING_CONDITION]:
            self._table[Addr.TORQUE_ENABLE] = 0
            self.motor.disable()
            load = 0.0
        self._set(Addr.PRESENT_POSITION, 2, self._counts(sample.position))
        cpr = self.spec.counts_per_rev
        self._set(Addr.PRESENT_VELOCITY, 2, tb.rad_s_to_steps(sample.velocity, cpr))
        self._set(Addr.PRESENT_LOAD, 2, round(load * 1000.0))
        if self.spec.present_current_address is not None:
            self._set(self.spec.present_current_address, 2, round(load * _STALL_CURRENT_UNITS))
        self._table[Addr.PRESENT_VOLTAGE] = max(0, min(255, voltage))
        self._table[Addr.PRESENT_TEMPERATURE] = max(0, min(255, round(temperature)))
        self._table[Addr.MOVING] = int(abs(sample.velocity) > 0.01)

    def _status_bits(self, voltage: int, temperature: float) -> int:
        """The status bits (65) for a voltage (0.1 V) and a temperature (°C)."""
        bits = 0
        if not self.get(Addr.MIN_VOLTAGE_LIMIT) <= voltage <= self.get(Addr.MAX_VOLTAGE_LIMIT):
            bits |= ErrorBit.VOLTAGE
        if self.faults.sensor_error:
            bits |= ErrorBit.SENSOR
        if temperature > self.get(Addr.MAX_TEMPERATURE_LIMIT):
            bits |= ErrorBit.OVERHEAT
        if self._overloaded:
            bits |= ErrorBit.OVERLOAD
        return bits

    def _track_overload(self, load: float, torque_on: bool, now: float) -> None:
        address = self.spec.overload_torque_address
        threshold = 0.8 if address is None else self.get(address) / 100.0
        if not torque_on or load < threshold:
            self._overload_since = None
            return
        if self._overload_since is None:
            self._overload_since = now
        if now - self._overload_since >= self.get(self.spec.protection_time_address) * 0.010:
            self._overloaded = True


def _span(item: Item) -> range:
    return range(item.address, item.address + item.size)


_GOAL_ITEMS = (Addr.GOAL_POSITION, Addr.MIN_POSITION_LIMIT, Addr.MAX_POSITION_LIMIT)
_NOMINAL_V = {"sts3215": 12.0, "sts3250": 12.0, "scs0009": 6.0}
