"""Pure kinematics for armd: dual quaternions, kinematic trees, forward kinematics, Jacobians,
inverse kinematics, joint limits, link inertials; in rooms of their own, model files
(`kinematics.models`), rigid-body dynamics (`kinematics.dynamics`), chain mapping
(`kinematics.mapping`) and collision checking (`kinematics.collision`). Imports only numpy and
numba; no I/O besides model files."""

from kinematics.errors import InertialError, KinematicsError, ModelError, UnknownNameError
from kinematics.ik import IKOptions, IKResult
from kinematics.ik import solve as solve_ik
from kinematics.inertial import Inertial
from kinematics.limits import JointLimit, JointLimits, LimitViolation
from kinematics.models.loaders import load_tree, save_tree
from kinematics.motors import ConstantMotor, JointMotor, Link, Mimic, Motor
from kinematics.pose import Pose
from kinematics.tree import Chain, KinematicTree

__all__ = [
    "Chain",
    "ConstantMotor",
    "IKOptions",
    "IKResult",
    "Inertial",
    "InertialError",
    "JointLimit",
    "JointLimits",
    "JointMotor",
    "KinematicTree",
    "KinematicsError",
    "LimitViolation",
    "Link",
    "Mimic",
    "ModelError",
    "Motor",
    "Pose",
    "UnknownNameError",
    "load_tree",
    "save_tree",
    "solve_ik",
]
