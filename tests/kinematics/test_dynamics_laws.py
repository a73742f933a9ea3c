"""Laws `kinematics.dynamics` must obey, checked with armd's own kinematics and no peer: the mass
matrix is symmetric positive definite and is what inverse dynamics says it is; the kinetic energy
it gives equals the sum over links of ½ m v² + ½ ωᵀ I ω from the Jacobians; gravity torques are
the gradient of the potential energy from forward kinematics; power balances; a mimic joint folds
into its driver; a payload is the same as that much more inertial on its link; the Coriolis
matrix gives the bias torques and the rate of the mass matrix."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinematics import (
    Inertial,
    JointMotor,
    KinematicsError,
    KinematicTree,
    Link,
    UnknownNameError,
    load_tree,
)
from kinematics.dynamics import Dynamics
from tests.kinematics.test_dynamics import ARMS

NAMES = ["ur5", "panda", "so101", "kinova", "features", "baxter"]
LOAD = Inertial(1.7, (0.02, 0.01, 0.06), (0.008, 0.0005, -0.001, 0.01, 0.0002, 0.007))
PAYLOAD_LINK = {
    "ur5": "tool0",
    "panda": "panda_hand_tcp",
    "so101": "gripper_frame_link",
    "kinova": "j2s6s200_end_effector",
    "features": "tool",
    "baxter": "left_gripper",
}
_cache: dict[str, Dynamics] = {}


def dynamics_of(name: str) -> Dynamics:
    if name not in _cache:
        _cache[name] = Dynamics(load_tree(ARMS[name]))
    return _cache[name]


def state(tree: KinematicTree, data: st.DataObject) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q within the limits ([-π, π] where unbounded); qd, qdd in [-2, 2] per joint."""
    lower = np.where(np.isfinite(tree.limits.lower), tree.limits.lower, -math.pi)
    upper = np.where(np.isfinite(tree.limits.upper), tree.limits.upper, math.pi)
    unit = st.lists(st.floats(0.0, 1.0), min_size=tree.dof, max_size=tree.dof)
    rate = st.lists(st.floats(-2.0, 2.0), min_size=tree.dof, max_size=tree.dof)
    q = lower + np.array(data.draw(unit)) * (upper - lower)
    return q, np.array(data.draw(rate)), np.array(data.draw(rate))


def kinetic_energy_from_jacobians(tree: KinematicTree, q: np.ndarray, qd: np.ndarray) -> float:
    """Σ over links of ½ m |v_c|² + ½ ωᵀ (R I Rᵀ) ω, v and ω from each link's Jacobian."""
    total = 0.0
    for link in tree.links:
        inertial = link.inertial
        if inertial is None or link.parent is None:
            continue
        twist = tree.jacobian(q, link.name) @ qd
        pose = tree.fk(q, link.name)
        R = pose.rotation_matrix
        omega = twist[3:]
        v_com = twist[:3] + np.cross(omega, R @ np.array(inertial.com))
        total += 0.5 * inertial.mass * float(v_com @ v_com)
        total += 0.5 * float(omega @ (R @ inertial.tensor @ R.T) @ omega)
    return total


