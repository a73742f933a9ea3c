"""Compiled kernel (numba) of one inverse-kinematics attempt; `kinematics.ik` drives it.

One attempt iterates from a start configuration toward a target pose:

- error: position ``p* - p(q)`` (m) and orientation ``log(R* R(q)ᵀ)`` as a rotation vector (rad),
  both in the root frame; orientation rows are scaled by √w (w = 0: position only);
- damped least squares (Levenberg–Marquardt) in task space,
  ``dq = Jᵀ (J Jᵀ + λI)⁻¹ e``, with λ adapted per step (a step that does not reduce the error is
  rejected and λ grows; an accepted one shrinks it);
- or Jacobian-transpose gradient descent, ``dq = α Jᵀ e`` with the optimal α for the linearised
  error;
- a secondary task pulls toward the seed in the null space of the primary one,
  ``(I - Jᵀ(J Jᵀ + λI)⁻¹J) k (q_seed - q)``, so that a redundant arm ends near its seed;
- every iterate is projected into [lower, upper] (the joint limits, intersected with the "stay
  near the seed" box), never only the result;
- an attempt that stalls (no 1 % error decrease in `STALL_ITERATIONS`) gives up early: from a
  local minimum or a limit, a random restart does better than more iterations.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from kinematics._kernels import chain_pose_jacobian
from kinematics._layout import (
    DLS,
    I_CONVERGED,
    I_ITERATIONS,
    I_POS_ERR,
    I_ROT_ERR,
    P_LAMBDA,
    P_MAX_CHANGE,
    P_MAX_ITER,
    P_METHOD,
    P_NULL_GAIN,
    P_ORIENT_WEIGHT,
    P_POS_TOL,
    P_ROT_TOL,
    TRANSPOSE,
)

STALL_ITERATIONS = 8  # iterations without a 1 % error decrease before an attempt gives up
POLISH_ITERATIONS = 3

_jit = nb.njit(cache=True, nogil=True)
_packed = nb.types.Array(nb.float64, 2, "C", readonly=True)
_f8_1r = nb.types.Array(nb.float64, 1, "C", readonly=True)
_f8_1 = nb.types.Array(nb.float64, 1, "C")
_b1_1r = nb.types.Array(nb.boolean, 1, "C", readonly=True)


@_jit
def pose_error(dq, target7, e):
    """e (6,) = [p* - p, rotation vector of R* R(q)ᵀ] for the pose `dq` and target [t, quat]."""
    # translation of dq (vector part of 2 d ⊗ r*)
    rw, rx, ry, rz = dq[0], -dq[1], -dq[2], -dq[3]
    dw, dx, dy, dz = dq[4], dq[5], dq[6], dq[7]
    e[0] = target7[0] - 2.0 * (dw * rx + dx * rw + dy * rz - dz * ry)
    e[1] = target7[1] - 2.0 * (dw * ry - dx * rz + dy * rw + dz * rx)
    e[2] = target7[2] - 2.0 * (dw * rz + dx * ry - dy * rx + dz * rw)
    # q_err = q* ⊗ conj(q); its rotation vector is the orientation error in the root frame
    tw, tx, ty, tz = target7[3], target7[4], target7[5], target7[6]
    w = tw * rw - tx * rx - ty * ry - tz * rz
    x = tw * rx + tx * rw + ty * rz - tz * ry
    y = tw * ry - tx * rz + ty * rw + tz * rx
    z = tw * rz + tx * ry - ty * rx + tz * rw
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    s = math.sqrt(x * x + y * y + z * z)
    factor = 2.0 * math.atan2(s, w) / s if s > 1e-12 else 2.0
    e[3] = factor * x
    e[4] = factor * y
    e[5] = factor * z


@_jit
def cholesky_solve(M, r, b, x):
    """Solve M x = b for the leading r×r block of a symmetric positive definite M (in place
    factorisation). Returns False when M is not positive definite."""
    for j in range(r):
        d = M[j, j]
        for k in range(j):
            d -= M[j, k] * M[j, k]
        if d <= 0.0:
            return False
        d = math.sqrt(d)
        M[j, j] = d
        for i in range(j + 1, r):
            v = M[i, j]
            for k in range(j):
                v -= M[i, k] * M[j, k]
            M[i, j] = v / d
    for i in range(r):
        v = b[i]
        for k in range(i):
            v -= M[i, k] * x[k]
        x[i] = v / M[i, i]
    for i in range(r - 1, -1, -1):
        v = x[i]
        for k in range(i + 1, r):
            v -= M[k, i] * x[k]
        x[i] = v / M[i, i]
    return True


@_jit
def damped_solve(J, r, lam, b, x):
    """x = (J Jᵀ + λI)⁻¹ b over the first r rows of J."""
    n = J.shape[1]
    M = np.empty((r, r))
    for i in range(r):
        for j in range(i + 1):
            v = 0.0
            for k in range(n):
                v += J[i, k] * J[j, k]
            M[i, j] = v
            M[j, i] = v
        M[i, i] += lam
    return cholesky_solve(M, r, b, x)


@_jit
def weighted(J, e, sw, r):
    """Scale the orientation rows of J and e by sw (=√w); r = 3 drops them."""
    if r == 6:
        for i in range(3, 6):
            e[i] *= sw
            for k in range(J.shape[1]):
                J[i, k] *= sw


@_jit
def step(method, J, e, r, lam, null_pull, dq):
    """The joint step for the weighted task error e (first r rows of J, e)."""
    n = J.shape[1]
    y = np.empty(r)
    if method == TRANSPOSE:
        # α minimising |e - α J Jᵀ e|²
        g = np.zeros(n)
        for k in range(n):
            for i in range(r):
                g[k] += J[i, k] * e[i]
        jg = np.zeros(r)
        for i in range(r):
            for k in range(n):
                jg[i] += J[i, k] * g[k]
        num = 0.0
        den = 0.0
        for i in range(r):
            num += e[i] * jg[i]
            den += jg[i] * jg[i]
        alpha = num / den if den > 1e-300 else 0.0
        for k in range(n):
            dq[k] = alpha * g[k] + null_pull[k]
        return True
    if not damped_solve(J, r, lam, e, y):
        return False
    # null-space pull: z - Jᵀ (J Jᵀ + λI)⁻¹ J z
    jz = np.zeros(r)
    for i in range(r):
        for k in range(n):
            jz[i] += J[i, k] * null_pull[k]
    w = np.empty(r)
    if not damped_solve(J, r, lam, jz, w):
        return False
    for k in range(n):
        v = null_pull[k]
        for i in range(r):
            v += J[i, k] * (y[i] - w[i])
        dq[k] = v
    return True


@_jit
def evaluate(chain, q, target7, sw, r, dq8, J, e):
    """FK + Jacobian at q, weighted error into e and J; returns the squared weighted error."""
    chain_pose_jacobian(chain, q, dq8, J)
    pose_error(dq8, target7, e)
    weighted(J, e, sw, r)
    total = 0.0
    for i in range(r):
        total += e[i] * e[i]
    return total


@_jit
def project(q, lower, upper):
    for k in range(q.shape[0]):
        if q[k] < lower[k]:
            q[k] = lower[k]
        elif q[k] > upper[k]:
            q[k] = upper[k]


@_jit
def bounded_step(method, J, e, r, lam, q, lower, upper, J_work, dq):
    """The step from q, with the joints that sit on a bound and would be pushed past it taken out
    of the problem (their columns zeroed) and the step solved again: projecting the first step
    alone makes the iterations crawl along a limit."""
    if not step(method, J, e, r, lam, np.zeros(q.shape[0]), dq):
        return False
    blocked = False
    J_work[:, :] = J
    for k in range(q.shape[0]):
        if (q[k] <= lower[k] and dq[k] < 0.0) or (q[k] >= upper[k] and dq[k] > 0.0):
            J_work[:, k] = 0.0
            blocked = True
    if not blocked:
        return True
    return step(method, J_work, e, r, lam, np.zeros(q.shape[0]), dq)


@_jit
def search_bounds(limit_lower, limit_upper, moving, seed, max_change, lower, upper):
    """Per joint: the limits intersected with seed ± max_change; the seed itself for joints that
    do not move the link (they must come back unchanged)."""
    for k in range(seed.shape[0]):
        if moving[k]:
            lower[k] = max(limit_lower[k], seed[k] - max_change)
            upper[k] = min(limit_upper[k], seed[k] + max_change)
        else:
            lower[k] = seed[k]
            upper[k] = seed[k]


@_jit
def wrap_continuous(q, seed, limit_lower, limit_upper):
    """Continuous joints (no bounds) to within π of the seed: the same pose, the nearest angle."""
    for k in range(q.shape[0]):
        if math.isinf(limit_lower[k]) and math.isinf(limit_upper[k]):
            q[k] = seed[k] + ((q[k] - seed[k] + math.pi) % (2.0 * math.pi)) - math.pi


@_jit
def errors(e, r, sw):
    """(position error m, rotation error rad) of a weighted error vector."""
    pos = math.sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2])
    rot = math.sqrt(e[3] * e[3] + e[4] * e[4] + e[5] * e[5]) / sw if r == 6 else 0.0
    return pos, rot


@_jit
def converge(chain, lower, upper, target7, params, sw, r, q):
    """The primary iterations from q (in/out). Returns the number of iterations."""
    n = q.shape[0]
    method = int(params[P_METHOD])
    max_iter = int(params[P_MAX_ITER])
    lam = params[P_LAMBDA]
    dq8 = np.empty(8)
    J = np.empty((6, n))
    e = np.empty(6)
    J_trial = np.empty((6, n))
    e_trial = np.empty(6)
    dq = np.empty(n)
    trial = np.empty(n)
    err2 = evaluate(chain, q, target7, sw, r, dq8, J, e)
    best, since_best = err2, 0
    for iteration in range(max_iter):
        pos_err, rot_err = errors(e, r, sw)
        if pos_err <= params[P_POS_TOL] and rot_err <= params[P_ROT_TOL]:
            return iteration
        if since_best > STALL_ITERATIONS:
            return iteration  # a local minimum or a limit: a restart does better
        if not bounded_step(method, J, e, r, lam, q, lower, upper, J_trial, dq):
            lam = lam * 10.0 + 1e-9
            continue
        for k in range(n):
            trial[k] = q[k] + dq[k]
        project(trial, lower, upper)
        trial_err2 = evaluate(chain, trial, target7, sw, r, dq8, J_trial, e_trial)
        if trial_err2 < err2 or method == TRANSPOSE:
            q[:] = trial
            J[:, :] = J_trial
            e[:] = e_trial
            err2 = trial_err2
            lam = max(lam * 0.1, params[P_LAMBDA] * 1e-3)
        else:
            lam = lam * 10.0 + 1e-9
        if err2 < 0.99 * best:
            best, since_best = err2, 0
        else:
            since_best += 1
    return max_iter


@_jit
def pull_toward_seed(chain, lower, upper, target7, seed, params, sw, r, q):
    """Null-space steps toward the seed, each re-converged onto the target and kept only if it
    ends closer to the seed (redundant arms: among the solutions, approach the one closest to the
    seed). Returns the iterations used."""
    n = q.shape[0]
    dq8 = np.empty(8)
    J = np.empty((6, n))
    e = np.empty(6)
    dq = np.empty(n)
    pull = np.empty(n)
    trial = np.empty(n)
    gain = params[P_NULL_GAIN]
    iterations = 0
    for _ in range(POLISH_ITERATIONS):
        evaluate(chain, q, target7, sw, r, dq8, J, e)
        distance = 0.0
        for k in range(n):
            pull[k] = gain * (seed[k] - q[k])
            distance += (seed[k] - q[k]) ** 2
        if distance < 1e-12 or not step(DLS, J, e, r, params[P_LAMBDA], pull, dq):
            break
        for k in range(n):
            trial[k] = q[k] + dq[k]
        project(trial, lower, upper)
        iterations += 1 + converge(chain, lower, upper, target7, params, sw, r, trial)
        evaluate(chain, trial, target7, sw, r, dq8, J, e)
        pos_err, rot_err = errors(e, r, sw)
        moved = 0.0
        for k in range(n):
            moved += (seed[k] - trial[k]) ** 2
        if pos_err <= params[P_POS_TOL] and rot_err <= params[P_ROT_TOL] and moved < distance:
            q[:] = trial
            if distance - moved < 1e-6 * distance + 1e-12:
                break  # settled on the closest solution this search can reach
        else:
            gain *= 0.5  # the step left the solution manifold too far: take a smaller one
            if gain < 1e-3:
                break
    return iterations


@_jit
def solve_attempt(chain, limit_lower, limit_upper, moving, target7, seed, params, q, info):
    """One attempt from q (in/out, dof) toward target7 = [t (m), quat]: bounds, primary
    iterations, null-space pull toward the seed once converged, continuous joints wrapped near the
    seed. Writes info = [position error m, rotation error rad — both from FK on the returned q,
    unweighted —, iterations, converged 0/1]."""
    n = q.shape[0]
    w = params[P_ORIENT_WEIGHT]
    sw = math.sqrt(w) if w > 0.0 else 1.0
    r = 6 if w > 0.0 else 3
    lower = np.empty(n)
    upper = np.empty(n)
    search_bounds(limit_lower, limit_upper, moving, seed, params[P_MAX_CHANGE], lower, upper)
    project(q, lower, upper)
    iterations = converge(chain, lower, upper, target7, params, sw, r, q)
    free = 0
    for k in range(n):
        free += 1 if upper[k] > lower[k] else 0
    if params[P_NULL_GAIN] > 0.0 and free > r:  # redundant: a null space exists
        iterations += pull_toward_seed(chain, lower, upper, target7, seed, params, sw, r, q)
    wrap_continuous(q, seed, limit_lower, limit_upper)
    dq8 = np.empty(8)
    J = np.empty((6, n))
    e = np.empty(6)
    evaluate(chain, q, target7, 1.0, 6, dq8, J, e)
    info[I_POS_ERR], info[I_ROT_ERR] = errors(e, 6, 1.0)
    info[I_ITERATIONS] = iterations
    converged = info[I_POS_ERR] <= params[P_POS_TOL] and (
        r == 3 or info[I_ROT_ERR] <= params[P_ROT_TOL]
    )
    info[I_CONVERGED] = 1.0 if converged else 0.0


# The entry kernel and its one signature (see `kinematics._kernels.ENTRIES`).
ENTRIES = {
    "ik_attempt": (
        solve_attempt,
        nb.void(_packed, _f8_1r, _f8_1r, _b1_1r, _f8_1r, _f8_1r, _f8_1r, _f8_1, _f8_1),
    ),
}
