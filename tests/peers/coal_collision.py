"""coal (hpp-fcl's successor) as an independent peer for the collision model's distances: the
same shapes and environment (capsules, spheres, boxes, planes as half-spaces) placed by the
tree's forward kinematics, their signed distances by coal's GJK/EPA. Keep-in boxes are not
modelled here (no test of the daemon's uses one against coal)."""

from __future__ import annotations

from collections.abc import Sequence

import coal
import numpy as np
from numpy.typing import NDArray

from kinematics import KinematicTree
from kinematics.collision import Box, Capsule, CollisionSpec, ObstacleBox, Plane, Shape, Sphere
from kinematics.quaternion import quat_to_matrix

__all__ = ["CoalPeer"]

Array = NDArray[np.float64]


def _rotation_z_to(direction: Array) -> Array:
    """A rotation taking +z onto the unit `direction`."""
    z = np.array([0.0, 0.0, 1.0])
    v = np.cross(z, direction)
    c = float(np.dot(z, direction))
    if np.linalg.norm(v) < 1e-12:
        return np.eye(3) if c > 0 else np.diag([1.0, -1.0, -1.0])
    k = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    return np.eye(3) + k + k @ k * (1.0 / (1.0 + c))


def _geometry(shape: Shape) -> tuple[coal.CollisionGeometry, Array, Array]:
    """coal's geometry of `shape` and its placement (rotation, translation) in the link frame."""
    if isinstance(shape, Capsule):
        a, b = np.array(shape.a), np.array(shape.b)
        length = float(np.linalg.norm(b - a))
        if length < 1e-12:
            return coal.Sphere(shape.radius), np.eye(3), a
        rotation = _rotation_z_to((b - a) / length)
        return coal.Capsule(shape.radius, length), rotation, (a + b) / 2.0  # radius, full length
    if isinstance(shape, Sphere):
        return coal.Sphere(shape.radius), np.eye(3), np.array(shape.center)
    assert isinstance(shape, Box)
    rotation = np.asarray(quat_to_matrix(np.array(shape.orientation)))
    return coal.Box(*shape.size), rotation, np.array(shape.center)


class CoalPeer:
    """Signed distances (m) of named pairs at a configuration, computed by coal."""

    def __init__(self, tree: KinematicTree, spec: CollisionSpec) -> None:
        self.tree = tree
        self.links = {link: [_geometry(s) for s in shapes] for link, shapes in spec.links.items()}
        self.environment: dict[str, list[tuple[coal.CollisionGeometry, Array, Array]]] = {}
        for obj in spec.environment:
            if isinstance(obj, Plane):
                normal = np.array(obj.normal)
                half = coal.Halfspace(normal, float(normal @ np.array(obj.point)))
                self.environment[obj.name] = [(half, np.eye(3), np.zeros(3))]
            elif isinstance(obj, ObstacleBox):
                rotation = np.asarray(quat_to_matrix(np.array(obj.orientation)))
                box = coal.Box(*obj.size)
                self.environment[obj.name] = [(box, rotation, np.array(obj.center))]
        self.request = coal.DistanceRequest()
        self.request.enable_signed_distance = True

    def _placed(self, name: str, q: Array) -> list[tuple[coal.CollisionGeometry, coal.Transform3s]]:
        if name in self.environment:
            parts = self.environment[name]
            world_r, world_t = np.eye(3), np.zeros(3)
        else:
            parts = self.links[name]
            pose = self.tree.fk(q, name)
            world_r, world_t = pose.rotation_matrix, pose.translation
        return [
            (geometry, coal.Transform3s(world_r @ rotation, world_r @ center + world_t))
            for geometry, rotation, center in parts
        ]

    def distance(self, a: str, b: str, q: Array) -> float:
        """The least signed distance between the shapes of `a` and `b` at `q` (m)."""
        best = np.inf
        for ga, ta in self._placed(a, q):
            for gb, tb in self._placed(b, q):
                result = coal.DistanceResult()
                coal.distance(ga, ta, gb, tb, self.request, result)
                best = min(best, float(result.min_distance))
        return best

    def min_distance(
        self, pairs: Sequence[tuple[str, str]], q: Array
    ) -> tuple[float, tuple[str, str]]:
        """The closest of `pairs` at `q`: (distance (m), pair)."""
        return min((self.distance(a, b, q), (a, b)) for a, b in pairs)
