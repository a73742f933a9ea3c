"""The `mujoco` driver: the arm simulated with contacts, gravity and its actuators' own laws, behind
the same `Driver` interface as a real bus.

The physics runs at its own rate (`timestep_s`, ≥ 1 kHz), never in the control loop's tick:
`read()` returns the latest state with the clock time it stands for, `write()` replaces the
targets the actuators follow from the next physics step on. In production a thread steps it in
real time from `open()` to `close()` (`RealTimeRunner`); tests construct the driver with
``realtime=False`` and step it with `advance()`, so nothing depends on timing::

    driver = MujocoDriver(MujocoDriver.Params.model_validate(params), realtime=False)
    async with driver:
        await driver.enable()
        await driver.write({"elbow_flex": DeviceCommand(0.5)})
        driver.advance(1.0)                      # one simulated second
        state = (await driver.read())["elbow_flex"]

Efforts are the torque each actuator applies, N·m at the joint, positive along the joint's axis
(a servo's load reading, an MIT actuator's torque); at rest they balance gravity and contacts.
Positions are the joints' (rad, or m): configure the joints with gear ratio 1 and sign 1.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np
from pydantic import model_validator

from drivers.base import Clock, DeviceCommand, DeviceState, Driver, DriverParams
from drivers.errors import DriverConfigError, DriverIOError, DriverStateError
from drivers.mujoco.params import MujocoParams
from drivers.mujoco.physics import Physics, RealTimeRunner, Snapshot
from drivers.mujoco.scene import Scene, build_scene
from drivers.mujoco.touches import Touch

__all__ = ["MujocoDriver", "MujocoDriverParams"]


class MujocoDriverParams(MujocoParams):
    """`MujocoParams` whose model is built once when they are validated, so that a URDF element,
    link or joint at fault is named when the config is read (``armd check``), not when the
    daemon starts."""

    @model_validator(mode="after")
    def _builds(self) -> Self:
        try:
            build_scene(self)
        except DriverConfigError as exc:
            raise ValueError(str(exc).removeprefix("mujoco: ")) from None
        return self


class MujocoDriver(Driver):
    """A physics-simulated arm. The scene lives as long as the driver: closing and reopening it
    finds the arm and the objects where they were (simulated time pauses while closed)."""

    Params: ClassVar[type[MujocoParams]] = MujocoDriverParams
    params: MujocoParams
    torque_feedforward: ClassVar[bool] = True
    torque_effort: ClassVar[bool] = True  # the torque the actuator applies
    """The MIT devices apply a command's torque feed-forward (`FeedForward.COMMAND`)."""

    def __init__(
        self, params: DriverParams, *, clock: Clock = time.monotonic, realtime: bool = True
    ) -> None:
        """Build the scene from `params` (a `MujocoDriver.Params`). `realtime`: a thread steps
        the physics against `clock` while open; False: only `advance()` does. Raises
        `DriverConfigError` for other parameter types or a model that does not build."""
        if not isinstance(params, MujocoParams):
            raise DriverConfigError(
                f"MujocoDriver needs MujocoDriver.Params, got {type(params).__name__}"
            )
        super().__init__(params, clock=clock)
        self.params = params
        self.scene: Scene = build_scene(params)
        self.physics = Physics(self.scene, params, origin=clock())
        self._runner = RealTimeRunner(self.physics, clock, params.max_lag_s) if realtime else None
        self._index = {name: i for i, name in enumerate(self.scene.device_names)}

    @property
    def device_names(self) -> tuple[str, ...]:
        return self.scene.device_names

    @property
    def stepping(self) -> bool:
        """Whether the real-time thread is stepping the physics (open, and not stopped by an
        error, which `read()` and `write()` then raise)."""
        return self._runner is not None and self._runner.running

    @property
    def skipped_steps(self) -> int:
        """Physics steps skipped because the real-time thread fell more than `max_lag_s` behind."""
        return 0 if self._runner is None else self._runner.skipped_steps

    def advance(self, seconds: float) -> Snapshot:
        """Step the physics by `seconds` of simulated time (rounded to whole steps) in the
        calling thread; the state after it. Only without the real-time thread. Raises
        `DriverStateError` with it, `DriverConfigError` for a negative or non-finite time."""
        if self._runner is not None:
            raise DriverStateError("mujoco: advance(): the real-time thread steps this driver")
        if not (np.isfinite(seconds) and seconds >= 0.0):
            raise DriverConfigError(f"mujoco: advance(): {seconds} s must be finite and >= 0")
        return self.physics.step(round(seconds / self.physics.timestep_s))

    def object_position(self, name: str) -> tuple[float, float, float]:
        """Object `name`'s centre in the root frame, m, at the latest state. Raises
        `DriverConfigError` for an unknown object."""
        names = list(self.scene.object_bodies)
        if name not in names:
            raise DriverConfigError(f"mujoco: no object {name!r}; objects: {names}")
        x, y, z = self.physics.snapshot.object_positions[names.index(name)]
        return float(x), float(y), float(z)

    def touches(self) -> tuple[Touch, ...]:
        """The latest touches of the arm (`drivers.mujoco.touches`, oldest first): each time one
        of its links began to touch an object, the table or another link, stamped on the
        driver's clock. Each is also logged at INFO (``mujoco: <link> touches <other> at ...``)."""
        return self.physics.touch_log.touches

    def gravity_torques(self) -> dict[str, float]:
        """Each device's gravity torque at the latest measured positions, N·m (the arm's URDF
        links only): what a torque feed-forward for gravity would be."""
        snapshot = self.physics.snapshot
        torques = self.physics.gravity_torques(snapshot.position)
        return dict(zip(self.scene.device_names, torques.tolist(), strict=True))

    # -- lifecycle hooks --------------------------------------------------------------------------

    async def _open(self) -> None:
        if self._runner is not None:
            self._runner.error = None
            self._runner.start()

    async def _enable(self) -> None:
        self._check_runner("enable")
        position = self.physics.snapshot.position.copy()
        zeros = np.zeros_like(position)
        self.physics.command(position, zeros, zeros, True)

    async def _disable(self) -> None:
        targets = self.physics.targets
        self.physics.command(targets.position, targets.velocity, targets.torque, False)

    async def _close(self) -> None:
        if self._runner is not None:
            self._runner.stop()

    async def _clear_faults(self) -> None:
        """The simulated actuators latch no faults."""

    # -- cyclic I/O -------------------------------------------------------------------------------

    async def _read(self) -> Mapping[str, DeviceState]:
        self._check_runner("read")
        s = self.physics.snapshot
        return {
            name: DeviceState(
                position=float(s.position[i]),
                velocity=float(s.velocity[i]),
                timestamp=s.stamp,
                enabled=s.enabled,
                effort=float(s.effort[i]),
            )
            for name, i in self._index.items()
        }

    async def _write(self, commands: Mapping[str, DeviceCommand]) -> None:
        self._check_runner("write")
        targets = self.physics.targets
        position, velocity = targets.position.copy(), targets.velocity.copy()
        torque = targets.torque.copy()
        for name, command in commands.items():
            i = self._index[name]
            position[i], velocity[i] = command.position, command.velocity
            # The daemon's torque feed-forward (gravity compensation), N·m at the joint: the
            # devices are the joints (gear ratio 1, sign 1).
            torque[i] = command.torque
        self.physics.command(position, velocity, torque, True)

    def _check_runner(self, action: str) -> None:
        """A physics thread that died makes the driver fail like a bus that went away."""
        runner = self._runner
        if runner is not None and runner.error is not None:
            raise DriverIOError(
                f"mujoco: cannot {action}: the physics thread stopped: {runner.error}"
            ) from runner.error
