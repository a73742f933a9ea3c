"""The signed distance kernels against coal on thousands of random primitive pairs, and their
laws: symmetry, invariance under rigid motion, witness points that realise the distance."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from kinematics.collision import _primitive_kernels as kern
from kinematics.collision.geometry import Box, Capsule, Plane, Shape, Sphere
from kinematics.quaternion import quat_to_matrix
from tests.kinematics.collision_peers import COAL_TOLERANCE, coal_distance, coal_object

Array = NDArray[np.float64]
EXACT = 1e-9  # m: both sides exact (sphere/capsule pairs, planes)
MARGIN = 0.01
COUNT = 600
IDENTITY = (np.eye(3), np.zeros(3))


def _quaternion(rng: np.random.Generator) -> tuple[float, float, float, float]:
    q = rng.normal(size=4)
    w, x, y, z = (float(v) for v in q / np.linalg.norm(q))
    return (w, x, y, z)


def random_shape(rng: np.random.Generator, kind: str) -> Shape:
    """Shapes around the origin at sizes where every relation (apart, touching, deep) occurs."""
    center = rng.uniform(-0.25, 0.25, 3)
    if kind == "sphere":
        return Sphere(center, rng.uniform(0.01, 0.2))
    if kind == "capsule":
        half = rng.normal(size=3) * rng.uniform(0.0, 0.2)
        return Capsule(center - half, center + half, rng.uniform(0.01, 0.15))
    return Box(center, rng.uniform(0.02, 0.4, 3), _quaternion(rng))


def random_plane(rng: np.random.Generator) -> Plane:
    return Plane("plane", rng.uniform(-0.2, 0.2, 3), rng.normal(size=3))


def _segment(shape: Shape) -> tuple[Array, Array, float]:
    if isinstance(shape, Sphere):
        return np.array(shape.center), np.array(shape.center), shape.radius
    assert isinstance(shape, Capsule)
    return np.array(shape.a), np.array(shape.b), shape.radius


def _box(shape: Box) -> tuple[Array, Array, Array]:
    R = np.ascontiguousarray(quat_to_matrix(np.array(shape.orientation)))
    return np.array(shape.center), R, 0.5 * np.array(shape.size)


def ours(first: Shape, second: Shape | Plane, out: Array | None = None) -> float:
    """Our signed distance (m), witnesses into `out` (6,) (on `first`, then `second`)."""
    out = np.empty(6) if out is None else out
    if isinstance(second, Plane):
        point, normal = np.array(second.point), np.array(second.normal)
        if isinstance(first, Box):
            return float(kern.box_plane(*_box(first), point, normal, out))
        return float(kern.segment_plane(*_segment(first), point, normal, out))
    if isinstance(first, Box) and isinstance(second, Box):
        return float(kern.box_box(*_box(first), *_box(second), out))
    if isinstance(first, Box):
        d = float(kern.segment_box(*_segment(second), *_box(first), out))  # type: ignore[arg-type]
        out[:] = np.concatenate((out[3:], out[:3]))
        return d
    if isinstance(second, Box):
        return float(kern.segment_box(*_segment(first), *_box(second), out))
    return float(kern.segment_segment(*_segment(first), *_segment(second), out))


def peer(first: Shape, second: Shape | Plane) -> float:
    return coal_distance(coal_object(first, *IDENTITY), coal_object(second, *IDENTITY))


ROUND = ["sphere", "capsule"]


@pytest.mark.parametrize(("kind_a", "kind_b"), [(a, b) for a in ROUND for b in ROUND])
def test_round_pairs_match_coal_exactly(kind_a: str, kind_b: str) -> None:
    rng = np.random.default_rng(hash((kind_a, kind_b)) % 2**32)
    errors = []
    for _ in range(COUNT):
        a, b = random_shape(rng, kind_a), random_shape(rng, kind_b)
        errors.append(abs(ours(a, b) - peer(a, b)))
    assert max(errors) < EXACT


@pytest.mark.parametrize("kind", ["sphere", "capsule", "box"])
def test_planes_match_coal_exactly(kind: str) -> None:
    rng = np.random.default_rng(7)
    errors = []
    for _ in range(COUNT):
        shape, plane = random_shape(rng, kind), random_plane(rng)
        errors.append(abs(ours(shape, plane) - peer(shape, plane)))
    assert max(errors) < EXACT


@pytest.mark.parametrize(
    ("kind_a", "kind_b"), [("sphere", "box"), ("capsule", "box"), ("box", "box")]
)
def test_box_pairs_agree_with_coal(kind_a: str, kind_b: str) -> None:
    """Exact on both sides up to coal's own tolerance, so the distances agree within it and the
    verdicts at the margin agree wherever coal's distance is farther than that from the margin."""
    rng = np.random.default_rng(11)
    apart = deep = 0
    for _ in range(COUNT):
        a, b = random_shape(rng, kind_a), random_shape(rng, kind_b)
        mine, theirs = ours(a, b), peer(a, b)
        assert mine == pytest.approx(theirs, abs=COAL_TOLERANCE), (a, b)
        if abs(theirs - MARGIN) > COAL_TOLERANCE:
            assert (mine < MARGIN) == (theirs < MARGIN)
        apart += theirs > 0.0
        deep += theirs < -0.01
    assert apart > COUNT // 10
    assert deep > COUNT // 10


