"""Rigid-body dynamics of a `KinematicTree`: gravity torques g(q), inverse dynamics (recursive
Newton–Euler), the joint-space mass matrix M(q) (composite rigid bodies) and the Coriolis matrix
C(q, q̇) (Echeandia and Wensing).

The model (conventions written once, here):
- The root does not move (a fixed base). Each joint link, with every link fixed to it through
  constant motors, is one rigid *body* in the joint link's frame; their inertials combine by the
  parallel-axis theorem (`Inertial.__add__`). Links fixed to the root carry nothing.
- ``q``, ``qd``, ``qdd`` and the returned ``tau`` have shape (dof,) in `tree.joint_names` order:
  rad, rad/s, rad/s² and N·m for revolute joints; m, m/s, m/s² and N for prismatic ones. A mimic
  joint moves as ``multiplier × q[joint] + offset`` (velocity and acceleration times the
  multiplier), and its generalized force adds, times the multiplier, into its driver's
  (``τ = Gᵀ τ_joints``, ``M = Gᵀ M_joints G``): the dynamics of the degrees of freedom.
- ``gravity``: the gravity acceleration in the root frame, m/s², default ``[0, 0, -9.81]``.
- A `Payload` is a rigid load on one link (its inertial in that link's frame); it changes at run
  time, the model never does: build a new one (`Dynamics.payload`, ~0.1 ms) when it changes.

    τ = M(q) q̈ + C(q, q̇) q̇ + g(q),   `rnea(q, qd, qdd)` = τ,   `gravity(q)` = g(q),
    `mass_matrix(q)` = M(q),   `coriolis_matrix(q, qd)` = C(q, q̇)

Joint friction, motor inertia (armature) and joint limits' forces are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics import _layout as layout
from kinematics.compiled import Kernels, load_kernels
from kinematics.errors import KinematicsError, UnknownNameError
from kinematics.inertial import Inertial
from kinematics.motors import JointMotor
from kinematics.pose import Pose
from kinematics.tree import KinematicTree

__all__ = ["STANDARD_GRAVITY", "Body", "Dynamics", "Payload"]

Array = NDArray[np.float64]
_F64 = np.dtype(np.float64)
_MASSLESS = Inertial(0.0)

STANDARD_GRAVITY = (0.0, 0.0, -9.81)
"""The default gravity acceleration, root frame, m/s²."""


@dataclass(frozen=True, slots=True)
class Body:
    """One rigid body of the dynamics model: a joint link with the links fixed to it.

    link: the joint link whose frame is the body's. parent: the parent body's index (-1: the root).
    parent_from_origin: the joint origin in the parent body's frame (the root's when parent < 0).
    inertial: the combined inertial of the body's links, in the body's frame.
    """

    link: str
    parent: int
    parent_from_origin: Pose
    inertial: Inertial


@dataclass(frozen=True, slots=True)
class Payload:
    """A rigid load on `link` (a link of the model, moving or fixed): its mass, centre of mass and
    inertia in that link's frame (`Inertial`'s conventions). Made by `Dynamics.payload`."""

    link: str
    inertial: Inertial
    tree: KinematicTree = field(repr=False, compare=False)
    packed: Array = field(repr=False, compare=False)  # (P_ROW,) read-only, the body's frame


def _bodies(tree: KinematicTree) -> tuple[tuple[Body, ...], dict[str, tuple[int, Pose]]]:
    """The bodies of `tree` in topological order, and for every link: its body's index (-1 for
    links fixed to the root) and ``body_from_link``."""
    where: dict[str, tuple[int, Pose]] = {}
    parts: list[tuple[str, int, Pose, list[Inertial]]] = []
    for link in tree.links:
        inertial = link.inertial or _MASSLESS
        if link.parent is None:
            where[link.name] = (-1, Pose())
            continue
        parent, body_from_parent = where[link.parent]
        motor = link.motor
        if isinstance(motor, JointMotor):
            where[link.name] = (len(parts), Pose())
            parts.append((link.name, parent, body_from_parent @ motor.origin, [inertial]))
        else:
            body_from_link = body_from_parent @ motor.pose
            where[link.name] = (parent, body_from_link)
            if parent >= 0:
                parts[parent][3].append(inertial.transformed(body_from_link))
    bodies = tuple(
        Body(name, parent, origin, sum(inertials[1:], inertials[0]))
        for name, parent, origin, inertials in parts
    )
    return bodies, where


def _inertia_values(inertial: Inertial) -> Array:
    """(10,): mass, first moment (3), rotational inertia about the frame's origin (6)."""
    ibar = inertial.about_origin()
    return np.array(
        [
            inertial.mass,
            *inertial.first_moment,
            ibar[0, 0],
            ibar[0, 1],
            ibar[0, 2],
            ibar[1, 1],
            ibar[1, 2],
            ibar[2, 2],
        ]
    )


