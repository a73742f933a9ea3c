"""``armd calibrate --auto``: find a joint's two end stops by driving it slowly into each, at a low
torque limit, with the other joints holding where they are (docs/calibration.md).

- `limited_drivers`: the drivers' setups with the calibrated joints' torque limits lowered to
  the `AutoSettings.torque` (never raised); a joint whose device has no torque limit armd can
  set is refused (`AutoRefusedError`, naming it). Today: `feetech` servos with a Torque_Limit
  item, the `sim` driver's devices (their `torque_limit`, a fraction of the stall torque, clamps
  the effort they apply), and the `mujoco` driver's (their `torque_limit` is in N·m, the
  stall torque: it becomes that fraction of it).
- `EndStops.find`: for one joint, from its measured position, a ramp at `speed` (accelerating at
  `acceleration`) in the joint's positive direction until it stops following, a short back-off,
  the same in the negative direction, then back to where it started. It never commands the motor
  more than `max_travel` from that start. The stop is detected when, for `dwell_s`, the joint is
  (nearly) still while its device pushes at the torque limit or lags the command by `STALL_LAG`
  or more; the end stop is then the measured position. A device that refuses a command beyond
  its own range (`UnsupportedCommandError`: nothing is sent, e.g. a Feetech servo's position
  limits) ends the ramp there: the command stays at the last position it accepts (to within
  `EDGE`), and where the joint comes to rest there is its end of travel, an end stop if it
  stalled, else the end of the device's range (`Travel.range_ends` says so).

Positions here are at the motor (motor units, what the drivers speak); `speed`, `acceleration`,
`max_travel` and `backoff` are given in joint units and converted through the transmission.
Failures (no stop within the travel, the time-out, a device fault) raise `EndStopError`.
With a collision model, `sweep_collision` says before anything moves whether a joint's search
would collide (within the joint's limits, at the configured offsets).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ValidationError

from armd.control.transmission import Transmission
from armd.control.wiring import DriverSetup
from armd.errors import ArmdError
from drivers import Clock, DeviceCommand, DeviceState, Driver, UnsupportedCommandError
from kinematics import JointLimit
from kinematics.collision import CollisionModel

Array = NDArray[np.float64]

__all__ = [
    "SETTLED",
    "STALL_LAG",
    "TORQUE_IN_NM",
    "TORQUE_LIMITED",
    "AutoRefusedError",
    "AutoSettings",
    "EndStopError",
    "EndStops",
    "Travel",
    "limited_drivers",
    "sweep_collision",
]

TORQUE_LIMITED = ("feetech", "sim", "mujoco")
"""The driver types whose devices have a torque limit (`torque_limit`, that the device clamps its
effort to) that armd sets when it enables them: a fraction of the stall torque, or in N·m for
the types of `TORQUE_IN_NM`."""
TORQUE_IN_NM = ("mujoco",)
"""The driver types whose `torque_limit` is a torque (N·m), the device's stall torque: the search
limits it to `AutoSettings.torque` times itself."""
STALL_LAG = 0.1
"""rad (m) at the motor: a command lead the joint does not close while still is a stall."""
SETTLED = STALL_LAG / 4  # rad (m) at the motor: a move has arrived
EFFORT_AT_LIMIT = 0.9  # of the torque limit: the device pushes as hard as it may
STILL = 0.25  # of the ramp's speed: slower than this, the joint is not following
EDGE = 1e-4  # rad (m) at the motor: how close a ramp gets to the end of its device's range
READ_TIMEOUT_S = 1.0
STALE_S = 0.25  # a reading older than this is no evidence of where the joint is now


class AutoRefusedError(ArmdError):
    """The automatic calibration cannot be done safely on these joints (nothing moved)."""


def sweep_collision(
    model: CollisionModel, q: Array, joint: int, travel: float
) -> tuple[float, str, str] | None:
    """Where searching joint `joint` (q index) would collide: it sweeps from `q` up to `travel`
    (rad or m) either way within the joint's limits, the other joints holding. Returns (the
    joint's position there, the pair) or None when both sweeps are clear. The positions are the
    configured offsets' (the joint is not calibrated yet): a check of what the model knows."""
    lower, upper = model.tree.limits.lower[joint], model.tree.limits.upper[joint]
    for direction in (1.0, -1.0):
        end = q.copy()
        end[joint] = min(max(q[joint] + direction * travel, lower), upper)
        check = model.check_path(np.vstack([q, end]))
        if not check.clear:
            assert check.q is not None
            assert check.pair is not None
            return float(check.q[joint]), check.pair[0], check.pair[1]
    return None


