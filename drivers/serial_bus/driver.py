"""What the drivers of a half-duplex servo bus share (Dynamixel Protocol 2.0, Feetech SCS/STS): one
serial port, a chain of servos addressed by id, one Sync Read of their status blocks per `read()`
and one Sync Write of their goals per `write()`.

`ServoBusDriver` is a template over `Driver`'s hooks. open() opens the link (`_make_link`), pings
and identifies every device (silent ids: `DriverTimeoutError`; `_identify`), configures each
(`_configure`) and logs the cycle's bus time. enable() reads every status block (again while
some are missing, as `SerialLink.command` sends a configuration command again), refuses devices
whose status block reports a fault (`_block_fault`), prepares each (`_prepare`: goal = present
position, limits, watchdog) and turns torque on device by device; clear_faults() reads the
statuses back after the family's `_clear_faults`; disable() turns torque off on every device
with one Sync Write, then verifies (`_torque_check`) and retries one by one, without the
configuration's patience (a safety action reports a silent device at once). A family supplies
its control table (`status_block_length`, `goal_position`, `torque_enable_address`), its status
block's decoding (`_read_blocks`, `_decode`) and its goal encoding (`_goal`).

A missing, late, corrupt or refused status packet leaves that device's previous state (see
`drivers.base`) and is counted: `missing_replies` per silent device, `timeouts` per transaction
that ran out of time, `corrupt_replies` per run of undecodable bytes and per refused or malformed
status packet. All devices of one transaction get the same timestamp, the injected clock's time
when it ended.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import ClassVar, Generic, Protocol, TypeVar

from pydantic import Field

from drivers.base import Clock, DeviceCommand, DeviceState, Driver, DriverParams
from drivers.errors import (
    DeviceFaultError,
    DriverConfigError,
    DriverError,
    DriverIOError,
    DriverOpenError,
    DriverTimeoutError,
)
from drivers.serial_bus.framing import transaction_time_s
from drivers.serial_bus.link import PacketT, Reply, SerialLink

__all__ = ["BusDevice", "ServoBusDriver", "ServoBusParams"]

log = logging.getLogger(__name__)

_WARN_EVERY_S = 10.0
P = TypeVar("P", bound=DriverParams)


class ServoBusParams(DriverParams):
    """The port every servo-bus driver is configured with: its path and baud rate."""

    port: str = Field(min_length=1)  # e.g. /dev/serial/by-id/usb-FTDI_USB__-__Serial_Converter_…
    baudrate: int = Field(default=1_000_000, gt=0)


class BusDevice(Protocol):
    """A device as the driver keeps it: its name and bus id; ``str()`` names it in messages."""

    @property
    def name(self) -> str: ...
    @property
    def id(self) -> int: ...


DeviceT = TypeVar("DeviceT", bound=BusDevice)
BlockT = TypeVar("BlockT")


class ServoBusDriver(Driver, Generic[DeviceT, BlockT, PacketT]):
    """A chain of servos on one serial port (see the module docstring)."""

    status_block_length: ClassVar[int]
    goal_position: ClassVar[tuple[int, int]]  # Goal Position: address, size
    torque_enable_address: ClassVar[int]
    torque_items: ClassVar[tuple[str, str]] = ("Torque Enable = 0", "Torque Enable = 1")
    clear_faults_hint: ClassVar[str] = "clear faults"

    def __init__(
        self, params: ServoBusParams, devices: Sequence[DeviceT], *, clock: Clock = time.monotonic
    ) -> None:
        super().__init__(params, clock=clock)
        self._port_params = params
        self._devices = tuple(devices)
        self._by_name = {device.name: device for device in self._devices}
        self._link: SerialLink[PacketT] | None = None
        self._lock = asyncio.Lock()
        self._states: dict[str, DeviceState] = {}
        self._limits: dict[int, tuple[int, int]] = {}
        self._warned_at: dict[str, float] = {}

    @classmethod
    def _checked(cls, params: DriverParams, wanted: type[P]) -> P:
        """`params` as the family's parameter model. Raises DriverConfigError."""
        if not isinstance(params, wanted):
            raise DriverConfigError(f"{cls.__name__} needs {wanted.__name__}, not {type(params)}")
        return params

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(device.name for device in self._devices)

    # -- lifecycle hooks ------------------------------------------------------------------------

    async def _open(self) -> None:
        link = self._make_link()
        self._link = link
        self._states.clear()
        try:
            await link.open()
            await self._bring_up()
            self._log_cycle_time()
        except BaseException:
            await self._close()
            raise

    async def _enable(self) -> None:
        async with self._lock:
            blocks = await self._read_all("enable")
            faulted = [
                f"{d}: {fault}"
                for d in self._devices
                if (fault := self._block_fault(blocks[d.id])) is not None
            ]
            if faulted:
                raise DeviceFaultError(
                    f"cannot enable: {'; '.join(faulted)}; remove the cause, then "
                    f"{self.clear_faults_hint}"
                )
            try:
                for device in self._devices:
                    await self._prepare(device, blocks[device.id])
                for device in self._devices:
                    await self._torque(device, on=True)
            except DriverError:
                await self._torque_off_all()
                raise

    async def _disable(self) -> None:
        async with self._lock:
            await self._torque_off_all(best_effort=False)
            failures = []
            with self._line().impatient():  # a safety action: a silent device is reported at once
                still_on = await self._torque_check()
                for device in self._devices:
                    try:
                        if await still_on(device):
                            await self._torque(device, on=False)
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
            device = self._by_name[name]
            goals[device.id] = self._goal(device, command.position)
        if goals:
            address, size = self.goal_position
            async with self._lock:
                await self._line().sync_write(address, size, goals)

    # -- what a family implements ---------------------------------------------------------------

    @abc.abstractmethod
    def _make_link(self) -> SerialLink[PacketT]:
        """The (unopened) link to the configured port."""

    @abc.abstractmethod
    async def _identify(self, device: DeviceT) -> str | None:
        """Ping `device` and check its model; returns what is wrong with it, or None. Raises
        DriverTimeoutError when it stays silent."""

    @abc.abstractmethod
    async def _configure(self, device: DeviceT) -> None:
        """Check (and write where it differs) the settings the driver relies on."""

    @abc.abstractmethod
    def _log_cycle_time(self) -> None: ...

    @abc.abstractmethod
    def _block_fault(self, block: BlockT) -> str | None:
        """What in a status block keeps the device from being enabled, or None."""

    @abc.abstractmethod
    async def _prepare(self, device: DeviceT, block: BlockT) -> None:
        """Before torque on: hold the present position (a stale goal would make it jump)."""

    @abc.abstractmethod
    async def _torque_check(self) -> Callable[[DeviceT], Awaitable[bool]]:
        """After the Sync Write of torque off: whether a device may still hold torque."""

    @abc.abstractmethod
    async def _read_blocks(self) -> dict[int, BlockT]:
        """Read every device's status block (updating the states, counting problems)."""

    @abc.abstractmethod
    def _decode(self, device: DeviceT, packet: PacketT, now: float) -> tuple[BlockT, DeviceState]:
        """A status block of the right length and the device's state from it, stamped `now`."""

    @abc.abstractmethod
    def _goal(self, device: DeviceT, position: float) -> bytes:
        """Goal Position for `position` (rad). Raises `UnsupportedCommandError`."""

    def _wrong_models(self, problems: Sequence[str]) -> str:
        """The message that refuses the devices `_identify` found wrong."""
        return "; ".join(problems)

    # -- steps ----------------------------------------------------------------------------------

    async def _bring_up(self) -> None:
        """Identify every device, then configure each."""
        await self._ping_all()
        for device in self._devices:
            await self._configure(device)

    async def _ping_all(self) -> None:
        """Identify every device. The silent ones are pinged again, pass after pass, for as long
        as a configuration command would be (`SerialLink.within_patience`): a wrong baud rate or
        an unpowered chain costs that once, not once per id."""
        link = self._line()
        started = time.monotonic()
        silent: list[DeviceT] = list(self._devices)
        problems: list[str] = []
        while silent:
            with link.impatient():
                silent = await self._identify_each(silent, problems)
            if not link.within_patience(started):
                break
        if silent:
            p = self._port_params
            raise DriverTimeoutError(
                f"port {p.port!r} at {p.baudrate} baud: no answer to Ping from "
                f"{', '.join(map(str, silent))}; check power, wiring, ids and baud rate"
            )
        if problems:
            raise DriverOpenError(self._wrong_models(problems))

    async def _identify_each(
        self, devices: Sequence[DeviceT], problems: list[str]
    ) -> list[DeviceT]:
        """`_identify` each of `devices`, adding what is wrong to `problems`; the silent ones."""
        silent = []
        for device in devices:
            try:
                problem = await self._identify(device)
            except DriverTimeoutError:
                silent.append(device)
                continue
            if problem is not None:
                problems.append(problem)
        return silent

    def _cycle_times(self, address: int, ids: Sequence[int]) -> tuple[float, float]:
        """One Sync Read of the status blocks of `ids`: its time on the bus and its deadline, s."""
        codec, length = self._line().codec, self.status_block_length
        request = len(codec.make_sync_read(address, length, ids))
        replies = [codec.status_packet_size(length)] * len(ids)
        link = self._line()
        bus_s = transaction_time_s(request, replies, link.baudrate, link.return_delay_s)
        return bus_s, link.deadline_s(request, replies)

    async def _torque(self, device: DeviceT, *, on: bool) -> None:
        value = b"\x01" if on else b"\x00"
        await self._write_item(device, self.torque_enable_address, value, self.torque_items[on])

    async def _torque_off_all(self, *, best_effort: bool = True) -> None:
        """One Sync Write of Torque Enable = 0: every device lets go at the same moment."""
        off = {device.id: b"\x00" for device in self._devices}
        try:
            await self._line().sync_write(self.torque_enable_address, 1, off)
        except DriverError as exc:
            if not best_effort:
                raise
            log.warning("port %r: torque off failed: %s", self._port_params.port, exc)

    # -- the cyclic transaction -----------------------------------------------------------------

    async def _sync_read_blocks(
        self, devices: Sequence[DeviceT], address: int, blocks: dict[int, BlockT], *, what: str
    ) -> None:
        """One Sync Read (`what`) of the status blocks of `devices` at `address` into `blocks`."""
        ids = [device.id for device in devices]
        reply = await self._line().sync_read(address, self.status_block_length, ids)
        self._take(devices, reply, blocks, what=what)

    def _take(
        self,
        devices: Sequence[DeviceT],
        reply: Reply[PacketT],
        blocks: dict[int, BlockT],
        *,
        what: str,
    ) -> None:
        """The status blocks of `reply` into `blocks` and the states; counts the problems."""
        now = self.clock()
        link = self._line()
        for device in devices:
            packet = reply.packets.get(device.id)
            refusal = None if packet is None else link.refusal(packet)
            if packet is None:
                self._count(device, "missing_replies", f"{device}: no status packet")
            elif refusal is not None:
                self._count(device, "corrupt_replies", f"{device}: status read refused: {refusal}")
            elif (size := len(link.data(packet))) != self.status_block_length:
                self._count(device, "corrupt_replies", f"{device}: status of {size} bytes")
            else:
                blocks[device.id], self._states[device.name] = self._decode(device, packet, now)
        port = self._port_params.port
        for _ in range(reply.corrupt):
            message = f"port {port!r}: undecodable bytes on the line"
            self.stats.count_error(None, "corrupt_replies", message)
        if reply.timed_out:
            self.stats.count_error(None, "timeouts", f"port {port!r}: {what} timed out")

    async def _read_all(self, action: str) -> dict[int, BlockT]:
        """Every device's status block, for a configuration step (enable, clearing faults): read
        again while some are missing, as a configuration command is sent again
        (`SerialLink.keeps_trying`). Raises DriverTimeoutError."""
        started, attempts = time.monotonic(), 0
        blocks: dict[int, BlockT] = {}
        while True:
            blocks.update(await self._read_blocks())
            attempts += 1
            missing = [str(d) for d in self._devices if d.id not in blocks]
            if not missing:
                return blocks
            if not self._line().keeps_trying(started, attempts):
                raise DriverTimeoutError(
                    f"cannot {action}: no valid status from {', '.join(missing)}"
                )

    async def clear_faults(self) -> None:
        """Clear the devices' faults (the family's `_clear_faults`), then read every status
        back: the states the control loop judges a reset on are the cleared ones, even when its
        own next read loses a reply (it keeps the last states)."""
        await super().clear_faults()
        async with self._lock:
            await self._read_all("read the status after clearing faults")

    def _count(self, device: DeviceT, kind: str, message: str) -> None:
        """Count a problem; log it at most once per `_WARN_EVERY_S` per device."""
        self.stats.count_error(device.name, kind, message)
        now = time.monotonic()
        if now - self._warned_at.get(device.name, -_WARN_EVERY_S) >= _WARN_EVERY_S:
            self._warned_at[device.name] = now
            log.warning(
                "%s (%d problems so far)", message, self.stats.per_device_errors[device.name]
            )

    # -- transactions ---------------------------------------------------------------------------

    def _line(self) -> SerialLink[PacketT]:
        """The serial link while open. Raises DriverIOError."""
        if self._link is None:
            raise DriverIOError(f"port {self._port_params.port!r} is not open")
        return self._link

    async def _read_item(self, device: DeviceT, address: int, length: int, what: str) -> bytes:
        return await self._line().read_item(device, address, length, what)

    async def _write_item(self, device: DeviceT, address: int, data: bytes, what: str) -> None:
        """Write one item; a status the device reports in its answer is the read path's
        business."""
        await self._line().write_item(device, address, data, what)
