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

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence

from drivers.base import (
    Clock,
    DeviceCommand,
    DeviceState,
    Driver,
    DriverParams,
    Lifecycle,
)
from drivers.errors import (
    DeviceFaultError,
    DriverConfigError,
    DriverError,
    DriverIOError,
    DriverOpenError,
    DriverTimeoutError,
)
from drivers.feetech import protocol as ft
from drivers.feetech import table as tb
from drivers.feetech.device import Servo
from drivers.feetech.link import FeetechLink
from drivers.feetech.params import FeetechDeviceParams, FeetechParams
from drivers.feetech.protocol import ErrorBit
from drivers.feetech.table import MODELS, Addr, StatusBlock

__all__ = ["FeetechDeviceParams", "FeetechDriver", "FeetechParams"]

log = logging.getLogger(__name__)

_WARN_EVERY_S = 10.0
_BLOCK = tb.STATUS_BLOCK_LENGTH


class FeetechDriver(Driver):
    """A Feetech SCS/STS chain on one serial port (see the module docstring)."""

    Params = FeetechParams

    def __init__(self, params: DriverParams, *, clock: Clock = time.monotonic) -> None:
        if not isinstance(params, FeetechParams):
            raise DriverConfigError(f"FeetechDriver needs FeetechParams, not {type(params)}")
        super().__init__(params, clock=clock)
        self._p = params
        self._servos = tuple(
            Servo(name, d.id, MODELS[d.model], d.torque_limit) for name, d in params.devices.items()
        )
        self._by_name = {servo.name: servo for servo in self._servos}
        self._link: FeetechLink | None = None
        self._lock = asyncio.Lock()
        self._states: dict[str, DeviceState] = {}
        self._limits: dict[int, tuple[int, int]] = {}
        self._unloading: dict[int, int] = {}
        self._warned_at: dict[str, float] = {}

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(servo.name for servo in self._servos)

    # -- lifecycle hooks ------------------------------------------------------------------------

    async def _open(self) -> None:
        p = self._p
        self._link = FeetechLink(
            p.port, p.baudrate, reply_margin_s=p.reply_margin_s, usb_latency_s=p.usb_latency_s,
            retries=p.retries,
        )  # fmt: skip
        self._states.clear()
        try:
            await self._link.open()
            await self._ping_all()
            for servo in self._servos:
                await self._configure(servo)
            self._link.return_delay_s = 0.0
            self._log_cycle_time()
        except BaseException:
            await self._close()
            raise

    async def _enable(self) -> None:
        async with self._lock:
            blocks = await self._read_all("enable")
            faulted = [
                f"{s}: {ft.describe_error(blocks[s.id].status)}"
                for s in self._servos
                if blocks[s.id].status
            ]
            if faulted:
                raise DeviceFaultError(
                    f"cannot enable: {'; '.join(faulted)}; remove the cause, then clear faults"
                )
            try:
                for servo in self._servos:
                    goal = servo.word(blocks[servo.id].position, Addr.GOAL_POSITION)
                    await self._write_item(servo, Addr.GOAL_POSITION, goal, "Goal Position")
                    address = servo.spec.torque_limit_address
                    if address is not None:
                        limit = servo.word(tb.torque_limit_units(servo.torque_limit), address)
                        await self._write_item(servo, address, limit, "Torque Limit")
                for servo in self._servos:
                    await self._write_item(servo, Addr.TORQUE_ENABLE, b"\x01", "Torque Enable")
            except DriverError:
                await self._torque_off_all()
                raise

    async def _disable(self) -> None:
        async with self._lock:
            await self._torque_off_all(best_effort=False)
            failures = []
            for servo in self._servos:
                try:
                    line = self._line()
                    on = await line.read_item(servo, Addr.TORQUE_ENABLE, 1, "Torque Enable")
                    if on != b"\x00":
                        await self._write_item(servo, Addr.TORQUE_ENABLE, b"\x00", "Torque Enable")
                except DriverError as exc:
                    failures.append(str(exc))
            if failures:
                raise DriverIOError(f"torque may still be on: {'; '.join(failures)}")

    async def _close(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            await link.close()  # never raises

    async def _read(self) -> Mapping[str, DeviceState]:
        async with self._lock:
            await self._read_blocks()
        return dict(self._states)

    async def _write(self, commands: Mapping[str, DeviceCommand]) -> None:
        goals: dict[int, bytes] = {}
        for name, command in commands.items():
            servo = self._by_name[name]
            counts = servo.goal_counts(command.position, self._limits[servo.id])
            goals[servo.id] = servo.word(counts, Addr.GOAL_POSITION)
        if goals:
            request = ft.make_sync_write(Addr.GOAL_POSITION, 2, goals)
            async with self._lock:
                await self._line().transact(request, (), 0)

    async def _clear_faults(self) -> None:
        """Clear latched overloads (Torque Enable = 0); raises `DeviceFaultError` naming the
        conditions that persist, `DriverTimeoutError` when a servo stays silent."""
        async with self._lock:
            blocks = await self._read_all("clear faults")
            for servo in self._servos:
                if blocks[servo.id].status & ErrorBit.OVERLOAD:
                    log.warning("%s: clearing an overload", servo)
                    await self._write_item(servo, Addr.TORQUE_ENABLE, b"\x00", "Torque Enable")
            after = await self._read_all("check the faults")
            still = [
                f"{s}: {ft.describe_error(after[s.id].status)}"
                for s in self._servos
                if after[s.id].status
            ]
            if still:
                raise DeviceFaultError(f"faults persist: {'; '.join(still)}")

    # -- open -----------------------------------------------------------------------------------

    async def _ping_all(self) -> None:
        silent: list[str] = []
        wrong: list[str] = []
        for servo in self._servos:
            try:
                await self._line().command(servo, ft.make_ping(servo.id), "Ping")
                data = await self._line().read_item(servo, Addr.MODEL_NUMBER, 2, "Model Number")
            except DriverTimeoutError:
                silent.append(str(servo))
                continue
            model = ft.decode_word(data, servo.spec.byteorder)
            log.info("%s: model number %d", servo, model)
            if model != servo.spec.model_number:
                wrong.append(
                    f"{servo}: model number {model}, configured {servo.spec.name} "
                    f"({servo.spec.model_number})"
                )
        if silent:
            raise DriverTimeoutError(
                f"port {self._p.port!r} at {self._p.baudrate} baud: no answer to Ping from "
                f"{', '.join(silent)}; check power, wiring, ids and baud rate"
            )
        if wrong:
            raise DriverOpenError("; ".join(wrong))

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
        ids = [s.id for s in self._servos if s.spec.sync_read]
        request = len(ft.make_sync_read(tb.STATUS_BLOCK_ADDRESS, _BLOCK, ids))
        replies = [ft.status_packet_size(_BLOCK)] * len(ids)
        bus_s = ft.transaction_time_s(request, replies, self._p.baudrate, 0.0)
        log.info(
            "port %r: one Sync Read of %d servos takes %.2f ms on the bus at %d baud, "
            "deadline %.2f ms",
            self._p.port, len(ids), bus_s * 1e3, self._p.baudrate,
            self._line().deadline_s(request, replies) * 1e3,
        )  # fmt: skip

    async def _torque_off_all(self, *, best_effort: bool = True) -> None:
        """One Sync Write of Torque Enable = 0: every servo lets go at the same moment."""
        request = ft.make_sync_write(Addr.TORQUE_ENABLE, 1, {s.id: b"\x00" for s in self._servos})
        try:
            await self._line().transact(request, (), 0)
        except DriverError as exc:
            if not best_effort:
                raise
            log.warning("port %r: torque off failed: %s", self._p.port, exc)

    # -- the cyclic transaction -----------------------------------------------------------------

    async def _read_blocks(self) -> dict[int, StatusBlock]:
        """One Sync Read of the STS servos' status blocks (and one Read per SCS servo); updates
        the states and counts the problems."""
        line = self._line()
        blocks: dict[int, StatusBlock] = {}
        synced = [s for s in self._servos if s.spec.sync_read]
        if synced:
            ids = [s.id for s in synced]
            request = ft.make_sync_read(tb.STATUS_BLOCK_ADDRESS, _BLOCK, ids)
            reply = await line.transact(request, ids, _BLOCK)
            self._take(synced, reply.packets, reply.corrupt, reply.timed_out, blocks)
        for servo in self._servos:
            if not servo.spec.sync_read:
                request = ft.make_read(servo.id, tb.STATUS_BLOCK_ADDRESS, _BLOCK)
                reply = await line.transact(request, [servo.id], _BLOCK)
                self._take([servo], reply.packets, reply.corrupt, reply.timed_out, blocks)
        return blocks

    def _take(
        self,
        servos: Sequence[Servo],
        packets: Mapping[int, ft.Packet],
        corrupt: int,
        timed_out: bool,
        blocks: dict[int, StatusBlock],
    ) -> None:
        now = self.clock()
        for servo in servos:
            packet = packets.get(servo.id)
            if packet is None:
                self._count(servo, "missing_replies", f"{servo}: no status packet")
            elif len(packet.params) != _BLOCK:
                size = len(packet.params)
                self._count(servo, "corrupt_replies", f"{servo}: status of {size} bytes")
            else:
                block = tb.decode_status_block(packet.params, servo.spec.byteorder)
                blocks[servo.id] = block
                enabled = self.lifecycle is Lifecycle.ENABLED
                unloading = self._unloading.get(servo.id, 0)
                self._states[servo.name] = servo.state(
                    block, packet.error, now, driver_enabled=enabled, unloading=unloading
                )
        for _ in range(corrupt):
            message = f"port {self._p.port!r}: undecodable bytes on the line"
            self.stats.count_error(None, "corrupt_replies", message)
        if timed_out:
            self.stats.count_error(None, "timeouts", f"port {self._p.port!r}: read timed out")

    async def _read_all(self, action: str) -> dict[int, StatusBlock]:
        blocks = await self._read_blocks()
        missing = [str(s) for s in self._servos if s.id not in blocks]
        if missing:
            raise DriverTimeoutError(f"cannot {action}: no valid status from {', '.join(missing)}")
        return blocks

    def _count(self, servo: Servo, kind: str, message: str) -> None:
        """Count a problem; log it at most once per `_WARN_EVERY_S` per servo."""
        self.stats.count_error(servo.name, kind, message)
        now = time.monotonic()
        if now - self._warned_at.get(servo.name, -_WARN_EVERY_S) >= _WARN_EVERY_S:
            self._warned_at[servo.name] = now
            log.warning(
                "%s (%d problems so far)", message, self.stats.per_device_errors[servo.name]
            )

    # -- transactions ---------------------------------------------------------------------------

    def _line(self) -> FeetechLink:
        """The serial link while open. Raises DriverIOError."""
        if self._link is None:
            raise DriverIOError(f"port {self._p.port!r} is not open")
        return self._link

    async def _read_item(self, servo: Servo, address: int, length: int, what: str) -> bytes:
        return await self._line().read_item(servo, address, length, what)

    async def _write_item(self, servo: Servo, address: int, data: bytes, what: str) -> None:
        """Write one item; the answer's status bits are the read path's business."""
        await self._line().write_item(servo, address, data, what)