class EndStopError(ArmdError):
    """The search for a joint's end stops failed; the drives are disabled, nothing is written."""


@dataclass(frozen=True, slots=True)
class Travel:
    """A joint's two ends of travel (motor units, low < high), and one line for each end that is
    not an end stop but the end of the range its device accepts commands in."""

    low: float
    high: float
    range_ends: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AutoSettings:
    """torque: the torque limit during the search, a fraction of the stall torque (0, 1].
    speed: joint units/s; acceleration: joint units/s²; max_travel, backoff: joint units.
    timeout_s: the most one joint's search (both stops and the way back) may take.
    period_s: the command period; dwell_s: how long a stall must last to be an end stop."""

    torque: float = 0.2
    speed: float = 0.2
    acceleration: float = 1.0
    max_travel: float = 2.0 * math.pi
    backoff: float = 0.05
    timeout_s: float = 90.0
    period_s: float = 0.02
    dwell_s: float = 0.3


def limited_drivers(
    drivers: Mapping[str, DriverSetup],
    joints: Sequence[Transmission],
    torque: float,
) -> dict[str, DriverSetup]:
    """`drivers` with the devices of `joints` limited to `torque` (or their configured torque
    limit, if lower). Raises `AutoRefusedError` naming every joint whose device has no settable
    torque limit."""
    refused: list[str] = []
    out = dict(drivers)
    for t in joints:
        setup = out[t.driver]
        devices = getattr(setup.params, "devices", None)
        device = devices.get(t.device) if isinstance(devices, Mapping) else None
        configured = getattr(device, "torque_limit", None)
        where = f"joint {t.joint!r} ({t.driver}/{t.device}, driver type {setup.type_name})"
        settable = isinstance(device, BaseModel) and isinstance(configured, float)
        if setup.type_name not in TORQUE_LIMITED or not settable or devices is None:
            refused.append(f"{where} has no torque limit armd can set")
            continue
        assert isinstance(device, BaseModel)
        assert isinstance(configured, float)
        lowered = (
            torque * configured if setup.type_name in TORQUE_IN_NM else min(configured, torque)
        )
        try:
            limited = type(device).model_validate({**device.model_dump(), "torque_limit": lowered})
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"].removeprefix("Value error, ")
            refused.append(f"{where}: {reason}")
            continue
        params = setup.params.model_copy(update={"devices": {**devices, t.device: limited}})
        out[t.driver] = replace(setup, params=params)
    if refused:
        raise AutoRefusedError(
            "calibrate --auto: refused: "
            + "; ".join(refused)
            + f" (--auto drives a joint into its end stops, safe only at a low torque limit: "
            f"{', '.join(TORQUE_LIMITED)} devices have one). Calibrate it by hand (without --auto)"
        )
    return out


Sleep = Callable[[float], Awaitable[None]]
Report = Callable[[str], None]


@dataclass
class _Ramp:
    """A command moving from `position` toward `direction` (±1) at up to `speed`; `refusal`: the
    device's, once the ramp reached the end of the range it accepts (it stays there)."""

    position: float
    direction: float
    speed: float
    acceleration: float
    velocity: float = 0.0
    refusal: str | None = None

    def step(self, dt: float, bound: float) -> float:
        """Advance by `dt` s, braking in time to stop at `bound` (motor units), never beyond it;
        the new command."""
        left = max(0.0, (bound - self.position) * self.direction)
        braking = math.sqrt(2.0 * self.acceleration * left)
        self.velocity = min(self.speed, self.velocity + self.acceleration * dt, braking)
        ahead = self.position + self.direction * self.velocity * dt
        self.position = min(ahead, bound) if self.direction > 0 else max(ahead, bound)
        if self.position == bound:
            self.velocity = 0.0
        return self.position


