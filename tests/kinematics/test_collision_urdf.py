"""URDF <collision> elements as shapes, meshes found and fitted with the capsules that contain
them, and the errors that name the link."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trimesh
from hypothesis import given, settings
from hypothesis import strategies as st

from kinematics.collision import Box, Capsule, Sphere
from kinematics.collision.mesh_fit import bounding_capsule, fit_capsules, fit_radii
from kinematics.collision.urdf_collision import collision_from_urdf, collision_from_urdf_file
from kinematics.errors import ModelError


def _urdf(*links: str) -> str:
    return f'<robot name="r">{"".join(links)}</robot>'


def _link(name: str, *collisions: str) -> str:
    return (
        f'<link name="{name}">'
        + "".join(f"<collision>{c}</collision>" for c in collisions)
        + "</link>"
    )


def _gap(points: np.ndarray, capsule: Capsule) -> np.ndarray:
    """How far each point is outside the capsule (m; ≤ 0 inside)."""
    a, b = np.array(capsule.a), np.array(capsule.b)
    d = b - a
    t = np.clip((points - a) @ d / max(float(d @ d), 1e-300), 0.0, 1.0)
    return np.linalg.norm(points - (a + t[:, None] * d), axis=1) - capsule.radius


def test_primitives_with_their_origins() -> None:
    shapes = collision_from_urdf(
        _urdf(
            _link(
                "a",
                '<origin xyz="0 0 0.1" rpy="1.5707963267948966 0 0"/>'
                '<geometry><cylinder radius="0.05" length="0.4"/></geometry>',
                '<origin xyz="1 2 3"/><geometry><sphere radius="0.2"/></geometry>',
                '<origin xyz="0 0 1" rpy="0 0 1.5707963267948966"/>'
                '<geometry><box size="0.1 0.2 0.3"/></geometry>',
            ),
            _link("b"),
        )
    )
    assert set(shapes) == {"a"}  # a link without collision elements has no geometry
    capsule, sphere, box = shapes["a"]
    assert isinstance(capsule, Capsule)
    assert isinstance(sphere, Sphere)
    assert isinstance(box, Box)
    # the cylinder's z axis turned onto -y by the roll: the segment is its axis
    assert capsule.a == pytest.approx((0.0, 0.2, 0.1), abs=1e-12)
    assert capsule.b == pytest.approx((0.0, -0.2, 0.1), abs=1e-12)
    assert capsule.radius == 0.05
    assert sphere.center == (1.0, 2.0, 3.0)
    assert sphere.radius == 0.2
    assert box.size == (0.1, 0.2, 0.3)
    s = np.sqrt(0.5)
    assert box.orientation == pytest.approx((s, 0.0, 0.0, s), abs=1e-12)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A ROS-style package: my_arm/urdf/arm.urdf and my_arm/meshes/part.stl (a 0.1 × 0.1 × 0.4
    box, in mm), used through package://, a relative path, and with a scale."""
    root = tmp_path / "my_arm"
    (root / "urdf").mkdir(parents=True)
    (root / "meshes").mkdir()
    trimesh.creation.box((100.0, 100.0, 400.0)).export(root / "meshes" / "part.stl")
    mesh = '<geometry><mesh filename="{}" scale="0.001 0.001 0.001"/></geometry>'
    (root / "urdf" / "arm.urdf").write_text(
        _urdf(
            _link("by_package", mesh.format("package://my_arm/meshes/part.stl")),
            _link("by_path", '<origin xyz="0 0 1"/>' + mesh.format("../meshes/part.stl")),
        )
    )
    return root


def test_meshes_are_found_and_fitted_with_a_containing_capsule(package: Path) -> None:
    shapes = collision_from_urdf_file(package / "urdf" / "arm.urdf")
    corners = np.array(
        [[x, y, z] for x in (-0.05, 0.05) for y in (-0.05, 0.05) for z in (-0.2, 0.2)]
    )
    for link, offset in (("by_package", 0.0), ("by_path", 1.0)):
        (capsule,) = shapes[link]
        assert isinstance(capsule, Capsule)
        assert _gap(corners + np.array([0.0, 0.0, offset]), capsule).max() <= 1e-9
        # tight: the radius is the corners' distance from the axis; the end faces' corners lie on
        # that radius, so the segment spans the box's length
        assert capsule.radius == pytest.approx(np.hypot(0.05, 0.05), abs=1e-3)
        assert abs(capsule.b[2] - capsule.a[2]) == pytest.approx(0.4, abs=2e-3)


