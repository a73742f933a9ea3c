"""The `sim` driver: simulated devices in-process, configured and behaving like a real bus, so that
the daemon (and its demo) runs on it exactly as on hardware.

Each device is a `SimulatedMotor` (see `drivers.sim.motor` for the physics) behind a simulated link
with injectable `LinkFaults`; the configuration and the fault bits are `drivers.sim.params`'s.
Tests and fault-injection scenarios reach them through `SimDriver.motor(name)` and
`SimDriver.link(name)`::

    clock = ManualClock()
    driver = SimDriver(SimDriver.Params(devices={"shoulder": {}, "elbow": {"watchdog_s": 0.05}}),
                       clock=clock)
    async with driver:
        await driver.enable()
        driver.motor("elbow").faults.fault_code = SimFault.OVERTEMPERATURE
        driver.link("shoulder").drop_probability = 0.5

How the simulated devices behave, as real drives do:

- Faults: a device reports its latched fault as a `DeviceFault` whose code is a `SimFault` bit set
  (an injected `MotorFaults.fault_code`, plus `SimFault.WATCHDOG_EXPIRED`) and whose message names
  the bits. A faulted device leaves closed loop; `enable()` is refused with `DeviceFaultError` until
  `clear_faults()`.
- Watchdog: an enabled device that receives no command for more than its `watchdog_s` faults with
  `SimFault.WATCHDOG_EXPIRED` and stops. Only `write()` feeds it.
- Replies: `read()` never blocks. Like a driver that collects replies in the background, it returns
  for each device the newest reply received by the time it is called, timestamped with its receive
  time (request time + `LinkFaults.delay_s`). A dropped reply is counted in
  `DriverStats.missing_replies`; one that would arrive more than `reply_timeout_s` after its request
  is discarded as stale and counted in `DriverStats.timeouts`. Either way the device keeps its
  previous state and timestamp.
- A hand: with `hand_file` set, each `read()` (when the file changed) puts the devices it names
  whose torque is off at the positions it gives, as a hand moving a limp arm would
  (`SimulatedMotor.move_by_hand`); how tests move the arm for ``armd calibrate``. A missing or
  half-written file is ignored until it is complete.
- End stops and torque limit: a device's `end_stops` ([low, high], rad at the shaft) bound its
  travel (`MotorFaults.end_stops`: the drive keeps pushing, its effort rises); its `torque_limit`
  (a fraction of the stall torque, like a Feetech servo's) clamps the effort it applies and
  reports (`DeviceState.effort`, 2 × the position error, saturating). ``armd calibrate --auto``
  drives into them.
- Disconnection: while any device is disconnected, `open()` raises `DriverOpenError`, and `read()`,
  `write()`, `enable()`, `disable()` and `clear_faults()` raise `DriverIOError`. Like a serial port
  that vanished, the driver then stays failed until it is closed and reopened with the link back.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from drivers.base import Clock, DeviceCommand, DeviceFault, DeviceState, Driver, DriverParams
from drivers.errors import (
    DeviceFaultError,
    DriverConfigError,
    DriverIOError,
    DriverOpenError,
)
from drivers.sim.motor import LinkFaults, SimulatedMotor
from drivers.sim.params import SimDeviceParams, SimDriverParams, SimFault, fault_message

__all__ = [
    "ManualClock",
    "SimDeviceParams",
    "SimDriver",
    "SimDriverParams",
    "SimFault",
    "fault_message",
]


@dataclass
class ManualClock:
    """A monotonic clock for simulations and tests: reads `now` (s) and moves only when told."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, dt_s: float) -> None:
        """Move the clock forward by `dt_s` seconds. Raises `DriverConfigError` if negative."""
        if not (math.isfinite(dt_s) and dt_s >= 0.0):
            raise DriverConfigError(f"ManualClock.advance: dt_s {dt_s} s must be finite and >= 0")
        self.now += dt_s


@dataclass(frozen=True, slots=True)
class _Reply:
    arrival: float
    state: DeviceState


