"""`CollisionModel`: a tree's collision geometry, its environment and the pairs to check, built
once and then only queried (like `KinematicTree`).

Queries take joint vectors ``q`` (dof,) in ``tree.joint_names`` order (rad, m) and answer signed
distances in m (positive apart, negative the penetration depth), witness points in the root frame.
A pair is in contact when its distance is below `margin`. The kernels are loaded on the first
query (`kinematics.collision.compiled`), or at once by `load_collision_kernels`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kinematics.collision import _layout as lay
from kinematics.collision.bodies import pair_reach_weights, reach_weights
from kinematics.collision.compiled import CollisionKernels, load_collision_kernels
from kinematics.collision.packing import pack_pairs, pack_shapes
from kinematics.collision.pairs import SAMPLES, check_allowed_names, select_pairs
from kinematics.collision.results import (
    DistanceReport,
    PairDistance,
    PathCheck,
)
from kinematics.collision.spec import (
    CollisionSpec,
    environment_to_dict,
    shape_to_dict,
    spec_from_dict,
)
from kinematics.errors import KinematicsError, ModelError, UnknownNameError
from kinematics.tree import KinematicTree

__all__ = ["CollisionModel"]

Array = NDArray[np.float64]
TrajectoryFn = Callable[[Array], ArrayLike]


class CollisionModel:
    """The collision model of `tree` described by `spec`.

    Pairs: `checked_pairs` (links against links, then links against the environment) and
    `excluded_pairs` with their reasons (`kinematics.collision.pairs`). Raises `ModelError` for a
    link the tree does not have (`UnknownNameError`), allowed pairs naming unknown things, and a
    prismatic joint without finite limits above geometry.
    """

    def __init__(
        self, tree: KinematicTree, spec: CollisionSpec, *, samples: int = SAMPLES, seed: int = 0
    ) -> None:
        self.tree = tree
        self.spec = spec
        self.margin = float(spec.margin)
        index = {name: i for i, name in enumerate(tree.link_names)}
        for link in spec.links:
            if link not in index:
                raise UnknownNameError(
                    f"collision links: unknown link {link!r}; links: {list(tree.link_names)}"
                )
        env_names = [obj.name for obj in spec.environment]
        problems = check_allowed_names(spec.allowed, spec.links, env_names)
        if problems:
            raise ModelError("; ".join(problems))
        self._shapes, self._owned = pack_shapes(index, spec.links, spec.environment)
        self._weights = reach_weights(tree, spec.links)
        self._weights.flags.writeable = False
        links = sorted(spec.links, key=lambda n: index[n])
        self.checked_pairs, self.excluded_pairs = select_pairs(
            tree,
            links,
            env_names,
            self_collision=spec.self_collision,
            allowed=spec.allowed,
            margin=self.margin,
            batch_distances=self._candidate_distances,
            samples=samples,
            seed=seed,
        )
        self._names = [(p.a, p.b) for p in self.checked_pairs]
        self._pairs = pack_pairs(self._names, self._owned, self._shapes)
        relative = pair_reach_weights(tree, self._weights, self._names)
        self._pair_weights = np.ascontiguousarray(relative[self._pairs[:, lay.PAIR_ID]])
        self._pair_weights.flags.writeable = False

    @classmethod
    def from_dict(cls, tree: KinematicTree, data: Mapping[str, Any]) -> CollisionModel:
        """The model of `tree` from a config's ``collision:`` section, already parsed
        (`kinematics.collision.spec`)."""
        return cls(tree, spec_from_dict(data))

    # -- construction helpers -------------------------------------------------------------------

    @cached_property
    def kernels(self) -> CollisionKernels:
        """The compiled collision kernels (loaded on first use)."""
        return load_collision_kernels()

    def _candidate_distances(self, names: Sequence[tuple[str, str]], qs: Array) -> Array:
        pairs = pack_pairs(names, self._owned, self._shapes)
        return self._batch(pairs, len(names), qs)

    def _batch(self, pairs: NDArray[np.int64], count: int, qs: ArrayLike) -> Array:
        qs = self.tree.q_vector(qs, batch=True)
        out = np.empty((qs.shape[0], count))
        if not self.kernels.distances_batch(self.tree.packed, self._shapes, pairs, qs, out):
            raise KinematicsError(f"joint vectors must be finite, got {qs.tolist()}")
        return out

    # -- queries --------------------------------------------------------------------------------

    @property
    def pair_names(self) -> tuple[tuple[str, str], ...]:
        """The checked pairs' (a, b) names, in the order of `distances_batch`'s columns."""
        return tuple(self._names)

    @property
    def reach_weights(self) -> Array:
        """(n_links, dof) read-only: no point of link i's geometry moves more than
        ``reach_weights[i] · |Δq|`` (m) for a joint change Δq (`kinematics.collision.bodies`)."""
        return self._weights

    def distances(self, q: ArrayLike) -> DistanceReport:
        """Every checked pair's signed distance and witness points at `q` (dof,)."""
        q = self.tree.q_vector(q)
        count = len(self._names)
        dist = np.empty(count)
        points = np.empty((count, 6))
        if not self.kernels.distances(self.tree.packed, self._shapes, self._pairs, q, dist, points):
            raise KinematicsError(f"joint vector must be finite, got {q.tolist()}")
        pairs = tuple(
            PairDistance(a, b, float(dist[i]), points[i, :3].copy(), points[i, 3:].copy())
            for i, (a, b) in enumerate(self._names)
        )
        return DistanceReport(q.copy(), self.margin, pairs)

    def distances_batch(self, qs: ArrayLike) -> Array:
        """(N, P) signed distances (m) for configurations qs (N, dof); columns: `pair_names`."""
        return self._batch(self._pairs, len(self._names), qs)

    def min_distance(self, q: ArrayLike) -> tuple[float, tuple[str, str] | None]:
        """(the least signed distance over the checked pairs (m), its pair); (inf, None) when the
        model checks no pair."""
        return self._min(q, -np.inf)

    def first_contact(self, q: ArrayLike) -> tuple[str, str, float] | None:
        """The first checked pair closer than the margin at `q` as (a, b, distance (m)), or None:
        the hot path (a target's check), stopping at the first pair in contact."""
        distance, pair = self._min(q, self.margin)
        if pair is None or distance >= self.margin:
            return None
        return (pair[0], pair[1], distance)

    def in_contact(self, q: ArrayLike) -> bool:
        """Whether some checked pair is closer than the margin at `q`."""
        return self.first_contact(q) is not None

    def _min(self, q: ArrayLike, stop_below: float) -> tuple[float, tuple[str, str] | None]:
        q = self.tree.q_vector(q)
        out = np.empty(2)
        packed = self.tree.packed
        if not self.kernels.min_distance(packed, self._shapes, self._pairs, q, stop_below, out):
            raise KinematicsError(f"joint vector must be finite, got {q.tolist()}")
        pid = int(out[1])
        return (float(out[0]), None) if pid < 0 else (float(out[0]), self._names[pid])

    # -- paths ----------------------------------------------------------------------------------

    def check_path(self, waypoints: ArrayLike) -> PathCheck:
        """Check the joint-space path through `waypoints` (M, dof), straight between them.

        Each interval is sampled finely enough that no point of any link moves more than
        margin / 2 between samples (`reach_weights`): when every sample is at least the margin
        apart, the continuous path keeps every checked pair at least margin / 2 apart (pairs with
        the environment 3/4 of it). Reports the first sample closer than the margin.
        """
        qs = self.tree.q_vector(waypoints, batch=True)
        bounds = np.ascontiguousarray(np.abs(np.diff(qs, axis=0)))
        return self._check(qs, bounds)

    def check_trajectory(
        self,
        positions: TrajectoryFn,
        duration_s: float,
        max_velocity: ArrayLike,
        breaks_s: ArrayLike | None = None,
    ) -> PathCheck:
        """Check a trajectory given as a function: ``positions(t)`` maps times t (N,) in s to
        configurations (N, dof). `max_velocity` bounds its joint speeds (rad/s, m/s): (dof,) over
        the whole trajectory (e.g. the joints' velocity limits), or (m, dof) per piece between
        the m + 1 non-decreasing `breaks_s` from 0 to `duration_s`. Sampled at `sample_times`: no
        point of any link moves more than margin / 2 between samples at those speeds; the
        fraction reported is t / duration_s."""
        times, steps = self._trajectory_steps(duration_s, max_velocity, breaks_s)
        qs = self.tree.q_vector(np.asarray(positions(times), dtype=np.float64), batch=True)
        if qs.shape[0] != times.shape[0]:
            raise KinematicsError(
                f"positions(t) returned {qs.shape[0]} configurations for {times.shape[0]} times"
            )
        check = self._check(qs, np.ascontiguousarray(steps))
        if check.clear or duration_s == 0.0:
            return check
        assert check.fraction is not None  # the kernel's: the sample's index / intervals
        sample = round(check.fraction * (times.shape[0] - 1))
        return dataclasses.replace(check, fraction=float(times[sample]) / duration_s)

    def sample_times(
        self, duration_s: float, max_velocity: ArrayLike, breaks_s: ArrayLike | None = None
    ) -> Array:
        """The times (s) at which `check_trajectory` samples a trajectory with these speed
        bounds: the fewest for which no point of any link moves more than margin / 2 between two
        of them (`reach_weights`), spaced by the pieces' speeds."""
        return self._trajectory_steps(duration_s, max_velocity, breaks_s)[0]

    def _trajectory_steps(
        self, duration_s: float, max_velocity: ArrayLike, breaks_s: ArrayLike | None
    ) -> tuple[Array, Array]:
        """(times (N,), joint travel bounds (N - 1, dof) between consecutive times).

        The bounds integrate to the reach of the fastest point (m, piecewise linear in time)
        and each joint's travel (rad, m); the times cut the total reach into equal steps of at
        most margin / 2, so a step may span pieces and no piece costs a sample of its own."""
        breaks, velocity = self._pieces(duration_s, max_velocity, breaks_s)
        span = np.diff(breaks)
        speed = np.max(velocity @ self._weights.T, axis=1, initial=0.0)  # m/s per piece
        if self.margin == 0.0 and np.any(speed > 0.0):
            raise KinematicsError("a moving path cannot be sampled with a margin of 0")
        reach = np.concatenate([[0.0], np.cumsum(speed * span)])  # m, at each break
        travel = np.vstack([np.zeros(velocity.shape[1]), np.cumsum(velocity * span[:, None], 0)])
        steps = max(1, int(np.ceil(reach[-1] / (0.5 * self.margin)))) if reach[-1] > 0.0 else 1
        times = np.interp(np.linspace(0.0, reach[-1], steps + 1), reach, breaks)
        times[0], times[-1] = 0.0, duration_s
        at = np.column_stack([np.interp(times, breaks, column) for column in travel.T])
        bounds = np.diff(at, axis=0)
        # A step within one piece lasts reach / steps / speed: the same bounds for all its steps
        # (the kernel then reuses what it derived from them), not each rounded differently.
        first = np.searchsorted(breaks, times[:-1], side="right") - 1
        last = np.searchsorted(breaks, times[1:], side="left") - 1
        inside = (first == last) & (first >= 0) & (first < span.shape[0])
        piece = first[inside]
        if piece.size and np.all(speed[piece] > 0.0):
            bounds[inside] = velocity[piece] * (reach[-1] / steps / speed[piece])[:, None]
        return times, bounds

    def _pieces(
        self, duration_s: float, max_velocity: ArrayLike, breaks_s: ArrayLike | None
    ) -> tuple[Array, Array]:
        """Validated (breaks (m + 1,), |velocity| (m, dof)) of `check_trajectory`'s arguments."""
        if not (np.isfinite(duration_s) and duration_s >= 0.0):
            raise KinematicsError(f"duration_s: {duration_s} must be a finite number ≥ 0 (s)")
        velocity = np.abs(np.asarray(max_velocity, dtype=np.float64))
        dof = self.tree.dof
        if breaks_s is None:
            if velocity.shape != (dof,) or not np.all(np.isfinite(velocity)):
                raise KinematicsError(
                    f"max_velocity must be {dof} finite numbers, got {velocity.tolist()}"
                )
            return np.array([0.0, duration_s]), velocity[None, :]
        breaks = np.asarray(breaks_s, dtype=np.float64)
        ordered = breaks.ndim == 1 and breaks.shape[0] >= 2 and bool(np.all(np.diff(breaks) >= 0))
        if not (ordered and breaks[0] == 0.0 and breaks[-1] == duration_s):
            raise KinematicsError(
                f"breaks_s: {breaks.tolist()} must increase from 0 to duration_s {duration_s}"
            )
        m = breaks.shape[0] - 1
        if velocity.shape != (m, dof):
            raise KinematicsError(
                f"max_velocity must have one row of {dof} per piece between breaks_s, ({m}, "
                f"{dof}), got shape {velocity.shape}"
            )
        if not np.all(np.isfinite(velocity)):
            raise KinematicsError(f"max_velocity must be finite, got {velocity.tolist()}")
        return breaks, velocity

    def _check(self, qs: Array, bounds: Array) -> PathCheck:
        if self.margin == 0.0 and np.any(bounds > 0.0):
            raise KinematicsError("a moving path cannot be sampled with a margin of 0")
        result = np.zeros(lay.N_RESULT)
        q_out = np.zeros(self.tree.dof)
        ok = self.kernels.check_path(
            self.tree.packed,
            self._shapes,
            self._pairs,
            self._weights,
            self._pair_weights,
            qs,
            bounds,
            self.margin,
            result,
            q_out,
        )
        if not ok:
            raise KinematicsError(f"path configurations must be finite, got {qs.tolist()}")
        samples, evaluated = int(result[lay.R_SAMPLES]), int(result[lay.R_EVALUATED])
        if not result[lay.R_FOUND]:
            return PathCheck(True, None, None, None, None, samples, evaluated)
        pair = self._names[int(result[lay.R_PAIR])]
        fraction = float(result[lay.R_FRACTION])
        return PathCheck(
            False, fraction, pair, float(result[lay.R_DISTANCE]), q_out, samples, evaluated
        )

    # -- description ----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The model as JSON-ready data (the daemon's ``model`` topic)::

        {"margin", "self_collision", "links": {link: [shape dicts]}, "environment": [object
         dicts], "allowed": [[a, b, reason], ...]}
        """
        return {
            "margin": self.margin,
            "self_collision": self.spec.self_collision,
            "links": {
                link: [shape_to_dict(shape) for shape in shapes]
                for link, shapes in self.spec.links.items()
            },
            "environment": [environment_to_dict(obj) for obj in self.spec.environment],
            "allowed": [pair.to_list() for pair in self.excluded_pairs],
        }

    def __repr__(self) -> str:
        return (
            f"CollisionModel(tree={self.tree.name!r}, links={len(self.spec.links)}, "
            f"environment={len(self.spec.environment)}, checked={len(self.checked_pairs)}, "
            f"excluded={len(self.excluded_pairs)}, margin={self.margin})"
        )
