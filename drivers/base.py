"""The driver interface: one `Driver` owns one bus (a CAN channel, a serial port, the simulation)
and serves the devices on it.

Lifecycle (as in ros2_control's hardware components)::

    CLOSED --open()--> OPEN --enable()--> ENABLED --disable()--> OPEN --close()--> CLOSED

- OPEN: communication is up and `read()` works; `write()` is refused.
- ENABLED: devices are powered / in closed loop and follow `write()` commands.
- `close()` is idempotent and always safe: it disables what it can and releases the bus.

Backends implement the protected hooks (`_open`, `_enable`, `_disable`, `_close`, `_read`,
`_write`, `_clear_faults`); the public methods here check the lifecycle, so every backend behaves
the same way. Positions and velocities are SI at the motor shaft (rad, rad/s; m, m/s for linear
devices); device units only appear inside the protocol modules.

Feedback freshness: `read()` returns, for every device that has answered at least once, its latest
valid reading with the time it was taken (`DeviceState.timestamp`, from the driver's clock). A reply
that is missing, late, corrupt or malformed never produces a made-up position: the device keeps its
previous reading (and its old timestamp), the problem is counted in `DriverStats`, and the caller
judges staleness from the timestamp.
"""

from __future__ import annotations

import abc
import enum
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

from pydantic import BaseModel, ConfigDict

from drivers.errors import DriverError, DriverStateError, UnsupportedCommandError

__all__ = [
    "CONFIG_DIR",
    "Clock",
    "DeviceCommand",
    "DeviceFault",
    "DeviceState",
    "Driver",
    "DriverParams",
    "DriverStats",
    "Lifecycle",
    "LoopContext",
    "check_distinct",
    "config_dir",
]

_log = logging.getLogger(__name__)

Clock = Callable[[], float]
"""A monotonic clock in seconds; injected so tests and simulations can run faster than real time."""


