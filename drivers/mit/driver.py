"""MIT driver (config name ``mit``): quasi-direct-drive actuators speaking the "MIT mini cheetah"
CAN protocol (Damiao DM-J series, CubeMars AK series; codec in `drivers.mit.protocol`, ranges in
`drivers.mit.models`) over python-can, one actuator per device.

The position loop runs in the actuator: each `write()` sends one MIT frame per actuator with
armd's position setpoint, its velocity feed-forward, the device's ``kp``/``kd`` and armd's torque
feed-forward (t_ff; 0 without gravity compensation), bounded by the torque limit
(`drivers.mit.device.MotorRecord.command`). An actuator answers every frame
with one feedback frame (position, velocity, torque, state) from its master id; `read()`
collects the answers to the last `write()` until a deadline (the cycle's wire time at the bit
rate plus ``reply_margin_s``), and an actuator that missed it keeps its previous reading
(counted in `stats.missing_replies`). While not enabled, `read()` asks for feedback itself
(Damiao: the 0xCC request on 0x7FF; CubeMars: a disable frame, which it answers).

`open()` checks that every actuator answers and, on Damiao, that its CTRL_MODE register is MIT
(a motor in another mode ignores MIT frames without a word) and that its PMAX/VMAX/TMAX
registers equal the configured ranges; with ``can_timeout_s`` it sets the CAN timeout (strongly
recommended: the motor then drops torque when the control loop stops writing). `enable()` sends
FF×7 FC and then a command holding the measured position; `disable()` FF×7 FD;
`clear_faults()` Damiao's clear-error frame FF×7 FB.
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
from drivers.mit.device import MotorRecord, describe_faults, owner_of
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
Register = proto.Register
_OPEN_REGISTERS = (
    Register.CTRL_MODE,
    Register.PMAX,
    Register.VMAX,
    Register.TMAX,
    Register.TIMEOUT,
)


class MitDriver(Driver):
    """MIT-mode actuators on one CAN bus. `bus_factory` replaces opening the bus from the
    params."""

    Params = MitParams
    torque_feedforward = True
    torque_effort = True

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
            silent = await self._exchange(self._feedback_requests())
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
            raise DeviceFaultError(f"{self.bus_label}: cannot enable: {describe_faults(faults)}")
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
            try:
                self._send(Frame(m.slave_id, proto.DISABLE) for m in self._motors.values())
            except DriverError as exc:
                log.error("%s: could not send disable: %s", self.bus_label, exc)
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
            await self._exchange(self._feedback_requests(), count=True)
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
        silent = await self._exchange(frames)
        if silent:
            raise DriverTimeoutError(self._silent_message(silent, "reply after clear error"))
        with self._lock:
            left = {m: m.fault for m in self._motors.values() if m.fault is not None}
        if left:
            cubemars = any(not m.damiao for m in left)
            hint = " (CubeMars has no clear-error frame: power-cycle it)" if cubemars else ""
            raise DeviceFaultError(
                f"{self.bus_label}: faults persist after clear error (cause still present?)"
                f"{hint}: {describe_faults(left)}"
            )

    # -- opening --------------------------------------------------------------------------------

    def _make_bus(self) -> can.BusABC:
        p = self._p
        filters = [{"can_id": i, "can_mask": 0x7FF, "extended": False} for i in self._by_master]
        return make_bus(
            p.interface, p.channel, bitrate=p.bitrate, can_filters=filters, hop_limit=p.hop_limit
        )

    async def _check_registers(self) -> None:
        """Damiao: read CTRL_MODE, the ranges and TIMEOUT of every motor; refuse a wrong mode or
        range; write TIMEOUT when `can_timeout_s` is set."""
        damiao = [m for m in self._motors.values() if m.damiao]
        for rid in _OPEN_REGISTERS:
            await self._register_exchange(damiao, proto.RegisterOp.READ, rid)
        problems = [p for m in damiao for p in m.open_problems(self._p.check_ranges)]
        if problems:
            raise DriverOpenError(f"{self.bus_label}: " + "; ".join(problems))
        timeout_s = self._p.can_timeout_s
        if timeout_s is not None:
            units = round(timeout_s / proto.TIMEOUT_UNIT_S)
            await self._register_exchange(damiao, proto.RegisterOp.WRITE, Register.TIMEOUT, units)
            wrong = [m.label for m in damiao if m.registers[Register.TIMEOUT] != units]
            if wrong:
                raise DriverOpenError(f"{self.bus_label}: TIMEOUT not set on " + ", ".join(wrong))
        elif unguarded := [m.label for m in damiao if m.registers[Register.TIMEOUT] == 0]:
            log.warning(
                "%s: no CAN timeout (register TIMEOUT = 0) on %s: such a motor keeps its last "
                "command when armd stops; set can_timeout_s",
                self.bus_label,
                ", ".join(unguarded),
            )

    async def _register_exchange(
        self, motors: list[MotorRecord], op: proto.RegisterOp, rid: Register, value: float = 0
    ) -> None:
        """Send a register request to each motor and wait for every answer (stored in the
        motor's `registers`). Raises DriverTimeoutError naming the silent ones."""
        with self._lock:
            for motor in motors:
                motor.pending_register = rid
        self._send(
            Frame(proto.REGISTER_ID, proto.make_register_frame(m.slave_id, op, rid, value))
            for m in motors
        )
        await self._wait_for(
            lambda: all(m.pending_register is None for m in motors), self._p.open_timeout_s
        )
        silent = [m for m in motors if m.pending_register is not None]
        if silent:
            raise DriverTimeoutError(self._silent_message(silent, f"answer to {rid.name}"))

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
            motor = sharing[0] if len(sharing) == 1 else owner_of(sharing, data)
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
                    mit = motor.command(command.position, command.velocity, command.torque)
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
        accept: Callable[[MotorRecord], bool] = lambda motor: True,
        *,
        count: bool = False,
    ) -> list[MotorRecord]:
        """Send `frames` (one per motor) and wait for a newer reply, for which `accept(motor)`
        holds, from every motor; returns the motors left without one. The deadline is
        open_timeout_s, or in `read()` (`count`: missing replies are counted) the reply one."""
        with self._lock:
            before = {m.name: m.reply_seq for m in self._motors.values()}
        self._send(frames)
        timeout_s = self.reply_deadline_s if count else self._p.open_timeout_s

        def answered(m: MotorRecord) -> bool:
            return m.reply_seq > before[m.name] and accept(m)

        await self._wait_for(lambda: all(map(answered, self._motors.values())), timeout_s)
        with self._lock:
            silent = [m for m in self._motors.values() if not answered(m)]
        if count:
            self._count_missing(silent, before)
        return silent

    async def _confirm(self, frames: list[Frame], *, enabled: bool, action: str) -> None:
        """Send `frames` and wait until every motor reports the wanted state (CubeMars: any
        reply). Raises DeviceFaultError, DriverTimeoutError."""

        def settled(motor: MotorRecord) -> bool:
            if not motor.damiao or motor.reports_enabled(enabled) == enabled:
                return True
            return enabled and motor.fault is not None

        silent = await self._exchange(frames, settled)
        with self._lock:
            faults = {m: m.fault for m in self._motors.values() if enabled and m.fault}
        if faults:
            raise DeviceFaultError(f"{self.bus_label}: cannot {action}: {describe_faults(faults)}")
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
