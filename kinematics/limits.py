"""Joint limits: position, velocity and acceleration per joint, checked and clamped by name.

Units: rad, rad/s, rad/s² for revolute joints; m, m/s, m/s² for prismatic ones. An absent bound is
infinite (a continuous joint has infinite position bounds).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics.errors import KinematicsError, ModelError

__all__ = ["JointLimit", "JointLimits", "LimitViolation"]

Array = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class JointLimit:
    """Bounds of one joint. lower ≤ upper; velocity and acceleration > 0 (inf when unlimited)."""

    lower: float = -math.inf
    upper: float = math.inf
    velocity: float = math.inf
    acceleration: float = math.inf

    def __post_init__(self) -> None:
        for key in ("lower", "upper", "velocity", "acceleration"):
            value = getattr(self, key)
            if not isinstance(value, int | float) or math.isnan(value):
                raise ModelError(f"limit {key}: {value!r} must be a number")
        if self.lower > self.upper:
            raise ModelError(f"limits: lower {self.lower} must be <= upper {self.upper}")
        if self.lower == math.inf or self.upper == -math.inf:
            raise ModelError(f"limits: [{self.lower}, {self.upper}] is empty")
        for key in ("velocity", "acceleration"):
            if getattr(self, key) <= 0.0:
                raise ModelError(f"limit {key}: {getattr(self, key)} must be > 0")

    @property
    def is_continuous(self) -> bool:
        """True when the position is unbounded (a revolute joint that turns freely)."""
        return math.isinf(self.lower) and math.isinf(self.upper)

    def replace(self, **changes: float) -> JointLimit:
        values = {key: getattr(self, key) for key in ("lower", "upper", "velocity", "acceleration")}
        values.update(changes)
        return JointLimit(**values)


@dataclass(frozen=True, slots=True)
class LimitViolation:
    """One joint outside its position bounds: ``joint 'elbow': 1.92 outside [-1.57, 1.57]``."""

    joint: str
    value: float
    lower: float
    upper: float

    def __str__(self) -> str:
        return (
            f"joint {self.joint!r}: {self.value:.6g} outside [{self.lower:.6g}, {self.upper:.6g}]"
        )


class JointLimits:
    """The limits of an ordered set of joints, as flat arrays in that order (``q`` order)."""

    __slots__ = ("_by_name", "acceleration", "lower", "names", "upper", "velocity")

    def __init__(self, names: Sequence[str], limits: Sequence[JointLimit]) -> None:
        if len(names) != len(limits):
            raise KinematicsError(f"{len(names)} joint names but {len(limits)} limits")
        self.names: tuple[str, ...] = tuple(names)
        self._by_name = dict(zip(self.names, limits, strict=True))
        self.lower = self._frozen([lim.lower for lim in limits])
        self.upper = self._frozen([lim.upper for lim in limits])
        self.velocity = self._frozen([lim.velocity for lim in limits])
        self.acceleration = self._frozen([lim.acceleration for lim in limits])

    @staticmethod
    def _frozen(values: list[float]) -> Array:
        arr = np.array(values, dtype=np.float64)
        arr.flags.writeable = False
        return arr

    def __getitem__(self, joint: str) -> JointLimit:
        try:
            return self._by_name[joint]
        except KeyError:
            raise KinematicsError(f"unknown joint {joint!r}; joints: {list(self.names)}") from None

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def items(self) -> list[tuple[str, JointLimit]]:
        return list(self._by_name.items())

    def with_overrides(self, overrides: Mapping[str, JointLimit]) -> JointLimits:
        """A copy with some joints' limits replaced (e.g. tighter limits from a config file)."""
        unknown = sorted(set(overrides) - set(self.names))
        if unknown:
            raise KinematicsError(f"limit overrides name unknown joints {unknown}")
        return JointLimits(self.names, [overrides.get(n, self._by_name[n]) for n in self.names])

    def _vector(self, q: ArrayLike) -> Array:
        arr = np.asarray(q, dtype=np.float64)
        if arr.shape[-1:] != (len(self.names),):
            raise KinematicsError(
                f"joint vector must have {len(self.names)} elements, got shape {arr.shape}"
            )
        return arr

    def check(self, q: ArrayLike, *, tolerance: float = 0.0) -> list[LimitViolation]:
        """The joints of `q` (one configuration) outside [lower - tol, upper + tol]; NaN counts."""
        arr = self._vector(q)
        bad = ~((arr >= self.lower - tolerance) & (arr <= self.upper + tolerance))
        return [
            LimitViolation(self.names[i], float(arr[i]), float(self.lower[i]), float(self.upper[i]))
            for i in np.flatnonzero(bad)
        ]

    def within(self, q: ArrayLike, *, tolerance: float = 0.0) -> bool:
        arr = self._vector(q)
        return bool(np.all((arr >= self.lower - tolerance) & (arr <= self.upper + tolerance)))

    def clamp(self, q: ArrayLike) -> Array:
        """`q` (..., n) with every position clipped into its bounds."""
        return np.clip(self._vector(q), self.lower, self.upper)
