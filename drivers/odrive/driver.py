"""ODrive driver: the CAN Simple protocol (firmware v0.6, see `drivers.odrive.protocol`) over
python-can, one axis per device.

Setup on the ODrive (via USB, once): ``<axis>.config.can.node_id``, the bus bit rate, and cyclic
messages: heartbeat (default 100 ms) and encoder estimates (``encoder_msg_rate_ms``, default 10 ms)
for ``feedback="cyclic"``; for ``feedback="rtr"`` the driver requests estimates every `read()`.
Enabling the ODrive watchdog (``<axis>.config.enable_watchdog``, ``watchdog_timeout``) is strongly
recommended: `write()` feeds it, so the axes go idle when the control loop stops. On Linux raise
the SocketCAN transmit queue (``ip link set can0 txqueuelen 1000``): sends never block the event
loop, so a full queue is a `DriverIOError`.

Receiving runs in a thread (``bus.recv`` is blocking; see `drivers.can_link`) that decodes frames,
stamps them with the injected clock and stores the latest per axis under a lock
(`drivers.odrive.axis`); coroutines that wait for an answer are woken through an asyncio event.
Units: the ODrive speaks turns at its encoder; a device's position in rad at the motor shaft is
``direction * scale * 2π * turns``. The configuration is `drivers.odrive.params`. An axis with
``homing`` is homed (`drivers.odrive.homing`) by the first `enable()` after each `open()`.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping

import can

from drivers.base import (
    Clock,
    DeviceCommand,
    DeviceState,
    Driver,
    DriverParams,
    Lifecycle,
)
from drivers.can_link import (
    BusFactory,
    CanLink,
    frame_to_message,
    make_bus,
    message_to_frame,
    open_bus,
)
from drivers.errors import (
    DeviceFaultError,
    DriverConfigError,
    DriverError,
    DriverIOError,
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
_RX_POLL_S = 0.02  # s: how long closing may wait for the reader thread
_LOG_EVERY_S = 5.0
_INPUT_MODES = {
    "passthrough": proto.InputMode.PASSTHROUGH,
    "pos_filter": proto.InputMode.POS_FILTER,
    "trap_traj": proto.InputMode.TRAP_TRAJ,
}


class ODriveDriver(Driver):
    """ODrive axes on one CAN bus. `bus_factory` replaces opening the bus from the params."""

    Params = ODriveParams
    torque_feedforward = True

    def __init__(
        self,
        params: DriverParams,
        *,
        clock: Clock = time.monotonic,
        bus_factory: BusFactory | None = None,
    ) -> None:
        if not isinstance(params, ODriveParams):
            raise DriverConfigError(f"ODriveDriver needs ODriveParams, got {type(params).__name__}")
        super().__init__(params, clock=clock)
        self._p = params
        self._bus_factory = bus_factory or self._make_bus
        self._axes = {
            name: AxisRecord(
                name, dev.node_id, dev.direction * dev.scale * TWO_PI, dev.torque_limit
            )
            for name, dev in params.devices.items()
        }
        self._by_node = {axis.node_id: axis for axis in self._axes.values()}
        self._link: CanLink | None = None
        self._lock = threading.Lock()
        self._last_logged: dict[str, float] = {}
        self._homing = HomingPlan(params.devices)

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(self._axes)

    @property
    def bus_label(self) -> str:
        return f"ODrive bus {self._p.interface}:{self._p.channel}"

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
        self._send(proto.make_estop(a.node_id) for a in self._axes.values())

    # -- lifecycle hooks ------------------------------------------------------------------------

    async def _open(self) -> None:
        for axis in self._axes.values():
            axis.forget()
        self._homing.forget()
        timeout_s, label = self._p.open_timeout_s, self.bus_label
        bus = await open_bus(self._bus_factory, timeout_s=timeout_s, label=label)
        self._link = CanLink(
            bus, self._on_message, label=label, poll_s=_RX_POLL_S, thread_name="odrive-rx"
        )
        self._link.start()
        try:
            await self._await_first_contact()
            await self._check_versions()
        except BaseException:
            await self._close()
            raise

    async def _enable(self) -> None:
        with self._lock:
            faults = {a: a.error for a in self._axes.values() if a.error}
        if faults:
            raise DeviceFaultError(f"{self.bus_label}: cannot enable: {describe_errors(faults)}")
        try:  # the axes to home, one after the other (once per open)
            await self._homing.run(
                self._axes.values(), send=self._send, wait_for=self._wait_for, lock=self._lock,
                rtr=self._p.feedback == "rtr", label=self.bus_label,
            )  # fmt: skip
        except BaseException:  # cancelled too: never leave an axis pushing towards a stop
            self._send_idle_best_effort()
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
        control, input_mode = proto.ControlMode.POSITION_CONTROL, _INPUT_MODES[self._p.input_mode]
        frames: list[proto.Frame] = []
        for axis in self._axes.values():
            assert axis.estimate is not None
            frames.append(proto.make_set_controller_mode(axis.node_id, control, input_mode))
            limits = self._p.devices[axis.name]
            if limits.current_limit is not None and limits.velocity_limit is not None:
                frames.append(
                    proto.make_set_limits(axis.node_id, limits.velocity_limit, limits.current_limit)
                )
            # Start from the measured position so that closed loop does not jump.
            frames.append(proto.make_set_input_pos(axis.node_id, axis.estimate.position_turns))
        before = self._heartbeat_seqs()
        frames += self._state_frames(proto.AxisState.CLOSED_LOOP_CONTROL)
        try:
            self._send(frames)
            await self._confirm_state(proto.AxisState.CLOSED_LOOP_CONTROL, before, "enable")
        except DriverError:
            self._send_idle_best_effort()
            raise

    async def _disable(self) -> None:
        """Request IDLE and confirm it by heartbeat. Raises DriverIOError, DriverTimeoutError
        (close() logs them); the ODrive watchdog is the backstop when this cannot get through."""
        before = self._heartbeat_seqs()
        self._send(self._state_frames(proto.AxisState.IDLE))
        await self._confirm_state(proto.AxisState.IDLE, before, "disable")

    async def _close(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            await link.close()  # never raises

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
            for axis in self._axes.values():
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
            axis = self._axes[name]
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
        self._send(proto.make_clear_errors(a.node_id) for a in self._axes.values())

        def cleared(axis: AxisRecord) -> bool:
            beat = axis.fresh_heartbeat(before[axis.name])
            return beat is not None and beat.axis_error == 0

        if await self._wait_for(lambda: all(map(cleared, self._axes.values())), self._timeout):
            return
        with self._lock:
            left = {a: a.error for a in self._axes.values() if a.error}
            silent = [a for a in self._axes.values() if a.heartbeat_seq <= before[a.name]]
        if left:
            raise DeviceFaultError(
                f"{self.bus_label}: errors persist after Clear_Errors (cause still present?): "
                + describe_errors(left)
            )
        raise DriverTimeoutError(
            f"{self.bus_label}: no heartbeat within {self._timeout} s after Clear_Errors from "
            + ", ".join(a.label for a in silent)
        )

    # -- opening --------------------------------------------------------------------------------

    def _make_bus(self) -> can.BusABC:
        p = self._p
        filters = [
            {"can_id": node_id << 5, "can_mask": 0x7E0, "extended": False}
            for node_id in self._by_node
        ]
        return make_bus(p.interface, p.channel, bitrate=p.bitrate, can_filters=filters)

    async def _await_first_contact(self) -> None:
        def contacted() -> bool:
            return all(a.heartbeat and a.estimate for a in self._axes.values())

        deadline = time.monotonic() + self._p.open_timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            if self._p.feedback == "rtr":
                self._send(self._requests(proto.Command.GET_ENCODER_ESTIMATES))
                remaining = min(remaining, max(self._p.reply_timeout_s, 0.05))
            if await self._wait_for(contacted, remaining):
                break
        with self._lock:
            silent = [a.missing() for a in self._axes.values() if not (a.heartbeat and a.estimate)]
            closed = [a.label for a in self._axes.values() if a.in_closed_loop]
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
            lambda: all(a.version for a in self._axes.values()), self._p.reply_timeout_s
        )
        for axis in self._axes.values():
            warning = axis.firmware_warning(answered)
            if warning is not None:
                log.warning("%s", warning)

    # -- receiving (runs in the receiver thread) ------------------------------------------------

    def _on_message(self, message: can.Message) -> None:
        received_at = self.clock()
        if message.is_error_frame or message.is_remote_frame or message.is_extended_id:
            return
        node_id, cmd = proto.split_id(message.arbitration_id)
        axis = self._by_node.get(node_id)
        if axis is None:
            return
        try:
            reply = decode_reply(cmd, bytes(message.data))
        except proto.MalformedFrameError as exc:
            self._count(axis.name, "corrupt_replies", f"{axis.label}: {exc}")
            return
        if reply is not None:
            with self._lock:
                axis.store(reply, received_at)

    # -- helpers --------------------------------------------------------------------------------

    @property
    def _timeout(self) -> float:
        return self._p.enable_timeout_s

    async def _wait_for(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `done()` (evaluated under the lock) holds; False after `timeout_s`.

        Raises DriverIOError when the receiver fails meanwhile.
        """

        def locked() -> bool:
            with self._lock:
                return done()

        return await self._open_link().wait_for(locked, timeout_s)

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

        await self._wait_for(lambda: all(map(settled, self._axes.values())), self._timeout)
        with self._lock:
            fresh = {a: a.fresh_heartbeat(before[a.name]) for a in self._axes.values()}
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
        before = {a.name: a.estimate_seq for a in self._axes.values()}
        self._send(self._requests(proto.Command.GET_ENCODER_ESTIMATES))
        await self._wait_for(
            lambda: all(a.estimate_seq > before[a.name] for a in self._axes.values()),
            self._p.reply_timeout_s,
        )
        silent = [a for a in self._axes.values() if a.estimate_seq <= before[a.name]]
        for axis in silent:
            message = f"{axis.label}: no encoder estimate within {self._p.reply_timeout_s} s"
            self._count(axis.name, "timeouts", message)
        return silent

    def _without_fresh_estimate(self, now: float) -> list[AxisRecord]:
        with self._lock:
            return [
                a
                for a in self._axes.values()
                if a.estimate is None or not now - a.estimate_time <= self._p.feedback_timeout_s
            ]

    def _heartbeat_seqs(self) -> dict[str, int]:
        with self._lock:
            return {a.name: a.heartbeat_seq for a in self._axes.values()}

    def _state_frames(self, state: proto.AxisState) -> list[proto.Frame]:
        return [proto.make_set_axis_state(a.node_id, state) for a in self._axes.values()]

    def _requests(self, command: proto.Command) -> list[proto.Frame]:
        return [proto.make_request(a.node_id, command) for a in self._axes.values()]

    def _send(self, frames: Iterable[proto.Frame]) -> None:
        """Send a batch now. CAN sends are non-blocking socket writes (timeout 0): they fail
        rather than stall the event loop. Raises DriverIOError."""
        link = self._open_link()
        try:
            link.send(frames)
        except DriverIOError as exc:
            self._count(None, "io_errors", str(exc))
            raise

    def _send_idle_best_effort(self) -> None:
        try:
            self._send(self._state_frames(proto.AxisState.IDLE))
        except DriverError as exc:
            log.error("%s: could not request IDLE: %s", self.bus_label, exc)

    def _open_link(self) -> CanLink:
        """The link, when it is open and receiving. Raises DriverIOError."""
        link = self._link
        if link is None:
            raise DriverIOError(f"{self.bus_label}: not open")
        link.raise_if_failed()
        return link

    def _raise_if_receiver_failed(self) -> None:
        if self._link is not None:
            self._link.raise_if_failed()

    def _count(self, device: str | None, kind: str, message: str) -> None:
        with self._lock:
            self.stats.count_error(device, kind, message)
        key = f"{device}:{kind}"
        now = time.monotonic()
        if now - self._last_logged.get(key, -math.inf) >= _LOG_EVERY_S:
            self._last_logged[key] = now
            log.warning("%s (%s, logged every %.0f s at most)", message, kind, _LOG_EVERY_S)