def potential_energy(tree: KinematicTree, q: np.ndarray, gravity: np.ndarray) -> float:
    """-Σ m gᵀ c over links, c the centre of mass in the root frame (forward kinematics)."""
    poses = tree.fk_all(q)
    total = 0.0
    for link in tree.links:
        if link.inertial is not None:
            com = poses[link.name].transform_points(np.array([link.inertial.com]))[0]
            total -= link.inertial.mass * float(gravity @ com)
    return total


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_the_mass_matrix_is_symmetric_positive_definite_and_inverse_dynamics(
    name: str, data: st.DataObject
) -> None:
    dynamics = dynamics_of(name)
    q, qd, qdd = state(dynamics.tree, data)
    for payload in (None, dynamics.payload(PAYLOAD_LINK[name], LOAD)):
        M = dynamics.mass_matrix(q, payload)
        scale = float(np.max(np.abs(M)))
        np.testing.assert_allclose(M, M.T, rtol=0, atol=1e-14 * scale)
        assert float(np.min(np.linalg.eigvalsh(M))) > 0.0
        g = dynamics.gravity(q, payload)
        tau = dynamics.rnea(q, qd, qdd, payload)
        bias = dynamics.rnea(q, qd, np.zeros_like(qdd), payload)
        size = float(np.max(np.abs(tau))) + float(np.max(np.abs(bias)))
        np.testing.assert_allclose(tau - bias, M @ qdd, rtol=0, atol=1e-12 * size)
        still = dynamics.rnea(q, np.zeros_like(qd), qdd, payload)
        np.testing.assert_allclose(still - g, M @ qdd, rtol=0, atol=1e-12 * size)
        np.testing.assert_allclose(dynamics.rnea(q, 0 * qd, 0 * qdd, payload), g, atol=1e-12 * size)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_the_coriolis_matrix_gives_the_bias_and_the_rate_of_the_mass_matrix(
    name: str, data: st.DataObject
) -> None:
    """C q̇ = rnea(q, q̇, 0) - g(q), and Ṁ = C + Cᵀ (Ṁ by central differences along q̇)."""
    dynamics = dynamics_of(name)
    q, qd, _ = state(dynamics.tree, data)
    payload = dynamics.payload(PAYLOAD_LINK[name], LOAD)
    C = dynamics.coriolis_matrix(q, qd, payload)
    bias = dynamics.rnea(q, qd, np.zeros_like(qd), payload) - dynamics.gravity(q, payload)
    size = float(np.max(np.abs(dynamics.rnea(q, qd, np.zeros_like(qd), payload))))
    np.testing.assert_allclose(C @ qd, bias, rtol=0, atol=1e-12 * size + 1e-12)
    h = 1e-6
    rate = dynamics.mass_matrix(q + h * qd, payload) - dynamics.mass_matrix(q - h * qd, payload)
    rate /= 2 * h
    # central differences: truncation ~h² and rounding ~1e-16 |M| / h
    scale = float(np.max(np.abs(C))) + float(np.max(np.abs(dynamics.mass_matrix(q, payload))))
    np.testing.assert_allclose(rate, C + C.T, rtol=0, atol=1e-7 * scale)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_kinetic_energy_matches_the_links_moving_as_the_jacobians_say(
    name: str, data: st.DataObject
) -> None:
    dynamics = dynamics_of(name)
    q, qd, _ = state(dynamics.tree, data)
    ours = 0.5 * float(qd @ dynamics.mass_matrix(q) @ qd)
    assert ours == pytest.approx(kinetic_energy_from_jacobians(dynamics.tree, q, qd), rel=1e-11)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_gravity_torques_are_the_gradient_of_the_potential_energy(
    name: str, data: st.DataObject
) -> None:
    dynamics = dynamics_of(name)
    tree = dynamics.tree
    q, _, _ = state(tree, data)
    gravity = np.array([0.7, -1.3, -9.6])
    step = 1e-6
    gradient = np.empty(tree.dof)
    for k in range(tree.dof):
        dq = np.zeros(tree.dof)
        dq[k] = step
        plus, minus = (
            potential_energy(tree, q + dq, gravity),
            potential_energy(tree, q - dq, gravity),
        )
        gradient[k] = (plus - minus) / (2 * step)
    ours = dynamics.gravity(q, gravity=gravity)
    # central differences: truncation ~h² V''' and rounding ~1e-16 |V| / h, both < 1e-7 here
    np.testing.assert_allclose(
        ours, gradient, rtol=0, atol=1e-7 * (1 + float(np.max(np.abs(ours))))
    )


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_power_balance_along_a_motion(name: str, data: st.DataObject) -> None:
    """d/dt ½ q̇ᵀ M(q) q̇ = q̇ᵀ (τ - g(q)) for τ = rnea(q, q̇, q̈), along q(t) = q + t q̇ + ½ t² q̈."""
    dynamics = dynamics_of(name)
    q, qd, qdd = state(dynamics.tree, data)

    def kinetic(t: float) -> float:
        v = qd + t * qdd
        return 0.5 * float(v @ dynamics.mass_matrix(q + t * qd + 0.5 * t * t * qdd) @ v)

    h = 1e-5
    derivative = (kinetic(h) - kinetic(-h)) / (2 * h)
    power = float(qd @ (dynamics.rnea(q, qd, qdd) - dynamics.gravity(q)))
    assert derivative == pytest.approx(power, rel=1e-6, abs=1e-8 * (1 + kinetic(0.0)))


def _unmimicked(tree: KinematicTree) -> KinematicTree:
    """The same tree with every mimic joint made independent."""
    links = []
    for link in tree.links:
        motor = link.motor
        if isinstance(motor, JointMotor) and motor.mimic is not None:
            motor = JointMotor(motor.kind, motor.axis, motor.origin, motor.limits, motor.joint_name)
        links.append(Link(link.name, link.parent, motor, link.inertial))
    return KinematicTree(links, name=tree.name)


