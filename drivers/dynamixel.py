"""Dynamixel Protocol 2.0 driver: one serial port (a U2D2 or any half-duplex adapter) and a chain of
X-series (or MX 2.0) devices in position or extended-position mode.

open() pings every id (silent ids: `DriverTimeoutError`), checks the model numbers, sets the
Operating Mode (an EEPROM item: only written when it differs, and only while torque is off) and
maps a status block onto Indirect Data: torque, Hardware Error Status, Bus Watchdog, Present
Velocity and Present Position, 11 bytes per device. Each cycle is then one transaction per
direction: `read()` is one Sync Read of the status blocks, `write()` one Sync Write of Goal Position
(devices do not answer it). enable() refuses devices with a hardware error, sets Goal Position to
the present position (a stale goal would make the device jump), arms the Bus Watchdog and turns
torque on; disable() turns torque off on every device with one Sync Write, then verifies.

Units: ``position = direction · 2π · counts / 4096 + offset_rad`` (rad at the motor shaft; velocity
likewise from 0.229 rpm units, without the offset). A command's velocity feed-forward is not used:
the X series has no per-cycle feed-forward input in position mode. All devices of one Sync Read
get the same timestamp, the injected clock's time when the transaction ended.

Reply deadlines come from the baud rate and the packet sizes: the request's wire time, then for
each device its Return Delay Time (read at open) and its reply's wire time, plus `reply_margin_s`
and twice the USB adapter's latency (`usb_latency_s`, read from the FTDI ``latency_timer`` in sysfs
when not configured; set it to 1 ms for fast cycles).

Serial I/O runs on one dedicated thread, never on the event loop. A missing, late, corrupt or
refused status packet leaves that device's previous state (see `drivers.base`) and is counted:
`missing_replies` per silent device, `timeouts` per Sync Read that ran out of time,
`corrupt_replies` per run of undecodable bytes and per refused or malformed status packet.

Faults (`DeviceState.fault`): a hardware error (code = the Hardware Error Status bits) turns torque
off; an expired Bus Watchdog (`FAULT_BUS_WATCHDOG`) stops the device, which then refuses goals;
torque found off while enabled is `FAULT_TORQUE_OFF`. `clear_faults()` reboots the devices with a
hardware error (waiting until they answer pings again, then restoring the indirect mapping) and
clears expired watchdogs. A reboot loses the multi-turn count: afterwards the position is within
one turn of the encoder's zero.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import select
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, Self, TypeVar

import serial
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from drivers import dynamixel_protocol as dxl
from drivers.base import (
    Clock,
    DeviceCommand,
    DeviceFault,
    DeviceState,
    Driver,
    DriverParams,
    Lifecycle,
)
from drivers.dynamixel_protocol import Addr, Packet, StatusBlock
from drivers.errors import (
    DeviceFaultError,
    DriverConfigError,
    DriverError,
    DriverIOError,
    DriverOpenError,
    DriverTimeoutError,
    UnsupportedCommandError,
)

__all__ = [
    "FAULT_BUS_WATCHDOG",
    "FAULT_TORQUE_OFF",
    "KNOWN_MODELS",
    "DynamixelDeviceParams",
    "DynamixelDriver",
    "DynamixelParams",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

FAULT_BUS_WATCHDOG = 0x100
FAULT_TORQUE_OFF = 0x200
_WARN_EVERY_S = 10.0
_EXTENDED_LIMIT = 1_048_575  # Goal Position range in extended position mode, counts
_MODES = {
    "position": dxl.OperatingMode.POSITION,
    "extended_position": dxl.OperatingMode.EXTENDED_POSITION,
}

KNOWN_MODELS: Mapping[int, str] = MappingProxyType({
    30: "MX-28(2.0)", 311: "MX-64(2.0)", 321: "MX-106(2.0)", 1000: "XH430-W350",
    1001: "XD430-T350", 1010: "XH430-W210", 1011: "XD430-T210", 1020: "XM430-W350",
    1030: "XM430-W210", 1040: "XH430-V350", 1050: "XH430-V210", 1060: "XL430-W250",
    1070: "XC430-W150", 1080: "XC430-W240", 1090: "2XL430-W250", 1100: "XH540-W270",
    1101: "XD540-T270", 1110: "XH540-W150", 1111: "XD540-T150", 1120: "XM540-W270",
    1130: "XM540-W150", 1140: "XH540-V270", 1150: "XH540-V150", 1160: "2XC430-W250",
    1170: "XW540-T260", 1180: "XW540-T140", 1190: "XL330-M077", 1200: "XL330-M288",
    1210: "XC330-T181", 1220: "XC330-T288", 1230: "XC330-M181", 1240: "XC330-M288",
    1270: "XW430-T333", 1280: "XW430-T200", 1310: "XW540-H260",
})  # fmt: skip
"""Model numbers whose control table has the X-series addresses this driver uses."""


class DynamixelDeviceParams(BaseModel):
    """One device: its bus `id`, `direction` (-1 flips the sign) and `offset_rad` (the SI position
    at which the device reads 0 counts)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int = Field(ge=0, le=dxl.MAX_ID)
    direction: Literal[1, -1] = 1
    offset_rad: float = Field(default=0.0, allow_inf_nan=False)


