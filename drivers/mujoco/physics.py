"""Stepping the scene: the actuators' laws, the latest state as an immutable snapshot, and the
real-time thread that steps it against a clock.

The actuator law, per device (N·m, rad, rad/s)::

    τ = clamp(kp·(p* - q) + kd·(v* - q̇) + τff, ±torque_limit)     enabled
    τ = 0                                                          torque off

A servo has v* = 0 and τff = 0 (its loop damps the measured velocity); an MIT actuator takes both
from its commands. MuJoCo applies it at every step as an affine actuator (`drivers.mujoco.scene`):
``τ = ctrl - kp·q - kd·q̇``, clamped, with ``ctrl = kp·p* + kd·v* + τff`` set once per command, so
that a step runs in MuJoCo (`mj_step` releases the interpreter lock). With torque off, the
actuators' gain and bias are zero and a device's `brake_torque` adds to its joint's friction.

The effort a device reports is its torque through a first-order low-pass filter of time constant
`effort_filter_s`, as a drive measures its load: a servo's setpoint jumps at each command (4 ms
at 250 Hz) and its torque with it (± kp × the step), a ripple a load reading averages out.

Threads: `Physics.step` runs in one thread at a time (the real-time thread, or a test's
`advance`). Commands arrive as a whole new `Targets` and the state leaves as a whole new
`Snapshot`: both are replaced by one reference assignment, so readers and writers never lock.
A batch of steps applies the targets current when it starts.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass

import mujoco
import numpy as np
from numpy.typing import NDArray

from drivers.base import Clock
from drivers.mujoco.params import FeedForward, MujocoParams
from drivers.mujoco.scene import Scene
from drivers.mujoco.touches import TouchLog

__all__ = ["Physics", "RealTimeRunner", "Snapshot", "Targets"]

_log = logging.getLogger(__name__)
Array = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Targets:
    """What the actuators follow, per device (`Scene.device_names` order): position p* (rad),
    velocity v* (rad/s), torque feed-forward τff (N·m), whether torque is on, and the actuators'
    control input they make (kp·p* + kd·v* + τff, N·m)."""

    position: Array
    velocity: Array
    torque: Array
    enabled: bool
    ctrl: Array


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The state after a step. `time_s`: simulated time; `stamp`: the driver clock's time it
    corresponds to, s. Per device: `position` (rad), `velocity` (rad/s), `effort` (N·m along the
    joint's axis). `qpos`: the whole model's positions; `object_positions`: each object's centre
    in the root frame (m), by object order."""

    time_s: float
    stamp: float
    position: Array
    velocity: Array
    effort: Array
    enabled: bool
    qpos: Array
    object_positions: Array