@pytest.mark.parametrize("name", ["panda", "features", "baxter"])
def test_mimic_joints_fold_into_their_driver(name: str) -> None:
    """τ = Gᵀ τ_all and M = Gᵀ M_all G, with the tree whose mimic joints move freely as `all`."""
    dynamics = dynamics_of(name)
    tree = dynamics.tree
    free = Dynamics(_unmimicked(tree))
    G = np.zeros((free.tree.dof, tree.dof))
    offset = np.zeros(free.tree.dof)
    for link in tree.links:
        if isinstance(link.motor, JointMotor):
            row = free.tree.joint_names.index(str(link.joint_name))
            mimic = link.motor.mimic
            if mimic is None:
                G[row, tree.joint_names.index(str(link.joint_name))] = 1.0
            else:
                G[row, tree.joint_names.index(mimic.joint)] = mimic.multiplier
                offset[row] = mimic.offset
    rng = np.random.default_rng(5)
    for _ in range(10):
        q, qd, qdd = (rng.uniform(-0.5, 0.5, tree.dof) for _ in range(3))
        q_all = G @ q + offset
        tau = G.T @ free.rnea(q_all, G @ qd, G @ qdd)
        np.testing.assert_allclose(dynamics.rnea(q, qd, qdd), tau, rtol=1e-12, atol=1e-12)
        M = G.T @ free.mass_matrix(q_all) @ G
        np.testing.assert_allclose(dynamics.mass_matrix(q), M, rtol=1e-12, atol=1e-13)
        C = G.T @ free.coriolis_matrix(q_all, G @ qd) @ G
        np.testing.assert_allclose(dynamics.coriolis_matrix(q, qd), C, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", ["ur5", "panda", "features"])
def test_a_payload_is_that_much_more_inertial_on_its_link(name: str) -> None:
    dynamics = dynamics_of(name)
    tree = dynamics.tree
    link = PAYLOAD_LINK[name]
    heavier = KinematicTree(
        [
            Link(other.name, other.parent, other.motor, (other.inertial or Inertial(0.0)) + LOAD)
            if other.name == link
            else other
            for other in tree.links
        ],
        name=tree.name,
    )
    payload = dynamics.payload(link, LOAD)
    reference = Dynamics(heavier)
    rng = np.random.default_rng(3)
    for _ in range(10):
        q, qd, qdd = (rng.uniform(-1.0, 1.0, tree.dof) for _ in range(3))
        np.testing.assert_allclose(
            dynamics.rnea(q, qd, qdd, payload), reference.rnea(q, qd, qdd), rtol=1e-12, atol=1e-12
        )
        np.testing.assert_allclose(
            dynamics.mass_matrix(q, payload), reference.mass_matrix(q), rtol=1e-12, atol=1e-13
        )


def test_gravity_is_linear_in_the_gravity_vector_and_the_default_is_configurable() -> None:
    panda = dynamics_of("panda")
    q = np.linspace(-1.0, 1.0, panda.tree.dof)
    g = panda.gravity(q)
    np.testing.assert_allclose(panda.gravity(q, gravity=(0, 0, 9.81)), -g, rtol=1e-15, atol=0)
    assert panda.gravity(q, gravity=(0, 0, 0)).tolist() == [0.0] * panda.tree.dof
    on_the_moon = Dynamics(panda.tree, gravity=(0, 0, -1.62))
    np.testing.assert_allclose(on_the_moon.gravity(q), g * (1.62 / 9.81), rtol=1e-12, atol=1e-15)
    assert on_the_moon.gravity_acceleration.tolist() == [0.0, 0.0, -1.62]


def test_a_tree_without_joints_has_empty_dynamics() -> None:
    dynamics = Dynamics(KinematicTree([Link("base", None, inertial=LOAD)]))
    assert dynamics.gravity([]).shape == (0,)
    assert dynamics.rnea([], [], []).shape == (0,)
    assert dynamics.mass_matrix([]).shape == (0, 0)


def test_invalid_inputs_are_refused_with_what_was_expected() -> None:
    panda = dynamics_of("panda")
    with pytest.raises(
        KinematicsError, match=r"qd must have shape \(dof,\) with dof=8, got \(7,\)"
    ):
        panda.rnea(np.zeros(8), np.zeros(7), np.zeros(8))
    with pytest.raises(KinematicsError, match="joint vectors must be finite"):
        panda.gravity([math.nan] + [0.0] * 7)
    with pytest.raises(KinematicsError, match="gravity must be 3 finite numbers"):
        panda.gravity(np.zeros(8), gravity=(0.0, -9.81))
    with pytest.raises(UnknownNameError, match="payload on unknown link 'flange'"):
        panda.payload("flange", LOAD)
    other = dynamics_of("ur5").payload("tool0", LOAD)
    with pytest.raises(KinematicsError, match="was made for model 'ur5'"):
        panda.gravity(np.zeros(8), other)


def test_out_arrays_receive_the_same_results() -> None:
    panda = dynamics_of("panda")
    q, qd, qdd = np.linspace(-1, 1, 8), np.linspace(2, -1, 8), np.linspace(0.5, -0.3, 8)
    tau, M = np.full(8, np.nan), np.full((8, 8), np.nan)
    assert panda.rnea(q, qd, qdd, out=tau) is tau
    assert tau.tolist() == panda.rnea(q, qd, qdd).tolist()
    assert panda.gravity(q, out=tau) is tau
    assert tau.tolist() == panda.gravity(q).tolist()
    assert panda.mass_matrix(q, out=M) is M
    assert M.tolist() == panda.mass_matrix(q).tolist()
    assert panda.coriolis_matrix(q, qd, out=M) is M
    assert M.tolist() == panda.coriolis_matrix(q, qd).tolist()
    with pytest.raises(KinematicsError, match=r"out must be .* of shape \(8, 8\)"):
        panda.mass_matrix(q, out=np.empty((8, 8), dtype=np.float32))


def test_the_example_of_docs_dynamics_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "dynamics.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    monkeypatch.chdir(root)  # the example loads config/robots/ur5.urdf as the README's do
    for block in blocks:
        exec(compile(block, "docs/dynamics.md", "exec"), {})
