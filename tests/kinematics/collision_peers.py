"""coal (hpp-fcl's successor) as the independent peer of the collision tests: our primitives as
coal geometries and coal's signed distance between them."""

from __future__ import annotations

import coal
import numpy as np
from numpy.typing import NDArray

from kinematics.collision.geometry import Box, Capsule, Plane, Shape, Sphere
from kinematics.quaternion import quat_to_matrix

Array = NDArray[np.float64]

COAL_TOLERANCE = 1e-6
"""m: coal's GJK/EPA tolerance (DistanceRequest.gjk_tolerance, default 1e-6): where one of the
shapes is a box, coal iterates to this, so its distance is within it of the exact one."""


def _rotation_z_to(direction: Array) -> Array:
    """A rotation matrix whose z axis is the unit `direction`."""
    z = direction / np.linalg.norm(direction)
    helper = np.eye(3)[int(np.argmin(np.abs(z)))]
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    return np.column_stack((x, np.cross(z, x), z))


def coal_object(shape: Shape | Plane, rotation: Array, translation: Array) -> tuple[object, object]:
    """(geometry, transform) of a shape placed by ``root_from_link`` (rotation (3, 3),
    translation (3,)); a plane is already in the root frame."""
    if isinstance(shape, Plane):
        normal = np.array(shape.normal)
        return coal.Halfspace(normal, float(normal @ np.array(shape.point))), coal.Transform3s()
    if isinstance(shape, Sphere):
        center = rotation @ np.array(shape.center) + translation
        return coal.Sphere(shape.radius), coal.Transform3s(np.eye(3), center)
    if isinstance(shape, Capsule):
        a = rotation @ np.array(shape.a) + translation
        b = rotation @ np.array(shape.b) + translation
        length = float(np.linalg.norm(b - a))
        if length == 0.0:
            return coal.Sphere(shape.radius), coal.Transform3s(np.eye(3), a)
        frame = coal.Transform3s(_rotation_z_to(b - a), 0.5 * (a + b))
        return coal.Capsule(shape.radius, length), frame
    assert isinstance(shape, Box)
    R = rotation @ np.asarray(quat_to_matrix(np.array(shape.orientation)))
    center = rotation @ np.array(shape.center) + translation
    return coal.Box(*shape.size), coal.Transform3s(R, center)


def coal_distance(first: tuple[object, object], second: tuple[object, object]) -> float:
    """coal's signed distance (m) between two placed geometries."""
    request = coal.DistanceRequest()
    request.enable_signed_distance = True
    result = coal.DistanceResult()
    return float(coal.distance(first[0], first[1], second[0], second[1], request, result))