class Physics:
    """The scene's data, its actuators and its clock mapping (`origin`: the clock time of
    simulated time 0)."""

    def __init__(self, scene: Scene, params: MujocoParams, origin: float) -> None:
        self.scene = scene
        self.model = scene.model
        self.data = mujoco.MjData(scene.model)
        self.origin = origin
        devices = [params.devices[name] for name in scene.device_names]
        self._kp = np.array([d.kp for d in devices])
        self._kd = np.array([d.kd for d in devices])
        dt = self.timestep_s
        self._blend = np.array(
            [
                1.0 - math.exp(-dt / d.effort_filter_s) if d.effort_filter_s > 0 else 1.0
                for d in devices
            ]
        )
        self._effort = np.zeros(len(devices))
        self._gravity_ff = np.array([d.torque_feedforward is FeedForward.GRAVITY for d in devices])
        friction = np.array([d.friction for d in devices])
        self._friction = {True: friction, False: friction + [d.brake_torque for d in devices]}
        self.touch_log = TouchLog(scene.geom_owners, scene.arm_geoms)
        self._scratch = mujoco.MjData(scene.model)  # for gravity torques, off the stepping data
        self._gravity_out = np.zeros(scene.model.nv)
        self.data.qpos[scene.qpos_adr] = [d.initial_position for d in devices]
        mujoco.mj_forward(self.model, self.data)
        self._torque_on: bool | None = None
        self._applied: Targets | None = None
        zeros = np.zeros(len(devices))
        position = self.data.qpos[scene.qpos_adr].copy()
        self.targets = Targets(position, zeros, zeros, False, zeros)
        self._set_torque(False)
        self.snapshot = self._snapshot()

    @property
    def timestep_s(self) -> float:
        return float(self.model.opt.timestep)

    @property
    def time_s(self) -> float:
        return float(self.data.time)

    def step(self, count: int) -> Snapshot:
        """Run `count` physics steps under the current targets; publish and return the state."""
        targets = self.targets
        if targets is not self._applied:
            if targets.enabled is not self._torque_on:
                self._set_torque(targets.enabled)
            self.data.ctrl[self.scene.actuator_ids] = targets.ctrl
            self._applied = targets
        d, force, effort, blend = self.data, self.data.actuator_force, self._effort, self._blend
        ids, touches, sensor = self.scene.actuator_ids, self.touch_log, self.scene.touch_sensor
        for _ in range(count):
            mujoco.mj_step(self.model, d)
            effort += blend * (force[ids] - effort)
            if d.sensordata[sensor] > 0.0 or touches.touching:
                touches.check(d, self.origin + float(d.time))
        self.snapshot = self._snapshot()
        return self.snapshot

    def gravity_torques(self, position: Array) -> Array:
        """The gravity torque of each device's joint (N·m, the torque that holds the arm still:
        g(q) of τ = M(q)·q̈ + c(q, q̇) + g(q)) with the devices at `position` (rad) and every other
        joint where it is now. Only the URDF's links count, not what the arm holds."""
        scratch, scene = self._scratch, self.scene
        scratch.qpos[:] = self.snapshot.qpos
        scratch.qpos[scene.qpos_adr] = position
        mujoco.mj_kinematics(self.model, scratch)
        mujoco.mj_comPos(self.model, scratch)
        mujoco.mj_rne(self.model, scratch, 0, self._gravity_out)  # q̇ = 0: gravity alone
        return self._gravity_out[scene.dof_adr].copy()

    def command(self, position: Array, velocity: Array, torque: Array, enabled: bool) -> None:
        """Replace the targets: position, velocity and torque feed-forward per device (rad,
        rad/s, N·m). Servos ignore the velocity and the torque; MIT devices whose feed-forward is
        `gravity` get g(q) at the commanded positions instead of `torque`."""
        mit = self.scene.is_mit
        velocity = np.where(mit, velocity, 0.0)
        torque = np.where(mit, torque, 0.0)
        if enabled and self._gravity_ff.any():
            torque = np.where(self._gravity_ff, self.gravity_torques(position), torque)
        ctrl = self._kp * position + self._kd * velocity + torque
        self.targets = Targets(position, velocity, torque, enabled, ctrl)

    def _set_torque(self, on: bool) -> None:
        """Torque on: the actuators' law; off: no force, and the brakes."""
        self._torque_on = on
        m, ids = self.model, self.scene.actuator_ids
        m.actuator_gainprm[ids, 0] = 1.0 if on else 0.0
        m.actuator_biasprm[ids, 1] = -self._kp if on else 0.0
        m.actuator_biasprm[ids, 2] = -self._kd if on else 0.0
        m.dof_frictionloss[self.scene.dof_adr] = self._friction[on]
        if not on:
            self._effort[:] = 0.0

    def _snapshot(self) -> Snapshot:
        d, scene = self.data, self.scene
        bodies = list(scene.object_bodies.values())
        return Snapshot(
            time_s=float(d.time),
            stamp=self.origin + float(d.time),
            position=d.qpos[scene.qpos_adr].copy(),
            velocity=d.qvel[scene.dof_adr].copy(),
            effort=self._effort.copy(),
            enabled=self._torque_on is True,
            qpos=d.qpos.copy(),
            object_positions=d.xpos[bodies].copy(),
        )


class RealTimeRunner:
    """Steps `physics` in its own thread so that simulated time follows `clock`.

    It wakes at each step's deadline and runs the steps due; behind by more than `max_lag_s`
    (the machine stalled it), it skips the excess rather than run faster than real time, and
    counts it in `skipped_steps` (the snapshot's stamp stays on the clock).
    """

    def __init__(self, physics: Physics, clock: Clock, max_lag_s: float) -> None:
        self.physics = physics
        self.clock = clock
        self.max_steps = max(1, math.ceil(max_lag_s / physics.timestep_s))
        self.skipped_steps = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start stepping from now: simulated time continues where it stopped."""
        if self.running:
            return
        self.physics.origin = self.clock() - self.physics.time_s
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="armd-mujoco", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop stepping and wait for the thread to end."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        physics, dt = self.physics, self.physics.timestep_s
        try:
            while not self._stop.is_set():
                behind_s = self.clock() - physics.origin - physics.time_s
                due = math.floor(behind_s / dt + 1e-9)
                if due > self.max_steps:
                    self.skipped_steps += due - self.max_steps
                    physics.origin += (due - self.max_steps) * dt
                    due = self.max_steps
                if due > 0:
                    physics.step(due)
                wait_s = physics.origin + physics.time_s + dt - self.clock()
                if wait_s > 0.0:
                    self._stop.wait(wait_s)
        except Exception as exc:  # the thread's boundary: kept for `read()` to raise
            _log.exception("mujoco: the physics thread stopped")
            self.error = exc
