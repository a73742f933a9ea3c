"""Pure kinematics for armd: dual quaternions, kinematic trees, forward kinematics, Jacobians,
inverse kinematics and joint limits. Imports only numpy and numba; no I/O besides model files."""

from kinematics.errors import KinematicsError, ModelError, UnknownNameError
from kinematics.ik import IKOptions, IKResult
from kinematics.ik import solve as solve_ik
from kinematics.limits import JointLimit, JointLimits, LimitViolation
from kinematics.loaders import load_tree, save_tree
from kinematics.motors import ConstantMotor, JointMotor, Link, Mimic, Motor
from kinematics.pose import Pose
from kinematics.tree import Chain, KinematicTree

__all__ = [
    "Chain",
    "ConstantMotor",
    "IKOptions",
    "IKResult",
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
