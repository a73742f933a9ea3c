"""The arm's hardware interface: every driver of the config behind one read/write in joint space.

`ArmHardware` owns the drivers (one per bus) and the `ArmTransmission`; the control loop sees only
joint-space arrays in ``q`` order. Drivers are read and written concurrently, one batched
transaction per bus. A driver whose read fails keeps its devices' previous readings (with their old
timestamps), so the loop's staleness checks decide; the failure is counted and logged, rate-limited.
"""

from __future__ import annotations

import asyncio
import logging
import time
import types
from collections.abc import Coroutine, Generator, Mapping
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from armd.control.transmission import ArmTransmission
from armd.link.protocol import MeasuredState
from armd.ratelimit import RateLimiter
from drivers import (
    DeviceCommand,
    DeviceFault,
    DeviceState,
    Driver,
    DriverError,
    DriverIOError,
    Lifecycle,
)

__all__ = ["ArmHardware"]

log = logging.getLogger(__name__)
Array = NDArray[np.float64]
T = TypeVar("T")


class ArmHardware:
    """Joint-space access to the drivers. Lifecycle: open → enable ⇄ disable → close."""

    def __init__(
        self,
        drivers: Mapping[str, Driver],
        transmission: ArmTransmission,
        io_timeout_s: float = 0.25,
    ) -> None:
        self.drivers = dict(drivers)
        self.transmission = transmission
        self.joint_names = transmission.joint_names
        self.io_timeout_s = io_timeout_s
        self._states: dict[str, Mapping[str, DeviceState]] = {name: {} for name in self.drivers}
        self.read_errors = 0
        self.failed: dict[str, str] = {}  # driver name -> why its bus is considered lost
        # while drivers home (enable with `slow_enable_s`): the monotonic time it must end by
        self.homing_until: float | None = None
        self._warnings = RateLimiter(burst=1, interval_s=5.0)
        # what `_measured` starts from each tick: (driver, device, joint index, sign, joint name)
        # per driven joint; arrays copied rather than built (fixed joints are never stale)
        self._devices = [
            (driver, device, int(transmission.driven[i]), j.sign, j.joint)
            for i, ((driver, device), j) in enumerate(
                zip(transmission.devices, transmission.joints, strict=True)
            )
        ]
        n, dof = len(transmission), len(self.joint_names)
        self._unread_motors, self._still_motors = np.full(n, np.nan), np.zeros(n)
        self._no_efforts, self._fixed_stamps = np.full(dof, np.nan), np.full(dof, np.inf)
        self._sent: dict[str, dict[str, DeviceCommand]] = {}  # the last commands written

    async def _each(
        self,
        action: str,
        calls: Mapping[str, Coroutine[Any, Any, object]],
        timeout_s: float | None = None,
    ) -> None:
        """Await one call per driver concurrently, each within `timeout_s` (default: 8 I/O
        timeouts); raise the first failure naming its driver."""
        names = list(calls)
        timeout_s = self.io_timeout_s * 8 if timeout_s is None else timeout_s
        results = await _gather([calls[name] for name in names], timeout_s)
        for name, result in zip(names, results, strict=True):
            if isinstance(result, TimeoutError):
                raise DriverIOError(f"driver {name!r}: {action} timed out")
            if isinstance(result, DriverError):
                raise type(result)(f"driver {name!r}: {action}: {result}") from result
            if isinstance(result, BaseException):
                raise result

    async def open(self) -> None:
        """Open every bus; if one fails, close those already open and raise."""
        try:
            await self._each("open", {name: d.open() for name, d in self.drivers.items()})
        except BaseException:
            await self.close()
            raise

    async def enable(self) -> None:
        """Enable every driver. Those that ask for more time (`Driver.slow_enable_s`: a homing
        routine still to run) go first, within that time, so that no other drive sits enabled
        and uncommanded (its watchdog unfed) while they home; then the others, within the usual
        I/O timeout."""
        budgets = {n: d.slow_enable_s for n, d in self.drivers.items()}
        homing = {n: b for n, b in budgets.items() if b is not None}
        try:
            if homing:
                calls = {name: self.drivers[name].enable() for name in homing}
                budget_s = max(self.io_timeout_s * 8, *homing.values())
                self.homing_until = time.monotonic() + budget_s
                try:
                    await self._each("enable", calls, budget_s)
                finally:
                    self.homing_until = None
            calls = {name: d.enable() for name, d in self.drivers.items()}
            await self._each("enable", calls)
        except BaseException:
            await self.disable()
            raise

    async def disable(self) -> None:
        """Best effort on every driver; raises the first failure after trying all."""
        await self._each("disable", {name: d.disable() for name, d in self.drivers.items()})

    async def close(self) -> None:
        """Close every driver; never raises `DriverError` (drivers' `close` promise)."""
        await asyncio.gather(*(d.close() for d in self.drivers.values()), return_exceptions=True)

    async def clear_faults(self) -> None:
        await self._each("clear faults", {n: d.clear_faults() for n, d in self.drivers.items()})

    async def read(self) -> MeasuredState:
        """The measured joint state. A driver that fails keeps its previous readings."""
        names = list(self.drivers)
        results = await _gather([self.drivers[n].read() for n in names], self.io_timeout_s)
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, DriverError | TimeoutError):
                    raise result
                self._read_failed(name, result)
            else:
                self._states[name] = result
        return self._measured()

    @property
    def enabled(self) -> bool:
        """Every driver is enabled (false while one is lost or being reconnected)."""
        return all(d.lifecycle is Lifecycle.ENABLED for d in self.drivers.values())

    async def reconnect(self) -> list[str]:
        """Close and reopen every driver whose bus was lost (left OPEN, never enabled: the loop
        re-enables after a reset). Returns the drivers that are back."""
        back = []
        for name in list(self.failed):
            driver = self.drivers[name]
            await driver.close()
            try:
                await asyncio.wait_for(driver.open(), self.io_timeout_s * 8)
            except (DriverError, TimeoutError) as exc:
                self.failed[name] = str(exc) or "open timed out"
                await driver.close()
                continue
            log.info("driver %r: reconnected", name)
            del self.failed[name]
            back.append(name)
        return back

    def _read_failed(self, driver: str, error: BaseException) -> None:
        if isinstance(error, DriverIOError) or self.drivers[driver].lifecycle is Lifecycle.CLOSED:
            self.failed.setdefault(driver, str(error))
        self.read_errors += 1
        if self._warnings.allow(driver) is not None:
            log.warning("driver %r: read failed (%d so far): %s", driver, self.read_errors, error)

    def _measured(self) -> MeasuredState:
        t = self.transmission
        motor_p, motor_v = self._unread_motors.copy(), self._still_motors.copy()
        effort, stamps = self._no_efforts.copy(), self._fixed_stamps.copy()
        faults: list[tuple[str, DeviceFault]] = []
        for i, (driver, device, joint, sign, name) in enumerate(self._devices):
            state = self._states[driver].get(device)
            if state is None:
                stamps[joint] = -np.inf
                continue
            motor_p[i], motor_v[i], stamps[joint] = state.position, state.velocity, state.timestamp
            if state.effort is not None:
                effort[joint] = state.effort * sign  # along the joint's axis
            if state.fault is not None:
                faults.append((name, state.fault))
        return MeasuredState(
            position=t.joint_positions(motor_p),
            velocity=t.joint_velocities(motor_v),
            timestamp=stamps,
            faults=tuple(faults),
            effort=effort,
        )

    async def write(
        self, position: ArrayLike, velocity: ArrayLike, torque: ArrayLike | None = None
    ) -> None:
        """Command every driven joint (positions, velocity and torque feed-forward; q order)."""
        commands = self.transmission.commands(position, velocity, self._sent, torque)
        self._sent = commands
        await self._each(
            "write",
            {name: self.drivers[name].write(commands.get(name, {})) for name in self.drivers},
        )


