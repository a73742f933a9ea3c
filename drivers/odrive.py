"""ODrive driver: the CAN Simple protocol (firmware v0.6, see `drivers.odrive_protocol`) over
python-can, one axis per device.

Setup on the ODrive (via USB, once): ``<axis>.config.can.node_id``, the bus bit rate, and cyclic
messages: heartbeat (default 100 ms) and encoder estimates (``encoder_msg_rate_ms``, default 10 ms)
for ``feedback="cyclic"``; for ``feedback="rtr"`` the driver requests estimates every `read()`.
Enabling the ODrive watchdog (``<axis>.config.enable_watchdog``, ``watchdog_timeout``) is strongly
recommended: `write()` feeds it, so the axes go idle when the control loop stops. On Linux raise
the SocketCAN transmit queue (``ip link set can0 txqueuelen 1000``): sends never block the event
loop, so a full queue is a `DriverIOError`.

Receiving runs in a thread (``bus.recv`` is blocking) that decodes frames, stamps them with the
injected clock and stores the latest per axis under a lock; coroutines that wait for an answer are
woken through an asyncio event. Units: the ODrive speaks turns at its encoder; a device's position
in rad at the motor shaft is ``direction * scale * 2π * turns``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Self

import can
from pydantic import BaseModel, ConfigDict, Field, model_validator

from drivers import odrive_protocol as proto
from drivers.base import (
    Clock,
    DeviceCommand,
    DeviceFault,
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
    UnsupportedCommandError,
)

__all__ = [
    "BusFactory",
    "ODriveAxisParams",
    "ODriveDriver",
    "ODriveParams",
    "frame_to_message",
    "message_to_frame",
]

log = logging.getLogger(__name__)

BusFactory = Callable[[], can.BusABC]
TWO_PI = 2.0 * math.pi
_RX_POLL_S = 0.02  # s: how long closing may wait for the reader thread
_LOG_EVERY_S = 5.0
_INPUT_MODES = {
    "passthrough": proto.InputMode.PASSTHROUGH,
    "pos_filter": proto.InputMode.POS_FILTER,
    "trap_traj": proto.InputMode.TRAP_TRAJ,
}


class ODriveAxisParams(BaseModel):
    """One ODrive axis. `scale`: motor-shaft turns per ODrive turn (1 unless the encoder is
    not on the motor shaft); `direction`: -1 flips the sign."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_id: int = Field(ge=0, le=proto.MAX_NODE_ID)
    direction: Literal[1, -1] = 1
    scale: float = Field(default=1.0, gt=0.0, allow_inf_nan=False)


class ODriveParams(DriverParams):
    """The ODrive driver's configuration (times in s).

    open_timeout_s: `open()` waits this long for a heartbeat and an encoder estimate of each axis.
    enable_timeout_s: enable / disable / clear_faults wait this long for confirming heartbeats.
    reply_timeout_s: an RTR request (``feedback="rtr"``, Get_Version) waits this long.
    feedback_timeout_s: an older encoder estimate counts as missing at `read()`, and `enable()`
        refuses to start closed loop from it.
    heartbeat_timeout_s: an older heartbeat counts as a timeout at `read()`.
    vel_ff_scale: turns/s per LSB of Set_Input_Pos.Vel_FF; must match the ODrive's CAN
        velocity scale (default 0.001).
    """

    interface: str = "socketcan"  # any python-can interface: socketcan, virtual, udp_multicast...
    channel: str
    bitrate: int | None = Field(default=None, gt=0)  # None: the interface's (SocketCAN: ip link)
    devices: dict[str, ODriveAxisParams] = Field(min_length=1)
    feedback: Literal["cyclic", "rtr"] = "cyclic"
    input_mode: Literal["passthrough", "pos_filter", "trap_traj"] = "passthrough"
    vel_ff_scale: float = Field(default=proto.DEFAULT_VEL_FF_SCALE, gt=0.0)
    open_timeout_s: float = Field(default=1.0, gt=0.0)
    enable_timeout_s: float = Field(default=1.0, gt=0.0)
    reply_timeout_s: float = Field(default=0.02, gt=0.0)
    feedback_timeout_s: float = Field(default=0.05, gt=0.0)
    heartbeat_timeout_s: float = Field(default=0.5, gt=0.0)

    @model_validator(mode="after")
    def _unique_node_ids(self) -> Self:
        seen: dict[int, str] = {}
        for name, device in self.devices.items():
            if device.node_id in seen:
                raise ValueError(
                    f"devices {seen[device.node_id]!r} and {name!r}: same node_id {device.node_id}"
                )
            seen[device.node_id] = name
        return self


