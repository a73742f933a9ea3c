"""cia402 driver (config name ``cia402``): CiA 402 servo drives over CANopen in cyclic synchronous
position mode, one drive (node) per device, on python-can and the `canopen` library (object
dictionary from the EDS, SDO client, PDO mapping, NMT, SYNC producer, EMCY and heartbeat
consumers).

`open()` brings every node up (`drivers.cia402.startup`, a worker thread per node), then NMT
Operational, and waits for each heartbeat and a first TPDO. Every `write()` is one cycle: each
node's RPDOs (controlword, target, velocity offset), then one SYNC (unless ``sync: external``);
the drives apply them at that SYNC and answer with TPDOs, which `read()` returns with the time
they arrived (a drive whose heartbeat stopped keeps the time of its last heartbeat: stale). Not
enabled, `read()` sends a SYNC itself and waits for the answers. `enable()`, `disable()` and
`clear_faults()` walk the state machine (`drivers.cia402.plans`) in such cycles. Frames are
checked before canopen sees them (`drivers.cia402.link`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import can

from drivers.base import (
    Clock,
    DeviceCommand,
    DeviceState,
    Driver,
    DriverParams,
    Lifecycle,
    LoopContext,
)
from drivers.can_link import BusFactory, make_bus, open_bus
from drivers.cia402 import plans, startup
from drivers.cia402.drive import DriveRecord
from drivers.cia402.link import CanOpenLink
from drivers.cia402.objects import State
from drivers.cia402.params import CiA402Params
from drivers.errors import (
    DeviceFaultError,
    DriverConfigError,
    DriverError,
    DriverIOError,
    DriverOpenError,
    DriverTimeoutError,
    UnsupportedCommandError,
)

__all__ = ["CiA402Driver", "CiA402Params"]

log = logging.getLogger(__name__)

_LOG_EVERY_S = 5.0
_FAULT_STATES = (State.FAULT, State.FAULT_REACTION_ACTIVE)
_DEFAULT_PERIOD_S = 0.01  # s: a cycle's wait for TPDOs when no loop period is given
_NMT_START = 0x01
_NMT_OPERATIONAL = 0x05  # the heartbeat's state byte


class CiA402Driver(Driver):
    """CiA 402 drives on one CAN bus. `bus_factory` replaces opening the bus from the params."""

    Params = CiA402Params
    torque_effort = True  # Torque actual value × the rated torque, when the drive has both

    def __init__(
        self,
        params: DriverParams,
        *,
        clock: Clock = time.monotonic,
        bus_factory: BusFactory | None = None,
    ) -> None:
        if not isinstance(params, CiA402Params):
            raise DriverConfigError(f"CiA402Driver needs CiA402Params, got {type(params).__name__}")
        super().__init__(params, clock=clock)
        self._p = params
        self._bus_factory = bus_factory or self._make_bus
        self._lock = threading.Lock()
        self._records: dict[str, DriveRecord] = {}
        self._link: CanOpenLink | None = None
        self._controlwords: dict[str, int] = {}
        self._targets: dict[str, int] = {}  # increments
        self._offsets: dict[str, int] = {}  # increments/s
        self._seen: dict[str, int] = {}  # status_seq at the previous read
        self._last_logged: dict[str, float] = {}

    @classmethod
    def with_loop(cls, params: DriverParams, loop: LoopContext) -> DriverParams:
        """The loop period (→ 0x60C2) and the devices' position limits (→ 0x607D) in the params.
        Raises DriverConfigError when the period cannot be written to 0x60C2."""
        if not isinstance(params, CiA402Params):
            raise DriverConfigError(f"CiA402Driver needs CiA402Params, got {type(params).__name__}")
        try:
            startup.interpolation_period(loop.period_s)
            return params.for_loop(loop.period_s, loop.position_limits)
        except ValueError as exc:
            raise DriverConfigError(f"cia402: {exc}") from exc

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(self._p.devices)

    @property
    def bus_label(self) -> str:
        return f"CANopen bus {self._p.interface}:{self._p.channel}"

    # -- lifecycle hooks ------------------------------------------------------------------------

    async def _open(self) -> None:
        p = self._p
        records = {name: DriveRecord.load(name, device) for name, device in p.devices.items()}
        bus = await open_bus(self._bus_factory, timeout_s=p.open_timeout_s, label=self.bus_label)
        link = CanOpenLink(bus, self._lock, self.clock, self._on_malformed)
        self._link, self._records = link, records
        for record in records.values():
            link.attach(record, self._p.sdo_timeout_s)
        link.start()
        try:
            await self._start_up()
        except BaseException:
            await self._close()
            raise

    async def _start_up(self) -> None:
        records = list(self._records.values())
        results = await asyncio.gather(
            *(asyncio.to_thread(startup.configure, r, self._p) for r in records),
            return_exceptions=True,
        )
        self._raise_all(results, DriverOpenError, "cannot open")
        link = self._open_link()
        for record in records:
            self._controlwords[record.name] = self._offsets[record.name] = 0
            link.follow_tpdos(record)
        for record in records:
            link.send(0x000, bytes([_NMT_START, record.node_id]))

        def operational(record: DriveRecord) -> bool:
            return record.heartbeat_state == _NMT_OPERATIONAL

        if not await self._open_link().wait(
            lambda: all(map(operational, records)), self._p.open_timeout_s
        ):
            silent = ", ".join(r.label for r in records if not operational(r))
            raise DriverTimeoutError(
                f"{self.bus_label}: no heartbeat showing NMT Operational within "
                f"{self._p.open_timeout_s} s from {silent}"
            )
        silent_pdo = await self._poll(self._p.open_timeout_s)
        if silent_pdo:
            names = ", ".join(r.label for r in silent_pdo)
            raise DriverTimeoutError(f"{self.bus_label}: no TPDO after SYNC from {names}")
        with self._lock:
            for record in records:
                self._targets[record.name] = record.position

    async def _enable(self) -> None:
        now, timeout_s = self.clock(), self._p.heartbeat_timeout_s
        with self._lock:
            faults = [r.fault.message for r in self._records.values() if r.fault is not None]
            lost = [r.label for r in self._records.values() if now - r.heartbeat_time > timeout_s]
            for record in self._records.values():
                self._targets[record.name] = record.position
                self._offsets[record.name] = 0
        if faults:
            raise DeviceFaultError(f"{self.bus_label}: cannot enable: {'; '.join(faults)}")
        if lost:
            silent = ", ".join(lost)
            raise DriverTimeoutError(
                f"{self.bus_label}: cannot enable: no heartbeat for {timeout_s} s from {silent}"
            )
        try:
            await self._walk({n: plans.enable_steps() for n in self._records}, "enable", True)
            records = list(self._records.values())
            held = await asyncio.gather(
                *(asyncio.to_thread(startup.write_target, r) for r in records),
                return_exceptions=True,
            )
            self._raise_all(held, DriverIOError, "cannot enable")
            with self._lock:
                self._targets.update(
                    (r.name, p) for r, p in zip(records, held, strict=True) if isinstance(p, int)
                )
            await self._walk({n: plans.operation_step() for n in self._records}, "enable", True)
        except DriverError:
            with contextlib.suppress(DriverError):
                await self._disable()
            raise

    async def _disable(self) -> None:
        """Every drive walks down (`plans.disable_steps`), each by its own `disable` option."""
        steps = {n: plans.disable_steps(r.params.disable) for n, r in self._records.items()}
        await self._walk(steps, "disable", False)

    async def _close(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            await link.close()  # stops receiving, shuts the bus down

    async def _read(self) -> Mapping[str, DeviceState]:
        if self._lifecycle is not Lifecycle.ENABLED:  # a drive that misses a period is stale
            await self._poll(self._p.loop_period_s or _DEFAULT_PERIOD_S)
        now = self.clock()
        timeout_s = self._p.heartbeat_timeout_s
        states: dict[str, DeviceState] = {}
        problems: list[tuple[str, str, str]] = []
        with self._lock:
            for name, record in self._records.items():
                state = record.state_at(now, timeout_s)
                if state is not None:
                    states[name] = state
                if record.lost:
                    age = now - record.heartbeat_time
                    problems.append(
                        (name, "timeouts", f"{record.label}: no heartbeat for {age:.3f} s")
                    )
                elif record.status_seq == self._seen.get(name):
                    problems.append(
                        (name, "missing_replies", f"{record.label}: no TPDO since the last read")
                    )
                self._seen[name] = record.status_seq
        for name, kind, message in problems:
            self._count(name, kind, message)
        return states

    async def _write(self, commands: Mapping[str, DeviceCommand]) -> None:
        with self._lock:
            for name, command in commands.items():
                record = self._records[name]
                try:
                    self._targets[name] = record.to_counts(command.position)
                    self._offsets[name] = record.to_counts(command.velocity)
                except ValueError as exc:
                    raise UnsupportedCommandError(f"{record.label}: {exc}") from exc
        self._cycle()

    async def _clear_faults(self) -> None:
        with self._lock:
            faulted = [n for n, r in self._records.items() if r.state is State.FAULT or r.emcy_code]
        with contextlib.suppress(DriverTimeoutError):  # a fault that stays is reported below
            await self._walk({n: plans.reset_steps() for n in faulted}, "reset the fault of", True)
        with self._lock:
            for name in faulted:
                self._records[name].emcy_code = None
            left = [r.fault for r in self._records.values() if r.fault is not None]
        if left:
            message = "; ".join(f.message for f in left if f is not None)
            raise DeviceFaultError(f"{self.bus_label}: faults persist after fault reset: {message}")

    # -- cycles ---------------------------------------------------------------------------------

    def _cycle(self) -> None:
        """Every drive's RPDOs with its controlword and target, then one SYNC. Raises
        DriverIOError."""
        with self._lock:
            for name, record in self._records.items():
                values = {
                    0x6040: self._controlwords[name],
                    0x607A: self._targets[name],
                    0x60B1: self._offsets[name],
                    0x60B2: 0,
                }
                for pdo in record.command_pdos:
                    for variable in pdo:
                        variable.raw = values.get(variable.index, 0)
            pdos = [pdo for record in self._records.values() for pdo in record.command_pdos]
        try:
            for pdo in pdos:
                pdo.transmit()
            if self._p.sync == "produce":
                self._open_link().sync()
        except (can.CanError, OSError, ValueError) as exc:
            self._count(None, "io_errors", f"{self.bus_label}: send failed: {exc}")
            raise DriverIOError(f"{self.bus_label}: send failed: {exc}") from exc

    async def _poll(self, timeout_s: float) -> list[DriveRecord]:
        """A SYNC alone (or the external one) and the TPDOs it brings; returns the silent drives."""
        with self._lock:
            before = {n: r.status_seq for n, r in self._records.items()}
        if self._p.sync == "produce":
            try:
                self._open_link().sync()
            except (can.CanError, OSError) as exc:
                raise DriverIOError(f"{self.bus_label}: send failed: {exc}") from exc
        await self._open_link().wait(self._answered(before), timeout_s)
        with self._lock:
            return [r for r in self._records.values() if r.status_seq <= before[r.name]]

    async def _walk(self, steps: dict[str, list[plans.Step]], action: str, strict: bool) -> None:
        """Cycle until every drive has done its steps; each step may take state_timeout_s. A
        fault fails a `strict` walk and ends a drive's walk otherwise. Raises DeviceFaultError,
        DriverTimeoutError naming every drive that failed (the others finish their walk)."""
        todo = {name: list(s) for name, s in steps.items() if s}
        loop = asyncio.get_running_loop()
        deadlines = {name: loop.time() + self._p.state_timeout_s for name in todo}
        failures: list[str] = []
        faulted = False
        wait_s = min(self._p.loop_period_s or _DEFAULT_PERIOD_S, _DEFAULT_PERIOD_S)
        while todo:
            with self._lock:
                for name, remaining in todo.items():
                    self._controlwords[name] = remaining[0].command
                    if remaining[0].command != 0x0F:
                        self._targets[name] = self._records[name].position
                before = {name: self._records[name].status_seq for name in todo}
            self._cycle()
            await self._open_link().wait(self._answered(before), wait_s)
            with self._lock:
                for name in list(todo):
                    record, step = self._records[name], todo[name][0]
                    if record.status_seq > before[name] and step.reached(record):
                        todo[name].pop(0)
                        deadlines[name] = loop.time() + self._p.state_timeout_s
                        if not todo[name]:
                            del todo[name]
                    elif record.state in _FAULT_STATES and not step.from_fault:
                        del todo[name]
                        if strict:
                            faulted = True
                            fault = record.fault
                            failures.append(fault.message if fault else f"{record.label}: fault")
                    elif loop.time() > deadlines[name]:
                        del todo[name]
                        state = record.state.value if record.state else "an unknown state"
                        failures.append(
                            f"{record.label}: still {state} after {self._p.state_timeout_s} s "
                            f"of controlword 0x{step.command:04X}, expected {step.wanted}"
                        )
        if failures:
            error = DeviceFaultError if faulted else DriverTimeoutError
            raise error(f"{self.bus_label}: cannot {action}: " + "; ".join(failures))

    def _answered(self, before: Mapping[str, int]) -> Callable[[], bool]:
        """Whether every drive in `before` sent a status TPDO since (`status_seq` then)."""
        records = [self._records[name] for name in before]
        return lambda: all(r.status_seq > before[r.name] for r in records)

    # -- receiving (canopen's notifier thread) --------------------------------------------------

    def _on_malformed(self, record: DriveRecord, message: str) -> None:
        self._count(record.name, "corrupt_replies", message)

    # -- helpers --------------------------------------------------------------------------------

    def _make_bus(self) -> can.BusABC:
        p = self._p
        return make_bus(p.interface, p.channel, bitrate=p.bitrate, hop_limit=p.hop_limit)

    def _open_link(self) -> CanOpenLink:
        link = self._link
        if link is None:
            raise DriverIOError(f"{self.bus_label}: not open")
        return link

    def _raise_all(self, results: list[Any], error: type[DriverError], action: str) -> None:
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise error(
                f"{self.bus_label}: {action}: " + "; ".join(map(str, failures))
            ) from failures[0]

    def _count(self, device: str | None, kind: str, message: str) -> None:
        with self._lock:
            self.stats.count_error(device, kind, message)
        key = f"{device}:{kind}"
        now = time.monotonic()
        if now - self._last_logged.get(key, -math.inf) >= _LOG_EVERY_S:
            self._last_logged[key] = now
            log.warning("%s (%s, logged every %.0f s at most)", message, kind, _LOG_EVERY_S)
