"""The array layouts the compiled kernels share with their Python callers, without numba: a
model can be packed, and IK parameters built, without importing (or compiling) any kernel.

Motors are packed one per row of a float64 array with `ROW` columns, so that a kernel takes one
array instead of seven (numba's per-argument call overhead is the larger part of a 7-DOF FK)::

    KIND    0 constant, 1 revolute, 2 prismatic
    QIDX    index into q of the joint driving the motor
    SCALE   joint value = SCALE * q[QIDX] + OFFSET (mimic joints; 1 and 0 otherwise)
    OFFSET
    AXIS    3 columns: unit axis in the frame after the origin
    ORIGIN  8 columns: the constant transform applied before the motion (dual quaternion)
    PARENT  row of the parent link (tree arrays only; -1 for the root)

A *chain* array is the path from the root to one link, compacted: every constant transform is
folded into the origin of the next joint, and its last row is a constant motor (the tip).
A *tree* array has one row per link in topological order (a parent before its children).

The kernels read these names as compile-time constants: numba alone does not see a change here;
`kinematics.kernel_cache` does, and has the kernels that read them compiled again.
"""

from __future__ import annotations

CONSTANT, REVOLUTE, PRISMATIC = 0, 1, 2
KIND, QIDX, SCALE, OFFSET, AXIS, ORIGIN, PARENT = 0, 1, 2, 3, 4, 7, 15
ROW = 16

# IK (`kinematics._ik_kernels`): methods, indices into the `params` array, into the `info` output.
DLS, TRANSPOSE = 0, 1
P_METHOD, P_ORIENT_WEIGHT, P_MAX_ITER, P_POS_TOL, P_ROT_TOL, P_NULL_GAIN, P_LAMBDA = range(7)
P_MAX_CHANGE = 7
N_PARAMS = 8
I_POS_ERR, I_ROT_ERR, I_ITERATIONS, I_CONVERGED = range(4)

# Dynamics (`kinematics.dynamics._kernels`): one row of `D_ROW` columns per *body*, a joint link
# with every link fixed to it through constant motors, in topological order. KIND, QIDX, SCALE,
# OFFSET and AXIS are the columns of a motor row; then
#
#     D_PARENT  row of the parent body (-1: the body hangs from the root, which does not move)
#     D_ROT     9 columns: rotation of the joint origin in the parent body's frame, row-major
#     D_POS     3 columns: position of the joint origin in the parent body's frame, m
#     D_MASS    kg
#     D_H       3 columns: first moment, mass × centre of mass in the body's frame, kg·m
#     D_IBAR    6 columns: rotational inertia about the body's origin, body axes, kg·m²,
#               (ixx, ixy, ixz, iyy, iyz, izz)
#
# A payload is a `P_ROW` array: the body it rides on (-1: none) then D_MASS..D_IBAR's 10 values.
D_PARENT, D_ROT, D_POS, D_MASS, D_H, D_IBAR = 7, 8, 17, 20, 21, 24
D_ROW = 30
P_BODY, P_MASS, P_H, P_IBAR = 0, 1, 2, 5
P_ROW = 11