@dataclass(slots=True, eq=False)
class _Axis:
    """What the receiver last saw from one axis (guarded by the driver's lock)."""

    name: str
    node_id: int
    rad_per_turn: float  # signed
    estimate: proto.EncoderEstimates | None = None
    estimate_time: float = math.nan
    estimate_seq: int = 0
    heartbeat: proto.Heartbeat | None = None
    heartbeat_time: float = math.nan
    heartbeat_seq: int = 0
    version: proto.Version | None = None

    @property
    def label(self) -> str:
        return f"device {self.name!r} (node {self.node_id})"

    def fresh_heartbeat(self, since_seq: int) -> proto.Heartbeat | None:
        return self.heartbeat if self.heartbeat_seq > since_seq else None


def frame_to_message(frame: proto.Frame) -> can.Message:
    """A python-can message for a codec frame (11-bit id; RTR frames carry only a DLC)."""
    if frame.remote_dlc is not None:
        return can.Message(
            arbitration_id=frame.arbitration_id,
            is_extended_id=False,
            is_remote_frame=True,
            dlc=frame.remote_dlc,
        )
    return can.Message(arbitration_id=frame.arbitration_id, data=frame.data, is_extended_id=False)


def message_to_frame(message: can.Message) -> proto.Frame:
    dlc = message.dlc if message.is_remote_frame else None
    return proto.Frame(message.arbitration_id, bytes(message.data or b""), dlc)


