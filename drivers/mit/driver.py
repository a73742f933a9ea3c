"""MIT driver (config name ``mit``): quasi-direct-drive actuators speaking the "MIT mini cheetah"
CAN protocol (Damiao DM-J series, CubeMars AK series; codec in `drivers.mit.protocol`, ranges in
`drivers.mit.models`) over python-can, one actuator per device.

The position loop runs in the actuator: each `write()` sends one MIT frame per actuator with
armd's position setpoint, its velocity feed-forward, the device's ``kp``/``kd`` and a torque
feed-forward of 0 (`drivers.mit.device.MotorRecord.command`). An actuator answers every frame
with one feedback frame (position, velocity, torque, state) from its master id; `read()`
collects the answers to the last `write()` until a deadline (the cycle's wire time at the bit
rate plus ``reply_margin_s``), and an actuator that missed it keeps its previous reading
(counted in `stats.missing_replies`). While not enabled, `read()` asks for feedback itself
(Damiao: the 0xCC request on 0x7FF; CubeMars: a disable frame, which it answers).

`open()` checks that every actuator answers and, on Damiao, that its CTRL_MODE register is MIT
(a motor in another mode ignores MIT frames without a word) and that its PMAX/VMAX/TMAX
registers equal the configured ranges. `enable()` sends the enable frame (FF×7 FC) and then a
command holding the measured position; `disable()` sends FF×7 FD; `clear_faults()` sends
Damiao's clear-error frame FF×7 FB. Setting Damiao's TIMEOUT register (CAN timeout) is strongly
recommended: the motor then drops torque when the control loop stops writing.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping

import can

from drivers.base import Clock, DeviceCommand, DeviceState, Driver, DriverParams, Lifecycle
from drivers.can_link import BusFactory, CanLink, make_bus, open_bus
from drivers.errors import (
    DeviceFaultError,
    DriverConfigError,
    DriverError,
    DriverIOError,
    DriverOpenError,
    DriverTimeoutError,
    UnsupportedCommandError,
)
from drivers.mit import protocol as proto
from drivers.mit.device import MotorRecord
from drivers.mit.params import MitDeviceParams, MitParams
from drivers.odrive.protocol import Frame

__all__ = ["FRAME_BITS", "MitDeviceParams", "MitDriver", "MitParams"]

log = logging.getLogger(__name__)

FRAME_BITS = 135
"""Bits of a classic CAN frame with an 11-bit id and 8 data bytes at worst-case bit stuffing,
with the interframe space (111 unstuffed + 24 stuff bits)."""
_DEFAULT_BITRATE = 1_000_000
_RX_POLL_S = 0.02
_LOG_EVERY_S = 5.0
_OPEN_REGISTERS = (
    proto.Register.CTRL_MODE,
    proto.Register.PMAX,
    proto.Register.VMAX,
    proto.Register.TMAX,
)


class MitDriver(Driver):
    """MIT-mode actuators on one CAN bus. `bus_factory` replaces opening the bus from the
    params."""

    Params = MitParams

    def __init__(
        self,
        params: DriverParams,
        *,
        clock: Clock = time.monotonic,
        bus_factory: BusFactory | None = None,
    ) -> None:
        if not isinstance(params, MitParams):
            raise DriverConfigError(f"MitDriver needs MitParams, got {type(params).__name__}")
        super().__init__(params, clock=clock)
        self._p = params
        self._bus_factory = bus_factory or self._make_bus
        self._motors = {name: MotorRecord(name, dev) for name, dev in params.devices.items()}
        self._by_master: dict[int, list[MotorRecord]] = {}
        for motor in self._motors.values():
            self._by_master.setdefault(motor.master_id, []).append(motor)
        self._link: CanLink | None = None
        self._lock = threading.Lock()
        self._awaiting: dict[str, int] = {}  # reply_seq at the last write, by device
        self._write_deadline = 0.0  # event-loop time by which the replies should be in
        self._last_logged: dict[str, float] = {}

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(self._motors)

    @property
    def bus_label(self) -> str:
        return f"MIT bus {self._p.interface}:{self._p.channel}"

    @property
    def wire_time_s(self) -> float:
        """One cycle on the wire: a command and a reply per actuator at the bit rate, s."""
        bitrate = self._p.bitrate or _DEFAULT_BITRATE
        return 2 * len(self._motors) * FRAME_BITS / bitrate

    @property
    def reply_deadline_s(self) -> float:
        return self.wire_time_s + self._p.reply_margin_s

    # -- lifecycle hooks ------------------------------------------------------------------------

    async def _open(self) -> None:
        for motor in self._motors.values():
            motor.forget()
        self._awaiting = {}
        label = self.bus_label
        bus = await open_bus(self._bus_factory, timeout_s=self._p.open_timeout_s, label=label)
        self._link = CanLink(
            bus, self._on_message, label=label, poll_s=_RX_POLL_S, thread_name="mit-rx"
        )
        self._link.start()
        try:
            await self._check_registers()
            silent = await self._exchange(self._feedback_requests(), lambda m, seq: True)
            if silent:
                raise DriverTimeoutError(self._silent_message(silent, "feedback"))
        except BaseException:
            await self._close()
            raise

    async def _enable(self) -> None:
        with self._lock:
            faults = {m: m.fault for m in self._motors.values() if m.fault is not None}
            unread = [m.label for m in self._motors.values() if m.reply is None]
        if faults:
            raise DeviceFaultError(f"{self.bus_label}: cannot enable: {_describe(faults)}")
        if unread:
            raise DriverTimeoutError(
                f"{self.bus_label}: cannot enable without a reading from " + ", ".join(unread)
            )
        frames = [Frame(m.slave_id, proto.ENABLE) for m in self._motors.values()]
        try:
            await self._confirm(frames, enabled=True, action="enable")
            # Hold the measured position: the first command replaces the zero gains.
            with self._lock:
                hold = {m.name: m.state(True) for m in self._motors.values()}
            self._send_commands({n: DeviceCommand(s.position) for n, s in hold.items()})
        except DriverError:
            self._send_best_effort(Frame(m.slave_id, proto.DISABLE) for m in self._motors.values())
            raise

    async def _disable(self) -> None:
        """Send the disable frame and confirm it by the replies. Raises DriverIOError,
        DriverTimeoutError (close() logs them); Damiao's CAN timeout is the backstop."""
        self._awaiting = {}
        frames = [Frame(m.slave_id, proto.DISABLE) for m in self._motors.values()]
        await self._confirm(frames, enabled=False, action="disable")

    async def _close(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            await link.close()  # never raises

    async def _read(self) -> Mapping[str, DeviceState]:
        self._open_link()
        awaiting, self._awaiting = self._awaiting, {}
        if self._lifecycle is not Lifecycle.ENABLED:
            await self._exchange(self._feedback_requests(), lambda m, seq: True, count=True)
        elif awaiting:
            remaining = self._write_deadline - asyncio.get_running_loop().time()
            await self._wait_for(
                lambda: all(self._motors[n].reply_seq > s for n, s in awaiting.items()),
                max(remaining, 0.0),
            )
            self._count_missing([self._motors[n] for n, s in awaiting.items()], awaiting)
        enabled = self._lifecycle is Lifecycle.ENABLED
        with self._lock:
            return {m.name: m.state(enabled) for m in self._motors.values() if m.reply is not None}

    async def _write(self, commands: Mapping[str, DeviceCommand]) -> None:
        self._send_commands(commands)

    async def _clear_faults(self) -> None:
        # CubeMars has no clear-error frame: a disable frame gets its current state.
        frames = [
            Frame(m.slave_id, proto.CLEAR_ERROR if m.damiao else proto.DISABLE)
            for m in self._motors.values()
        ]
        silent = await self._exchange(frames, lambda m, seq: True)
        if silent:
            raise DriverTimeoutError(self._silent_message(silent, "reply after clear error"))
        with self._lock:
            left = {m: m.fault for m in self._motors.values() if m.fault is not None}
        if left:
            cubemars = any(not m.damiao for m in left)
            hint = " (CubeMars has no clear-error frame: power-cycle it)" if cubemars else ""
            raise DeviceFaultError(
                f"{self.bus_label}: faults persist after clear error (cause still present?)"
                f"{hint}: {_describe(left)}"
            )

    # -- opening --------------------------------------------------------------------------------

    def _make_bus(self) -> can.BusABC:
        p = self._p
        filters = [{"can_id": i, "can_mask": 0x7FF, "extended": False} for i in self._by_master]
        return make_bus(
            p.interface, p.channel, bitrate=p.bitrate, can_filters=filters, hop_limit=p.hop_limit
        )

    async def _check_registers(self) -> None:
        """Damiao: read CTRL_MODE and the ranges of every motor; refuse a wrong mode or range."""
        damiao = [m for m in self._motors.values() if m.damiao]
        for rid in _OPEN_REGISTERS:
            with self._lock:
                for motor in damiao:
                    motor.pending_register = rid
            read = proto.RegisterOp.READ
            self._send(
                Frame(proto.REGISTER_ID, proto.make_register_frame(m.slave_id, read, rid))
                for m in damiao
            )
            await self._wait_for(
                lambda: all(m.pending_register is None for m in damiao), self._p.open_timeout_s
            )
            silent = [m for m in damiao if m.pending_register is not None]
            if silent:
                raise DriverTimeoutError(self._silent_message(silent, f"answer to {rid.name}"))
        problems = []
        for motor in damiao:
            mode = int(motor.registers[proto.Register.CTRL_MODE])
            if mode != proto.ControlMode.MIT:
                name = proto.describe_mode(mode)
                problems.append(
                    f"{motor.label}: control mode {name} (register CTRL_MODE (10) = {mode}), not "
                    "MIT (1): it would ignore every MIT frame without a word; set register 10 to "
                    "1 with Damiao's debugging tool (and save)"
                )
            mismatch = motor.range_mismatch() if self._p.check_ranges else None
            if mismatch:
                problems.append(f"{motor.label}: model {motor.params.model}: {mismatch}")
        if problems:
            raise DriverOpenError(f"{self.bus_label}: " + "; ".join(problems))

    def _feedback_requests(self) -> list[Frame]:
        return [
            Frame(proto.REGISTER_ID, proto.make_refresh_request(m.slave_id))
            if m.damiao
            else Frame(m.slave_id, proto.DISABLE)
            for m in self._motors.values()
        ]

    # -- receiving (runs in the receiver thread) ------------------------------------------------

    def _on_message(self, message: can.Message) -> None:
        received_at = self.clock()
        if message.is_error_frame or message.is_remote_frame or message.is_extended_id:
            return
        sharing = self._by_master.get(message.arbitration_id)
        if sharing is None:
            return
        data = bytes(message.data or b"")
        with self._lock:
            motor = sharing[0] if len(sharing) == 1 else _owner(sharing, data)
            problem: str | None = (
                motor.receive(data, received_at)
                if motor is not None
                else f"a reply from master id {message.arbitration_id} names no motor"
            )
        if problem is not None:
            self._count(motor.name if motor else None, "corrupt_replies", problem)

    # -- helpers --------------------------------------------------------------------------------

    def _send_commands(self, commands: Mapping[str, DeviceCommand]) -> None:
        frames = []
        with self._lock:
            for name, command in commands.items():
                motor = self._motors[name]
                try:
                    mit = motor.command(command.position, command.velocity)
                except ValueError as exc:
                    raise UnsupportedCommandError(f"{motor.label}: {exc}") from exc
                frames.append(Frame(motor.slave_id, proto.encode_command(mit, motor.ranges)))
            awaiting = {name: self._motors[name].reply_seq for name in commands}
        self._send(frames)
        self._awaiting = awaiting
        self._write_deadline = asyncio.get_running_loop().time() + self.reply_deadline_s

    async def _exchange(
        self,
        frames: list[Frame],
        accept: Callable[[MotorRecord, int], bool],
        *,
        count: bool = False,
    ) -> list[MotorRecord]:
        """Send `frames` (one per motor) and wait for a newer reply from every motor that
        `accept(motor, before_seq)` holds for; returns the motors left without one. While open,
        the deadline is open_timeout_s; in `read()` (`count`), the reply deadline."""
        with self._lock:
            before = {m.name: m.reply_seq for m in self._motors.values()}
        self._send(frames)
        timeout_s = self.reply_deadline_s if count else self._p.open_timeout_s

        def answered(m: MotorRecord) -> bool:
            return m.reply_seq > before[m.name] and accept(m, before[m.name])

        await self._wait_for(lambda: all(map(answered, self._motors.values())), timeout_s)
        with self._lock:
            silent = [m for m in self._motors.values() if not answered(m)]
        if count:
            self._count_missing(silent, before)
        return silent

    async def _confirm(self, frames: list[Frame], *, enabled: bool, action: str) -> None:
        """Send `frames` and wait until every motor reports the wanted state (CubeMars: any
        reply). Raises DeviceFaultError, DriverTimeoutError."""

        def settled(motor: MotorRecord, seq: int) -> bool:
            if not motor.damiao or motor.reports_enabled(enabled) == enabled:
                return True
            return enabled and motor.fault is not None

        silent = await self._exchange(frames, settled)
        with self._lock:
            faults = {m: m.fault for m in self._motors.values() if enabled and m.fault}
        if faults:
            raise DeviceFaultError(f"{self.bus_label}: cannot {action}: {_describe(faults)}")
        if silent:
            state = "enabled" if enabled else "disabled"
            raise DriverTimeoutError(
                f"{self.bus_label}: cannot {action}: no reply reporting {state} within "
                f"{self._p.open_timeout_s} s from " + ", ".join(m.label for m in silent)
            )

    def _count_missing(self, motors: Iterable[MotorRecord], before: Mapping[str, int]) -> None:
        with self._lock:
            missing = [m for m in motors if m.reply_seq <= before[m.name]]
        for motor in missing:
            message = f"{motor.label}: no reply within {self.reply_deadline_s * 1e3:.2f} ms"
            self._count(motor.name, "missing_replies", message)

    def _silent_message(self, silent: Iterable[MotorRecord], what: str) -> str:
        return (
            f"{self.bus_label}: no {what} within {self._p.open_timeout_s} s from "
            + ", ".join(m.label for m in silent)
            + " (powered? id and master id right? bit rate?)"
        )

    async def _wait_for(self, done: Callable[[], bool], timeout_s: float) -> bool:
        def locked() -> bool:
            with self._lock:
                return done()

        return await self._open_link().wait_for(locked, timeout_s)

    def _send(self, frames: Iterable[Frame]) -> None:
        """Send a batch now (non-blocking writes). Raises DriverIOError."""
        try:
            self._open_link().send(frames)
        except DriverIOError as exc:
            self._count(None, "io_errors", str(exc))
            raise

    def _send_best_effort(self, frames: Iterable[Frame]) -> None:
        try:
            self._send(frames)
        except DriverError as exc:
            log.error("%s: could not send disable: %s", self.bus_label, exc)

    def _open_link(self) -> CanLink:
        """The link, when it is open and receiving. Raises DriverIOError."""
        link = self._link
        if link is None:
            raise DriverIOError(f"{self.bus_label}: not open")
        link.raise_if_failed()
        return link

    def _count(self, device: str | None, kind: str, message: str) -> None:
        with self._lock:
            self.stats.count_error(device, kind, message)
        key = f"{device}:{kind}"
        now = time.monotonic()
        if now - self._last_logged.get(key, -math.inf) >= _LOG_EVERY_S:
            self._last_logged[key] = now
            log.warning("%s (%s, logged every %.0f s at most)", message, kind, _LOG_EVERY_S)


def _describe(faults: Mapping[MotorRecord, object]) -> str:
    return "; ".join(f"{m.label}: {getattr(f, 'message', f)}" for m, f in faults.items())


def _owner(sharing: list[MotorRecord], data: bytes) -> MotorRecord | None:
    return next((m for m in sharing if m.owns(data)), None)
