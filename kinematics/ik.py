"""Inverse kinematics: the joint vector that puts a link at a target, seeded from a known state.

`solve` runs the compiled attempt of `kinematics._ik_kernels` from the seed first; if that does not
converge and restarts are allowed, it retries from random configurations inside the limits until
one converges or the time budget is spent, and returns the best attempt. Success is decided by the
position and rotation tolerances, measured with FK on the returned ``q``: an unreachable target is
never reported as reached, and a singular one ends as a failure, not an exception.

Continuous joints (no position bounds) are returned within π of the seed, which is the same pose.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics import _layout as kern  # the IK kernel's parameter and info indices
from kinematics.errors import KinematicsError
from kinematics.pose import Pose
from kinematics.tree import KinematicTree

__all__ = ["IKOptions", "IKResult", "solve"]

Array = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class IKOptions:
    """How `solve` searches.

    method: "dls" (damped least squares / Levenberg–Marquardt) or "transpose" (Jacobian-transpose
        gradient descent; slower, kept for comparison and for very ill-conditioned cases).
    position_tolerance: m; rotation_tolerance: rad — success means both are met (rotation is
        ignored for position-only targets).
    orientation_weight: m²/rad² weight of the orientation error against the position error.
    max_iterations: per attempt.
    max_joint_change: when set (rad or m), no joint may end farther than this from the seed; the
        search stays inside that box and fails rather than jump to another solution branch.
    restarts: retry from random configurations when the seeded attempt fails.
    time_budget_s: budget for the restarts, in CPU time of the solving thread (the seeded attempt
        always runs): a machine busy with other work delays the answer rather than cutting the
        search short, so a target is not reported unreachable because the CPU was shared.
    null_space_gain: 0..1, pull toward the seed in the null space (redundant arms).
    rng_seed: seed of the random restarts (None: nondeterministic).
    """

    method: Literal["dls", "transpose"] = "dls"
    position_tolerance: float = 1e-5
    rotation_tolerance: float = 1e-4
    orientation_weight: float = 0.1
    max_iterations: int = 100
    max_joint_change: float | None = None
    restarts: bool = True
    time_budget_s: float = 0.01
    null_space_gain: float = 1.0
    damping: float = 1e-4
    rng_seed: int | None = 0

    def __post_init__(self) -> None:
        checks = {
            "position_tolerance": self.position_tolerance > 0.0,
            "rotation_tolerance": self.rotation_tolerance > 0.0,
            "orientation_weight": self.orientation_weight > 0.0,
            "max_iterations": self.max_iterations >= 1,
            "time_budget_s": self.time_budget_s >= 0.0,
            "null_space_gain": 0.0 <= self.null_space_gain <= 1.0,
            "damping": self.damping > 0.0,
            "max_joint_change": self.max_joint_change is None or self.max_joint_change > 0.0,
        }
        for name, ok in checks.items():
            value = getattr(self, name)
            if not ok or (isinstance(value, float) and not math.isfinite(value)):
                raise KinematicsError(f"IKOptions.{name}: {value!r} is out of range")
        if self.method not in ("dls", "transpose"):
            raise KinematicsError(f"IKOptions.method: {self.method!r} must be 'dls' or 'transpose'")


@dataclass(frozen=True, slots=True)
class IKResult:
    """The outcome of `solve`.

    q: (dof,) the best joint vector found (always within the limits).
    success: both errors within tolerance.
    position_error: m; rotation_error: rad (0 for position-only targets), from FK on `q`.
    iterations: total over all attempts; attempts: 1 + the number of random restarts.
    """

    q: Array
    success: bool
    position_error: float
    rotation_error: float
    iterations: int
    attempts: int = 1
    message: str = field(default="")


def _target7(target: Pose | ArrayLike) -> tuple[Array, bool]:
    """[t, quat] of the target and whether it constrains the orientation."""
    if isinstance(target, Pose):
        return np.concatenate((target.translation, target.quaternion)), True
    position = np.asarray(target, dtype=np.float64)
    if position.shape != (3,) or not np.all(np.isfinite(position)):
        raise KinematicsError(f"IK target must be a Pose or 3 finite numbers, got {position!r}")
    return np.concatenate((position, [1.0, 0.0, 0.0, 0.0])), False


def _random_start(rng: np.random.Generator, seed: Array, lower: Array, upper: Array) -> Array:
    """Uniform inside the limits (seed ± π for continuous joints)."""
    low = np.where(np.isfinite(lower), lower, seed - math.pi)
    high = np.where(np.isfinite(upper), upper, seed + math.pi)
    return rng.uniform(low, high)


@functools.lru_cache(maxsize=64)
def _params(options: IKOptions, with_orientation: bool) -> Array:
    """The kernel's parameter vector (read-only, cached: options are frozen and hashable)."""
    params = np.empty(kern.N_PARAMS)
    params[kern.P_METHOD] = kern.DLS if options.method == "dls" else kern.TRANSPOSE
    params[kern.P_ORIENT_WEIGHT] = options.orientation_weight if with_orientation else 0.0
    params[kern.P_MAX_ITER] = options.max_iterations
    params[kern.P_POS_TOL] = options.position_tolerance
    params[kern.P_ROT_TOL] = options.rotation_tolerance
    params[kern.P_NULL_GAIN] = options.null_space_gain
    params[kern.P_LAMBDA] = options.damping
    params[kern.P_MAX_CHANGE] = (
        math.inf if options.max_joint_change is None else options.max_joint_change
    )
    params.flags.writeable = False
    return params


