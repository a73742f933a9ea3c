"""Dynamixel Protocol 2.0 driver: one serial port (a U2D2 or any half-duplex adapter) and a chain of
X-series (or MX 2.0) devices in position, extended-position or current-based position mode.

open() pings every id (silent ids: `DriverTimeoutError`), checks the model numbers, sets the
Operating Mode (an EEPROM item: only written when it differs, and only while torque is off) and
maps a status block onto Indirect Data: torque, Hardware Error Status, Bus Watchdog, Present
Velocity, Present Position and Present Current, 13 bytes per device. A device's `current_limit`
(A; current-based position mode) is checked against its Current Limit (38) at open and written to
Goal Current (102, RAM: no EEPROM wear) before every torque on: the device's torque limit.
`DeviceState.effort` is the Present Current in A on the models that sense current.

Each cycle is one transaction per direction: `read()` is one Sync Read of the status blocks,
`write()` one Sync Write of Goal Position (devices do not answer it). enable() refuses devices with
a hardware error, sets Goal Position to the present position (a stale goal would make the device
jump), arms the Bus Watchdog and turns torque on; disable() turns torque off on every device with
one Sync Write, then verifies.

Units: ``position = direction · 2π · counts / 4096 + offset_rad`` (rad at the motor shaft; see
`drivers.dynamixel.device`). A command's velocity feed-forward is not used: the X series has no
per-cycle feed-forward input in position mode. All devices of one Sync Read get the same
timestamp, the injected clock's time when the transaction ended.

Serial I/O runs on one dedicated thread, never on the event loop, with reply deadlines computed
from the baud rate, the packet sizes, the Return Delay Time (read at open), `reply_margin_s` and
the USB adapter's latency (`usb_latency_s`; set it to 1 ms for fast cycles): see
`drivers.dynamixel.link`. The configuration is `drivers.dynamixel.params`. A missing, late,
corrupt or refused status packet leaves that device's previous state (see `drivers.base`) and is
counted: `missing_replies` per silent device, `timeouts` per Sync Read that ran out of time,
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
import time
from collections.abc import Awaitable, Callable, Sequence

from drivers.base import Clock, DeviceState, DriverParams, Lifecycle
from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.device import FAULT_BUS_WATCHDOG, FAULT_TORQUE_OFF, Device
from drivers.dynamixel.link import DynamixelLink
from drivers.dynamixel.params import DynamixelDeviceParams, DynamixelParams
from drivers.dynamixel.protocol import Addr, Packet, StatusBlock
from drivers.dynamixel.table import CURRENT_UNITS_A, EXTENDED_POSITION_LIMIT, KNOWN_MODELS
from drivers.errors import DeviceFaultError, DriverOpenError, DriverTimeoutError
from drivers.serial_bus.driver import ServoBusDriver

__all__ = [
    "FAULT_BUS_WATCHDOG",
    "FAULT_TORQUE_OFF",
    "KNOWN_MODELS",
    "DynamixelDeviceParams",
    "DynamixelDriver",
    "DynamixelParams",
]

log = logging.getLogger(__name__)

_MODES = {
    "position": dxl.OperatingMode.POSITION,
    "extended_position": dxl.OperatingMode.EXTENDED_POSITION,
    "current_based_position": dxl.OperatingMode.CURRENT_BASED_POSITION,
}


class DynamixelDriver(ServoBusDriver[Device, StatusBlock, Packet]):
    """A Dynamixel Protocol 2.0 chain on one serial port (see the module docstring)."""

    Params = DynamixelParams
    status_block_length = dxl.STATUS_BLOCK_LENGTH
    goal_position = (Addr.GOAL_POSITION, 4)
    torque_enable_address = Addr.TORQUE_ENABLE
    clear_faults_hint = "clear faults (which reboots those devices)"

    def __init__(self, params: DriverParams, *, clock: Clock = time.monotonic) -> None:
        p = self._checked(params, DynamixelParams)
        devices = [Device(name, d.id, d.direction, d.offset_rad) for name, d in p.devices.items()]
        super().__init__(p, devices, clock=clock)
        self._p = p
        self._block_address = dxl.indirect_data_address(p.indirect_index)
        self._current_unit_a: dict[int, float] = {}  # by id: models that sense current

    # -- Driver hooks beyond the servo bus's ------------------------------------------------------

    async def _clear_faults(self) -> None:
        """Reboot the devices that report a hardware error, wait until they answer again and
        restore their configuration; clear expired bus watchdogs. Raises `DeviceFaultError` when a
        hardware error persists after the reboot, `DriverTimeoutError` when a device stays silent.
        """
        async with self._lock:
            blocks = await self._read_all("clear faults")
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
                after = await self._read_all("check the rebooted devices")
                still = [
                    f"{d}: {dxl.describe_hardware_error(after[d.id].hardware_error)}"
                    for d in broken
                    if after[d.id].hardware_error
                ]
                if still:
                    raise DeviceFaultError(
                        f"hardware error persists after reboot: {'; '.join(still)}"
                    )

    # -- the servo bus's hooks ------------------------------------------------------------------

    def _make_link(self) -> DynamixelLink:
        return DynamixelLink.for_params(self._p)

    async def _identify(self, device: Device) -> str | None:
        ping = dxl.make_ping(device.id)
        data = (await self._line().command(device, ping, "Ping", data_length=3)).data
        model = data[0] | data[1] << 8
        log.info(
            "%s: %s (model %d), firmware %d", device, KNOWN_MODELS.get(model, "?"), model, data[2]
        )
        if model in CURRENT_UNITS_A:
            self._current_unit_a[device.id] = CURRENT_UNITS_A[model]
        if model in KNOWN_MODELS or self._p.accept_unknown_models:
            return None
        return f"{device}: model number {model}"

    def _wrong_models(self, problems: Sequence[str]) -> str:
        return (
            f"{'; '.join(problems)} is not a known X-series/MX(2.0) model whose control table "
            "this driver knows; set accept_unknown_models if it uses the same addresses"
        )

    async def _configure(self, device: Device) -> None:
        """Check the device's settings and map the status block; at open and after a reboot."""
        p = self._p
        eeprom = await self._read_item(device, Addr.RETURN_DELAY_TIME, 3, "Return Delay Time")
        ram = await self._read_item(device, Addr.TORQUE_ENABLE, 7, "Torque Enable…")
        self._line().set_return_delay(device.id, dxl.return_delay_s(eeprom[0]))
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
        await self._check_current_limit(device)
        limits = await self._read_item(device, Addr.MAX_POSITION_LIMIT, 8, "position limits")
        self._limits[device.id] = (_i32(limits[4:8]), _i32(limits[0:4]))
        address, mapping = dxl.make_indirect_mapping(p.indirect_index)
        if await self._read_item(device, address, len(mapping), "indirect addresses") != mapping:
            await self._write_item(device, address, mapping, "indirect addresses")
        if ram[6]:
            log.warning("%s: hardware error: %s", device, dxl.describe_hardware_error(ram[6]))

    async def _check_current_limit(self, device: Device) -> None:
        """A configured `current_limit` needs a model that senses current and must not exceed
        the device's own Current Limit (38), which caps Goal Current."""
        wanted = self._p.devices[device.name].current_limit
        if wanted is None:
            return
        unit = self._current_unit_a.get(device.id)
        if unit is None:
            raise DriverOpenError(
                f"{device}: current_limit {wanted:g} A: this model has no current sensing "
                "(no current-based position mode)"
            )
        cap = int.from_bytes(
            await self._read_item(device, Addr.CURRENT_LIMIT, 2, "Current Limit"), "little"
        )
        if wanted > cap * unit:
            raise DriverOpenError(
                f"{device}: current_limit {wanted:g} A is above the device's Current Limit (38) "
                f"of {cap * unit:.3f} A ({cap} units); lower it, or raise the device's"
            )

    async def _prepare(self, device: Device, block: StatusBlock) -> None:
        """Before torque on: clear an expired watchdog, hold the present position, arm the
        watchdog (it then expires if the control loop stops talking to the bus)."""
        if block.bus_watchdog != 0:
            await self._write_item(device, Addr.BUS_WATCHDOG, b"\x00", "Bus Watchdog = 0")
        goal = dxl.i32(block.position)
        await self._write_item(device, Addr.GOAL_POSITION, goal, "Goal Position = present")
        wanted = self._p.devices[device.name].current_limit
        if wanted is not None:
            current = round(wanted / self._current_unit_a[device.id]).to_bytes(2, "little")
            await self._write_item(device, Addr.GOAL_CURRENT, current, "Goal Current")
        if self._p.bus_watchdog_s is not None:
            units = bytes([dxl.watchdog_units(self._p.bus_watchdog_s)])
            await self._write_item(device, Addr.BUS_WATCHDOG, units, "Bus Watchdog")

    def _log_cycle_time(self) -> None:
        ids = [device.id for device in self._devices]
        bus_s, deadline_s = self._cycle_times(self._block_address, ids)
        log.info(
            "port %r: one Sync Read of %d devices takes %.2f ms on the bus at %d baud "
            "(Return Delay Time %.0f µs; lower it to shorten the cycle), deadline %.2f ms",
            self._p.port, len(ids), bus_s * 1e3, self._p.baudrate,
            self._line().return_delay_s * 1e6, deadline_s * 1e3,
        )  # fmt: skip

    def _block_fault(self, block: StatusBlock) -> str | None:
        bits = block.hardware_error
        return dxl.describe_hardware_error(bits) if bits else None

    async def _torque_check(self) -> Callable[[Device], Awaitable[bool]]:
        blocks = await self._read_blocks()

        async def still_on(device: Device) -> bool:
            return device.id not in blocks or blocks[device.id].torque_enabled

        return still_on

    async def _read_blocks(self) -> dict[int, StatusBlock]:
        """One Sync Read of every device's status block; updates the states, counts problems."""
        blocks: dict[int, StatusBlock] = {}
        await self._sync_read_blocks(self._devices, self._block_address, blocks, what="sync read")
        return blocks

    def _decode(
        self, device: Device, packet: Packet, now: float
    ) -> tuple[StatusBlock, DeviceState]:
        block = dxl.decode_status_block(packet.data)
        enabled = self.lifecycle is Lifecycle.ENABLED
        unit = self._current_unit_a.get(device.id)
        return block, device.state(block, now, driver_enabled=enabled, current_unit_a=unit)

    def _goal(self, device: Device, position: float) -> bytes:
        """Goal Position counts for `position` (rad). Raises `UnsupportedCommandError`."""
        if self._p.operating_mode == "position":
            limits = self._limits[device.id]
        else:
            limits = (-EXTENDED_POSITION_LIMIT, EXTENDED_POSITION_LIMIT)
        return dxl.i32(device.goal_counts(position, limits, self._p.operating_mode))

    # -- reboots --------------------------------------------------------------------------------

    async def _reboot(self, device: Device) -> None:
        """Send Reboot once: a lost status packet is no reason to reboot a second time."""
        reply = await self._line().transact(dxl.make_reboot(device.id), (device.id,), 0)
        packet = reply.packets.get(device.id)
        if packet is not None and packet.error & ~dxl.ALERT_BIT:
            error = dxl.describe_status_error(packet.error)
            raise DeviceFaultError(f"{device}: Reboot refused: {error}")

    async def _await_reboot(self, device: Device) -> None:
        deadline = time.monotonic() + self._p.reboot_timeout_s
        while True:
            reply = await self._line().transact(dxl.make_ping(device.id), (device.id,), 3)
            if device.id in reply.packets:
                log.warning("%s rebooted: its multi-turn count restarted", device)
                return
            if time.monotonic() > deadline:
                raise DriverTimeoutError(
                    f"{device}: no answer within {self._p.reboot_timeout_s} s after Reboot"
                )
            await asyncio.sleep(0.02)


def _i32(data: bytes) -> int:
    return int.from_bytes(data, "little", signed=True)