@pytest.mark.parametrize("kind_a", ["sphere", "capsule", "box"])
@pytest.mark.parametrize("kind_b", ["sphere", "capsule", "box"])
def test_witness_points_realise_the_distance(kind_a: str, kind_b: str) -> None:
    """|p_a - p_b| is |distance|; apart, p_a lies on a's surface and p_b on b's."""
    rng = np.random.default_rng(3)
    out = np.empty(6)
    for _ in range(300):
        a, b = random_shape(rng, kind_a), random_shape(rng, kind_b)
        d = ours(a, b, out)
        assert np.linalg.norm(out[:3] - out[3:]) == pytest.approx(abs(d), abs=1e-9)
        if d > 0.0:  # each witness is on its own shape: 0 from it
            probe_a, probe_b = Sphere(out[:3], 0.0), Sphere(out[3:], 0.0)
            assert ours(a, probe_a) == pytest.approx(0.0, abs=1e-9)
            assert ours(b, probe_b) == pytest.approx(0.0, abs=1e-9)


KINDS = st.sampled_from(["sphere", "capsule", "box"])


@settings(max_examples=60, deadline=None)
@given(kind_a=KINDS, kind_b=KINDS, seed=st.integers(0, 2**32 - 1))
def test_symmetric(kind_a: str, kind_b: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = random_shape(rng, kind_a), random_shape(rng, kind_b)
    assert ours(a, b) == pytest.approx(ours(b, a), abs=EXACT)


def _moved(shape: Shape, R: Array, t: Array) -> Shape:
    if isinstance(shape, Sphere):
        return Sphere(R @ np.array(shape.center) + t, shape.radius)
    if isinstance(shape, Capsule):
        return Capsule(R @ np.array(shape.a) + t, R @ np.array(shape.b) + t, shape.radius)
    from kinematics.quaternion import quat_from_matrix, quat_mul  # noqa: PLC0415

    q = quat_mul(quat_from_matrix(R), np.array(shape.orientation))
    return Box(R @ np.array(shape.center) + t, shape.size, q)


@settings(max_examples=60, deadline=None)
@given(kind_a=KINDS, kind_b=KINDS, seed=st.integers(0, 2**32 - 1))
def test_invariant_under_rigid_motion(kind_a: str, kind_b: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = random_shape(rng, kind_a), random_shape(rng, kind_b)
    R = np.asarray(quat_to_matrix(np.array(_quaternion(rng))))
    t = rng.uniform(-2.0, 2.0, 3)
    assert ours(_moved(a, R, t), _moved(b, R, t)) == pytest.approx(ours(a, b), abs=EXACT)
