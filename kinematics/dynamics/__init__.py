"""Rigid-body dynamics of a `KinematicTree` (docs/dynamics.md): the model (`model.py`: bodies
merged per joint link, a payload per call) and its numba kernels (`_kernels.py`: gravity torques,
inverse dynamics, mass matrix; `_coriolis_kernels.py`: the Coriolis matrix), compiled with the
other kinematics kernels (`kinematics.compiled`)."""

from kinematics.dynamics.model import STANDARD_GRAVITY, Body, Dynamics, Payload

__all__ = ["STANDARD_GRAVITY", "Body", "Dynamics", "Payload"]