@dataclass
class _SimDevice:
    motor: SimulatedMotor
    link: LinkFaults
    rng: np.random.Generator
    torque_limit: float
    in_flight: list[_Reply] = field(default_factory=list)


class SimDriver(Driver):
    """Simulated devices in-process, behind the same lifecycle and fault reporting as a real bus.

    The devices (motors and links) live as long as the driver: closing and reopening it reconnects
    to the same motors, wherever they are. Their physics runs on the driver's injected clock.
    """

    Params: ClassVar[type[SimDriverParams]] = SimDriverParams
    params: SimDriverParams

    def __init__(self, params: DriverParams, *, clock: Clock = time.monotonic) -> None:
        """Build the simulated devices from `params` (a `SimDriver.Params`); `clock` runs their
        physics and stamps their replies. Raises `DriverConfigError` for other parameter types."""
        if not isinstance(params, SimDriverParams):
            raise DriverConfigError(
                f"SimDriver needs SimDriver.Params, got {type(params).__name__}"
            )
        super().__init__(params, clock=clock)
        self.params = params
        self._devices = {
            name: _SimDevice(
                motor=SimulatedMotor(device.motor_params(), self.clock, seed=device.seed),
                link=LinkFaults(),
                # A stream apart from the motor's noise, so link faults don't shift the noise.
                rng=np.random.default_rng((device.seed, 1)),
                torque_limit=device.torque_limit,
            )
            for name, device in params.devices.items()
        }
        for name, device in params.devices.items():
            self._devices[name].motor.faults.end_stops = device.end_stops
        self._states: dict[str, DeviceState] = {}
        self._lost: tuple[str, ...] = ()
        self._hand_seen: bytes | None = None  # the hand file's content, once applied

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(self._devices)

    def motor(self, name: str) -> SimulatedMotor:
        """Device `name`'s simulated motor, to inject `MotorFaults` or inspect the true shaft state.

        Raises `DriverConfigError` for an unknown device.
        """
        return self._device(name).motor

    def link(self, name: str) -> LinkFaults:
        """Device `name`'s link faults, to set (drops, delay, disconnection).

        Raises `DriverConfigError` for an unknown device.
        """
        return self._device(name).link

    # -- lifecycle hooks --------------------------------------------------------------------------

    async def _open(self) -> None:
        gone = self._disconnected()
        if gone:
            raise DriverOpenError(f"sim: cannot open: device(s) {list(gone)} disconnected")
        self._lost = ()
        self._states = {}
        for device in self._devices.values():
            device.in_flight.clear()

    async def _enable(self) -> None:
        self._check_link("enable")
        for device in self._devices.values():
            device.motor.advance()
        faults = {name: self._fault(device.motor) for name, device in self._devices.items()}
        active = {name: fault for name, fault in faults.items() if fault is not None}
        if active:
            listed = "; ".join(
                f"device {name!r}: {fault.message}" for name, fault in active.items()
            )
            raise DeviceFaultError(f"sim: cannot enable: {listed}; clear faults first")
        for device in self._devices.values():
            device.motor.enable()

    async def _disable(self) -> None:
        # Best effort: reachable devices are disabled; after a lost link none is, and the devices'
        # watchdogs stop them, as they would real ones.
        gone = self._disconnected()
        if not self._lost:
            for name, device in self._devices.items():
                if name not in gone:
                    device.motor.disable()
        self._check_link("disable")

    async def _close(self) -> None:
        self._states = {}
        for device in self._devices.values():
            device.in_flight.clear()

    async def _clear_faults(self) -> None:
        self._check_link("clear faults")
        for device in self._devices.values():
            device.motor.clear_faults()

    # -- cyclic I/O -------------------------------------------------------------------------------

    async def _read(self) -> Mapping[str, DeviceState]:
        self._check_link("read")
        if self.params.hand_file is not None:
            self._follow_hand(self.params.hand_file)
        now = self.clock()
        for name, device in self._devices.items():
            state = self._request(name, device, now)
            if state is not None and state.timestamp <= now and not device.in_flight:
                self._states[name] = state  # an instant reply, nothing else in flight
                continue
            if state is not None:
                device.in_flight.append(_Reply(state.timestamp, state))
            arrived = [reply for reply in device.in_flight if reply.arrival <= now]
            if arrived:
                device.in_flight = [reply for reply in device.in_flight if reply.arrival > now]
                self._states[name] = max(arrived, key=lambda reply: reply.arrival).state
        return dict(self._states)

    async def _write(self, commands: Mapping[str, DeviceCommand]) -> None:
        self._check_link("write")
        for name, command in commands.items():
            self._devices[name].motor.command(command.position, command.velocity)

    def _request(self, name: str, device: _SimDevice, now: float) -> DeviceState | None:
        """Send one state request to `device` at time `now`: its reply, stamped with its arrival
        time, or None when it is lost (and counted)."""
        link = device.link
        if link.drop_probability > 0.0 and device.rng.random() < link.drop_probability:
            self.stats.count_error(name, "missing_replies", f"sim: device {name!r}: reply dropped")
            return None
        timeout_s = self.params.reply_timeout_s
        if link.delay_s > timeout_s:
            self.stats.count_error(
                name,
                "timeouts",
                f"sim: device {name!r}: reply delayed {link.delay_s} s, beyond the "
                f"reply_timeout_s of {timeout_s} s",
            )
            return None
        motor = device.motor
        position, velocity = motor.encoder()  # advanced to the clock's time
        return DeviceState(
            position=position,
            velocity=velocity,
            timestamp=now + link.delay_s,
            fault=self._fault(motor) if motor.faulted else None,
            enabled=motor.enabled,
            effort=_clamp(motor.effort, device.torque_limit),
        )

    def _follow_hand(self, path: str) -> None:
        """Move the limp devices to where the hand file puts them, if it changed and is whole.
        (By content: a file replaced within one clock tick of the file system keeps its mtime.)"""
        try:
            with open(path, "rb") as file:
                content = file.read(65536)
        except OSError:
            return
        if content == self._hand_seen:
            return
        try:
            positions = json.loads(content)
        except ValueError:
            return
        if not isinstance(positions, dict):
            return
        for name, position in positions.items():
            finite = isinstance(position, int | float) and math.isfinite(position)
            if name in self._devices and finite:
                self._devices[name].motor.move_by_hand(float(position))
        self._hand_seen = content

    # -- helpers ----------------------------------------------------------------------------------

    def _device(self, name: str) -> _SimDevice:
        try:
            return self._devices[name]
        except KeyError:
            raise DriverConfigError(
                f"sim: unknown device {name!r}; known: {list(self._devices)}"
            ) from None

    def _fault(self, motor: SimulatedMotor) -> DeviceFault | None:
        """The motor's fault, as of its last advance."""
        code = motor.faults.fault_code
        if motor.watchdog_expired:
            code |= SimFault.WATCHDOG_EXPIRED
        if code == 0:
            return None
        message = fault_message(code)
        if motor.watchdog_expired:
            message += f"; no command for more than watchdog_s = {motor.params.watchdog_s} s"
        return DeviceFault(code=int(code), message=message)

    def _disconnected(self) -> tuple[str, ...]:
        return tuple(name for name, device in self._devices.items() if device.link.disconnected)

    def _check_link(self, action: str) -> None:
        """Raise `DriverIOError` if a device is (or was, since the driver opened) disconnected."""
        if self._lost:
            raise DriverIOError(
                f"sim: cannot {action}: link to device(s) {list(self._lost)} was lost; "
                "close and reopen the driver"
            )
        if not any(device.link.disconnected for device in self._devices.values()):
            return
        gone = self._disconnected()
        if gone:
            self._lost = gone
            message = f"sim: cannot {action}: device(s) {list(gone)} disconnected"
            for name in gone:
                self.stats.count_error(name, "io_errors", message)
            raise DriverIOError(message)


def _clamp(value: float, bound: float) -> float:
    return max(-bound, min(bound, value))