class DynamixelParams(DriverParams):
    """The Dynamixel driver's configuration (times in s)."""

    port: str = Field(min_length=1)  # e.g. /dev/serial/by-id/usb-FTDI_USB__-__Serial_Converter_…
    baudrate: int = Field(default=1_000_000, gt=0)
    devices: dict[str, DynamixelDeviceParams] = Field(min_length=1)
    operating_mode: Literal["position", "extended_position"] = "extended_position"
    bus_watchdog_s: float | None = 0.1  # None: off; 0.02 … 2.54 in 20 ms steps
    reply_margin_s: float = Field(default=0.002, ge=0.0, allow_inf_nan=False)
    usb_latency_s: float | None = Field(default=None, ge=0.0)  # None: read from sysfs
    retries: int = Field(default=2, ge=0)  # for configuration commands, never for read/write
    reboot_timeout_s: float = Field(default=2.0, gt=0.0)
    indirect_index: int = Field(default=1, ge=1, le=29 - dxl.STATUS_BLOCK_LENGTH)
    accept_unknown_models: bool = False

    @field_validator("bus_watchdog_s")
    @classmethod
    def _watchdog_in_range(cls, value: float | None) -> float | None:
        if value is not None:
            dxl.watchdog_units(value)  # raises ValueError with the bounds
        return value

    @model_validator(mode="after")
    def _unique_ids(self) -> Self:
        seen: dict[int, str] = {}
        for name, device in self.devices.items():
            if device.id in seen:
                raise ValueError(f"devices {seen[device.id]!r} and {name!r}: same id {device.id}")
            seen[device.id] = name
        return self


@dataclass(frozen=True, slots=True)
class _Device:
    name: str
    id: int
    direction: int
    offset_rad: float

    def __str__(self) -> str:
        return f"device {self.name!r} (id {self.id})"


@dataclass(frozen=True, slots=True)
class _Reply:
    """What one transaction brought back: the first status packet of each expected id."""

    packets: Mapping[int, Packet]
    corrupt: int  # runs of undecodable bytes, including a truncated packet at the deadline
    timed_out: bool


