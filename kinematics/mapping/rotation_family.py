"""Rotations that map one direction onto another: the closed-form family of a vector pair, and
the turn a single revolute joint can make (used by `kinematics.mapping`).

One vector pair. Every rotation R with R â = b̂ (unit â, b̂) has its axis in the *bisecting plane*
n·â = n·b̂, spanned by m̂ = (â + b̂)/|â + b̂| and ĉ = (â × b̂)/|â × b̂|. With α = ∠(â, b̂),
s = sin(α/2), c = cos(α/2) and d̂ = (b̂ − â)/|b̂ − â|, (m̂, d̂, ĉ) is right-handed and orthonormal and
â = c m̂ − s d̂, b̂ = c m̂ + s d̂. About the axis n(φ) = cos φ m̂ + sin φ ĉ the parts of â and b̂
perpendicular to n are, in the basis (d̂, n × d̂), (−s, −c sin φ) and (s, −c sin φ): mirror images,
so the member φ turns by

    θ(φ) = 2 atan2(s, c sin φ),   q(φ) = [c sin φ, s n(φ)] / sqrt(c² sin²φ + s²)   ([w, x, y, z]).

φ and φ + π are the same rotation; over φ ∈ [0, π) the angle falls from π (the half turn about m̂)
to α at φ = π/2 (the minimal rotation, about ĉ) and rises back. Degenerate pairs, explicitly:
- b̂ = â (s ≤ `PARALLEL_TOLERANCE`): only rotations about â keep â: member φ turns by π − 2φ about â,
  q(φ) = [sin φ, cos φ â] (φ = π/2 the identity, φ = 0 the half turn: the limits of the general
  family's members there);
- b̂ = −â (c ≤ `PARALLEL_TOLERANCE`): m̂ is any unit vector ⊥ â; the members are the half turns about
  the axes ⊥ â (the formula with c = 0);
- a zero or non-finite vector has no direction: `KinematicsError`.

One revolute joint turns only about its axis u. If u lies in the bisecting plane it realises the
member with n(φ) = u; otherwise the best it can do turns the projection of â ⊥ u onto that of b̂:
θ* = atan2(u·(â × b̂), â·b̂ − (â·u)(b̂·u)), leaving the residual |∠(â, u) − ∠(b̂, u)|. Two joints
turning the same vector (axes u1 upstream, u2; Paden–Kahan subproblem 2) meet at
z = R(u2, θ2) v̂ = R(u1, −θ1) t̂, on both cones: z = α u1 + β u2 + γ u1 × u2, 0, 1 or 2 solutions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics.errors import KinematicsError

__all__ = [
    "PARALLEL_TOLERANCE",
    "AxisRotation",
    "RotationFamily",
    "angle_between",
    "cross",
    "norm",
    "rotate",
    "rotate_by_quaternions",
    "rotation_about_axis",
    "rotation_family",
    "turn_about",
    "two_turns",
    "unit_vector",
]

Array = NDArray[np.float64]
PARALLEL_TOLERANCE = 1e-12  # sin or cos of α/2 below this: the pair is (anti)parallel
_UNDETERMINED = 1e-12  # |â ⊥ u| or |b̂ ⊥ u| below this: every turn about u is as good


# -- one vector pair -------------------------------------------------------------------------------


def unit_vector(vector: ArrayLike, what: str) -> Array:
    """`vector` (3,) scaled to unit length; raises for zero, non-finite or misshapen input."""
    arr = np.asarray(vector, dtype=np.float64)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise KinematicsError(f"{what}: {np.asarray(vector).tolist()} must be 3 finite numbers")
    scale = float(np.max(np.abs(arr)))
    if scale == 0.0:
        raise KinematicsError(f"{what}: [0, 0, 0] has no direction (zero length)")
    arr = arr / scale  # scaled first: neither tiny nor huge components under- or overflow
    unit: Array = arr / math.sqrt(float(arr @ arr))
    return unit


def _perpendicular(u: Array) -> Array:
    """A unit vector ⊥ unit `u` (from the coordinate axis least aligned with it)."""
    e = np.zeros(3)
    e[int(np.argmin(np.abs(u)))] = 1.0
    w = e - (e @ u) * u
    unit: Array = w / np.linalg.norm(w)
    return unit


def _orthonormalised(v: Array, ref: Array) -> Array:
    w = v - (v @ ref) * ref
    unit: Array = w / np.linalg.norm(w)
    return unit


def cross(a: Array, b: Array) -> Array:
    """a × b for 3-vectors (np.cross costs several µs of overhead)."""
    a0, a1, a2 = a.tolist()
    b0, b1, b2 = b.tolist()
    return np.array((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0))


def norm(v: Array) -> float:
    return math.sqrt(float(v @ v))


def angle_between(x: Array, y: Array) -> float:
    """∠(x, y) in [0, π] (atan2: accurate near 0 and π); π when either vector is zero."""
    x0, x1, x2 = x.tolist()
    y0, y1, y2 = y.tolist()
    sin = math.hypot(x1 * y2 - x2 * y1, x2 * y0 - x0 * y2, x0 * y1 - x1 * y0)
    cos = x0 * y0 + x1 * y1 + x2 * y2
    return math.atan2(sin, cos) if sin > 0.0 or cos > 0.0 else math.pi


def rotate_by_quaternions(quaternions: Array, vectors: Array) -> Array:
    """Vectors (n, 3) rotated by unit quaternions (n, 4) (`quat_rotate` without np.cross)."""
    w, x, y, z = quaternions.T
    vx, vy, vz = vectors.T
    tx, ty, tz = 2.0 * (y * vz - z * vy), 2.0 * (z * vx - x * vz), 2.0 * (x * vy - y * vx)
    return np.stack(
        (
            vx + w * tx + y * tz - z * ty,
            vy + w * ty + z * tx - x * tz,
            vz + w * tz + x * ty - y * tx,
        ),
        axis=1,
    )


FamilyKind = Literal["general", "parallel", "antiparallel"]


@dataclass(frozen=True, slots=True, eq=False)
class RotationFamily:
    """Every rotation mapping the direction of `a` onto that of `b`, as a function of φ (rad).

    a, b: the unit directions. m, c: unit vectors spanning the bisecting plane (m̂ the bisector,
    ĉ ∥ â × b̂; see the module docstring for the degenerate kinds). angle_between: α ∈ [0, π].
    """

    a: Array
    b: Array
    m: Array
    c: Array
    angle_between: float
    kind: FamilyKind
    sin_half: float
    cos_half: float

    def axis(self, phi: float) -> Array:
        """The unit axis of member φ: cos φ m̂ + sin φ ĉ (â for a parallel pair)."""
        if self.kind == "parallel":
            return self.a.copy()
        axis: Array = math.cos(phi) * self.m + math.sin(phi) * self.c
        return axis

    def angle(self, phi: float) -> float:
        """The angle (rad, right hand about `axis(phi)`) of member φ: 2 atan2(s, c sin φ) in
        (0, 2π) (π − 2φ for a parallel pair)."""
        if self.kind == "parallel":
            return math.pi - 2.0 * phi
        return 2.0 * math.atan2(self.sin_half, self.cos_half * math.sin(phi))

    def quaternion(self, phi: float) -> Array:
        """Member φ as a unit quaternion ``[w, x, y, z]``, in closed form."""
        if self.kind == "parallel":
            return np.concatenate(([math.sin(phi)], math.cos(phi) * self.a))
        w = self.cos_half * math.sin(phi)
        norm = math.hypot(w, self.sin_half)  # ≥ s > 0: never 0/0
        return np.concatenate(([w], self.sin_half * self.axis(phi))) / norm

    def minimal(self) -> Array:
        """The member with the smallest angle (α, about ĉ; φ = π/2), as a quaternion."""
        return self.quaternion(0.5 * math.pi)


def rotation_family(a: ArrayLike, b: ArrayLike) -> RotationFamily:
    """The one-parameter family of rotations mapping â onto b̂ (`a`, `b`: (3,), any non-zero
    length). Raises `KinematicsError` for a zero, non-finite or misshapen vector."""
    a_hat, b_hat = unit_vector(a, "a"), unit_vector(b, "b")
    plus, minus = a_hat + b_hat, b_hat - a_hat
    cos_half, sin_half = 0.5 * float(np.linalg.norm(plus)), 0.5 * float(np.linalg.norm(minus))
    norm = math.hypot(cos_half, sin_half)
    cos_half, sin_half = cos_half / norm, sin_half / norm
    kind: FamilyKind = "general"
    if sin_half <= PARALLEL_TOLERANCE:
        kind, sin_half, cos_half = "parallel", 0.0, 1.0
        m, d = a_hat, _perpendicular(a_hat)
    elif cos_half <= PARALLEL_TOLERANCE:
        kind, sin_half, cos_half = "antiparallel", 1.0, 0.0
        d = minus / (2.0 * sin_half)
        m = _perpendicular(d)
    elif cos_half >= sin_half:  # build from the better-conditioned of â + b̂ and b̂ − â
        m = plus / (2.0 * cos_half)
        d = _orthonormalised(minus, m)
    else:
        d = minus / (2.0 * sin_half)
        m = _orthonormalised(plus, d)
    alpha = 2.0 * math.atan2(sin_half, cos_half)
    return RotationFamily(a_hat, b_hat, m, cross(m, d), alpha, kind, sin_half, cos_half)


@dataclass(frozen=True, slots=True)
class AxisRotation:
    """The turn about one fixed axis that best maps â onto b̂.

    angle: rad in (−π, π], right hand about the axis. residual: rad in [0, π], the angle left
    between the turned â and b̂ (0 when the axis lies in the bisecting plane). determined: False
    when every angle is as good (â or b̂ along the axis); `angle` is then the preferred one.
    """

    angle: float
    residual: float
    determined: bool


def rotate(v: Array, u: Array, angle: float) -> Array:
    """Rodrigues: `v` turned by `angle` about unit `u`."""
    cos, sin = math.cos(angle), math.sin(angle)
    turned: Array = v * cos + cross(u, v) * sin + u * (float(u @ v) * (1.0 - cos))
    return turned


def turn_about(a: Array, b: Array, u: Array, preferred: float) -> tuple[float, bool]:
    """(angle, determined) of `rotation_about_axis` for unit inputs."""
    a_perp, b_perp = a - float(a @ u) * u, b - float(b @ u) * u  # accurate even near the axis
    determined = min(norm(a_perp), norm(b_perp)) > _UNDETERMINED
    angle = math.atan2(float(u @ cross(a_perp, b_perp)), float(a_perp @ b_perp))
    return (angle if determined else preferred), determined


def rotation_about_axis(
    a: ArrayLike, b: ArrayLike, axis: ArrayLike, preferred: float = 0.0
) -> AxisRotation:
    """The turn about `axis` that brings the direction of `a` closest to that of `b` (a revolute
    joint's realisable member of the family). `preferred` (rad) is returned when the turn is
    undetermined. Raises `KinematicsError` for zero or non-finite vectors."""
    if not math.isfinite(preferred):
        raise KinematicsError(f"preferred: {preferred!r} must be a finite angle")
    a_hat, b_hat, u = unit_vector(a, "a"), unit_vector(b, "b"), unit_vector(axis, "axis")
    angle, determined = turn_about(a_hat, b_hat, u, preferred)
    return AxisRotation(angle, angle_between(rotate(a_hat, u, angle), b_hat), determined)


def two_turns(u1: Array, u2: Array, v: Array, t: Array) -> list[tuple[float, float]]:
    """(θ1, θ2) with R(u1, θ1) R(u2, θ2) v = t for unit v, t and non-parallel unit axes: the exact
    solutions, or the closest-approach one (γ = 0) when the cones do not meet."""
    k = float(u1 @ u2)
    sin2 = 1.0 - k * k
    t1, v2 = float(t @ u1), float(v @ u2)
    alpha = (t1 - k * v2) / sin2
    beta = (v2 - k * t1) / sin2
    gamma2 = (1.0 - alpha * alpha - beta * beta - 2.0 * alpha * beta * k) / sin2
    base, normal = alpha * u1 + beta * u2, cross(u1, u2)
    gammas = (math.sqrt(gamma2), -math.sqrt(gamma2)) if gamma2 > 0.0 else (0.0,)
    turns = []
    for gamma in gammas:
        z = base + gamma * normal
        length = norm(z)
        if length > _UNDETERMINED:
            z = z / length
            turns.append((turn_about(z, t, u1, 0.0)[0], turn_about(v, z, u2, 0.0)[0]))
    return turns