class ODriveDriver(Driver):
    """ODrive axes on one CAN bus. `bus_factory` replaces opening the bus from the params."""

    Params = ODriveParams

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
            name: _Axis(name, dev.node_id, dev.direction * dev.scale * TWO_PI)
            for name, dev in params.devices.items()
        }
        self._by_node = {axis.node_id: axis for axis in self._axes.values()}
        self._bus: can.BusABC | None = None
        self._lock = threading.Lock()
        self._rx_stop = threading.Event()
        self._rx_thread: threading.Thread | None = None
        self._rx_error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._waiters = 0
        self._last_logged: dict[str, float] = {}

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(self._axes)

    @property
    def bus_label(self) -> str:
        return f"ODrive bus {self._p.interface}:{self._p.channel}"

    def estop(self) -> None:
        """Send the ODrive Estop to every axis: they disarm at once and latch ESTOP_REQUESTED
        until `clear_faults()`. Beyond the `Driver` interface; needs an open bus.

        Raises DriverStateError when closed, DriverIOError.
        """
        self._require(Lifecycle.OPEN, Lifecycle.ENABLED, action="estop")
        self._send(proto.make_estop(a.node_id) for a in self._axes.values())

    # -- lifecycle hooks ------------------------------------------------------------------------

    async def _open(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._rx_error = None
        for axis in self._axes.values():
            axis.estimate = axis.heartbeat = axis.version = None
        self._bus = await self._open_bus()
        self._rx_stop = threading.Event()
        self._rx_thread = threading.Thread(
            target=self._receive, args=(self._bus, self._rx_stop), name="odrive-rx", daemon=True
        )
        self._rx_thread.start()
        try:
            await self._await_first_contact()
            await self._check_versions()
        except BaseException:
            await self._close()
            raise

    async def _enable(self) -> None:
        # Closed loop starts at the measured position, so that position must be current.
        if self._p.feedback == "rtr":
            stale = await self._refresh_estimates()
        else:
            stale = self._without_fresh_estimate(self.clock())
        with self._lock:
            faults = {a: _error_of(a) for a in self._axes.values() if _error_of(a)}
        if faults:
            raise DeviceFaultError(f"{self.bus_label}: cannot enable: {_describe(faults)}")
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
        self._rx_stop.set()
        thread, self._rx_thread = self._rx_thread, None
        bus, self._bus = self._bus, None
        try:
            if thread is not None:
                await asyncio.to_thread(thread.join, 2 * _RX_POLL_S + 1.0)
            if bus is not None:
                bus.shutdown()
        except Exception as exc:  # close() must not raise: log and release what is left
            log.warning("%s: error while closing: %s", self.bus_label, exc)

    async def _read(self) -> Mapping[str, DeviceState]:
        self._raise_if_receiver_failed()
        if self._p.feedback == "rtr":
            await self._refresh_estimates()
        now = self.clock()
        states: dict[str, DeviceState] = {}
        problems: list[tuple[_Axis, str, str]] = []
        with self._lock:
            for axis in self._axes.values():
                if axis.estimate is not None:
                    states[axis.name] = _state_of(axis)
                problems += self._staleness(axis, now)
        for axis, kind, message in problems:
            self._count(axis.name, kind, message)
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
                        vel_ff_scale=self._p.vel_ff_scale,
                    )
                )
            except (ValueError, OverflowError) as exc:
                raise UnsupportedCommandError(f"{axis.label}: invalid command: {exc}") from exc
        self._send(frames)

    async def _clear_faults(self) -> None:
        before = self._heartbeat_seqs()
        self._send(proto.make_clear_errors(a.node_id) for a in self._axes.values())

        def cleared(axis: _Axis) -> bool:
            beat = axis.fresh_heartbeat(before[axis.name])
            return beat is not None and beat.axis_error == 0

        if await self._wait_for(lambda: all(map(cleared, self._axes.values())), self._timeout):
            return
        with self._lock:
            left = {a: _error_of(a) for a in self._axes.values() if _error_of(a)}
            silent = [a for a in self._axes.values() if a.heartbeat_seq <= before[a.name]]
        if left:
            raise DeviceFaultError(
                f"{self.bus_label}: errors persist after Clear_Errors (cause still present?): "
                + _describe(left)
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
        kwargs: dict[str, Any] = {"can_filters": filters}
        if p.bitrate is not None:
            kwargs["bitrate"] = p.bitrate
        return can.Bus(interface=p.interface, channel=p.channel, **kwargs)

    async def _open_bus(self) -> can.BusABC:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, self._bus_factory)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self._p.open_timeout_s)
        except TimeoutError as exc:
            future.add_done_callback(_shutdown_late_bus)
            raise DriverOpenError(
                f"{self.bus_label}: not open after {self._p.open_timeout_s} s"
            ) from exc
        except (can.CanError, OSError, ValueError, ImportError) as exc:
            raise DriverOpenError(f"{self.bus_label}: cannot open: {exc}") from exc

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
            silent = [_missing(a) for a in self._axes.values() if not (a.heartbeat and a.estimate)]
            closed = [a.label for a in self._axes.values() if _in_closed_loop(a)]
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
            version = axis.version
            if version is None:
                log.warning(
                    "%s: no Get_Version answer%s; errors are decoded as firmware 0.6",
                    axis.label,
                    "" if answered else " (firmware older than 0.6?)",
                )
            elif (version.fw_major, version.fw_minor) != (0, 6):
                log.warning(
                    "%s: firmware %d.%d.%d, this driver follows 0.6",
                    axis.label,
                    version.fw_major,
                    version.fw_minor,
                    version.fw_revision,
                )

    # -- receiving (runs in the receiver thread) ------------------------------------------------

    def _receive(self, bus: can.BusABC, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                message = bus.recv(_RX_POLL_S)
                if message is not None:
                    self._on_message(message, self.clock())
        except Exception as exc:  # thread boundary: the bus is gone; operations now raise
            if not stop.is_set():
                self._rx_error = exc
                log.error("%s: receiving failed: %s", self.bus_label, exc)
        self._wake_waiters()

    def _on_message(self, message: can.Message, received_at: float) -> None:
        if message.is_error_frame or message.is_remote_frame or message.is_extended_id:
            return
        node_id, cmd = proto.split_id(message.arbitration_id)
        axis = self._by_node.get(node_id)
        if axis is None:
            return
        data = bytes(message.data)
        try:
            if cmd == proto.Command.GET_ENCODER_ESTIMATES:
                estimate = proto.parse_encoder_estimates(data)
                with self._lock:
                    axis.estimate, axis.estimate_time = estimate, received_at
                    axis.estimate_seq += 1
            elif cmd == proto.Command.HEARTBEAT:
                beat = proto.parse_heartbeat(data)
                with self._lock:
                    axis.heartbeat, axis.heartbeat_time = beat, received_at
                    axis.heartbeat_seq += 1
            elif cmd == proto.Command.GET_VERSION:
                axis.version = proto.parse_version(data)
            else:
                return
        except proto.MalformedFrameError as exc:
            self._count(axis.name, "corrupt_replies", f"{axis.label}: {exc}")
            return
        self._wake_waiters()

    def _wake_waiters(self) -> None:
        loop = self._loop
        if self._waiters and loop is not None:
            # A closed loop (RuntimeError) means nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._wake.set)

    # -- helpers --------------------------------------------------------------------------------

    @property
    def _timeout(self) -> float:
        return self._p.enable_timeout_s

    async def _wait_for(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `done()` (evaluated under the lock) holds; False after `timeout_s`.

        Raises DriverIOError when the receiver fails meanwhile.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self._waiters += 1
        try:
            while True:
                self._wake.clear()
                self._raise_if_receiver_failed()
                with self._lock:
                    if done():
                        return True
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                try:
                    async with asyncio.timeout(remaining):
                        await self._wake.wait()
                except TimeoutError:
                    pass
        finally:
            self._waiters -= 1

    async def _confirm_state(
        self, state: proto.AxisState, before: dict[str, int], action: str
    ) -> None:
        """Wait for a heartbeat newer than `before` reporting `state` from every axis.

        Raises DeviceFaultError when one reports an error instead, DriverTimeoutError if none
        confirms within the enable timeout.
        """
        strict = state is not proto.AxisState.IDLE

        def settled(axis: _Axis) -> bool:
            beat = axis.fresh_heartbeat(before[axis.name])
            return beat is not None and (
                beat.axis_state == state or (strict and beat.axis_error != 0)
            )

        await self._wait_for(lambda: all(map(settled, self._axes.values())), self._timeout)
        with self._lock:
            fresh = {a: a.fresh_heartbeat(before[a.name]) for a in self._axes.values()}
        errors = {a: b.axis_error for a, b in fresh.items() if strict and b and b.axis_error}
        if errors:
            raise DeviceFaultError(f"{self.bus_label}: cannot {action}: {_describe(errors)}")
        pending = [a.label for a, b in fresh.items() if b is None or b.axis_state != state]
        if pending:
            raise DriverTimeoutError(
                f"{self.bus_label}: cannot {action}: no heartbeat reporting {state.name} "
                f"within {self._timeout} s from " + ", ".join(pending)
            )

    async def _refresh_estimates(self) -> list[_Axis]:
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

    def _without_fresh_estimate(self, now: float) -> list[_Axis]:
        with self._lock:
            return [
                a
                for a in self._axes.values()
                if a.estimate is None or not now - a.estimate_time <= self._p.feedback_timeout_s
            ]

    def _staleness(self, axis: _Axis, now: float) -> list[tuple[_Axis, str, str]]:
        problems = []
        age = now - axis.estimate_time
        if self._p.feedback == "cyclic" and not age <= self._p.feedback_timeout_s:
            problems.append(
                (axis, "missing_replies", f"{axis.label}: no encoder estimate for {age:.3f} s")
            )
        age = now - axis.heartbeat_time
        if not age <= self._p.heartbeat_timeout_s:
            problems.append((axis, "timeouts", f"{axis.label}: no heartbeat for {age:.3f} s"))
        return problems

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
        self._raise_if_receiver_failed()
        bus = self._bus
        if bus is None:
            raise DriverIOError(f"{self.bus_label}: not open")
        try:
            for frame in frames:
                bus.send(frame_to_message(frame), timeout=0.0)
        except (can.CanError, OSError, ValueError) as exc:
            self._count(None, "io_errors", f"{self.bus_label}: send failed: {exc}")
            raise DriverIOError(f"{self.bus_label}: send failed: {exc}") from exc

    def _send_idle_best_effort(self) -> None:
        try:
            self._send(self._state_frames(proto.AxisState.IDLE))
        except DriverError as exc:
            log.error("%s: could not request IDLE: %s", self.bus_label, exc)

    def _raise_if_receiver_failed(self) -> None:
        exc = self._rx_error
        if exc is not None:
            raise DriverIOError(f"{self.bus_label}: bus failed: {exc}") from exc

    def _count(self, device: str | None, kind: str, message: str) -> None:
        with self._lock:
            self.stats.count_error(device, kind, message)
        key = f"{device}:{kind}"
        now = time.monotonic()
        if now - self._last_logged.get(key, -math.inf) >= _LOG_EVERY_S:
            self._last_logged[key] = now
            log.warning("%s (%s, logged every %.0f s at most)", message, kind, _LOG_EVERY_S)


def _error_of(axis: _Axis) -> int:
    return axis.heartbeat.axis_error if axis.heartbeat is not None else 0


def _in_closed_loop(axis: _Axis) -> bool:
    beat = axis.heartbeat
    return beat is not None and beat.axis_state == proto.AxisState.CLOSED_LOOP_CONTROL


def _state_of(axis: _Axis) -> DeviceState:
    assert axis.estimate is not None
    error = _error_of(axis)
    return DeviceState(
        position=axis.estimate.position_turns * axis.rad_per_turn,
        velocity=axis.estimate.velocity_turns_s * axis.rad_per_turn,
        timestamp=axis.estimate_time,
        fault=DeviceFault(error, proto.describe_axis_error(error)) if error else None,
        enabled=_in_closed_loop(axis),
    )


def _missing(axis: _Axis) -> str:
    what = [
        name
        for name, value in (("heartbeat", axis.heartbeat), ("encoder estimate", axis.estimate))
        if value is None
    ]
    hint = " (cyclic encoder messages off? set encoder_msg_rate_ms or feedback='rtr')"
    return f"{axis.label}: no {' and no '.join(what)}" + (hint if axis.heartbeat else "")


def _describe(errors: Mapping[_Axis, int]) -> str:
    return "; ".join(
        f"{axis.label}: 0x{code:08X} {proto.describe_axis_error(code)}"
        for axis, code in errors.items()
    )


def _shutdown_late_bus(future: asyncio.Future[can.BusABC]) -> None:
    """Release a bus whose opening finished after we gave up on it."""
    if not future.cancelled() and future.exception() is None:
        future.result().shutdown()