class _Link:
    """The serial port. Every method blocks: call them on the driver's I/O thread only."""

    def __init__(self, port: str, baudrate: int) -> None:
        self.port = port
        try:
            self._serial = serial.Serial(
                port, baudrate, timeout=0, write_timeout=1.0, exclusive=True
            )
        except (serial.SerialException, OSError, ValueError) as exc:
            raise DriverOpenError(f"port {port!r} at {baudrate} baud: cannot open: {exc}") from exc

    def transact(
        self, request: bytes, expect: Sequence[int], timeout_s: float, max_length: int
    ) -> _Reply:
        """Send `request`, then collect the status packets of `expect` until all came or
        `timeout_s` ran out."""
        try:
            stale = self._serial.in_waiting
            if stale:
                self._serial.read(stale)  # a late reply to an earlier transaction
            self._serial.write(request)
            return self._collect(expect, time.monotonic() + timeout_s, max_length)
        except (serial.SerialException, OSError) as exc:
            raise DriverIOError(f"port {self.port!r}: {exc}") from exc

    def _collect(self, expect: Sequence[int], deadline: float, max_length: int) -> _Reply:
        parser = dxl.PacketParser(max_length)
        packets: dict[int, Packet] = {}
        while len(packets) < len(expect):
            remaining = deadline - time.monotonic()
            if remaining <= 0.0:
                break
            select.select([self._serial.fileno()], [], [], remaining)
            for packet in parser.feed(self._serial.read(self._serial.in_waiting or 1)):
                if packet.is_status and packet.id in expect:
                    packets.setdefault(packet.id, packet)
        corrupt = parser.corrupt + (1 if parser.pending else 0)
        return _Reply(packets, corrupt, timed_out=len(packets) < len(expect))

    def close(self) -> None:
        try:
            self._serial.close()
        except (serial.SerialException, OSError) as exc:
            log.debug("port %r: error while closing: %s", self.port, exc)


def _usb_latency_s(port: str) -> float:
    """The FTDI latency timer of a USB serial port (0 when there is none, e.g. a pty)."""
    name = os.path.basename(os.path.realpath(port))
    try:
        with open(f"/sys/bus/usb-serial/devices/{name}/latency_timer") as file:
            return int(file.read()) / 1000.0
    except (OSError, ValueError):
        return 0.0