def _body_row(tree: KinematicTree, body: Body) -> Array:
    """One body as a packed `D_ROW` row (`kinematics._layout`)."""
    motor_row = tree._packed[tree._index[body.link]]  # KIND, QIDX, SCALE, OFFSET, AXIS
    row = np.zeros(layout.D_ROW)
    row[: layout.AXIS + 3] = motor_row[: layout.AXIS + 3]
    row[layout.D_PARENT] = body.parent
    row[layout.D_ROT : layout.D_ROT + 9] = body.parent_from_origin.rotation_matrix.reshape(9)
    row[layout.D_POS : layout.D_POS + 3] = body.parent_from_origin.translation
    row[layout.D_MASS : layout.D_IBAR + 6] = _inertia_values(body.inertial)
    return row


def _frozen(arr: Array) -> Array:
    arr.flags.writeable = False
    return arr


class Dynamics:
    """The rigid-body dynamics of an immutable tree (see the module's docstring for units,
    frames and order). Built once (~2 ms for the Panda); the kernels load on first use.

    Every method takes ``payload`` (a `Payload` of this model, or None), ``gravity`` (3,) in
    the root frame, m/s² (None: this model's `gravity_acceleration`) and ``out`` (an array to
    write the result into, or None for a new one), and raises `KinematicsError` for vectors of
    the wrong shape or not finite. The kernels release the interpreter lock and keep their
    scratch arrays per call: one model serves several threads.
    """

    def __init__(self, tree: KinematicTree, *, gravity: ArrayLike = STANDARD_GRAVITY) -> None:
        self.tree = tree
        self.gravity_acceleration = self._gravity_vector(gravity)
        self.bodies, self._where = _bodies(tree)
        rows = [_body_row(tree, body) for body in self.bodies]
        self._packed = _frozen(np.array(rows).reshape(len(rows), layout.D_ROW))
        none = np.zeros(layout.P_ROW)
        none[layout.P_BODY] = -1.0
        self._no_payload = _frozen(none)
        self._shape = (tree.dof,)

    @cached_property
    def kernels(self) -> Kernels:
        """The compiled kernels (`kinematics.compiled.load_kernels`, on first use)."""
        return load_kernels()

    # -- inputs -------------------------------------------------------------------------------

    @staticmethod
    def _gravity_vector(gravity: ArrayLike) -> Array:
        g = np.array(gravity, dtype=np.float64)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise KinematicsError(
                f"gravity must be 3 finite numbers (m/s², root frame), got {np.asarray(gravity)}"
            )
        return _frozen(g)

    def _vector(self, value: ArrayLike, what: str) -> Array:
        if (
            value.__class__ is np.ndarray
            and value.dtype is _F64
            and value.shape == self._shape
            and value.flags.c_contiguous
        ):
            return value
        arr = np.ascontiguousarray(value, dtype=np.float64)
        if arr.shape != self._shape:
            raise KinematicsError(
                f"{what} must have shape (dof,) with dof={self.tree.dof}, got {arr.shape}"
            )
        return arr

    def _out(self, out: Array | None, shape: tuple[int, ...]) -> Array:
        if out is None:
            return np.empty(shape)
        if not (
            out.__class__ is np.ndarray
            and out.dtype is _F64
            and out.shape == shape
            and out.flags.c_contiguous
            and out.flags.writeable
        ):
            raise KinematicsError(
                f"out must be a writeable C-contiguous float64 array of shape {shape}"
            )
        return out

    def _payload_row(self, payload: Payload | None) -> Array:
        if payload is None:
            return self._no_payload
        if payload.tree is not self.tree:
            raise KinematicsError(
                f"payload on {payload.link!r} was made for model {payload.tree.name!r}, "
                f"not this {self.tree.name!r}: make it with this model's payload()"
            )
        return payload.packed

    def _g(self, gravity: ArrayLike | None) -> Array:
        return self.gravity_acceleration if gravity is None else self._gravity_vector(gravity)

    @staticmethod
    def _not_finite(*vectors: Array) -> KinematicsError:
        return KinematicsError(
            f"joint vectors must be finite, got {[list(map(float, v)) for v in vectors]}"
        )

    # -- payloads -----------------------------------------------------------------------------

    def payload(self, link: str, inertial: Inertial) -> Payload:
        """A load on `link` with `inertial` in that link's frame (centre of mass, inertia about
        it). Raises `UnknownNameError` for a link the tree does not have."""
        if link not in self._where:
            raise UnknownNameError(
                f"payload on unknown link {link!r}; links: {list(self.tree.link_names)}"
            )
        body, body_from_link = self._where[link]
        row = np.zeros(layout.P_ROW)
        row[layout.P_BODY] = body
        row[layout.P_MASS :] = _inertia_values(inertial.transformed(body_from_link))
        return Payload(link, inertial, self.tree, _frozen(row))

    # -- dynamics -----------------------------------------------------------------------------

    def gravity(
        self,
        q: ArrayLike,
        payload: Payload | None = None,
        gravity: ArrayLike | None = None,
        *,
        out: Array | None = None,
    ) -> Array:
        """g(q) (dof,): the joint torques (N·m) and forces (N) that hold the tree still at q.
        Written into `out` (dof,) when given."""
        if not (  # the common case checked inline: gravity compensation runs at the loop's rate
            q.__class__ is np.ndarray
            and q.dtype is _F64
            and q.shape == self._shape
            and q.flags.c_contiguous
        ):
            q = self._vector(q, "q")
        tau = np.empty(self._shape) if out is None else self._out(out, self._shape)
        if not self.kernels.gravity_torques(
            self._packed,
            q,
            self.gravity_acceleration if gravity is None else self._gravity_vector(gravity),
            self._no_payload if payload is None else self._payload_row(payload),
            tau,
        ):
            raise self._not_finite(q)
        return tau

    def rnea(
        self,
        q: ArrayLike,
        qd: ArrayLike,
        qdd: ArrayLike,
        payload: Payload | None = None,
        gravity: ArrayLike | None = None,
        *,
        out: Array | None = None,
    ) -> Array:
        """Inverse dynamics (dof,): ``M(q) qdd + C(q, qd) qd + g(q)``, N·m and N. Written into
        `out` (dof,) when given."""
        q, qd, qdd = self._vector(q, "q"), self._vector(qd, "qd"), self._vector(qdd, "qdd")
        tau = self._out(out, self._shape)
        if not self.kernels.rnea(
            self._packed, q, qd, qdd, self._g(gravity), self._payload_row(payload), tau
        ):
            raise self._not_finite(q, qd, qdd)
        return tau

    def mass_matrix(
        self, q: ArrayLike, payload: Payload | None = None, *, out: Array | None = None
    ) -> Array:
        """M(q) (dof, dof): symmetric, positive definite where every joint moves some mass;
        kg·m² (revolute rows and columns), kg (prismatic), kg·m (mixed). Written into `out`
        (dof, dof) when given."""
        q = self._vector(q, "q")
        M = self._out(out, (self.tree.dof, self.tree.dof))
        if not self.kernels.mass_matrix(self._packed, q, self._payload_row(payload), M):
            raise self._not_finite(q)
        return M

    def coriolis_matrix(
        self,
        q: ArrayLike,
        qd: ArrayLike,
        payload: Payload | None = None,
        *,
        out: Array | None = None,
    ) -> Array:
        """C(q, qd) (dof, dof): ``C qd`` is the Coriolis and centrifugal term of `rnea` and
        ``Ṁ - 2C`` is skew-symmetric (``Ṁ = C + Cᵀ``), as a momentum observer needs
        (``ṗ = τ + τ_ext - g + Cᵀ q̇`` for ``p = M q̇``). Units of M per second. Written into
        `out` (dof, dof) when given."""
        q, qd = self._vector(q, "q"), self._vector(qd, "qd")
        C = self._out(out, (self.tree.dof, self.tree.dof))
        if not self.kernels.coriolis_matrix(self._packed, q, qd, self._payload_row(payload), C):
            raise self._not_finite(q, qd)
        return C

    def __repr__(self) -> str:
        mass = sum(body.inertial.mass for body in self.bodies)
        return (
            f"Dynamics(tree={self.tree.name!r}, bodies={len(self.bodies)}, "
            f"moving mass={mass:g} kg, gravity={self.gravity_acceleration.tolist()})"
        )
