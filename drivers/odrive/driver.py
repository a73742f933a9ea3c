"""ODrive driver: the CAN Simple protocol (firmware v0.6, see `drivers.odrive.protocol`) over
python-can, one axis per device.

Setup on the ODrive (via USB, once): ``<axis>.config.can.node_id``, the bus bit rate, and cyclic
messages: heartbeat (default 100 ms) and encoder estimates (``encoder_msg_rate_ms``, default 10 ms)
for ``feedback="cyclic"``; for ``feedback="rtr"`` the driver requests estimates every `read()`.
Enabling the ODrive watchdog (``<axis>.config.enable_watchdog``, ``watchdog_timeout``) is strongly
recommended: `write()` feeds it, so the axes go idle when the control loop stops. On Linux raise
the SocketCAN transmit queue (``ip link set can0 txqueuelen 1000``): sends never block the event
loop, so a full queue is a `DriverIOError`.

The bus, its receiver thread and the waiting are `drivers.can_bus.driver`'s; this driver decodes
each frame routed to it and stores the latest per axis (`drivers.odrive.axis`).
Units: the ODrive speaks turns at its encoder; a device's position in rad at the motor shaft is
``direction * scale * 2π * turns``. The configuration is `drivers.odrive.params`. An axis with
``homing`` is homed (`drivers.odrive.homing`) by the first `enable()` after each `open()`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from drivers.base import Clock, DeviceCommand, DeviceState, DriverParams, Lifecycle
from drivers.can_bus.driver import CanBusDriver
from drivers.can_bus.link import BusFactory, frame_to_message, message_to_frame
from drivers.errors import (
    DeviceFaultError,
    DriverError,
    DriverTimeoutError,
    UnsupportedCommandError,
)
from drivers.odrive import protocol as proto
from drivers.odrive.axis import AxisRecord, decode_reply, describe_errors
from drivers.odrive.homing import HomingPlan
from drivers.odrive.params import ODriveAxisParams, ODriveParams

__all__ = [
    "BusFactory",
    "ODriveAxisParams",
    "ODriveDriver",
    "ODriveParams",
    "frame_to_message",
    "message_to_frame",
]

log = logging.getLogger(__name__)

TWO_PI = 2.0 * math.pi
_INPUT_MODES = {
    "passthrough": proto.InputMode.PASSTHROUGH,
    "pos_filter": proto.InputMode.POS_FILTER,
    "trap_traj": proto.InputMode.TRAP_TRAJ,
}


class ODriveDriver(CanBusDriver[AxisRecord]):
    """ODrive axes on one CAN bus. `bus_factory` replaces opening the bus from the params."""

    Params = ODriveParams
    family = "ODrive"
    rx_thread_name = "odrive-rx"
    torque_feedforward = True

    def __init__(
        self,
        params: DriverParams,
        *,
        clock: Clock = time.monotonic,
        bus_factory: BusFactory | None = None,
    ) -> None:
        p = self._checked(params, ODriveParams)
        axes = {
            name: AxisRecord(
                name, dev.node_id, dev.direction * dev.scale * TWO_PI, dev.torque_limit
            )
            for name, dev in p.devices.items()
        }
        super().__init__(p, axes, clock=clock, bus_factory=bus_factory)
        self._p = p
        self._by_node = {axis.node_id: axis for axis in self._devices.values()}
        self._homing = HomingPlan(p.devices)

    @property
    def slow_enable_s(self) -> float | None:
        """The longest the next `enable()` may take: the homing timeouts of the axes still to
        home plus the usual confirmations; None when no homing is pending."""
        homing_s = self._homing.pending_time_s()
        return None if homing_s is None else homing_s + 2 * self._p.enable_timeout_s

    def estop(self) -> None:
        """Send the ODrive Estop to every axis: they disarm at once and latch ESTOP_REQUESTED
        until `clear_faults()`. Beyond the `Driver` interface; needs an open bus.

        Raises DriverStateError when closed, DriverIOError.
        """
        self._require(Lifecycle.OPEN, Lifecycle.ENABLED, action="estop")
        self._send(proto.make_estop(a.node_id) for a in self._devices.values())

    # -- lifecycle hooks ------------------------------------------------------------------------

    async def _enable(self) -> None:
        with self._lock:
            faults = {a: a.error for a in self._devices.values() if a.error}
        if faults:
            raise DeviceFaultError(f"{self.bus_label}: cannot enable: {describe_errors(faults)}")
        try:  # the axes to home, one after the other (once per open)
            await self._homing.run(
                self._devices.values(), send=self._send, wait_for=self._wait_for, lock=self._lock,
                rtr=self._p.feedback == "rtr", label=self.bus_label,
            )  # fmt: skip
        except BaseException:  # cancelled too: never leave an axis pushing towards a stop
            self._send_best_effort(self._state_frames(proto.AxisState.IDLE), "request IDLE")
            raise
        # Closed loop starts at the measured position, so that position must be current.
        if self._p.feedback == "rtr":
            stale = await self._refresh_estimates()
        else:
            stale = self._without_fresh_estimate(self.clock())
        if stale:
            raise DriverTimeoutError(
                f"{self.bus_label}: cannot enable without a current position from "
                + ", ".join(a.label for a in stale)
            )
        frames = self._position_control_frames()
        before = self._heartbeat_seqs()
        frames += self._state_frames(proto.AxisState.CLOSED_LOOP_CONTROL)
        try:
            self._send(frames)
            await self._confirm_state(proto.AxisState.CLOSED_LOOP_CONTROL, before, "enable")
        except DriverError:
            self._send_best_effort(self._state_frames(proto.AxisState.IDLE), "request IDLE")
            raise

    def _position_control_frames(self) -> list[proto.Frame]:
        """Position control in the configured input mode, the configured limits, and the measured
        position as the first input (so that closed loop does not jump), for every axis."""
        control, input_mode = proto.ControlMode.POSITION_CONTROL, _INPUT_MODES[self._p.input_mode]
        frames: list[proto.Frame] = []
        for axis in self._devices.values():
            assert axis.estimate is not None
            frames.append(proto.make_set_controller_mode(axis.node_id, control, input_mode))
            limits = self._p.devices[axis.name]
            if limits.current_limit is not None and limits.velocity_limit is not None:
                frames.append(
                    proto.make_set_limits(axis.node_id, limits.velocity_limit, limits.current_limit)
                )
            frames.append(proto.make_set_input_pos(axis.node_id, axis.estimate.position_turns))
        return frames

    async def _disable(self) -> None:
        """Request IDLE and confirm it by heartbeat. Raises DriverIOError, DriverTimeoutError
        (close() logs them); the ODrive watchdog is the backstop when this cannot get through."""
        before = self._heartbeat_seqs()
        self._send(self._state_frames(proto.AxisState.IDLE))
        await self._confirm_state(proto.AxisState.IDLE, before, "disable")

    async def _read(self) -> Mapping[str, DeviceState]:
        self._raise_if_receiver_failed()
        if self._p.feedback == "rtr":
            await self._refresh_estimates()
        now = self.clock()
        p = self._p
        cyclic_timeout_s = p.feedback_timeout_s if p.feedback == "cyclic" else None
        states: dict[str, DeviceState] = {}
        problems: list[tuple[str, str, str]] = []
        with self._lock:
            for axis in self._devices.values():
                if axis.estimate is not None:
                    states[axis.name] = axis.state()
                stale = axis.staleness(now, cyclic_timeout_s, p.heartbeat_timeout_s)
                problems += [(axis.name, kind, message) for kind, message in stale]
        for name, kind, message in problems:
            self._count(name, kind, message)
        return states

    async def _write(self, commands: Mapping[str, DeviceCommand]) -> None:
        self._raise_if_receiver_failed()
        frames: list[proto.Frame] = []
        for name, command in commands.items():
            axis = self._devices[name]
            try:
                frames.append(
                    proto.make_set_input_pos(
                        axis.node_id,
                        command.position / axis.rad_per_turn,
                        command.velocity / axis.rad_per_turn,
                        axis.torque_ff_nm(command.torque),
                        vel_ff_scale=self._p.vel_ff_scale,
                        torque_ff_scale=self._p.torque_ff_scale,
                    )
                )
            except (ValueError, OverflowError) as exc:
                raise UnsupportedCommandError(f"{axis.label}: invalid command: {exc}") from exc
        self._send(frames)

    async def _clear_faults(self) -> None:
        before = self._heartbeat_seqs()
        self._send(proto.make_clear_errors(a.node_id) for a in self._devices.values())

        def cleared(axis: AxisRecord) -> bool:
            beat = axis.fresh_heartbeat(before[axis.name])
            return beat is not None and beat.axis_error == 0

        if await self._wait_for(lambda: all(map(cleared, self._devices.values())), self._timeout):
            return
        with self._lock:
            left = {a: a.error for a in self._devices.values() if a.error}
            silent = [a for a in self._devices.values() if a.heartbeat_seq <= before[a.name]]
        if left:
            raise DeviceFaultError(
                f"{self.bus_label}: errors persist after Clear_Errors (cause still present?): "
                + describe_errors(left)
            )
        raise DriverTimeoutError(
            f"{self.bus_label}: no heartbeat within {self._timeout} s after Clear_Errors from "
            + ", ".join(a.label for a in silent)
        )

    # -- the CAN bus's hooks --------------------------------------------------------------------

    @property
    def _open_timeout_s(self) -> float:
        return self._p.open_timeout_s

    def _can_filters(self) -> Sequence[dict[str, Any]]:
        return [
            {"can_id": node_id << 5, "can_mask": 0x7E0, "extended": False}
            for node_id in self._by_node
        ]

    def _forget(self) -> None:
        super()._forget()
        self._homing.forget()

    async def _bring_up(self) -> None:
        await self._await_first_contact()
        await self._check_versions()

    def _route(self, arbitration_id: int, data: bytes, received_at: float) -> None:
        node_id, cmd = proto.split_id(arbitration_id)
        axis = self._by_node.get(node_id)
        if axis is None:
            return
        try:
            reply = decode_reply(cmd, data)
        except proto.MalformedFrameError as exc:
            self._count(axis.name, "corrupt_replies", f"{axis.label}: {exc}")
            return
        if reply is not None:
            with self._lock:
                axis.store(reply, received_at)

    # -- opening --------------------------------------------------------------------------------

    async def _await_first_contact(self) -> None:
        def contacted() -> bool:
            return all(a.heartbeat and a.estimate for a in self._devices.values())

        deadline = time.monotonic() + self._p.open_timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            if self._p.feedback == "rtr":
                self._send(self._requests(proto.Command.GET_ENCODER_ESTIMATES))
                remaining = min(remaining, max(self._p.reply_timeout_s, 0.05))
            if await self._wait_for(contacted, remaining):
                break
        with self._lock:
            silent = [
                a.missing() for a in self._devices.values() if not (a.heartbeat and a.estimate)
            ]
            closed = [a.label for a in self._devices.values() if a.in_closed_loop]
        if silent:
            raise DriverTimeoutError(
                f"{self.bus_label}: no answer within {self._p.open_timeout_s} s from "
                + "; ".join(silent)
            )
        if closed:
            log.warning("%s: already in closed loop at open: %s", self.bus_label, closed)

    async def _check_versions(self) -> None:
        """Warn (only) when an axis does not report firmware 0.6: its error bits mean else."""
        self._send(self._requests(proto.Command.GET_VERSION))
        answered = await self._wait_for(
            lambda: all(a.version for a in self._devices.values()), self._p.reply_timeout_s
        )
        for axis in self._devices.values():
            warning = axis.firmware_warning(answered)
            if warning is not None:
                log.warning("%s", warning)

    # -- helpers --------------------------------------------------------------------------------

    @property
    def _timeout(self) -> float:
        return self._p.enable_timeout_s

    async def _confirm_state(
        self, state: proto.AxisState, before: dict[str, int], action: str
    ) -> None:
        """Wait for a heartbeat newer than `before` reporting `state` from every axis.

        Raises DeviceFaultError when one reports an error instead, DriverTimeoutError if none
        confirms within the enable timeout.
        """
        strict = state is not proto.AxisState.IDLE

        def settled(axis: AxisRecord) -> bool:
            beat = axis.fresh_heartbeat(before[axis.name])
            return beat is not None and (
                beat.axis_state == state or (strict and beat.axis_error != 0)
            )

        await self._wait_for(lambda: all(map(settled, self._devices.values())), self._timeout)
        with self._lock:
            fresh = {a: a.fresh_heartbeat(before[a.name]) for a in self._devices.values()}
        errors = {a: b.axis_error for a, b in fresh.items() if strict and b and b.axis_error}
        if errors:
            raise DeviceFaultError(f"{self.bus_label}: cannot {action}: {describe_errors(errors)}")
        pending = [a.label for a, b in fresh.items() if b is None or b.axis_state != state]
        if pending:
            raise DriverTimeoutError(
                f"{self.bus_label}: cannot {action}: no heartbeat reporting {state.name} "
                f"within {self._timeout} s from " + ", ".join(pending)
            )

    async def _refresh_estimates(self) -> list[AxisRecord]:
        """Request encoder estimates by RTR and wait for them; returns the axes left silent."""
        before = {a.name: a.estimate_seq for a in self._devices.values()}
        self._send(self._requests(proto.Command.GET_ENCODER_ESTIMATES))
        await self._wait_for(
            lambda: all(a.estimate_seq > before[a.name] for a in self._devices.values()),
            self._p.reply_timeout_s,
        )
        silent = [a for a in self._devices.values() if a.estimate_seq <= before[a.name]]
        for axis in silent:
            message = f"{axis.label}: no encoder estimate within {self._p.reply_timeout_s} s"
            self._count(axis.name, "timeouts", message)
        return silent

    def _without_fresh_estimate(self, now: float) -> list[AxisRecord]:
        with self._lock:
            return [
                a
                for a in self._devices.values()
                if a.estimate is None or not now - a.estimate_time <= self._p.feedback_timeout_s
            ]

    def _heartbeat_seqs(self) -> dict[str, int]:
        with self._lock:
            return {a.name: a.heartbeat_seq for a in self._devices.values()}

    def _state_frames(self, state: proto.AxisState) -> list[proto.Frame]:
        return [proto.make_set_axis_state(a.node_id, state) for a in self._devices.values()]

    def _requests(self, command: proto.Command) -> list[proto.Frame]:
        return [proto.make_request(a.node_id, command) for a in self._devices.values()]

    def _raise_if_receiver_failed(self) -> None:
        if self._link is not None:
            self._link.raise_if_failed()
