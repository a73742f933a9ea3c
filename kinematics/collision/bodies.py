"""The structure a collision model derives from its tree, without numba: rigid bodies, the
adjacent bodies that are never checked against each other, and how far a link can move.

- A *body* is a set of links rigidly attached to each other by constant motors (fixed joints): a
  link with a constant motor belongs to its parent's body. The root's body does not move.
- Two bodies with geometry are *adjacent* when one is the nearest ancestor with geometry of the
  other (links without geometry are skipped): their shapes touch at the joint by construction.
- A link's *reach* weights bound how far any point of its geometry moves: for a joint change Δq,
  no point moves more than ``weights[link] · |Δq|`` (m). For the joint that moves the link, the
  weight is the largest distance of the geometry from that joint's axis (m per rad; 1 for a
  prismatic joint, m per m); for a joint further up, the distance of the next joint's origin from
  its axis plus the longest path from there to the geometry (the lengths between joint origins,
  the travel of prismatic joints between, and the geometry's distance from the last joint's
  origin) — the triangle inequality, valid at every configuration. Mimic joints add to their
  driver's column, scaled by |multiplier|.
- A pair's *relative* reach weights bound how much its distance can change: joints above both
  links move them together and change nothing, so only the columns of joints above one of them
  (below their common ancestor) count, with both links' weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from kinematics import _layout as layout
from kinematics.collision.geometry import Box, Capsule, Shape, Sphere
from kinematics.dualquat import dq_to_pose, dq_transform_points
from kinematics.errors import ModelError
from kinematics.motors import ConstantMotor
from kinematics.tree import KinematicTree

__all__ = ["adjacent_bodies", "bodies", "pair_reach_weights", "reach_weights", "shape_points"]

Array = NDArray[np.float64]


def bodies(tree: KinematicTree) -> dict[str, str]:
    """link → the name of its body (the link at the top of its rigid group), in link order."""
    body: dict[str, str] = {}
    for link in tree.links:
        rigid = link.parent is not None and isinstance(link.motor, ConstantMotor)
        body[link.name] = body[link.parent] if rigid and link.parent else link.name
    return body


def adjacent_bodies(tree: KinematicTree, with_geometry: set[str]) -> set[frozenset[str]]:
    """Pairs of bodies (frozensets of two body names) where one is the nearest ancestor with
    geometry of the other; `with_geometry` holds the links that have shapes."""
    body = bodies(tree)
    geometric = {body[link] for link in with_geometry}
    parent_body = {
        body[link.name]: body[link.parent]
        for link in tree.links
        if link.parent is not None and body[link.name] == link.name
    }
    pairs: set[frozenset[str]] = set()
    for b in geometric:
        up = parent_body.get(b)
        while up is not None and up not in geometric:
            up = parent_body.get(up)
        if up is not None:
            pairs.add(frozenset((b, up)))
    return pairs


def shape_points(shape: Shape) -> tuple[Array, float]:
    """Points (k, 3) whose hull grown by the returned radius (m) holds the shape (link frame):
    a capsule's ends and radius, a sphere's centre and radius, a box's 8 corners and 0."""
    if isinstance(shape, Capsule):
        return np.array([shape.a, shape.b]), shape.radius
    if isinstance(shape, Sphere):
        return np.array([shape.center]), shape.radius
    assert isinstance(shape, Box)
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    corners = signs * (0.5 * np.array(shape.size))
    return np.array(shape.center) + corners @ shape.rotation.T, 0.0


def _travel(row: Array, limits: tuple[float, float], link: str) -> float:
    """The largest |value| a prismatic row can take (m), from its joint's limits."""
    lower, upper = limits
    bound = abs(row[layout.SCALE]) * max(abs(lower), abs(upper)) + abs(row[layout.OFFSET])
    if not np.isfinite(bound):
        raise ModelError(
            f"link {link!r}: a prismatic joint above it has no finite limits, so how far the link "
            "can move is unbounded (give the joint limits)"
        )
    return float(bound)


