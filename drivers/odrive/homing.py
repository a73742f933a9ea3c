"""Homing of one ODrive axis (CAN Simple, firmware v0.6), run by `ODriveDriver.enable()` once per
`open()`, before the axis first enters closed loop (configuration: `drivers.odrive.params`).

- Index search: Set_Axis_State ENCODER_INDEX_SEARCH. While the procedure runs the heartbeat shows
  that state (and procedure result BUSY); when it has finished the axis is back in IDLE with the
  result of the procedure: SUCCESS, or why it failed (and error bits). The driver waits for a
  heartbeat showing the procedure running, then for one showing it finished.
- End stop: closed-loop velocity control (Set_Controller_Mode VELOCITY_CONTROL, Set_Input_Vel)
  with the motor current limited (Set_Limits) until the encoder velocity stays near zero for a
  dwell (the shaft pushes against the stop at the current limit), then Set_Input_Vel 0 and
  Set_Absolute_Position so that the stop reads the configured offset. The axis stays in closed
  loop; the driver then restores its limits and position control like any enable. Set_Input_Vel
  is repeated while the axis moves, so an enabled ODrive watchdog stays fed only while the
  routine runs.

Units: ODrive turns and turns/s (the device's `direction` and `scale` do not apply).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping

from drivers.errors import DeviceFaultError, DriverTimeoutError
from drivers.odrive import protocol as proto
from drivers.odrive.axis import AxisRecord
from drivers.odrive.params import EndstopHoming, IndexSearchHoming, ODriveAxisParams

__all__ = ["AxisHoming", "HomingPlan"]

log = logging.getLogger(__name__)

_STOPPED_FRACTION = 0.1  # the shaft has stopped below this fraction of the homing velocity
_POSITION_TOLERANCE_TURNS = 0.01  # the encoder took Set_Absolute_Position when it reads this near
_FEED_PERIOD_S = 0.02  # Set_Input_Vel repeats (and estimates are checked) at least this often

Send = Callable[[Iterable[proto.Frame]], None]
WaitFor = Callable[[Callable[[], bool], float], Awaitable[bool]]


class HomingPlan:
    """Which axes still need homing since the last `open()`, and running them in turn."""

    def __init__(self, devices: Mapping[str, ODriveAxisParams]) -> None:
        self._devices = devices
        self._homed: set[str] = set()

    def forget(self) -> None:
        """Every axis with a `homing` needs it again (the bus was opened again)."""
        self._homed.clear()

    def pending_time_s(self) -> float | None:
        """The sum of the pending homings' timeouts, s; None when none is pending."""
        pending = [
            device.homing.timeout_s
            for name, device in self._devices.items()
            if device.homing is not None and name not in self._homed
        ]
        return sum(pending) if pending else None

    async def run(
        self,
        axes: Iterable[AxisRecord],
        *,
        send: Send,
        wait_for: WaitFor,
        lock: threading.Lock,
        rtr: bool,
        label: str,
    ) -> None:
        """Home the pending axes one after the other (see `AxisHoming`); an axis counts as homed
        once its homing succeeded. Raises what `AxisHoming.run` raises."""
        for axis in axes:
            device = self._devices[axis.name]
            if device.homing is None or axis.name in self._homed:
                continue
            homing = AxisHoming(
                axis, device, send=send, wait_for=wait_for, lock=lock, rtr=rtr, label=label
            )
            await homing.run()
            self._homed.add(axis.name)


def _name(enum_type: type[proto.AxisState] | type[proto.ProcedureResult], value: int) -> str:
    try:
        return enum_type(value).name
    except ValueError:
        return str(value)