class DynamixelDriver(Driver):
    """A Dynamixel Protocol 2.0 chain on one serial port (see the module docstring)."""

    Params = DynamixelParams

    def __init__(self, params: DriverParams, *, clock: Clock = time.monotonic) -> None:
        if not isinstance(params, DynamixelParams):
            raise DriverConfigError(f"DynamixelDriver needs DynamixelParams, not {type(params)}")
        super().__init__(params, clock=clock)
        self._p = params
        self._devices = tuple(
            _Device(name, d.id, d.direction, d.offset_rad) for name, d in params.devices.items()
        )
        self._by_name = {device.name: device for device in self._devices}
        self._block_address = dxl.indirect_data_address(params.indirect_index)
        self._link: _Link | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._lock = asyncio.Lock()
        self._states: dict[str, DeviceState] = {}
        self._limits: dict[int, tuple[int, int]] = {}
        self._return_delays: dict[int, float] = {}
        self._latency_s: float | None = None
        self._warned_at: dict[str, float] = {}

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(device.name for device in self._devices)

    # -- lifecycle hooks ------------------------------------------------------------------------

    async def _open(self) -> None:
        p = self._p
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dynamixel-io")
        self._states.clear()
        try:
            self._link = await self._io(lambda: _Link(p.port, p.baudrate), timeout_s=2.0)
            self._latency_s = p.usb_latency_s
            if self._latency_s is None:
                self._latency_s = await self._io(lambda: _usb_latency_s(p.port), timeout_s=1.0)
            if self._latency_s > 0.002:
                log.warning(
                    "port %r: USB latency timer %.0f ms delays every reply; set it to 1 ms "
                    "(echo 1 > /sys/bus/usb-serial/devices/<tty>/latency_timer, or a udev rule)",
                    p.port, self._latency_s * 1e3,
                )  # fmt: skip
            await self._ping_all()
            for device in self._devices:
                await self._configure(device)
            self._log_cycle_time()
        except BaseException:
            await self._close()
            raise

    async def _enable(self) -> None:
        async with self._lock:
            blocks = await self._sync_read_all("enable")
            faulted = [
                f"{d}: {dxl.describe_hardware_error(blocks[d.id].hardware_error)}"
                for d in self._devices
                if blocks[d.id].hardware_error
            ]
            if faulted:
                raise DeviceFaultError(
                    f"cannot enable: {'; '.join(faulted)}; remove the cause, then clear faults "
                    "(which reboots those devices)"
                )
            try:
                for device in self._devices:
                    await self._prepare(device, blocks[device.id])
                for device in self._devices:
                    await self._write_item(device, Addr.TORQUE_ENABLE, b"\x01", "Torque Enable = 1")
            except DriverError:
                await self._torque_off_all()
                raise

    async def _disable(self) -> None:
        async with self._lock:
            await self._torque_off_all(best_effort=False)
            blocks = await self._sync_read()
            failures = []
            for device in self._devices:
                if device.id in blocks and not blocks[device.id].torque_enabled:
                    continue
                try:
                    await self._write_item(device, Addr.TORQUE_ENABLE, b"\x00", "Torque Enable = 0")
                except DriverError as exc:
                    failures.append(str(exc))
            if failures:
                raise DriverIOError(f"torque may still be on: {'; '.join(failures)}")

    async def _close(self) -> None:
        link, executor = self._link, self._executor
        self._link, self._executor = None, None
        if executor is None:
            return
        if link is not None:
            loop = asyncio.get_running_loop()
            try:
                await asyncio.wait_for(loop.run_in_executor(executor, link.close), 2.0)
            except TimeoutError:
                log.warning("port %r: closing timed out", self._p.port)
        executor.shutdown(wait=False)

    async def _read(self) -> Mapping[str, DeviceState]:
        async with self._lock:
            await self._sync_read()
        return dict(self._states)

    async def _write(self, commands: Mapping[str, DeviceCommand]) -> None:
        goals = {
            self._by_name[name].id: dxl.i32(self._to_counts(self._by_name[name], command.position))
            for name, command in commands.items()
        }
        if goals:
            request = dxl.make_sync_write(Addr.GOAL_POSITION, 4, goals)
            async with self._lock:
                await self._transact(request, (), 0)

    async def _clear_faults(self) -> None:
        """Reboot the devices that report a hardware error, wait until they answer again and
        restore their configuration; clear expired bus watchdogs. Raises `DeviceFaultError` when a
        hardware error persists after the reboot, `DriverTimeoutError` when a device stays silent.
        """
        async with self._lock:
            blocks = await self._sync_read_all("clear faults")
            broken = [d for d in self._devices if blocks[d.id].hardware_error]
            for device in broken:
                bits = blocks[device.id].hardware_error
                log.warning("%s: rebooting (%s)", device, dxl.describe_hardware_error(bits))
                await self._reboot(device)
            for device in broken:
                await self._await_reboot(device)
                await self._configure(device)
            for device in self._devices:
                if device not in broken and blocks[device.id].bus_watchdog == dxl.WATCHDOG_ERROR:
                    await self._write_item(device, Addr.BUS_WATCHDOG, b"\x00", "Bus Watchdog = 0")
            if broken:
                after = await self._sync_read_all("check the rebooted devices")
                still = [
                    f"{d}: {dxl.describe_hardware_error(after[d.id].hardware_error)}"
                    for d in broken
                    if after[d.id].hardware_error
                ]
                if still:
                    raise DeviceFaultError(
                        f"hardware error persists after reboot: {'; '.join(still)}"
                    )

    # -- steps ----------------------------------------------------------------------------------

    async def _ping_all(self) -> None:
        silent: list[str] = []
        unknown: list[str] = []
        for device in self._devices:
            try:
                data = await self._command(device, dxl.make_ping(device.id), "Ping", data_length=3)
            except DriverTimeoutError:
                silent.append(str(device))
                continue
            model = data[0] | data[1] << 8
            log.info(
                "%s: %s (model %d), firmware %d",
                device,
                KNOWN_MODELS.get(model, "?"),
                model,
                data[2],
            )
            if model not in KNOWN_MODELS:
                unknown.append(f"{device}: model number {model}")
        if silent:
            raise DriverTimeoutError(
                f"port {self._p.port!r} at {self._p.baudrate} baud: no answer to Ping from "
                f"{', '.join(silent)}; check power, wiring, ids and baud rate"
            )
        if unknown and not self._p.accept_unknown_models:
            raise DriverOpenError(
                f"{'; '.join(unknown)} is not a known X-series/MX(2.0) model whose control table "
                "this driver knows; set accept_unknown_models if it uses the same addresses"
            )

    async def _configure(self, device: _Device) -> None:
        """Check the device's settings and map the status block; at open and after a reboot."""
        p = self._p
        eeprom = await self._read_item(device, Addr.RETURN_DELAY_TIME, 3, "Return Delay Time")
        ram = await self._read_item(device, Addr.TORQUE_ENABLE, 7, "Torque Enable…")
        self._return_delays[device.id] = dxl.return_delay_s(eeprom[0])
        if ram[4] != 2:
            raise DriverOpenError(
                f"{device}: Status Return Level (68) is {ram[4]}; this driver needs 2 "
                "(a status packet for every instruction)"
            )
        mode, wanted = eeprom[2], _MODES[p.operating_mode]
        if mode != wanted:
            if ram[0]:
                raise DriverOpenError(
                    f"{device}: Operating Mode is {mode}, configured {p.operating_mode} "
                    f"({int(wanted)}); it can only change while torque is off: turn torque off"
                )
            await self._write_item(device, Addr.OPERATING_MODE, bytes([wanted]), "Operating Mode")
        limits = await self._read_item(device, Addr.MAX_POSITION_LIMIT, 8, "position limits")
        self._limits[device.id] = (_i32(limits[4:8]), _i32(limits[0:4]))
        address, mapping = dxl.make_indirect_mapping(p.indirect_index)
        if await self._read_item(device, address, len(mapping), "indirect addresses") != mapping:
            await self._write_item(device, address, mapping, "indirect addresses")
        if ram[6]:
            log.warning("%s: hardware error: %s", device, dxl.describe_hardware_error(ram[6]))

    async def _prepare(self, device: _Device, block: StatusBlock) -> None:
        """Before torque on: clear an expired watchdog, hold the present position, arm the
        watchdog (it then expires if the control loop stops talking to the bus)."""
        if block.bus_watchdog != 0:
            await self._write_item(device, Addr.BUS_WATCHDOG, b"\x00", "Bus Watchdog = 0")
        goal = dxl.i32(block.position)
        await self._write_item(device, Addr.GOAL_POSITION, goal, "Goal Position = present")
        if self._p.bus_watchdog_s is not None:
            units = bytes([dxl.watchdog_units(self._p.bus_watchdog_s)])
            await self._write_item(device, Addr.BUS_WATCHDOG, units, "Bus Watchdog")

    def _log_cycle_time(self) -> None:
        ids = [device.id for device in self._devices]
        request = len(dxl.make_sync_read(self._block_address, dxl.STATUS_BLOCK_LENGTH, ids))
        replies = [dxl.status_packet_size(dxl.STATUS_BLOCK_LENGTH)] * len(ids)
        delay = max(self._return_delays.values())
        bus_s = dxl.transaction_time_s(request, replies, self._p.baudrate, delay)
        log.info(
            "port %r: one Sync Read of %d devices takes %.2f ms on the bus at %d baud "
            "(Return Delay Time %.0f µs; lower it to shorten the cycle), deadline %.2f ms",
            self._p.port, len(ids), bus_s * 1e3, self._p.baudrate, delay * 1e6,
            self._deadline_s(request, replies) * 1e3,
        )  # fmt: skip

    async def _torque_off_all(self, *, best_effort: bool = True) -> None:
        """One Sync Write of Torque Enable = 0: every device lets go at the same moment."""
        request = dxl.make_sync_write(Addr.TORQUE_ENABLE, 1, {d.id: b"\x00" for d in self._devices})
        try:
            await self._transact(request, (), 0)
        except DriverError as exc:
            if not best_effort:
                raise
            log.warning("port %r: torque off failed: %s", self._p.port, exc)

    async def _reboot(self, device: _Device) -> None:
        """Send Reboot once: a lost status packet is no reason to reboot a second time."""
        reply = await self._transact(dxl.make_reboot(device.id), (device.id,), 0)
        packet = reply.packets.get(device.id)
        if packet is not None and packet.error & ~dxl.ALERT_BIT:
            error = dxl.describe_status_error(packet.error)
            raise DeviceFaultError(f"{device}: Reboot refused: {error}")

    async def _await_reboot(self, device: _Device) -> None:
        deadline = time.monotonic() + self._p.reboot_timeout_s
        while True:
            reply = await self._transact(dxl.make_ping(device.id), (device.id,), 3)
            if device.id in reply.packets:
                log.warning("%s rebooted: its multi-turn count restarted", device)
                return
            if time.monotonic() > deadline:
                raise DriverTimeoutError(
                    f"{device}: no answer within {self._p.reboot_timeout_s} s after Reboot"
                )
            await asyncio.sleep(0.02)

    # -- the cyclic transaction -----------------------------------------------------------------

    async def _sync_read(self) -> dict[int, StatusBlock]:
        """One Sync Read of every device's status block; updates the states, counts problems."""
        ids = [device.id for device in self._devices]
        request = dxl.make_sync_read(self._block_address, dxl.STATUS_BLOCK_LENGTH, ids)
        reply = await self._transact(request, ids, dxl.STATUS_BLOCK_LENGTH)
        now = self.clock()
        blocks: dict[int, StatusBlock] = {}
        for device in self._devices:
            packet = reply.packets.get(device.id)
            if packet is None:
                self._count(device, "missing_replies", f"{device}: no status packet")
            elif packet.error & ~dxl.ALERT_BIT:
                error = dxl.describe_status_error(packet.error)
                self._count(device, "corrupt_replies", f"{device}: status read refused: {error}")
            elif len(packet.data) != dxl.STATUS_BLOCK_LENGTH:
                size = len(packet.data)
                self._count(device, "corrupt_replies", f"{device}: status of {size} bytes")
            else:
                blocks[device.id] = block = dxl.decode_status_block(packet.data)
                self._states[device.name] = self._state(device, block, now)
        for _ in range(reply.corrupt):
            message = f"port {self._p.port!r}: undecodable bytes on the line"
            self.stats.count_error(None, "corrupt_replies", message)
        if reply.timed_out:
            self.stats.count_error(None, "timeouts", f"port {self._p.port!r}: sync read timed out")
        return blocks

    async def _sync_read_all(self, action: str) -> dict[int, StatusBlock]:
        blocks = await self._sync_read()
        missing = [str(d) for d in self._devices if d.id not in blocks]
        if missing:
            raise DriverTimeoutError(f"cannot {action}: no valid status from {', '.join(missing)}")
        return blocks

    def _state(self, device: _Device, block: StatusBlock, now: float) -> DeviceState:
        return DeviceState(
            position=device.direction * dxl.counts_to_rad(block.position) + device.offset_rad,
            velocity=device.direction * dxl.velocity_to_rad_s(block.velocity),
            timestamp=now,
            fault=self._fault(block),
            enabled=block.torque_enabled,
        )

    def _fault(self, block: StatusBlock) -> DeviceFault | None:
        if block.hardware_error:
            text = dxl.describe_hardware_error(block.hardware_error)
            return DeviceFault(block.hardware_error, f"hardware error: {text}; torque is off")
        if block.bus_watchdog == dxl.WATCHDOG_ERROR:
            message = "bus watchdog expired: the device stopped and refuses goals until cleared"
            return DeviceFault(FAULT_BUS_WATCHDOG, message)
        if self.lifecycle is Lifecycle.ENABLED and not block.torque_enabled:
            return DeviceFault(FAULT_TORQUE_OFF, "torque is off although the driver is enabled")
        return None

    def _count(self, device: _Device, kind: str, message: str) -> None:
        """Count a problem; log it at most once per `_WARN_EVERY_S` per device."""
        self.stats.count_error(device.name, kind, message)
        now = time.monotonic()
        if now - self._warned_at.get(device.name, -_WARN_EVERY_S) >= _WARN_EVERY_S:
            self._warned_at[device.name] = now
            log.warning(
                "%s (%d problems so far)", message, self.stats.per_device_errors[device.name]
            )

    def _to_counts(self, device: _Device, position: float) -> int:
        """Goal Position counts for `position` (rad). Raises `UnsupportedCommandError`."""
        if not math.isfinite(position):
            raise UnsupportedCommandError(f"{device}: position {position} rad is not finite")
        counts = dxl.rad_to_counts((position - device.offset_rad) * device.direction)
        if self._p.operating_mode == "position":
            low, high = self._limits[device.id]
        else:
            low, high = -_EXTENDED_LIMIT, _EXTENDED_LIMIT
        if not low <= counts <= high:
            raise UnsupportedCommandError(
                f"{device}: {position:.4f} rad is {counts} counts, outside [{low}, {high}] "
                f"in {self._p.operating_mode} mode"
            )
        return counts

    # -- transactions ---------------------------------------------------------------------------

    async def _command(
        self, device: _Device, request: bytes, what: str, data_length: int = 0
    ) -> bytes:
        """An instruction the device answers; returns its data, retrying when it stays silent.
        Raises `DriverTimeoutError` (silent), `DeviceFaultError` (refused), `DriverIOError`."""
        attempts = self._p.retries + 1
        for _ in range(attempts):
            packet = (await self._transact(request, (device.id,), data_length)).packets.get(
                device.id
            )
            if packet is not None:
                break
        else:
            raise DriverTimeoutError(f"{device}: no answer to {what} ({attempts} attempts)")
        if packet.error & ~dxl.ALERT_BIT:
            raise DeviceFaultError(f"{device}: {what}: {dxl.describe_status_error(packet.error)}")
        if len(packet.data) != data_length:
            raise DriverIOError(
                f"{device}: {what}: {len(packet.data)} bytes, expected {data_length}"
            )
        return packet.data

    async def _read_item(self, device: _Device, address: int, length: int, what: str) -> bytes:
        request = dxl.make_read(device.id, address, length)
        return await self._command(device, request, f"Read of {what} ({address})", length)

    async def _write_item(self, device: _Device, address: int, data: bytes, what: str) -> None:
        await self._command(device, dxl.make_write(device.id, address, data), f"Write of {what}")

    async def _transact(self, request: bytes, expect: Sequence[int], data_length: int) -> _Reply:
        link = self._link
        if link is None:
            raise DriverIOError(f"port {self._p.port!r} is not open")
        reply_size = dxl.status_packet_size(data_length)
        timeout_s = self._deadline_s(len(request), [reply_size] * len(expect))
        max_length = 2 * reply_size  # the LEN field, with room for byte stuffing
        return await self._io(
            lambda: link.transact(request, expect, timeout_s, max_length), timeout_s=timeout_s
        )

    def _deadline_s(self, request_size: int, reply_sizes: Sequence[int]) -> float:
        """How long a transaction may take: its bus time, the adapter's latency both ways and
        the margin (s)."""
        delay = max(self._return_delays.values(), default=dxl.return_delay_s(254))
        bus = dxl.transaction_time_s(request_size, reply_sizes, self._p.baudrate, delay)
        return bus + 2 * (self._latency_s or 0.0) + self._p.reply_margin_s

    async def _io(self, call: Callable[[], T], *, timeout_s: float) -> T:
        """Run a blocking call on the I/O thread; its own deadline is `timeout_s`."""
        if self._executor is None:
            raise DriverIOError(f"port {self._p.port!r} is not open")
        future = asyncio.get_running_loop().run_in_executor(self._executor, call)
        limit_s = timeout_s + 2.0  # the thread honours timeout_s; this guards a hung port
        try:
            return await asyncio.wait_for(future, limit_s)
        except TimeoutError as exc:
            raise DriverTimeoutError(
                f"port {self._p.port!r}: I/O hung for {limit_s:.1f} s"
            ) from exc


def _i32(data: bytes) -> int:
    return int.from_bytes(data, "little", signed=True)
