"""Joint space ↔ motor space: the gearing between each joint and the device that drives it.

The convention, for one joint (`Transmission`)::

    motor_position = sign * gear_ratio * (joint_position - offset)
    motor_velocity = sign * gear_ratio * joint_velocity
    motor_torque   = sign * joint_torque / gear_ratio    (the same power on both sides)

- joint side: rad (revolute) or m (prismatic), the model's joint coordinate (``q``);
- motor side: what the driver reports and accepts, at the motor shaft (rad, or m for linear
  devices), see `drivers.base`;
- `gear_ratio` > 0: motor turns per joint turn (a 50:1 gearbox is 50);
- `sign` (1 or -1): -1 when the motor turns the opposite way to the model's joint axis;
- `offset`: the joint position (joint side) at which the motor reads 0.

`ArmTransmission` applies the transmissions of a whole arm at once: numpy arrays in ``q`` order
(`tree.joint_names`) on the joint side, arrays in driven-joint order or per-(driver, device)
mappings on the motor side. Joints held by the config's ``fixed_joints`` have no device: they read
as their fixed position and are never commanded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from armd.errors import ArmdError
from drivers import DeviceCommand

__all__ = ["ArmTransmission", "Transmission"]

Array = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Transmission:
    """How one joint is driven: by `device` of `driver`, through `gear_ratio`, `sign`, `offset`
    (see the module docstring for the convention and units)."""

    joint: str
    driver: str
    device: str
    gear_ratio: float = 1.0
    sign: Literal[1, -1] = 1
    offset: float = 0.0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.gear_ratio) and self.gear_ratio > 0.0):
            raise ArmdError(f"joint {self.joint!r}: gear_ratio {self.gear_ratio} must be > 0")
        if self.sign not in (1, -1):
            raise ArmdError(f"joint {self.joint!r}: sign {self.sign} must be 1 or -1")
        if not np.isfinite(self.offset):
            raise ArmdError(f"joint {self.joint!r}: offset {self.offset} must be finite")

    @property
    def scale(self) -> float:
        """Motor units per joint unit: ``sign * gear_ratio``."""
        return self.sign * self.gear_ratio

    def motor_position(self, joint_position: float) -> float:
        return self.scale * (joint_position - self.offset)

    def joint_position(self, motor_position: float) -> float:
        return motor_position / self.scale + self.offset

    def motor_velocity(self, joint_velocity: float) -> float:
        return self.scale * joint_velocity

    def joint_velocity(self, motor_velocity: float) -> float:
        return motor_velocity / self.scale


def _floats(values: Sequence[float]) -> Array:
    arr = np.array(values, dtype=np.float64)
    arr.flags.writeable = False
    return arr


def _indices(values: Sequence[int]) -> NDArray[np.intp]:
    arr = np.array(values, dtype=np.intp)
    arr.flags.writeable = False
    return arr


class ArmTransmission:
    """The transmissions of every driven joint of an arm, vectorised.

    joint_names: the model's joints in ``q`` order (length dof).
    joints: the driven joints' `Transmission`s, in ``q`` order (length n ≤ dof).
    driven: (n,) indices of the driven joints in ``q``.
    fixed: (dof - n,) indices of the fixed joints in ``q``, held at `fixed_positions`.

    Raises `ArmdError` when a joint is both driven and fixed, neither, or unknown, or when two
    joints share a device.
    """

    __slots__ = (
        "_offset",
        "_scale",
        "devices",
        "driven",
        "fixed",
        "fixed_positions",
        "joint_names",
        "joints",
    )

    def __init__(
        self,
        joint_names: Sequence[str],
        transmissions: Sequence[Transmission],
        fixed_positions: Mapping[str, float] | None = None,
    ) -> None:
        fixed_positions = dict(fixed_positions or {})
        self.joint_names: tuple[str, ...] = tuple(joint_names)
        by_joint = {t.joint: t for t in transmissions}
        self._validate(by_joint, fixed_positions, len(transmissions))
        self.joints: tuple[Transmission, ...] = tuple(
            by_joint[name] for name in self.joint_names if name in by_joint
        )
        index = {name: i for i, name in enumerate(self.joint_names)}
        self.driven = _indices([index[t.joint] for t in self.joints])
        fixed = [name for name in self.joint_names if name not in by_joint]
        self.fixed = _indices([index[name] for name in fixed])
        self.fixed_positions = _floats([fixed_positions[name] for name in fixed])
        self._scale = _floats([t.scale for t in self.joints])
        self._offset = _floats([t.offset for t in self.joints])
        self.devices: tuple[tuple[str, str], ...] = tuple((t.driver, t.device) for t in self.joints)

    def _validate(
        self, by_joint: Mapping[str, Transmission], fixed: Mapping[str, float], count: int
    ) -> None:
        if len(by_joint) != count:
            raise ArmdError("a joint has more than one transmission")
        known = set(self.joint_names)
        unknown = sorted((set(by_joint) | set(fixed)) - known)
        both = sorted(set(by_joint) & set(fixed))
        neither = sorted(known - set(by_joint) - set(fixed))
        keys = [(t.driver, t.device) for t in by_joint.values()]
        problems = [
            f"unknown joints {unknown}; joints: {list(self.joint_names)}" if unknown else "",
            f"joints {both} are both driven and fixed" if both else "",
            f"joints {neither} are neither driven nor fixed" if neither else "",
            "two joints share a (driver, device)" if len(set(keys)) != len(keys) else "",
        ]
        if any(problems):
            raise ArmdError("; ".join(p for p in problems if p))

    def __len__(self) -> int:
        """The number of driven joints."""
        return len(self.joints)

    # -- arrays: joint side in q order (dof,), motor side in driven order (n,) --------------------

    def motor_positions(self, q: ArrayLike) -> Array:
        """Motor positions (n,) of the driven joints for the joint vector `q` (dof,)."""
        return self._scale * (np.asarray(q, dtype=np.float64)[self.driven] - self._offset)

    def motor_velocities(self, qd: ArrayLike) -> Array:
        """Motor velocities (n,) for the joint velocities `qd` (dof,)."""
        return self._scale * np.asarray(qd, dtype=np.float64)[self.driven]

    def joint_positions(self, motor: ArrayLike) -> Array:
        """The joint vector (dof,) for motor positions (n,); fixed joints at their positions."""
        q = np.empty(len(self.joint_names))
        q[self.driven] = np.asarray(motor, dtype=np.float64) / self._scale + self._offset
        q[self.fixed] = self.fixed_positions
        return q

    def joint_velocities(self, motor_velocity: ArrayLike) -> Array:
        """Joint velocities (dof,) for motor velocities (n,); fixed joints at 0."""
        qd = np.zeros(len(self.joint_names))
        qd[self.driven] = np.asarray(motor_velocity, dtype=np.float64) / self._scale
        return qd

    # -- per-(driver, device) mappings, as the drivers speak ---------------------------------------

    def by_device(self, motor_values: ArrayLike) -> dict[str, dict[str, float]]:
        """Motor-side values (n,) as ``{driver: {device: value}}``."""
        out: dict[str, dict[str, float]] = {}
        for (driver, device), value in zip(self.devices, np.asarray(motor_values), strict=True):
            out.setdefault(driver, {})[device] = float(value)
        return out

    def from_devices(self, values: Mapping[str, Mapping[str, float]]) -> Array:
        """Motor-side values (n,) in driven order from ``{driver: {device: value}}``.

        Raises `ArmdError` naming the joints whose device has no value.
        """
        out = np.empty(len(self.joints))
        missing = []
        for i, (driver, device) in enumerate(self.devices):
            try:
                out[i] = values[driver][device]
            except KeyError:
                missing.append(self.joints[i].joint)
        if missing:
            raise ArmdError(f"no value for the devices of joints {missing}")
        return out

    def commands(
        self,
        q: ArrayLike,
        qd: ArrayLike,
        previous: Mapping[str, Mapping[str, DeviceCommand]] | None = None,
        torque: ArrayLike | None = None,
    ) -> dict[str, dict[str, DeviceCommand]]:
        """One `DeviceCommand` per driven joint for joint positions `q`, velocities `qd` and
        torque feed-forward `torque` (dof, N·m or N at the joints; None: 0), grouped by driver:
        ``{driver: {device: command}}``. A command equal to the one in `previous` (an earlier
        result) is that same object: a joint held still costs no new command each control
        tick."""
        positions = self.motor_positions(q).tolist()
        velocities = self.motor_velocities(qd).tolist()
        torques = (
            [0.0] * len(self.joints)
            if torque is None
            else (np.asarray(torque, dtype=np.float64)[self.driven] / self._scale).tolist()
        )
        out: dict[str, dict[str, DeviceCommand]] = {}
        rows = zip(self.devices, positions, velocities, torques, strict=True)
        for (driver, device), p, v, t in rows:
            command = previous[driver][device] if previous else None
            if command is None or (command.position, command.velocity, command.torque) != (p, v, t):
                command = DeviceCommand(p, v, t)
            out.setdefault(driver, {})[device] = command
        return out

    def __repr__(self) -> str:
        joints = ", ".join(f"{t.joint}->{t.driver}/{t.device}" for t in self.joints)
        return f"ArmTransmission({joints})"