async def _gather(calls: list[Coroutine[Any, Any, Any]], timeout_s: float) -> list[Any]:
    """Await `calls` concurrently, each within `timeout_s`; failures are returned, not raised.

    A single call (one bus) is awaited in place rather than in a task of its own: a driver that
    answers without suspending then keeps the control tick from yielding to the event loop, where
    each yield lets a batch of MQTT messages run first (under a flood of goals, enough of them to
    starve the drives' watchdogs)."""
    if len(calls) != 1:
        return await asyncio.gather(
            *(asyncio.wait_for(call, timeout_s) for call in calls), return_exceptions=True
        )
    try:
        return [await within(calls[0], timeout_s)]
    except Exception as exc:  # returned, as gather's return_exceptions does
        return [exc]


async def within(call: Coroutine[Any, Any, T], timeout_s: float) -> T:
    """`await call` within `timeout_s` (else `TimeoutError`). A call that completes without
    suspending (the simulated driver; a reply already buffered) costs no timer: arming and
    cancelling one for every read and every write was a tenth of an idle tick's CPU."""
    try:
        step = call.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    async with asyncio.timeout(timeout_s):
        return cast(T, await _resume(call, step))


@types.coroutine
def _resume(call: Coroutine[Any, Any, Any], step: Any) -> Generator[Any, Any, Any]:
    """The rest of `call`, whose first step yielded `step` (the future it waits on): what the
    task sends or throws in (a wake-up, a cancellation) goes on to `call`."""
    while True:
        try:
            sent = yield step
        except GeneratorExit:
            call.close()
            raise
        except BaseException as exc:
            try:
                step = call.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                step = call.send(sent)
            except StopIteration as done:
                return done.value