def test_an_unreadable_mesh_names_the_link_unless_overridden(package: Path) -> None:
    (package / "meshes" / "broken.stl").write_bytes(b"solid nothing\nendsolid")
    text = _urdf(
        _link("good", '<geometry><mesh filename="../meshes/part.stl"/></geometry>'),
        _link("bad", '<geometry><mesh filename="../meshes/broken.stl"/></geometry>'),
        _link("gone", '<geometry><mesh filename="package://my_arm/meshes/none.stl"/></geometry>'),
    )
    urdf = package / "urdf" / "arm.urdf"
    urdf.write_text(text)
    with pytest.raises(ModelError, match=r"link 'bad' <collision> #1: mesh '.*broken.stl'"):
        collision_from_urdf_file(urdf, overrides={"gone": [Sphere((0, 0, 0), 0.1)]})
    with pytest.raises(ModelError, match="link 'gone' <collision> #1: mesh 'package://my_arm/"):
        collision_from_urdf_file(urdf, overrides={"bad": [Sphere((0, 0, 0), 0.1)]})
    override = [Sphere((0, 0, 0), 0.1)]
    shapes = collision_from_urdf_file(urdf, overrides={"bad": override, "gone": override})
    assert shapes["bad"] == shapes["gone"] == (override[0],)
    with pytest.raises(ModelError, match=r"does not have: \['elbow'\]"):
        collision_from_urdf_file(urdf, overrides={"elbow": override})


def test_malformed_elements_name_the_link() -> None:
    with pytest.raises(
        ModelError, match="link 'a' <collision> #1: <cylinder> needs the attribute 'length'"
    ):
        collision_from_urdf(_urdf(_link("a", '<geometry><cylinder radius="0.1"/></geometry>')))
    with pytest.raises(ModelError, match="link 'a' <collision> #2: unknown geometry <cone>"):
        collision_from_urdf(
            _urdf(
                _link(
                    "a", '<geometry><sphere radius="1"/></geometry>', "<geometry><cone/></geometry>"
                )
            )
        )
    with pytest.raises(ModelError, match="invalid XML"):
        collision_from_urdf("<robot><link></robot>")


POINTS = st.integers(1, 60).flatmap(
    lambda n: st.lists(
        st.tuples(*[st.floats(-1.0, 1.0, allow_nan=False)] * 3), min_size=n, max_size=n
    )
)


@settings(max_examples=60, deadline=None)
@given(points=POINTS, stretch=st.floats(0.01, 10.0))
def test_the_bounding_capsule_contains_every_point(
    points: list[tuple[float, float, float]], stretch: float
) -> None:
    cloud = np.array(points) * [1.0, 1.0, stretch]
    assert _gap(cloud, bounding_capsule(cloud)).max() <= 1e-9


def test_fitted_capsules_hold_the_whole_surface() -> None:
    """An L-shaped mesh: several capsules, every point of every triangle inside one of them."""
    mesh = trimesh.util.concatenate(
        [
            trimesh.creation.box(
                (0.06, 0.06, 0.4), trimesh.transformations.translation_matrix((0, 0, 0.2))
            ),
            trimesh.creation.cylinder(
                0.06, 0.15, transform=trimesh.transformations.rotation_matrix(np.pi / 2, (1, 0, 0))
            ),
        ]
    )
    samples = np.asarray(mesh.sample(4000, seed=1))
    for capsules in (
        fit_capsules(mesh.vertices, mesh.faces, max_count=2),
        fit_radii(
            mesh.vertices, mesh.faces, [((0, -0.05, 0), (0, 0.05, 0)), ((0, 0, 0), (0, 0, 0.4))]
        ),
    ):
        gap = np.min([_gap(samples, c) for c in capsules], axis=0)
        assert gap.max() <= 1e-9
    single = bounding_capsule(mesh.vertices)
    assert (
        sum(
            c.radius
            for c in fit_radii(
                mesh.vertices, mesh.faces, [((0, -0.05, 0), (0, 0.05, 0)), ((0, 0, 0), (0, 0, 0.4))]
            )
        )
        < 2 * single.radius
    )
