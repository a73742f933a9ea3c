"""The kinematics package's exceptions: one root, `KinematicsError`."""

from __future__ import annotations

__all__ = ["InertialError", "KinematicsError", "ModelError", "UnknownNameError"]


class KinematicsError(ValueError):
    """Root of every error raised by `kinematics` (invalid input, never an expected outcome)."""


class ModelError(KinematicsError):
    """A kinematic model (file or construction arguments) is invalid.

    The message names the link (and the key, where there is one), the value and what was expected.
    """


class InertialError(ModelError):
    """A link's inertial (mass, centre of mass, inertia tensor) that no rigid body has.

    Raised on construction of a `kinematics.inertial.Inertial`; the model loaders prefix the link.
    """


class UnknownNameError(KinematicsError):
    """A link or joint name that the tree does not have."""
