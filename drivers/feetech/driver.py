"""Feetech SCS/STS driver: one serial port (the SO-101's Waveshare/Feetech bus adapter or any
half-duplex TTL adapter) and a chain of STS3215 (or STS3250, SCS0009) servos in position mode.

open() pings every id (silent ids: `DriverTimeoutError`), checks each model number (the word at
address 3) against the configured `model`, and checks the EEPROM settings the driver relies on:
Return Delay Time (7) = 0 and Operating Mode (33) = 0 (position). An EEPROM item is written only
when it differs (Lock 0 → write → Lock 1), so a normal start-up writes nothing and does not wear
the EEPROM. Each cycle is then one transaction per direction: `read()` is one Sync Read of
addresses 56..65 (position, velocity, load, voltage, temperature, status) for all STS servos (SCS
servos, which have no Sync Read, are read one by one), `write()` one Sync Write of Goal Position
(servos do not answer it). enable() refuses servos with status error bits, sets Goal Position to
the present position (a stale goal would make the servo jump), writes Torque_Limit from
`torque_limit` and turns torque on; disable() turns torque off on every servo with one Sync Write,
then verifies.

Units: ``position = 2π · (counts - 2048) / 4096`` (rad, 0 at the middle of the turn; no homing
offset or direction: calibration is added by a later layer), velocity from steps/s likewise,
`DeviceState.effort` = Present_Load / 1000 (signed fraction of the stall torque). All servos of one
cycle get the same timestamp, the injected clock's time when the transaction ended.

A missing, late, corrupt or malformed status packet leaves that servo's previous state (see
`drivers.base`) and is counted: `missing_replies` per silent servo, `timeouts` per transaction
that ran out of time, `corrupt_replies` per run of undecodable bytes and per malformed packet.
Faults (`DeviceState.fault`, code = the status error bits, `drivers.feetech.protocol.ErrorBit`):
overload, overheat, overcurrent, sensor and voltage, each named in the message, which also says
whether the servo switched torque off (the bits in its Unloading_Condition (19)).
`clear_faults()` writes Torque Enable = 0 to servos with a latched overload (that clears it) and
raises `DeviceFaultError` naming what persists (a hot servo must cool down, a voltage come back).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from drivers.base import Clock, DeviceState, DriverParams, Lifecycle
from drivers.errors import DeviceFaultError, DriverOpenError
from drivers.feetech import protocol as ft
from drivers.feetech import table as tb
from drivers.feetech.device import Servo
from drivers.feetech.link import FeetechLink
from drivers.feetech.params import FeetechDeviceParams, FeetechParams
from drivers.feetech.protocol import ErrorBit, Packet
from drivers.feetech.table import MODELS, Addr, StatusBlock
from drivers.serial_bus.driver import ServoBusDriver

__all__ = ["FeetechDeviceParams", "FeetechDriver", "FeetechParams"]

log = logging.getLogger(__name__)

_BLOCK = tb.STATUS_BLOCK_LENGTH


class FeetechDriver(ServoBusDriver[Servo, StatusBlock, Packet]):
    """A Feetech SCS/STS chain on one serial port (see the module docstring)."""

    Params = FeetechParams
    status_block_length = _BLOCK
    goal_position = (Addr.GOAL_POSITION, 2)
    torque_enable_address = Addr.TORQUE_ENABLE
    torque_items = ("Torque Enable", "Torque Enable")

    def __init__(self, params: DriverParams, *, clock: Clock = time.monotonic) -> None:
        p = self._checked(params, FeetechParams)
        servos = [
            Servo(name, d.id, MODELS[d.model], d.torque_limit) for name, d in p.devices.items()
        ]
        super().__init__(p, servos, clock=clock)
        self._p = p
        self._unloading: dict[int, int] = {}

    # -- Driver hooks beyond the servo bus's ------------------------------------------------------

    async def _clear_faults(self) -> None:
        """Clear latched overloads (Torque Enable = 0); raises `DeviceFaultError` naming the
        conditions that persist, `DriverTimeoutError` when a servo stays silent."""
        async with self._lock:
            blocks = await self._read_all("clear faults")
            for servo in self._devices:
                if blocks[servo.id].status & ErrorBit.OVERLOAD:
                    log.warning("%s: clearing an overload", servo)
                    await self._torque(servo, on=False)
            after = await self._read_all("check the faults")
            still = [
                f"{s}: {ft.describe_error(after[s.id].status)}"
                for s in self._devices
                if after[s.id].status
            ]
            if still:
                raise DeviceFaultError(f"faults persist: {'; '.join(still)}")

    # -- the servo bus's hooks: open ----------------------------------------------------------

    def _make_link(self) -> FeetechLink:
        return FeetechLink.for_params(self._p)

    async def _bring_up(self) -> None:
        """Identify and configure every servo; each then answers at once (Return Delay Time 0)."""
        await super()._bring_up()
        for servo in self._devices:
            self._line().set_return_delay(servo.id, 0.0)

    async def _identify(self, servo: Servo) -> str | None:
        await self._line().command(servo, ft.make_ping(servo.id), "Ping")
        data = await self._read_item(servo, Addr.MODEL_NUMBER, 2, "Model Number")
        model = ft.decode_word(data, servo.spec.byteorder)
        log.info("%s: model number %d", servo, model)
        if model == servo.spec.model_number:
            return None
        return (
            f"{servo}: model number {model}, configured {servo.spec.name} "
            f"({servo.spec.model_number})"
        )

    async def _configure(self, servo: Servo) -> None:
        """Check the EEPROM settings (writing only those that differ) and read the limits."""
        eeprom = await self._read_item(servo, Addr.RETURN_DELAY_TIME, 6, "Return Delay Time…")
        if eeprom[1] != 1:
            raise DriverOpenError(
                f"{servo}: Response Status Level (8) is {eeprom[1]}; this driver needs 1 (a "
                "status packet for every instruction)"
            )
        if eeprom[0] != 0:
            await self._write_eeprom(servo, Addr.RETURN_DELAY_TIME, b"\x00", "Return Delay Time")
        order = servo.spec.byteorder
        low, high = ft.decode_word(eeprom[2:4], order), ft.decode_word(eeprom[4:6], order)
        if low >= high:
            raise DriverOpenError(
                f"{servo}: position limits (9, 11) [{low}, {high}] are empty, which the servo "
                "reads as multi-turn mode; this driver needs single-turn limits such as [0, "
                f"{servo.spec.counts_per_rev - 1}]"
            )
        self._limits[servo.id] = (low, high)
        mode_address = servo.spec.operating_mode_address
        if mode_address is not None:
            mode = await self._read_item(servo, mode_address, 1, "Operating Mode")
            if mode != b"\x00":
                await self._write_eeprom(servo, mode_address, b"\x00", "Operating Mode")
        unloading = await self._read_item(servo, Addr.UNLOADING_CONDITION, 1, "Unloading")
        self._unloading[servo.id] = unloading[0]

    async def _write_eeprom(self, servo: Servo, address: int, data: bytes, what: str) -> None:
        """Lock 0, write, Lock 1: the value is kept across power cycles."""
        log.info("%s: writing %s (%d) = %s to EEPROM", servo, what, address, data.hex())
        lock = servo.spec.lock_address
        await self._write_item(servo, lock, b"\x00", "Lock = 0")
        try:
            await self._write_item(servo, address, data, what)
        finally:
            await self._write_item(servo, lock, b"\x01", "Lock = 1")

    def _log_cycle_time(self) -> None:
        ids = [s.id for s in self._devices if s.spec.sync_read]
        bus_s, deadline_s = self._cycle_times(tb.STATUS_BLOCK_ADDRESS, ids)
        log.info(
            "port %r: one Sync Read of %d servos takes %.2f ms on the bus at %d baud, "
            "deadline %.2f ms",
            self._p.port, len(ids), bus_s * 1e3, self._p.baudrate, deadline_s * 1e3,
        )  # fmt: skip

    # -- the servo bus's hooks: enable, disable ---------------------------------------------------

    def _block_fault(self, block: StatusBlock) -> str | None:
        return ft.describe_error(block.status) if block.status else None

    async def _prepare(self, servo: Servo, block: StatusBlock) -> None:
        """Before torque on: hold the present position, write the configured torque limit."""
        goal = servo.word(block.position, Addr.GOAL_POSITION)
        await self._write_item(servo, Addr.GOAL_POSITION, goal, "Goal Position")
        address = servo.spec.torque_limit_address
        if address is not None:
            limit = servo.word(tb.torque_limit_units(servo.torque_limit), address)
            await self._write_item(servo, address, limit, "Torque Limit")

    async def _torque_check(self) -> Callable[[Servo], Awaitable[bool]]:
        async def still_on(servo: Servo) -> bool:
            on = await self._read_item(servo, Addr.TORQUE_ENABLE, 1, "Torque Enable")
            return on != b"\x00"

        return still_on

    # -- the servo bus's hooks: the cyclic transaction ------------------------------------------

    async def _read_blocks(self) -> dict[int, StatusBlock]:
        """One Sync Read of the STS servos' status blocks (and one Read per SCS servo); updates
        the states and counts the problems."""
        blocks: dict[int, StatusBlock] = {}
        synced = [s for s in self._devices if s.spec.sync_read]
        if synced:
            await self._sync_read_blocks(synced, tb.STATUS_BLOCK_ADDRESS, blocks, what="read")
        for servo in self._devices:
            if not servo.spec.sync_read:
                request = ft.make_read(servo.id, tb.STATUS_BLOCK_ADDRESS, _BLOCK)
                reply = await self._line().transact(request, [servo.id], _BLOCK)
                self._take([servo], reply, blocks, what="read")
        return blocks

    def _decode(self, servo: Servo, packet: Packet, now: float) -> tuple[StatusBlock, DeviceState]:
        block = tb.decode_status_block(packet.params, servo.spec.byteorder)
        enabled = self.lifecycle is Lifecycle.ENABLED
        unloading = self._unloading.get(servo.id, 0)
        state = servo.state(block, packet.error, now, driver_enabled=enabled, unloading=unloading)
        return block, state

    def _goal(self, servo: Servo, position: float) -> bytes:
        counts = servo.goal_counts(position, self._limits[servo.id])
        return servo.word(counts, Addr.GOAL_POSITION)
