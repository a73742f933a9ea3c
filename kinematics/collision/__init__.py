"""Collision checking for kinematic trees: per-link shapes (capsules, spheres, boxes), an
environment (planes, keep-out boxes, a keep-in workspace), and signed distances, contact checks
and path checks in compiled kernels. See docs/collision.md.

    model = CollisionModel(tree, spec_from_dict(config["collision"]))
    model.first_contact(q)            # None, or (a, b, distance): the hot path
    model.distances(q)                # every checked pair, witness points, the closest
    model.check_path(waypoints)       # the first sample closer than the margin, if any
"""

from kinematics.collision.geometry import (
    Box,
    Capsule,
    EnvironmentObject,
    KeepInBox,
    ObstacleBox,
    Plane,
    Shape,
    Sphere,
)
from kinematics.collision.model import CollisionModel
from kinematics.collision.results import (
    CheckedPair,
    DistanceReport,
    ExcludedPair,
    PairDistance,
    PathCheck,
)
from kinematics.collision.spec import DEFAULT_MARGIN, CollisionSpec, spec_from_dict

__all__ = [
    "DEFAULT_MARGIN",
    "Box",
    "Capsule",
    "CheckedPair",
    "CollisionModel",
    "CollisionSpec",
    "DistanceReport",
    "EnvironmentObject",
    "ExcludedPair",
    "KeepInBox",
    "ObstacleBox",
    "PairDistance",
    "PathCheck",
    "Plane",
    "Shape",
    "Sphere",
    "spec_from_dict",
]