class Lifecycle(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    ENABLED = "enabled"


@dataclass(frozen=True, slots=True)
class DeviceFault:
    """A fault reported by a device: its protocol's code and a readable message."""

    code: int
    message: str


@dataclass(frozen=True, slots=True)
class DeviceState:
    """One device's latest valid reading.

    position: rad (or m), velocity: rad/s (or m/s), at the motor shaft.
    timestamp: the driver clock's time when the reading was received, in s.
    fault: the device's active fault, or None.
    enabled: whether the device reports being in closed-loop control.
    effort: the device's measured effort, when it reports one, else None. Its meaning is the
        driver's: for Feetech servos (`feetech`), the signed load as a fraction of the stall
        torque (Present_Load; -1..1, bounded by the configured torque limit); for MIT-mode
        actuators (`mit`), the torque the actuator reports, N·m at the motor shaft; for CiA 402
        drives (`cia402`), the actual torque, N·m at the motor shaft (`Driver.torque_effort`); for
        the physics-simulated arm (`mujoco`), the torque its actuator applies, N·m at the joint.
    """

    position: float
    velocity: float
    timestamp: float
    fault: DeviceFault | None = None
    enabled: bool = False
    effort: float | None = None


@dataclass(frozen=True, slots=True)
class DeviceCommand:
    """A position setpoint, a velocity feed-forward and a torque feed-forward at the motor shaft
    (rad, rad/s, N·m; m, m/s, N for linear devices). Drivers whose devices take a torque
    feed-forward (`Driver.torque_feedforward`) put `torque` on the wire, bounded by the device's
    torque limit; the others ignore it (the config refuses gravity compensation for them)."""

    position: float
    velocity: float = 0.0
    torque: float = 0.0


@dataclass(slots=True)
class DriverStats:
    """Counters a driver keeps; read by the daemon for health reports and tests."""

    reads: int = 0
    writes: int = 0
    timeouts: int = 0
    corrupt_replies: int = 0
    missing_replies: int = 0
    io_errors: int = 0
    last_error: str | None = None
    per_device_errors: dict[str, int] = field(default_factory=dict)

    def count_error(self, device: str | None, kind: str, message: str) -> None:
        """Count one communication problem of `kind` (a counter name) and remember its message."""
        setattr(self, kind, getattr(self, kind) + 1)
        self.last_error = message
        if device is not None:
            self.per_device_errors[device] = self.per_device_errors.get(device, 0) + 1


@dataclass(frozen=True, slots=True)
class LoopContext:
    """What the control loop decides that some drives are configured with.

    period_s: the loop's period, s.
    position_limits: device name → (lower, upper) position limits at the motor shaft (rad, or m),
        the joint's limits through its transmission (ordered: a negative sign swaps them); only
        devices that drive a joint.
    """

    period_s: float
    position_limits: Mapping[str, tuple[float, float]]


CONFIG_DIR = "config_dir"
"""The key of the config file's folder (a `Path` or a str) in the validation context of a
driver's params (``Params.model_validate(raw, context={CONFIG_DIR: folder})``): a relative path in
the params starts there, as every path in an armd config does."""


def config_dir(context: object) -> Path | None:
    """The config file's folder in a validation context, or None (none given)."""
    folder = context.get(CONFIG_DIR) if isinstance(context, dict) else None
    return None if folder is None else Path(folder).expanduser()


class DriverParams(BaseModel):
    """Base of every driver's parameter model: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_distinct(ids: Mapping[str, int], what: str) -> None:
    """For a parameter model's validator: raises ValueError naming two devices (keys of `ids`)
    with the same bus address (`what`: its name, e.g. ``id``)."""
    seen: dict[int, str] = {}
    for name, device_id in ids.items():
        if device_id in seen:
            raise ValueError(f"devices {seen[device_id]!r} and {name!r}: same {what} {device_id}")
        seen[device_id] = name


class Driver(abc.ABC):
    """One bus and the devices on it. Use as ``async with driver: ...`` (open on entry, close on
    exit) or call the lifecycle methods explicitly.

    Subclasses set `Params` (a `DriverParams` model describing their configuration, including their
    devices keyed by device name) and implement the protected hooks.
    """

    Params: ClassVar[type[DriverParams]]
    torque_feedforward: ClassVar[bool] = False
    """Whether `DeviceCommand.torque` reaches the devices (gravity compensation needs it)."""
    torque_effort: ClassVar[bool] = False
    """Whether `DeviceState.effort` is the device's torque, N·m at the motor shaft (contact
    detection needs it)."""

    def __init__(self, params: DriverParams, *, clock: Clock = time.monotonic) -> None:
        self.params = params
        self.clock = clock
        self.stats = DriverStats()
        self._lifecycle = Lifecycle.CLOSED
        self._known_devices: frozenset[str] | None = None  # device_names, for `write`

    # -- what the daemon calls ------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def device_names(self) -> tuple[str, ...]:
        """The names of the devices this driver serves, in configuration order."""

    @classmethod
    def with_loop(cls, params: DriverParams, loop: LoopContext) -> DriverParams:
        """`params` completed with what the control loop decides (its period, the devices'
        position limits at the motor), for drivers that program them into their devices; called
        once per driver by the daemon's wiring before construction. Default: `params` unchanged.
        Raises `DriverConfigError` when the drives cannot take them."""
        return params

    @property
    def lifecycle(self) -> Lifecycle:
        return self._lifecycle

    @property
    def slow_enable_s(self) -> float | None:
        """How long the next `enable()` may take when it is more than a usual exchange with the
        devices (a homing routine still to run), s; None: no longer than usual."""
        return None

    async def open(self) -> None:
        """Bring communication up. Raises `DriverOpenError` when the bus cannot be opened."""
        if self._lifecycle is not Lifecycle.CLOSED:
            return
        await self._open()
        self._lifecycle = Lifecycle.OPEN

    async def enable(self) -> None:
        """Put every device into closed-loop control, holding its current position.

        Raises `DeviceFaultError` when a device refuses because of an active fault.
        """
        self._require(Lifecycle.OPEN, Lifecycle.ENABLED, action="enable")
        if self._lifecycle is Lifecycle.ENABLED:
            return
        await self._enable()
        self._lifecycle = Lifecycle.ENABLED

    async def disable(self) -> None:
        """Leave closed-loop control (devices idle / torque off). Safe to call when not enabled."""
        if self._lifecycle is not Lifecycle.ENABLED:
            return
        self._lifecycle = Lifecycle.OPEN
        await self._disable()

    async def close(self) -> None:
        """Disable (best effort) and release the bus. Idempotent; never raises `DriverError`: a
        backend's failure to disable or release is logged and kept in `stats.last_error`."""
        if self._lifecycle is Lifecycle.CLOSED:
            return
        try:
            if self._lifecycle is Lifecycle.ENABLED:
                self._lifecycle = Lifecycle.OPEN
                await self._disable()
        except DriverError as exc:
            self._note_close_failure("disable", exc)
        finally:
            self._lifecycle = Lifecycle.CLOSED
            try:
                await self._close()
            except DriverError as exc:
                self._note_close_failure("release the bus", exc)

    async def read(self) -> Mapping[str, DeviceState]:
        """One batched transaction: the latest valid state of every device that has answered."""
        self._require(Lifecycle.OPEN, Lifecycle.ENABLED, action="read")
        states = await self._read()
        self.stats.reads += 1
        return states

    async def write(self, commands: Mapping[str, DeviceCommand]) -> None:
        """One batched transaction sending a command to each named device.

        Feeds the device-side watchdogs, which is why it must be called from the control loop.
        Raises `DriverStateError` unless enabled, or when a command names an unknown device, and
        `UnsupportedCommandError` when a position or velocity is NaN or infinite (nothing is sent).
        """
        self._require(Lifecycle.ENABLED, action="write")
        if self._known_devices is None:
            self._known_devices = frozenset(self.device_names)
        unknown = sorted(commands.keys() - self._known_devices)
        if unknown:
            known = self.device_names
            raise DriverStateError(f"write: unknown device(s) {unknown}; known: {known}")
        for name, command in commands.items():
            if not (math.isfinite(command.position) and math.isfinite(command.velocity)):
                raise UnsupportedCommandError(
                    f"write: device {name!r}: position {command.position} rad, velocity "
                    f"{command.velocity} rad/s; both must be finite"
                )
        await self._write(commands)
        self.stats.writes += 1

    async def clear_faults(self) -> None:
        """Clear latched device faults (after the cause is gone). Requires OPEN, not ENABLED."""
        self._require(Lifecycle.OPEN, action="clear faults")
        await self._clear_faults()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _note_close_failure(self, step: str, exc: DriverError) -> None:
        message = f"{type(self).__name__}: close: cannot {step}: {exc}"
        self.stats.last_error = message
        _log.warning("%s", message)

    def _require(self, *allowed: Lifecycle, action: str) -> None:
        if self._lifecycle not in allowed:
            wanted = " or ".join(state.value for state in allowed)
            raise DriverStateError(
                f"{type(self).__name__}: cannot {action} while {self._lifecycle.value}; "
                f"must be {wanted}"
            )

    # -- what a backend implements --------------------------------------------------------------

    @abc.abstractmethod
    async def _open(self) -> None: ...

    @abc.abstractmethod
    async def _enable(self) -> None: ...

    @abc.abstractmethod
    async def _disable(self) -> None: ...

    @abc.abstractmethod
    async def _close(self) -> None: ...

    @abc.abstractmethod
    async def _read(self) -> Mapping[str, DeviceState]: ...

    @abc.abstractmethod
    async def _write(self, commands: Mapping[str, DeviceCommand]) -> None: ...

    @abc.abstractmethod
    async def _clear_faults(self) -> None: ...
