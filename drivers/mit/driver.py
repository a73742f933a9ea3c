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
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from drivers.base import Clock, DeviceCommand, DeviceState, DriverParams, Lifecycle
from drivers.can_bus.driver import CanBusDriver
from drivers.can_bus.frame import Frame
from drivers.can_bus.link import BusFactory
from drivers.errors import (
    DeviceFaultError,
    DriverError,
    DriverOpenError,
    DriverTimeoutError,
    UnsupportedCommandError,
)
from drivers.mit import protocol as proto
from drivers.mit.device import MotorRecord, describe_faults, owner_of
from drivers.mit.params import MitDeviceParams, MitParams

__all__ = ["FRAME_BITS", "MitDeviceParams", "MitDriver", "MitParams"]

log = logging.getLogger(__name__)

FRAME_BITS = 135
"""Bits of a classic CAN frame with an 11-bit id and 8 data bytes at worst-case bit stuffing,
with the interframe space (111 unstuffed + 24 stuff bits)."""
_DEFAULT_BITRATE = 1_000_000
Register = proto.Register
_OPEN_REGISTERS = (
    Register.CTRL_MODE,
    Register.PMAX,
    Register.VMAX,
    Register.TMAX,
    Register.TIMEOUT,
)


class MitDriver(CanBusDriver[MotorRecord]):
    """MIT-mode actuators on one CAN bus. `bus_factory` replaces opening the bus from the
    params."""

    Params = MitParams
    family = "MIT"
    rx_thread_name = "mit-rx"
    torque_feedforward = True
    torque_effort = True

    def __init__(
        self,
        params: DriverParams,
        *,
        clock: Clock = time.monotonic,
        bus_factory: BusFactory | None = None,
    ) -> None:
        p = self._checked(params, MitParams)
        motors = {name: MotorRecord(name, dev) for name, dev in p.devices.items()}
        super().__init__(p, motors, clock=clock, bus_factory=bus_factory)
        self._p = p
        self._by_master: dict[int, list[MotorRecord]] = {}
        for motor in self._devices.values():
            self._by_master.setdefault(motor.master_id, []).append(motor)
        self._awaiting: dict[str, int] = {}  # reply_seq at the last write, by device
        self._write_deadline = 0.0  # event-loop time by which the replies should be in

    @property
    def wire_time_s(self) -> float:
        """One cycle on the wire: a command and a reply per actuator at the bit rate, s."""
        bitrate = self._p.bitrate or _DEFAULT_BITRATE
        return 2 * len(self._devices) * FRAME_BITS / bitrate

    @property
    def reply_deadline_s(self) -> float:
        return self.wire_time_s + self._p.reply_margin_s

    # -- lifecycle hooks ------------------------------------------------------------------------

    async def _enable(self) -> None:
        with self._lock:
            faults = {m: m.fault for m in self._devices.values() if m.fault is not None}
            unread = [m.label for m in self._devices.values() if m.reply is None]
        if faults:
            raise DeviceFaultError(f"{self.bus_label}: cannot enable: {describe_faults(faults)}")
        if unread:
            raise DriverTimeoutError(
                f"{self.bus_label}: cannot enable without a reading from " + ", ".join(unread)
            )
        frames = [Frame(m.slave_id, proto.ENABLE) for m in self._devices.values()]
        try:
            await self._confirm(frames, enabled=True, action="enable")
            # Hold the measured position: the first command replaces the zero gains.
            with self._lock:
                hold = {m.name: m.state(True) for m in self._devices.values()}
            self._send_commands({n: DeviceCommand(s.position) for n, s in hold.items()})
        except DriverError:
            disable = [Frame(m.slave_id, proto.DISABLE) for m in self._devices.values()]
            self._send_best_effort(disable, "send disable")
            raise

    async def _disable(self) -> None:
        """Send the disable frame and confirm it by the replies. Raises DriverIOError,
        DriverTimeoutError (close() logs them); Damiao's CAN timeout is the backstop."""
        self._awaiting = {}
        frames = [Frame(m.slave_id, proto.DISABLE) for m in self._devices.values()]
        await self._confirm(frames, enabled=False, action="disable")

    async def _read(self) -> Mapping[str, DeviceState]:
        self._open_link()
        awaiting, self._awaiting = self._awaiting, {}
        if self._lifecycle is not Lifecycle.ENABLED:
            await self._exchange(self._feedback_requests(), count=True)
        elif awaiting:
            remaining = self._write_deadline - asyncio.get_running_loop().time()
            await self._wait_for(
                lambda: all(self._devices[n].reply_seq > s for n, s in awaiting.items()),
                max(remaining, 0.0),
            )
            self._count_missing([self._devices[n] for n, s in awaiting.items()], awaiting)
        enabled = self._lifecycle is Lifecycle.ENABLED
        with self._lock:
            return {m.name: m.state(enabled) for m in self._devices.values() if m.reply is not None}

    async def _write(self, commands: Mapping[str, DeviceCommand]) -> None:
        self._send_commands(commands)

    async def _clear_faults(self) -> None:
        # CubeMars has no clear-error frame: a disable frame gets its current state.
        frames = [
            Frame(m.slave_id, proto.CLEAR_ERROR if m.damiao else proto.DISABLE)
            for m in self._devices.values()
        ]
        silent = await self._exchange(frames)
        if silent:
            raise DriverTimeoutError(self._silent_message(silent, "reply after clear error"))
        with self._lock:
            left = {m: m.fault for m in self._devices.values() if m.fault is not None}
        if left:
            cubemars = any(not m.damiao for m in left)
            hint = " (CubeMars has no clear-error frame: power-cycle it)" if cubemars else ""
            raise DeviceFaultError(
                f"{self.bus_label}: faults persist after clear error (cause still present?)"
                f"{hint}: {describe_faults(left)}"
            )

    # -- the CAN bus's hooks --------------------------------------------------------------------

    @property
    def _open_timeout_s(self) -> float:
        return self._p.open_timeout_s

    def _can_filters(self) -> Sequence[dict[str, Any]]:
        return [{"can_id": i, "can_mask": 0x7FF, "extended": False} for i in self._by_master]

    @property
    def _hop_limit(self) -> int:
        return self._p.hop_limit

    def _forget(self) -> None:
        super()._forget()
        self._awaiting = {}

    async def _bring_up(self) -> None:
        await self._check_registers()
        silent = await self._exchange(self._feedback_requests())
        if silent:
            raise DriverTimeoutError(self._silent_message(silent, "feedback"))

    def _route(self, arbitration_id: int, data: bytes, received_at: float) -> None:
        sharing = self._by_master.get(arbitration_id)
        if sharing is None:
            return
        with self._lock:
            motor = sharing[0] if len(sharing) == 1 else owner_of(sharing, data)
            problem: str | None = (
                motor.receive(data, received_at)
                if motor is not None
                else f"a reply from master id {arbitration_id} names no motor"
            )
        if problem is not None:
            self._count(motor.name if motor else None, "corrupt_replies", problem)

    # -- opening --------------------------------------------------------------------------------

    async def _check_registers(self) -> None:
        """Damiao: read CTRL_MODE, the ranges and TIMEOUT of every motor; refuse a wrong mode or
        range; write TIMEOUT when `can_timeout_s` is set."""
        damiao = [m for m in self._devices.values() if m.damiao]
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
            for m in self._devices.values()
        ]

    # -- helpers --------------------------------------------------------------------------------

    def _send_commands(self, commands: Mapping[str, DeviceCommand]) -> None:
        frames = []
        with self._lock:
            for name, command in commands.items():
                motor = self._devices[name]
                try:
                    mit = motor.command(command.position, command.velocity, command.torque)
                except ValueError as exc:
                    raise UnsupportedCommandError(f"{motor.label}: {exc}") from exc
                frames.append(Frame(motor.slave_id, proto.encode_command(mit, motor.ranges)))
            awaiting = {name: self._devices[name].reply_seq for name in commands}
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
            before = {m.name: m.reply_seq for m in self._devices.values()}
        self._send(frames)
        timeout_s = self.reply_deadline_s if count else self._p.open_timeout_s

        def answered(m: MotorRecord) -> bool:
            return m.reply_seq > before[m.name] and accept(m)

        await self._wait_for(lambda: all(map(answered, self._devices.values())), timeout_s)
        with self._lock:
            silent = [m for m in self._devices.values() if not answered(m)]
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
            faults = {m: m.fault for m in self._devices.values() if enabled and m.fault}
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
