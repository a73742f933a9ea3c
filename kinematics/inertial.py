"""`Inertial`: the mass, centre of mass and rotational inertia of one rigid link.

Conventions (written once, here):
- `com` is the centre of mass in the link's frame, m.
- `inertia` is the rotational inertia about the centre of mass, with the axes of the link's frame,
  kg·m², as the six independent entries ``(ixx, ixy, ixz, iyy, iyz, izz)`` of the symmetric
  tensor ``[[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]`` (URDF's names and signs: the
  off-diagonal entries are the tensor's, not the negated products of inertia).
- A link without an inertial is massless; zero mass and a zero tensor are valid (tool frames).

What no rigid body has is refused on construction (`InertialError`): a negative or non-finite
mass, a tensor that is not positive semi-definite, or principal moments that break the triangle
inequality (each at most the sum of the other two). Both tensor checks allow a slack of
`RELATIVE_TOLERANCE` of the largest principal moment (values printed with few digits) plus
`ABSOLUTE_TOLERANCE` (rounding noise on a tensor that is zero).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics.errors import InertialError
from kinematics.pose import Pose

__all__ = ["ABSOLUTE_TOLERANCE", "RELATIVE_TOLERANCE", "Inertial", "inertia_tensor"]

Array = NDArray[np.float64]
Vector3 = tuple[float, float, float]
Inertia6 = tuple[float, float, float, float, float, float]

RELATIVE_TOLERANCE = 1e-6
"""Slack of the tensor checks, relative to the largest principal moment."""

ABSOLUTE_TOLERANCE = 1e-15
"""Slack of the tensor checks, kg·m²: far below any real part (1 mg at 30 µm is 1e-15)."""

_ZERO3: Vector3 = (0.0, 0.0, 0.0)
_ZERO6: Inertia6 = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def inertia_tensor(inertia: ArrayLike) -> Array:
    """The symmetric (3, 3) tensor of ``(ixx, ixy, ixz, iyy, iyz, izz)``."""
    ixx, ixy, ixz, iyy, iyz, izz = np.asarray(inertia, dtype=np.float64)
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def _six(tensor: Array) -> Inertia6:
    """``(ixx, ixy, ixz, iyy, iyz, izz)`` of a (3, 3) tensor, symmetrised."""
    t = 0.5 * (tensor + tensor.T)
    return (
        float(t[0, 0]),
        float(t[0, 1]),
        float(t[0, 2]),
        float(t[1, 1]),
        float(t[1, 2]),
        float(t[2, 2]),
    )


def _numbers(values: object, count: int, what: str) -> tuple[float, ...]:
    try:
        result = tuple(float(v) for v in np.asarray(values, dtype=np.float64).reshape(-1))
    except (TypeError, ValueError):
        result = ()
    if len(result) != count or not all(math.isfinite(v) for v in result):
        expected = "a finite number" if count == 1 else f"{count} finite numbers"
        raise InertialError(f"{what}: {values!r} must be {expected}")
    return result


def _check_tensor(inertia: Inertia6) -> None:
    moments = np.linalg.eigvalsh(inertia_tensor(inertia))  # ascending
    slack = RELATIVE_TOLERANCE * float(np.max(np.abs(moments))) + ABSOLUTE_TOLERANCE
    shown = f"inertia {list(inertia)} kg·m² (principal moments {_g(moments)})"
    if moments[0] < -slack:
        raise InertialError(f"{shown} must be positive semi-definite")
    if moments[2] > moments[0] + moments[1] + slack:
        raise InertialError(
            f"{shown} break the triangle inequality: {moments[2]:.6g} > "
            f"{moments[0]:.6g} + {moments[1]:.6g}"
        )


def _g(values: NDArray[np.floating]) -> str:
    return "[" + ", ".join(f"{v:.6g}" for v in values) + "]"


@dataclass(frozen=True, slots=True)
class Inertial:
    """One rigid link's mass (kg), centre of mass (link frame, m) and rotational inertia about the
    centre of mass (link axes, kg·m², ``(ixx, ixy, ixz, iyy, iyz, izz)``).

    Raises `InertialError` for a mass that is negative or not finite, or a tensor that no rigid
    body has (see the module's docstring)."""

    mass: float
    com: Vector3 = _ZERO3
    inertia: Inertia6 = _ZERO6
    _tensor: Array = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        mass = _numbers(self.mass, 1, "mass")[0]
        if mass < 0.0:
            raise InertialError(f"mass {mass:g} kg must be >= 0")
        com = _numbers(self.com, 3, "com")
        inertia = _numbers(self.inertia, 6, "inertia")
        object.__setattr__(self, "mass", mass)
        object.__setattr__(self, "com", com)
        object.__setattr__(self, "inertia", inertia)
        _check_tensor(self.inertia)
        tensor = inertia_tensor(self.inertia)
        tensor.flags.writeable = False
        object.__setattr__(self, "_tensor", tensor)

    @property
    def tensor(self) -> Array:
        """The rotational inertia about the centre of mass, (3, 3), link axes, kg·m² (read-only)."""
        return self._tensor

    @property
    def first_moment(self) -> Array:
        """``mass * com``, (3,), kg·m, link frame."""
        return self.mass * np.asarray(self.com)

    def about_origin(self) -> Array:
        """The rotational inertia about the link frame's origin (parallel-axis theorem), (3, 3)."""
        c = np.asarray(self.com)
        return self._tensor + self.mass * (float(c @ c) * np.eye(3) - np.outer(c, c))

    def transformed(self, a_from_link: Pose) -> Inertial:
        """The same body described in frame a: the centre of mass moved and the tensor rotated."""
        R = a_from_link.rotation_matrix
        com = a_from_link.translation + R @ np.asarray(self.com)
        return Inertial(self.mass, _vec3(com), _six(R @ self._tensor @ R.T))

    def __add__(self, other: Inertial) -> Inertial:
        """Two bodies in the same frame, rigidly joined: masses add, the centre of mass is the
        mass-weighted mean, and each tensor moves to it by the parallel-axis theorem."""
        mass = self.mass + other.mass
        if mass == 0.0:
            return Inertial(0.0, _ZERO3, _six(self._tensor + other._tensor))
        com = (self.first_moment + other.first_moment) / mass
        tensor = np.zeros((3, 3))
        for part in (self, other):
            d = np.asarray(part.com) - com
            tensor += part._tensor + part.mass * (float(d @ d) * np.eye(3) - np.outer(d, d))
        return Inertial(mass, _vec3(com), _six(tensor))


def _vec3(values: Array) -> Vector3:
    x, y, z = (float(v) for v in values)
    return (x, y, z)