def _without_null_space(params: Array) -> Array:
    copy = params.copy()
    copy[kern.P_NULL_GAIN] = 0.0
    copy.flags.writeable = False
    return copy


_DEFAULT_OPTIONS = IKOptions()


def solve(
    tree: KinematicTree,
    target: Pose | ArrayLike,
    seed: ArrayLike,
    link: str | None = None,
    options: IKOptions | None = None,
    *,
    hold: Collection[str] = (),
) -> IKResult:
    """Joint vector placing `link` (default: the tree's default link) at `target` (a Pose in the
    root frame, or a position (3,) for a position-only target), starting from `seed` (dof,).
    hold: joints kept at the seed (as the joints that do not move the link always are).
    Raises `KinematicsError` for invalid input (unknown link or joint, wrong shapes, non-finite
    values); an unreachable target is a result."""
    options = options or _DEFAULT_OPTIONS
    chain = tree.chain(link or tree.default_link())
    moving = _moving(tree, chain.moving, hold)
    target7, with_orientation = _target7(target)
    seed_q = tree.q_vector(seed).copy()
    if not math.isfinite(seed_q.sum()):  # any NaN or infinity makes the sum non-finite
        raise KinematicsError(f"IK seed must be finite, got {seed_q.tolist()}")
    seed_q.flags.writeable = False
    target7.flags.writeable = False
    params = _params(options, with_orientation)
    limits = tree.limits
    kernels = tree.kernels

    def attempt(start: Array, params: Array) -> tuple[Array, Array]:
        info = np.empty(4)
        kernels.ik_attempt(
            chain.packed,
            limits.lower,
            limits.upper,
            moving,
            target7,
            seed_q,
            params,
            start,
            info,
        )
        return start, info

    deadline = time.thread_time() + options.time_budget_s
    best_q, best_info = attempt(seed_q.copy(), params)
    attempts, iterations = 1, int(best_info[kern.I_ITERATIONS])
    rng = None
    while options.restarts and not best_info[kern.I_CONVERGED] and time.thread_time() < deadline:
        rng = rng or np.random.default_rng(options.rng_seed)
        restart_params = _without_null_space(params)  # random starts: the seed is far anyway
        q, info = attempt(_random_start(rng, seed_q, limits.lower, limits.upper), restart_params)
        attempts += 1
        iterations += int(info[kern.I_ITERATIONS])
        if _score(info, params) < _score(best_info, params):
            best_q, best_info = q, info
    return _result(best_q, best_info, params, iterations, attempts)


def _moving(
    tree: KinematicTree, moving: NDArray[np.bool_], hold: Collection[str]
) -> NDArray[np.bool_]:
    """The chain's moving joints without those held (read-only, as the kernel takes it)."""
    if not hold:
        return moving
    unknown = sorted(set(hold) - set(tree.joint_names))
    if unknown:
        raise KinematicsError(f"hold: unknown joints {unknown}; joints: {list(tree.joint_names)}")
    free = moving.copy()
    free[[tree.joint_names.index(name) for name in hold]] = False
    free.flags.writeable = False
    return free


def _score(info: Array, params: Array) -> float:
    """Normalised distance from success, for choosing the best attempt."""
    position = info[kern.I_POS_ERR] / params[kern.P_POS_TOL]
    if params[kern.P_ORIENT_WEIGHT] == 0.0:
        return float(position)
    return float(max(position, info[kern.I_ROT_ERR] / params[kern.P_ROT_TOL]))


def _result(q: Array, info: Array, params: Array, iterations: int, attempts: int) -> IKResult:
    """The kernel measured both errors with FK on the returned q; they decide success."""
    position_error = float(info[kern.I_POS_ERR])
    with_orientation = params[kern.P_ORIENT_WEIGHT] > 0.0
    rotation_error = float(info[kern.I_ROT_ERR]) if with_orientation else 0.0
    success = bool(info[kern.I_CONVERGED])
    if success:
        message = "converged"
    else:
        message = (
            f"did not converge: position error {position_error:.3g} m "
            f"(tolerance {params[kern.P_POS_TOL]:g})"
        )
        if with_orientation:
            message += (
                f", rotation error {rotation_error:.3g} rad (tolerance {params[kern.P_ROT_TOL]:g})"
            )
    q.flags.writeable = False
    return IKResult(q, success, position_error, rotation_error, iterations, attempts, message)