class AxisHoming:
    """One homing run of one axis. `send` sends frames now; `wait_for(done, timeout_s)` waits
    until `done()` (evaluated under `lock`, the lock guarding `axis`) holds; `rtr`: encoder
    estimates must be requested (``feedback="rtr"``)."""

    def __init__(
        self,
        axis: AxisRecord,
        device: ODriveAxisParams,
        *,
        send: Send,
        wait_for: WaitFor,
        lock: threading.Lock,
        rtr: bool,
        label: str,
    ) -> None:
        assert device.homing is not None
        self.axis = axis
        self.device = device
        self.homing = device.homing
        self._send = send
        self._wait_for = wait_for
        self._lock = lock
        self._rtr = rtr
        self._where = f"{label}: {axis.label}: homing ({self.homing.method})"
        self._deadline = time.monotonic() + self.homing.timeout_s

    async def run(self) -> None:
        """Home the axis. Raises DeviceFaultError when the axis reports a failure,
        DriverTimeoutError when it does not finish within the homing timeout, DriverIOError."""
        log.info("%s: started", self._where)
        if isinstance(self.homing, IndexSearchHoming):
            await self._index_search()
        else:
            await self._endstop(self.homing)
        log.info("%s: done", self._where)

    # -- index search ---------------------------------------------------------------------------

    async def _index_search(self) -> None:
        axis, node = self.axis, self.axis.node_id
        before = self._heartbeat_seq()
        self._send([proto.make_set_axis_state(node, proto.AxisState.ENCODER_INDEX_SEARCH)])

        def finished() -> bool:
            beat = axis.fresh_heartbeat(before)
            if beat is None:
                return False
            if beat.axis_state == proto.AxisState.ENCODER_INDEX_SEARCH or _busy(beat):
                return False
            # Done once the procedure was seen running, or refused (a result other than SUCCESS
            # on a later heartbeat than any that may have been in flight with the request).
            return axis.busy_seq > before or (
                axis.heartbeat_seq > before + 1
                and (beat.procedure_result != proto.ProcedureResult.SUCCESS or beat.axis_error != 0)
            )

        await self._wait_for(finished, self._remaining())
        with self._lock:
            beat = axis.fresh_heartbeat(before)
            done = finished()
        if beat is None or not done:
            state = "no heartbeat" if beat is None else _describe(beat)
            raise DriverTimeoutError(
                f"{self._where}: the index search did not finish within "
                f"{self.homing.timeout_s} s ({state})"
            )
        if beat.procedure_result != proto.ProcedureResult.SUCCESS or beat.axis_error:
            raise DeviceFaultError(f"{self._where}: the index search failed: {_describe(beat)}")
        await self._fresh_estimate()

    # -- end stop -------------------------------------------------------------------------------

    async def _endstop(self, homing: EndstopHoming) -> None:
        node, device = self.axis.node_id, self.device
        assert device.velocity_limit is not None
        before = self._heartbeat_seq()
        # Input velocity 0 first: an axis already in closed loop must not act on an old one.
        self._send(
            [
                proto.make_set_input_vel(node, 0.0),
                proto.make_set_limits(node, device.velocity_limit, homing.current_limit),
                proto.make_set_controller_mode(
                    node, proto.ControlMode.VELOCITY_CONTROL, proto.InputMode.PASSTHROUGH
                ),
                proto.make_set_axis_state(node, proto.AxisState.CLOSED_LOOP_CONTROL),
            ]
        )
        await self._closed_loop(before)
        await self._push_until_stopped(homing)
        seq = self._estimate_seq()
        self._send(
            [
                proto.make_set_input_vel(node, 0.0),
                proto.make_set_absolute_position(node, homing.offset),
            ]
        )

        def at_offset() -> bool:
            estimate = self.axis.estimate
            return (
                self.axis.estimate_seq > seq
                and estimate is not None
                and abs(estimate.position_turns - homing.offset) <= _POSITION_TOLERANCE_TURNS
            )

        if not await self._poll_until(at_offset):
            raise DriverTimeoutError(
                f"{self._where}: the encoder does not read the offset {homing.offset} turns "
                f"after Set_Absolute_Position (within {homing.timeout_s} s)"
            )

    async def _closed_loop(self, before: int) -> None:
        axis = self.axis

        def armed() -> bool:
            beat = axis.fresh_heartbeat(before)
            return beat is not None and (axis.in_closed_loop or beat.axis_error != 0)

        await self._wait_for(armed, self._remaining())
        with self._lock:
            beat = axis.fresh_heartbeat(before)
        if beat is not None:
            self._raise_on_error(beat)
        if beat is None or beat.axis_state != proto.AxisState.CLOSED_LOOP_CONTROL:
            state = "no heartbeat" if beat is None else _describe(beat)
            raise DriverTimeoutError(f"{self._where}: the axis did not enter closed loop ({state})")

    async def _push_until_stopped(self, homing: EndstopHoming) -> None:
        """Drive towards the stop until the velocity stays below the threshold for the dwell."""
        axis, node = self.axis, self.axis.node_id
        velocity = homing.direction * homing.velocity
        threshold = _STOPPED_FRACTION * homing.velocity
        stopped_since: float | None = None
        last_seq = self._estimate_seq()
        while self._remaining() > 0:
            self._send([proto.make_set_input_vel(node, velocity), *self._requests()])
            seen = last_seq
            await self._wait_for(self._estimate_after(seen), min(_FEED_PERIOD_S, self._remaining()))
            with self._lock:
                beat, estimate = axis.heartbeat, axis.estimate
                last_seq, at = axis.estimate_seq, axis.estimate_time
            if beat is not None:
                self._raise_on_error(beat)
                if beat.axis_state != proto.AxisState.CLOSED_LOOP_CONTROL:
                    raise DeviceFaultError(
                        f"{self._where}: the axis left closed loop ({_describe(beat)})"
                    )
            if estimate is None or last_seq == seen:
                continue
            if abs(estimate.velocity_turns_s) >= threshold:
                stopped_since = None
            elif stopped_since is None:
                stopped_since = at
            elif at - stopped_since >= homing.dwell_s:
                return
        self._send([proto.make_set_input_vel(node, 0.0)])
        raise DriverTimeoutError(
            f"{self._where}: no end stop within {homing.timeout_s} s (moving at {velocity} turns/s)"
        )

    # -- helpers --------------------------------------------------------------------------------

    def _remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    def _heartbeat_seq(self) -> int:
        with self._lock:
            return self.axis.heartbeat_seq

    def _estimate_seq(self) -> int:
        with self._lock:
            return self.axis.estimate_seq

    def _estimate_after(self, seq: int) -> Callable[[], bool]:
        return lambda: self.axis.estimate_seq > seq

    def _requests(self) -> list[proto.Frame]:
        if not self._rtr:
            return []
        return [proto.make_request(self.axis.node_id, proto.Command.GET_ENCODER_ESTIMATES)]

    async def _poll_until(self, done: Callable[[], bool]) -> bool:
        """Wait for `done()`, requesting estimates (RTR) as needed, until the homing deadline."""
        while True:
            self._send(self._requests())
            if await self._wait_for(done, min(_FEED_PERIOD_S, self._remaining())):
                return True
            if self._remaining() <= 0:
                return False

    async def _fresh_estimate(self) -> None:
        """Wait for an encoder estimate newer than now: the one closed loop starts from must
        come after the homing moved the encoder's zero."""
        if not await self._poll_until(self._estimate_after(self._estimate_seq())):
            raise DriverTimeoutError(f"{self._where}: no encoder estimate after homing")

    def _raise_on_error(self, beat: proto.Heartbeat) -> None:
        if beat.axis_error:
            raise DeviceFaultError(f"{self._where}: the axis reports {_describe(beat)}")


def _busy(beat: proto.Heartbeat) -> bool:
    return beat.procedure_result == proto.ProcedureResult.BUSY


def _describe(beat: proto.Heartbeat) -> str:
    text = (
        f"state {_name(proto.AxisState, beat.axis_state)}, "
        f"procedure result {_name(proto.ProcedureResult, beat.procedure_result)}"
    )
    if beat.axis_error:
        text += f", error 0x{beat.axis_error:08X} {proto.describe_axis_error(beat.axis_error)}"
    return text