def _link_weights(
    tree: KinematicTree, link: str, shapes: Sequence[Shape], limits: list[tuple[float, float]]
) -> Array:
    """One link's reach weights (dof,): see the module docstring. The chain's rows are its joints
    then the tip; row k+1's origin places joint k+1 (or the link) in the frame after joint k."""
    chain = tree.chain(link).packed
    last = chain.shape[0] - 2  # the joint that moves the link
    tip = chain[-1, layout.ORIGIN : layout.ORIGIN + 8]
    clouds = [shape_points(shape) for shape in shapes]
    points = np.concatenate([dq_transform_points(tip, pts) for pts, _ in clouds])
    radius = np.concatenate([np.full(len(pts), r) for pts, r in clouds])
    extent = float(np.max(np.linalg.norm(points, axis=1) + radius))
    weights = np.zeros(tree.dof)
    below = extent  # after each row k: a bound on the distance from joint k's origin (m)
    for k in range(last, -1, -1):
        row = chain[k]
        column = int(row[layout.QIDX])
        scale = abs(row[layout.SCALE])
        axis = row[layout.AXIS : layout.AXIS + 3]
        travel = 0.0
        if row[layout.KIND] == layout.PRISMATIC:
            weights[column] += scale
            travel = _travel(row, limits[column], link)
        elif k == last:
            perp = points - np.outer(points @ axis, axis)
            weights[column] += scale * float(np.max(np.linalg.norm(perp, axis=1) + radius))
        else:
            t = dq_to_pose(chain[k + 1, layout.ORIGIN : layout.ORIGIN + 8])[0]
            weights[column] += scale * (float(np.linalg.norm(t - (t @ axis) * axis)) + below)
        if k == last:
            below = extent + travel
        else:
            t = dq_to_pose(chain[k + 1, layout.ORIGIN : layout.ORIGIN + 8])[0]
            below = float(np.linalg.norm(t)) + below + travel
    return weights


def reach_weights(tree: KinematicTree, links: Mapping[str, Sequence[Shape]]) -> Array:
    """weights (n_links, dof) in link order: no point of link L's geometry moves more than
    ``weights[L] · |Δq|`` (m) for a joint change Δq (rad or m); zero rows for links without
    geometry. Raises `ModelError` for a prismatic joint without finite limits above geometry."""
    limits = list(zip(tree.limits.lower.tolist(), tree.limits.upper.tolist(), strict=True))
    out = np.zeros((len(tree.links), tree.dof))
    for i, name in enumerate(tree.link_names):
        if name in links:
            out[i] = _link_weights(tree, name, links[name], limits)
    return out


def pair_reach_weights(
    tree: KinematicTree, weights: Array, pairs: Sequence[tuple[str, str]]
) -> Array:
    """(P, dof): for each pair (a, b) of links or a link and the environment (a name the tree
    does not have, which never moves), a bound of how much its distance changes for a joint
    change Δq: ``out[p] · |Δq|`` (m), from `weights` (`reach_weights`)."""
    packed = tree.packed
    index = {name: i for i, name in enumerate(tree.link_names)}

    def joints_above(link: str) -> dict[int, set[int]]:
        """row → its joint column, for the rows from the root to `link` that carry a joint."""
        rows: dict[int, set[int]] = {}
        row = index.get(link, -1)
        while row >= 0:
            if packed[row, layout.KIND] != layout.CONSTANT:
                rows[row] = {int(packed[row, layout.QIDX])}
            row = int(packed[row, layout.PARENT])
        return rows

    out = np.zeros((len(pairs), tree.dof))
    for p, (a, b) in enumerate(pairs):
        above_a, above_b = joints_above(a), joints_above(b)
        apart = set().union(
            *(c for r, c in above_a.items() if r not in above_b),
            *(c for r, c in above_b.items() if r not in above_a),
        )
        columns = sorted(apart)
        out[p, columns] = weights[index[a], columns]
        if b in index:
            out[p, columns] += weights[index[b], columns]
    return out