class EndStops:
    """The opened and enabled drivers, driven together: the joint under search follows a ramp,
    every other device holds where it was when the search began."""

    def __init__(
        self,
        drivers: Mapping[str, Driver],
        settings: AutoSettings,
        torque: Mapping[str, float],
        *,
        clock: Clock,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        """`torque`: each searched joint's torque limit (its device's, lowered)."""
        self.drivers = drivers
        self.settings = settings
        self.current = settings  # the joint's under search: capped by its limits
        self.torque = torque
        self.clock = clock
        self.sleep = sleep
        self.hold: dict[tuple[str, str], float] = {}

    async def read(self) -> dict[tuple[str, str], DeviceState]:
        """Every device's latest state, by (driver, device)."""
        states = {}
        for name, driver in self.drivers.items():
            async with asyncio.timeout(READ_TIMEOUT_S):  # not wait_for: it can lose a Ctrl-C
                read = await driver.read()
            states.update({(name, device): state for device, state in read.items()})
        return states

    async def find(
        self, t: Transmission, report: Report, limit: JointLimit | None = None
    ) -> Travel:
        """Joint `t`'s ends of travel; the joint ends where it started. The speed and
        acceleration stay within `limit`'s. Raises `EndStopError`."""
        s = self.settings
        if limit is not None:
            s = replace(
                s,
                speed=min(s.speed, limit.velocity),
                acceleration=min(s.acceleration, limit.acceleration),
            )
        self.current = s
        key = (t.driver, t.device)
        self.hold = {k: state.position for k, state in (await self.read()).items()}
        start = self.hold[key]
        deadline = self.clock() + s.timeout_s
        scale = abs(t.scale)
        travel = s.max_travel * scale
        stops, range_ends = [], []
        for joint_direction in (1.0, -1.0):
            direction = joint_direction * t.sign
            bound = start + direction * travel
            stop, range_end = await self._search(t, direction, bound, deadline, report)
            stops.append(stop)
            range_ends += [range_end] if range_end else []
            await self._move(t, stop - direction * s.backoff * scale, deadline, report)
        await self._move(t, start, deadline, report)
        low, high = sorted(stops)
        return Travel(low, high, tuple(range_ends))

    async def _search(
        self, t: Transmission, direction: float, bound: float, deadline: float, report: Report
    ) -> tuple[float, str | None]:
        """Ramp toward `bound` until the joint stalls there for `dwell_s`, or rests at the end of
        its device's range: its position, and what that end is unless it is an end stop."""
        s = self.current
        key = (t.driver, t.device)
        scale = abs(t.scale)
        ramp = _Ramp(self.hold[key], direction, s.speed * scale, s.acceleration * scale)
        limit = self.torque[t.joint]
        still_since: float | None = None
        sign = "+" if direction * t.sign > 0 else "-"
        while True:
            state = await self._advance(t, ramp, bound, deadline)
            now = self.clock()
            lag = (ramp.position - state.position) * direction
            stalled = (state.effort or 0.0) * direction >= EFFORT_AT_LIMIT * limit
            stalled = stalled or lag >= STALL_LAG
            if abs(state.velocity) <= STILL * ramp.speed and (stalled or ramp.refusal):
                still_since = now if still_since is None else still_since
                if now - still_since >= s.dwell_s:
                    self.hold[key] = state.position  # stop pushing
                    if stalled:
                        return state.position, None
                    return state.position, _range_end(t, sign, state.position, ramp.refusal)
            else:
                still_since = None
                if ramp.position == bound and abs(state.position - bound) < STALL_LAG:
                    raise EndStopError(
                        f"joint {t.joint!r}: no end stop in the {sign} direction within "
                        f"{s.max_travel:g} of where it started (a joint without end stops, or "
                        "one the torque limit cannot hold? see --auto-max-travel)"
                    )
            report(
                f"  {t.joint}: searching the {sign} end stop  now "
                f"{t.joint_position(state.position):+8.4f}  effort {state.effort or 0.0:+.2f}"
                f"{_resting(still_since is not None, stalled)}"
            )

    async def _advance(
        self, t: Transmission, ramp: _Ramp, bound: float, deadline: float
    ) -> DeviceState:
        """One tick of the ramp toward `bound`, or at the end of its device's range."""
        if ramp.refusal is not None:
            return await self._tick(t, ramp, ramp.position, deadline)
        accepted = ramp.position
        try:
            return await self._tick(t, ramp, ramp.step(self.current.period_s, bound), deadline)
        except UnsupportedCommandError as exc:
            return await self._edge(t, ramp, accepted, str(exc), deadline)

    async def _edge(
        self, t: Transmission, ramp: _Ramp, accepted: float, refusal: str, deadline: float
    ) -> DeviceState:
        """The device refused the ramp's command (`refusal`), beyond `accepted`: the ramp stops
        at the last command it accepts, to within `EDGE`, halving the step (a refused write sends
        nothing); its `refusal` becomes the device's last. The state after that command."""
        refused, ramp.position, ramp.velocity = ramp.position, accepted, 0.0
        state = await self._tick(t, ramp, accepted, deadline)  # accepted before: raises if not
        while abs(refused - accepted) > EDGE:
            middle = (accepted + refused) / 2.0
            try:
                state = await self._tick(t, ramp, middle, deadline)
            except UnsupportedCommandError as exc:
                refused, refusal = middle, str(exc)
            else:
                accepted = ramp.position = middle
        ramp.refusal = refusal
        return state

    async def _move(self, t: Transmission, target: float, deadline: float, report: Report) -> None:
        """Ramp the joint to `target` (motor units) and wait there until it follows."""
        s = self.current
        key = (t.driver, t.device)
        scale = abs(t.scale)
        position = self.hold[key]
        direction = 1.0 if target >= position else -1.0
        ramp = _Ramp(position, direction, s.speed * scale, s.acceleration * scale)
        while True:
            state = await self._tick(t, ramp, ramp.step(s.period_s, target), deadline)
            report(f"  {t.joint}: moving  now {t.joint_position(state.position):+8.4f}")
            close = abs(state.position - target) <= SETTLED
            if ramp.position == target and close and abs(state.velocity) <= STILL * ramp.speed:
                self.hold[key] = target
                return

    async def _tick(
        self, t: Transmission, ramp: _Ramp, command: float, deadline: float
    ) -> DeviceState:
        """Write `command` (with the ramp's velocity) to `t`'s device and the holds to the others,
        wait a period, read."""
        key = (t.driver, t.device)
        commands = {k: DeviceCommand(p) for k, p in self.hold.items()}
        commands[key] = DeviceCommand(command, ramp.direction * ramp.velocity)
        for name, driver in self.drivers.items():
            mine = {dev: c for (drv, dev), c in commands.items() if drv == name}
            async with asyncio.timeout(READ_TIMEOUT_S):
                await driver.write(mine)
        await self.sleep(self.current.period_s)
        if self.clock() > deadline:
            raise EndStopError(
                f"joint {t.joint!r}: its end stops were not found within "
                f"{self.current.timeout_s:g} s (--auto-timeout)"
            )
        states = await self.read()
        for (drv, dev), other in states.items():
            if other.fault is not None:  # a held joint's device too: stop everything
                raise EndStopError(
                    f"while searching joint {t.joint!r}: device {drv}/{dev}: {other.fault.message}"
                )
        state = states.get(key)
        age = None if state is None else self.drivers[t.driver].clock() - state.timestamp
        if state is None or age is None or age > STALE_S:
            raise EndStopError(
                f"joint {t.joint!r}: device {t.driver}/{t.device} does not answer (no reading "
                f"for more than {STALE_S:g} s)"
            )
        if not state.enabled:
            raise EndStopError(f"joint {t.joint!r}: device {t.driver}/{t.device} left closed loop")
        return state


def _range_end(t: Transmission, sign: str, position: float, refusal: str | None) -> str:
    return (
        f"joint {t.joint!r}: no end stop in the {sign} direction before the end of its device's "
        f"range ({refusal}): the end of travel is recorded there, at "
        f"{t.joint_position(position):+.4f} (uncalibrated)"
    )


def _resting(still: bool, stalled: bool) -> str:
    """The live line's word for a joint that stopped moving."""
    if not still:
        return ""
    return "  stalled" if stalled else "  at the end of its device's range"
