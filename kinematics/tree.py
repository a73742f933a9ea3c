"""`KinematicTree`: an immutable tree of named links, built once and then only queried.

Like Pinocchio's model, construction validates the links and precomputes flat arrays (topological
link order, parent indices, one compacted chain per link) that the compiled kernels traverse. The
kernels are loaded (`kinematics.compiled`) when a tree first computes, not when it is built: a
model loads without numba.

Order conventions (stable and documented):
- links: topological order — every link after its parent, otherwise in the order given;
- `joint_names` (the order of ``q``): the independent (non-mimic) joints in link order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics import _layout as layout
from kinematics.compiled import Kernels, load_kernels
from kinematics.dualquat import DQ_IDENTITY, dq_mul
from kinematics.errors import KinematicsError, ModelError, UnknownNameError
from kinematics.limits import JointLimit, JointLimits
from kinematics.motors import ConstantMotor, JointMotor, Link
from kinematics.pose import Pose

__all__ = ["Chain", "KinematicTree"]

_F64 = np.dtype(np.float64)

Array = NDArray[np.float64]
_KIND = {"revolute": layout.REVOLUTE, "prismatic": layout.PRISMATIC}


_A = TypeVar("_A", bound=np.ndarray)


def _frozen(arr: _A) -> _A:
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, eq=False)
class Chain:
    """The compacted path from the root to `link`, packed for the kernels (`kinematics._layout`).

    packed: (m + 1, ROW) read-only rows, one per joint on the path then the constant tip.
    moving: (dof,) True for the joints that move the link.
    """

    link: str
    packed: Array
    moving: NDArray[np.bool_]


def _topological_order(links: Sequence[Link]) -> list[Link]:
    by_name: dict[str, Link] = {}
    for link in links:
        if link.name in by_name:
            raise ModelError(f"link {link.name!r}: duplicate name")
        by_name[link.name] = link
    roots = [link.name for link in links if link.parent is None]
    if len(roots) != 1:
        raise ModelError(f"a tree needs exactly one root link (one without 'parent'), got {roots}")
    for link in links:
        if link.parent is not None and link.parent not in by_name:
            raise ModelError(f"link {link.name!r}: key 'parent': unknown link {link.parent!r}")
    children: dict[str, list[Link]] = {name: [] for name in by_name}
    for link in links:
        if link.parent is not None:
            children[link.parent].append(link)
    ordered: list[Link] = []
    stack = [by_name[roots[0]]]
    while stack:  # depth-first, children in the order given
        link = stack.pop()
        ordered.append(link)
        stack.extend(reversed(children[link.name]))
    if len(ordered) != len(links):
        cyclic = sorted(set(by_name) - {link.name for link in ordered})
        raise ModelError(f"links {cyclic}: not connected to the root (their parents form a cycle)")
    return ordered


class KinematicTree:
    """An immutable kinematic tree. Build from `Link`s or load with `load_tree(path)`.

    Joint vectors ``q`` have shape (dof,) in `joint_names` order: rad for revolute joints, m for
    prismatic ones. Poses are ``root_from_link``.
    """

    def __init__(self, links: Sequence[Link], *, name: str = "") -> None:
        self.name = name
        self.links: tuple[Link, ...] = tuple(_topological_order(links))
        self._index = {link.name: i for i, link in enumerate(self.links)}
        self.root = self.links[0].name
        joints = [link for link in self.links if isinstance(link.motor, JointMotor)]
        self.joint_names: tuple[str, ...] = self._independent_joints(joints)
        self.dof = len(self.joint_names)
        self._q_shape = (self.dof,)
        self.limits = JointLimits(
            self.joint_names,
            [self._joint_link(j).motor.limits for j in self.joint_names],  # type: ignore[union-attr]
        )
        self._packed = _frozen(np.array([self._motor_row(link) for link in self.links]))
        self._chains = {link.name: self._build_chain(link.name) for link in self.links}
        self._default: Chain | None = None

    # -- construction ---------------------------------------------------------------------------

    def _joint_link(self, joint: str) -> Link:
        return next(link for link in self.links if link.joint_name == joint)

    @staticmethod
    def _independent_joints(joints: list[Link]) -> tuple[str, ...]:
        names = [link.joint_name for link in joints]
        seen: set[str | None] = set()
        for link, name in zip(joints, names, strict=True):
            if name in seen:
                raise ModelError(f"link {link.name!r}: duplicate joint name {name!r}")
            seen.add(name)
        independent = [link for link in joints if link.motor.mimic is None]  # type: ignore[union-attr]
        independent_names = {link.joint_name for link in independent}
        for link in joints:
            mimic = link.motor.mimic  # type: ignore[union-attr]
            if mimic is not None and mimic.joint not in independent_names:
                raise ModelError(
                    f"link {link.name!r}: key 'mimic': {mimic.joint!r} is not an independent joint"
                )
        return tuple(str(link.joint_name) for link in independent)

    def _motor_row(self, link: Link) -> Array:
        """One link's motor as a packed kernel row."""
        row = np.zeros(layout.ROW)
        motor = link.motor
        parent = -1 if link.parent is None else self._index[link.parent]
        row[layout.PARENT] = parent
        if isinstance(motor, ConstantMotor):
            row[layout.KIND] = layout.CONSTANT
            row[layout.ORIGIN : layout.ORIGIN + 8] = motor.pose.dual_quaternion
            return row
        driver, scale, offset = link.joint_name, 1.0, 0.0
        if motor.mimic is not None:
            driver, scale, offset = motor.mimic.joint, motor.mimic.multiplier, motor.mimic.offset
        row[layout.KIND] = _KIND[motor.kind]
        row[layout.QIDX] = self.joint_names.index(str(driver))
        row[layout.SCALE] = scale
        row[layout.OFFSET] = offset
        row[layout.AXIS : layout.AXIS + 3] = motor.axis
        row[layout.ORIGIN : layout.ORIGIN + 8] = motor.origin.dual_quaternion
        return row

    def _build_chain(self, link_name: str) -> Chain:
        path = []
        i = self._index[link_name]
        while i >= 0:
            path.append(i)
            i = int(self._packed[i, layout.PARENT])
        rows: list[Array] = []
        pending = DQ_IDENTITY.copy()  # constant transforms since the last joint
        moving = np.zeros(self.dof, dtype=np.bool_)
        for i in reversed(path):
            row = self._packed[i].copy()
            pending = dq_mul(pending, row[layout.ORIGIN : layout.ORIGIN + 8])
            if row[layout.KIND] != layout.CONSTANT:
                row[layout.ORIGIN : layout.ORIGIN + 8] = pending
                rows.append(row)
                moving[int(row[layout.QIDX])] = True
                pending = DQ_IDENTITY.copy()
        tip = np.zeros(layout.ROW)
        tip[layout.ORIGIN : layout.ORIGIN + 8] = pending
        rows.append(tip)
        return Chain(link_name, _frozen(np.array(rows)), _frozen(moving))

    # -- queries --------------------------------------------------------------------------------

    @property
    def packed(self) -> Array:
        """The tree array (n_links, `kinematics._layout.ROW`), read-only: one motor row per link
        in link order, for kernels that walk the whole tree (`tree_fk`)."""
        return self._packed

    @property
    def link_names(self) -> tuple[str, ...]:
        return tuple(link.name for link in self.links)

    def link(self, name: str) -> Link:
        try:
            return self.links[self._index[name]]
        except KeyError:
            raise UnknownNameError(
                f"unknown link {name!r}; links: {list(self.link_names)}"
            ) from None

    def chain(self, link: str) -> Chain:
        """The compacted root → `link` chain used by the kernels."""
        try:
            return self._chains[link]
        except KeyError:
            raise UnknownNameError(
                f"unknown link {link!r}; links: {list(self.link_names)}"
            ) from None

    @property
    def leaves(self) -> tuple[str, ...]:
        parents = {link.parent for link in self.links}
        return tuple(link.name for link in self.links if link.name not in parents)

    def default_link(self) -> str:
        """The single leaf of a serial chain; a branching tree has none and raises."""
        leaves = self.leaves
        if len(leaves) != 1:
            raise KinematicsError(f"the tree branches (leaves {list(leaves)}): name the link")
        return leaves[0]

    def q_vector(self, q: ArrayLike, *, batch: bool = False) -> Array:
        """`q` as C-contiguous float64 of shape (dof,) — or (N, dof) with `batch`; else raises.
        Finiteness is checked by the kernels (and by `check_finite`)."""
        if (
            type(q) is np.ndarray
            and q.dtype == np.float64
            and q.ndim == (2 if batch else 1)
            and q.shape[-1] == self.dof
            and q.flags.c_contiguous
        ):
            return q
        arr = np.ascontiguousarray(q, dtype=np.float64)
        if arr.ndim != (2 if batch else 1) or arr.shape[-1] != self.dof:
            want = "(N, dof)" if batch else "(dof,)"
            raise KinematicsError(
                f"joint vector must have shape {want} with dof={self.dof}, got {arr.shape}"
            )
        return arr

    @staticmethod
    def _not_finite(q: Array) -> KinematicsError:
        return KinematicsError(f"joint vector must be finite, got {q.tolist()}")

    def q_from_mapping(self, positions: dict[str, float], base: ArrayLike | None = None) -> Array:
        """A joint vector from name → value, unnamed joints taken from `base` (zeros if None)."""
        q = np.zeros(self.dof) if base is None else self.q_vector(base).copy()
        for joint, value in positions.items():
            if joint not in self.joint_names:
                raise UnknownNameError(f"unknown joint {joint!r}; joints: {list(self.joint_names)}")
            q[self.joint_names.index(joint)] = value
        return q

    # -- kinematics ----------------------------------------------------------------------------

    @cached_property
    def kernels(self) -> Kernels:
        """The compiled kernels (`kinematics.compiled.load_kernels`, on first use)."""
        return load_kernels()

    def _chain_or_default(self, link: str | None) -> Chain:
        if link is None:
            if self._default is None:
                self._default = self.chain(self.default_link())
            return self._default
        chain = self._chains.get(link)
        return chain if chain is not None else self.chain(link)

    def fk(self, q: ArrayLike, link: str | None = None) -> Pose:
        """``root_from_link`` at joint vector `q` (dof,), as a product of dual quaternions."""
        chain = self._chain_or_default(link)
        if not (  # the common case checked inline: this call is the hot path of telemetry
            q.__class__ is np.ndarray
            and q.dtype is _F64
            and q.shape == self._q_shape
            and q.flags.c_contiguous
        ):
            q = self.q_vector(q)
        pose7 = np.empty(7)
        if not self.kernels.fk_pose(chain.packed, q, pose7):
            raise self._not_finite(q)
        pose7.flags.writeable = False
        return Pose._trusted(pose7[:3], pose7[3:])

    def fk_dual_quaternion(self, q: ArrayLike, link: str | None = None) -> Array:
        """``root_from_link`` (8,) as a unit dual quaternion, or (N, 8) for q of shape (N, dof)."""
        chain = self._chain_or_default(link)
        single = np.ndim(q) == 1
        qs = self.q_vector(np.reshape(q, (1, -1)) if single else q, batch=True)
        out = np.empty((qs.shape[0], 8))
        if not self.kernels.fk_batch(chain.packed, qs, out):
            raise self._not_finite(qs)
        return out[0] if single else out

    def fk_batch(self, qs: ArrayLike, link: str | None = None) -> tuple[Array, Array]:
        """(translations (N, 3) m, quaternions (N, 4)) of ``root_from_link`` for qs (N, dof)."""
        chain = self._chain_or_default(link)
        qs = self.q_vector(qs, batch=True)
        pose7 = np.empty((qs.shape[0], 7))
        if not self.kernels.fk_batch(chain.packed, qs, pose7):
            raise self._not_finite(qs)
        return pose7[:, :3], pose7[:, 3:]

    def fk_all(self, q: ArrayLike) -> dict[str, Pose]:
        """``root_from_link`` of every link, keyed by link name in link order."""
        q = self.q_vector(q)
        out = np.empty((len(self.links), 8))
        if not self.kernels.tree_fk(self._packed, q, out):
            raise self._not_finite(q)
        return {link.name: Pose.from_dual_quaternion(out[i]) for i, link in enumerate(self.links)}

    def jacobian(self, q: ArrayLike, link: str | None = None) -> Array:
        """Geometric Jacobian (6, dof) of `link`: rows vx, vy, vz, wx, wy, wz in the root frame;
        zero columns for joints that do not move the link."""
        chain = self._chain_or_default(link)
        q = self.q_vector(q)
        pose7 = np.empty(7)
        J = np.empty((6, self.dof))
        if not self.kernels.fk_pose_jacobian(chain.packed, q, pose7, J):
            raise self._not_finite(q)
        return J

    def jacobian_batch(self, qs: ArrayLike, link: str | None = None) -> Array:
        """Jacobians (N, 6, dof) for qs (N, dof)."""
        chain = self._chain_or_default(link)
        qs = self.q_vector(qs, batch=True)
        J = np.empty((qs.shape[0], 6, self.dof))
        if not self.kernels.jacobian_batch(chain.packed, qs, J):
            raise self._not_finite(qs)
        return J

    def with_limits(self, overrides: dict[str, JointLimit]) -> KinematicTree:
        """A new tree whose joints named in `overrides` carry those limits instead."""
        unknown = sorted(set(overrides) - set(self.joint_names))
        if unknown:
            raise UnknownNameError(f"limit overrides name unknown joints {unknown}")
        links = []
        for link in self.links:
            motor = link.motor
            if isinstance(motor, JointMotor) and link.joint_name in overrides:
                motor = JointMotor(
                    motor.kind,
                    motor.axis,
                    motor.origin,
                    overrides[str(link.joint_name)],
                    motor.joint_name,
                    motor.mimic,
                )
            links.append(Link(link.name, link.parent, motor, link.inertial))
        return KinematicTree(links, name=self.name)

    def __repr__(self) -> str:
        return f"KinematicTree(name={self.name!r}, links={len(self.links)}, dof={self.dof})"
