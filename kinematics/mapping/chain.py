"""Chain mapping: put the arm in the *shape* of another chain (a leader arm with other proportions,
a tracked human arm) known only by the positions of its joints. Only directions matter.

The vector-pair math (the rotation family, one joint, two joints) lives in
`kinematics.mapping.rotation_family`, the path walked and each joint's effect on a segment in
`kinematics.mapping.path`; the public names are re-exported by `kinematics.mapping`.

The chain (`map_chain`) is walked from the root, one segment (consecutive keypoint links) at a time.
A segment's direction is turned by the joints at or above its start link (they rotate it whole:
the closed forms of `kinematics.mapping.rotation_family`) and by those strictly inside it (they
swing its end on a circle: handled, as are mimic-coupled joints, by a damped Gauss–Newton
(Levenberg–Marquardt) refinement). Each joint
is decided by the first segment whose direction it changes and is then kept, so later segments
never undo earlier ones; a joint that changes no direction (e.g. a wrist roll about the last
segment) stays at the seed, as do prismatic joints (lengths carry no information here) and joints
the caller holds. Every branch (each segment's choices within the tolerance) is explored, up to
`MappingOptions.max_nodes`, and of the complete mappings within the tolerance the one closest to
the seed wins (Euclidean distance in q), so a shape that two branches reach (an elbow up or down, a
wrist flipped) comes out on the seed's side; a branch already farther from the seed than the best
is not followed, and one that makes a later segment unreachable is backtracked. Joint values are
wrapped by 2π to the turn inside the limits closest to the seed, or clipped into the limits when
none fits: the result is always within the limits, never NaN.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics.errors import KinematicsError
from kinematics.mapping.path import EFFECT, ChainPath, link_path
from kinematics.mapping.rotation_family import (
    PARALLEL_TOLERANCE,
    AxisRotation,
    RotationFamily,
    angle_between,
    cross,
    norm,
    rotate,
    rotation_about_axis,
    rotation_family,
    turn_about,
    two_turns,
    unit_vector,
)
from kinematics.tree import KinematicTree

__all__ = [
    "MIN_SEGMENT_LENGTH",
    "PARALLEL_TOLERANCE",
    "AxisRotation",
    "ChainMapping",
    "MappingOptions",
    "RotationFamily",
    "map_chain",
    "rotation_about_axis",
    "rotation_family",
]

Array = NDArray[np.float64]
MIN_SEGMENT_LENGTH = 1e-9  # m: keypoints closer than this give no direction
_EXACT = 1e-10  # rad: a segment this close is aligned (no refinement; ranked by distance only)
_TWO_PI = 2.0 * math.pi


# -- a chain --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MappingOptions:
    """How `map_chain` searches.

    tolerance: rad; success means every segment's direction is within it of the target's.
    refine_iterations: Gauss–Newton iterations for a segment the closed forms leave unaligned.
    max_nodes: segment solutions tried in all, for backtracking out of dead-end branches.
    """

    tolerance: float = 1e-6
    refine_iterations: int = 30
    max_nodes: int = 64

    def __post_init__(self) -> None:
        if not (0.0 < self.tolerance < math.pi):
            raise KinematicsError(f"MappingOptions.tolerance: {self.tolerance!r} not in (0, π)")
        for name in ("refine_iterations", "max_nodes"):
            if getattr(self, name) < 1:
                raise KinematicsError(
                    f"MappingOptions.{name}: {getattr(self, name)!r} must be >= 1"
                )


@dataclass(frozen=True, slots=True, eq=False)
class ChainMapping:
    """The outcome of `map_chain`.

    q: (dof,) joint vector, always within the limits.
    success: every segment error within the tolerance.
    segment_errors: (k − 1,) rad, ∠(our links[i] → links[i + 1] at q, the target's segment i).
    joint_residuals: (dof,) rad, for each joint the error of the segment that decided it (0 for
        the joints kept at the seed).
    determined: (dof,) True for the joints decided by a segment direction; the others keep the
        seed (clipped into the limits).
    """

    q: Array
    success: bool
    segment_errors: Array
    joint_residuals: Array
    determined: NDArray[np.bool_]
    message: str

    @property
    def worst_error(self) -> float:
        return float(np.max(self.segment_errors))


class _Walk:
    """One `map_chain` call: the path's motors, the targets and the search state."""

    def __init__(
        self,
        tree: KinematicTree,
        links: Sequence[str],
        directions: Array,
        seed: Array,
        options: MappingOptions,
        hold: Collection[str],
    ) -> None:
        self.tree, self.links, self.options = tree, list(links), options
        self.chain = ChainPath(tree, self.links)
        held = {tree.joint_names.index(name) for name in hold}
        self.free = frozenset(
            m.joint for m in self.chain.motors if m.own and m.revolute and m.joint not in held
        )
        self.lower, self.upper = tree.limits.lower, tree.limits.upper
        self.seed = tree.limits.clamp(seed)
        self.directions = directions
        self.nodes = 0
        self.best: tuple[tuple[float, float], Array, Array, dict[int, int]] | None = None

    def error(self, q: Array, seg: int) -> float:
        start = self.tree.fk(q, self.links[seg]).translation
        end = self.tree.fk(q, self.links[seg + 1]).translation
        return angle_between(end - start, self.directions[seg])

    # -- choices for one segment ----------------------------------------------------------------

    def value(self, j: int, value: float) -> float:
        """`value` + 2πk inside joint j's limits closest to the seed, or the nearer bound."""
        lower, upper, seed = float(self.lower[j]), float(self.upper[j]), float(self.seed[j])
        k_low = -math.inf if math.isinf(lower) else math.ceil((lower - value) / _TWO_PI)
        k_high = math.inf if math.isinf(upper) else math.floor((upper - value) / _TWO_PI)
        if k_low <= k_high:
            k = min(max(round((seed - value) / _TWO_PI), k_low), k_high)
            return min(max(value + k * _TWO_PI, lower), upper)
        gap_low = abs(math.remainder(lower - value, _TWO_PI))
        gap_high = abs(math.remainder(upper - value, _TWO_PI))
        return lower if gap_low <= gap_high else upper

    def rank(self, error: float, q: Array) -> tuple[float, float]:
        """Aligned choices first, closest to the seed; then by error."""
        distance = float(np.linalg.norm(q - self.seed))
        return (0.0 if error <= _EXACT else error, distance)

    def candidates(
        self, seg: int, q: Array, positions: Array, axes: Array, locked: frozenset[int]
    ) -> list[tuple[float, Array]]:
        """(error, q) choices for segment `seg`, best first."""
        effects = {
            j: e
            for j, e in self.chain.effects(seg, positions, axes, self.free - locked).items()
            if norm(e[0]) > EFFECT
        }
        v = unit_vector(self.chain.segment(positions, seg), "segment")
        t = self.directions[seg]
        pure = [j for j, (_, single) in effects.items() if single]
        turns: list[dict[int, float]] = [{}]
        turns += [{j: turn_about(v, t, axes[self.chain.own_row[j]], 0.0)[0]} for j in pure]
        for j1, j2 in itertools.combinations(pure, 2):
            u1, u2 = axes[self.chain.own_row[j1]], axes[self.chain.own_row[j2]]
            if norm(cross(u1, u2)) > EFFECT:
                turns += [{j1: a1, j2: a2} for a1, a2 in two_turns(u1, u2, v, t)]
        found: list[tuple[float, Array]] = []
        for turn in turns:
            choice, direction = q.copy(), v
            for j in reversed(turn):  # R(u1, θ1) R(u2, θ2) v: the downstream turn first
                choice[j] = self.value(j, q[j] + turn[j])
                direction = rotate(direction, axes[self.chain.own_row[j]], choice[j] - q[j])
            if not any(np.array_equal(choice, other) for _, other in found):
                found.append((angle_between(direction, t), choice))  # exact: these turn v whole
        unchanged = found[0]
        found.sort(key=lambda c: self.rank(*c))
        one_turn_is_optimal = len(effects) == 1 and len(pure) == 1
        if found[0][0] > _EXACT and effects and not one_turn_is_optimal:
            # from the best closed-form choice, and from where the arm is (the best choice may
            # sit against a limit that the descent cannot get round)
            starts = [found[0]] if found[0] is unchanged else [found[0], unchanged]
            found += [self.refine(seg, start, error, sorted(effects)) for error, start in starts]
            found.sort(key=lambda c: self.rank(*c))
        return found

    def refine(self, seg: int, q: Array, error: float, joints: list[int]) -> tuple[float, Array]:
        """Levenberg–Marquardt on the segment's unit direction over `joints`, within the limits
        (a joint at a bound that the descent would push out of it sits the iteration out)."""
        damping, index = 1e-3, np.array(joints)
        for _ in range(self.options.refine_iterations):
            positions, axes = self.chain.frames(q)
            effects = self.chain.effects(seg, positions, axes, joints)
            jacobian = np.array([effects[j][0] for j in joints]).T  # (3, m)
            v = self.chain.segment(positions, seg)
            gradient = jacobian.T @ (v / norm(v) - self.directions[seg])
            pinned = ((q[index] <= self.lower[index]) & (gradient > 0.0)) | (
                (q[index] >= self.upper[index]) & (gradient < 0.0)
            )
            moving = index[~pinned]
            hessian = jacobian[:, ~pinned].T @ jacobian[:, ~pinned]
            improved = False
            while damping < 1e8 and not improved and len(moving):
                step = np.linalg.solve(hessian + damping * np.eye(len(moving)), -gradient[~pinned])
                trial = q.copy()
                trial[moving] = np.clip(q[moving] + step, self.lower[moving], self.upper[moving])
                trial_error = self.error(trial, seg)
                improved = trial_error < error
                if improved:
                    q, error, damping = trial, trial_error, max(damping * 0.1, 1e-12)
                else:
                    damping *= 10.0
            if not improved or error <= _EXACT:
                break
        return error, q

    # -- the walk -------------------------------------------------------------------------------

    def explore(
        self, seg: int, q: Array, frames: tuple[Array, Array], owners: dict[int, int]
    ) -> bool:
        """Depth-first from segment `seg`; True once the node budget ends the search."""
        if seg == len(self.directions):
            self.finish(q, frames[0], owners)
            return False
        locked = frozenset(owners)
        found = self.candidates(seg, q, *frames, locked)
        good = [c for c in found if c[0] <= self.options.tolerance] or found[:1]
        for _, choice in good:
            if self.farther_than_best(choice):
                continue
            self.nodes += 1
            chosen = self.chain.frames(choice)
            moved = self.chain.effects(seg, *chosen, self.free - locked)
            decided = {j for j, (d, _) in moved.items() if norm(d) > EFFECT}
            if self.explore(seg + 1, choice, chosen, owners | dict.fromkeys(decided, seg)):
                return True
            if self.nodes >= self.options.max_nodes:
                return True
        return False

    def farther_than_best(self, q: Array) -> bool:
        """A partial mapping can only move away from the seed (the joints later segments decide
        are still at it): not worth following once a successful mapping is closer."""
        if self.best is None or self.best[0][0] > 0.0:
            return False
        return float(np.linalg.norm(q - self.seed)) >= self.best[0][1]

    def finish(self, q: Array, positions: Array, owners: dict[int, int]) -> None:
        """Keep the complete mapping `q` if it is the best: within the tolerance, closest to the
        seed; else the smallest worst error."""
        errors = np.array(
            [
                angle_between(self.chain.segment(positions, i), t)
                for i, t in enumerate(self.directions)
            ]
        )
        worst = float(np.max(errors))
        key = (
            0.0 if worst <= self.options.tolerance else worst,
            float(np.linalg.norm(q - self.seed)),
        )
        if self.best is None or key < self.best[0]:
            self.best = (key, q, errors, owners)

    def result(self) -> ChainMapping:
        frames = self.chain.frames(self.seed)
        for seg in range(len(self.directions)):
            length = float(np.linalg.norm(self.chain.segment(frames[0], seg)))
            if length < MIN_SEGMENT_LENGTH:
                raise KinematicsError(
                    f"links {self.links[seg]!r} and {self.links[seg + 1]!r}: their origins are "
                    f"{length:.3g} m apart, no direction; choose links at distinct joints"
                )
        self.explore(0, self.seed.copy(), frames, {})
        assert self.best is not None  # the first branch always reaches the end
        _, q, errors, owners = self.best
        worst = float(np.max(errors))
        residuals = np.zeros(self.tree.dof)
        determined = np.zeros(self.tree.dof, dtype=np.bool_)
        for j, seg in owners.items():
            residuals[j], determined[j] = errors[seg], True
        success = worst <= self.options.tolerance
        tolerance = f"tolerance {self.options.tolerance:g} rad"
        if success:
            message = f"mapped: worst segment error {worst:.3g} rad ({tolerance})"
        else:
            seg = int(np.argmax(errors))
            message = (
                f"segment {self.links[seg]!r} -> {self.links[seg + 1]!r}: {worst:.3g} rad from "
                f"the target direction ({tolerance})"
            )
        for array in (q, errors, residuals, determined):
            array.flags.writeable = False
        return ChainMapping(q, success, errors, residuals, determined, message)


def _directions(links: Sequence[str], targets: ArrayLike) -> Array:
    """The unit directions (k − 1, 3) of the target's segments; raises for invalid targets."""
    points = np.array(targets, dtype=np.float64)
    if points.ndim != 2 or points.shape != (len(links), 3):
        raise KinematicsError(
            f"targets: shape {points.shape} must be ({len(links)}, 3), one point per link"
        )
    if not np.all(np.isfinite(points)):
        raise KinematicsError("targets: every coordinate must be a finite number")
    scale = float(np.max(np.abs(points))) or 1.0  # differences of huge coordinates stay finite
    segments = np.diff(points / scale, axis=0)
    lengths = np.linalg.norm(segments, axis=1)
    for i, length in enumerate(lengths):
        if length < MIN_SEGMENT_LENGTH / scale:
            raise KinematicsError(
                f"targets[{i}] -> targets[{i + 1}] ({links[i]!r} -> {links[i + 1]!r}): "
                f"{length * scale:.3g} m apart, no direction (at least {MIN_SEGMENT_LENGTH:g})"
            )
    directions: Array = segments / lengths[:, None]
    return directions


def map_chain(
    tree: KinematicTree,
    links: Sequence[str],
    targets: ArrayLike,
    seed: ArrayLike,
    *,
    options: MappingOptions | None = None,
    hold: Collection[str] = (),
) -> ChainMapping:
    """Joint values that align the arm's segments links[i] → links[i + 1] (between link origins)
    with the target's segments targets[i] → targets[i + 1] (directions only, in the root frame).

    links: k ≥ 2 link names, root first, each a descendant of the one before. targets: (k, 3),
    consecutive points at least `MIN_SEGMENT_LENGTH` apart. seed: (dof,) the current state,
    preferred wherever the directions leave freedom. hold: joints kept at the seed.
    Raises `KinematicsError` for invalid input; an unreachable shape is a result (success False).
    """
    options = options or MappingOptions()
    if len(links) < 2:
        raise KinematicsError(f"links: {list(links)} must name at least 2 links")
    if len(set(links)) != len(links):
        raise KinematicsError(f"links: {list(links)} must not repeat a link")
    for i in range(1, len(links)):
        if links[i - 1] not in link_path(tree, links[i])[:-1]:
            raise KinematicsError(
                f"links[{i}]: {links[i]!r} is not a descendant of {links[i - 1]!r}; the links "
                "must follow one chain from the root"
            )
    unknown = sorted(set(hold) - set(tree.joint_names))
    if unknown:
        raise KinematicsError(f"hold: unknown joints {unknown}; joints: {list(tree.joint_names)}")
    directions = _directions(links, targets)
    seed_q = tree.q_vector(seed).copy()
    if not np.all(np.isfinite(seed_q)):
        raise KinematicsError(f"seed: {seed_q.tolist()} must be finite")
    return _Walk(tree, links, directions, seed_q, options, hold).result()
