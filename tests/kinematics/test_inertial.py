"""Link inertials: the `Inertial` value (checks, parallel-axis sums, frames against Pinocchio's
`Inertia`), reading them from URDF and `.kinematic.json`, the round trip through the writer, and
the one-line errors that name the link."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from kinematics import Inertial, InertialError, ModelError, Pose, load_tree, save_tree
from kinematics.dynamics import Dynamics
from kinematics.models.kinematic_json import tree_from_dict, tree_to_dict
from kinematics.models.urdf import tree_from_urdf
from kinematics.quaternion import quat_from_rpy
from tests.kinematics.conftest import DESIGN_EXAMPLE, PANDA_URDF, ROBOTS
from tests.kinematics.test_dynamics import ARMS
from tests.peers.pinocchio_dynamics import EXAMPLE_ROBOTS

LOAD = Inertial(1.3, (0.02, -0.05, 0.11), (0.012, 0.002, -0.001, 0.009, 0.0007, 0.006))


def as_pinocchio(inertial: Inertial) -> pin.Inertia:
    return pin.Inertia(inertial.mass, np.array(inertial.com), np.array(inertial.tensor))


def assert_same_inertia(ours: Inertial, theirs: pin.Inertia) -> None:
    assert ours.mass == pytest.approx(theirs.mass, rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(ours.com, theirs.lever, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.tensor, theirs.inertia, rtol=1e-9, atol=1e-12)


# -- the value --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((-0.5,), "mass -0.5 kg must be >= 0"),
        ((math.nan,), "mass: nan must be a finite number"),
        ((1.0, (0.0, 0.0)), "com: (0.0, 0.0) must be 3 finite numbers"),
        (
            (1.0, (0, 0, 0), (1.0, 0.0, 0.0, 1.0, 0.0, -0.5)),
            "inertia [1.0, 0.0, 0.0, 1.0, 0.0, -0.5] kg·m² (principal moments [-0.5, 1, 1]) "
            "must be positive semi-definite",
        ),
        (
            (1.0, (0, 0, 0), (0.1, 0.0, 0.0, 0.1, 0.0, 0.3)),
            "inertia [0.1, 0.0, 0.0, 0.1, 0.0, 0.3] kg·m² (principal moments [0.1, 0.1, 0.3]) "
            "break the triangle inequality: 0.3 > 0.1 + 0.1",
        ),
    ],
)
def test_what_no_rigid_body_has_is_refused(arguments: tuple[object, ...], message: str) -> None:
    with pytest.raises(InertialError) as excinfo:
        Inertial(*arguments)  # type: ignore[arg-type]
    assert str(excinfo.value) == message


def test_zero_mass_zero_tensor_and_extreme_bodies_are_valid() -> None:
    assert Inertial(0.0).tensor.tolist() == np.zeros((3, 3)).tolist()
    Inertial(2.0, (0, 0, 0), (0.1, 0.0, 0.0, 0.2, 0.0, 0.3))  # a flat plate: izz = ixx + iyy
    Inertial(2.0, (0, 0, 0), (0.1, 0.0, 0.0, 0.1, 0.0, 0.0))  # a thin rod along z
    Inertial(2.0, (0, 0, 0), (0.1, 0.0, 0.0, 0.2, 0.0, 0.3 * (1 + 5e-7)))  # within the slack
    with pytest.raises(InertialError, match="triangle"):
        Inertial(2.0, (0, 0, 0), (0.1, 0.0, 0.0, 0.2, 0.0, 0.3 * (1 + 5e-6)))


def test_transformed_and_summed_as_pinocchio_does() -> None:
    """Moving an inertial into another frame and joining two (the parallel-axis theorem, as the
    dynamics model merges links through fixed joints) against Pinocchio's `Inertia`."""
    a_from_link = Pose((0.3, -0.1, 0.25), quat_from_rpy((0.4, -1.1, 2.0)))
    other = Inertial(0.4, (-0.1, 0.0, 0.03), (0.002, 0.0, 0.0001, 0.003, 0.0, 0.004))
    se3 = pin.SE3(a_from_link.rotation_matrix, a_from_link.translation)
    assert_same_inertia(LOAD.transformed(a_from_link), se3.act(as_pinocchio(LOAD)))
    joined = LOAD.transformed(a_from_link) + other
    assert_same_inertia(joined, se3.act(as_pinocchio(LOAD)) + as_pinocchio(other))
    assert_same_inertia(Inertial(0.0) + Inertial(0.0), pin.Inertia.Zero())


# -- files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ARMS))
def test_bodies_merge_fixed_links_as_pinocchio_does(name: str) -> None:
    """Every body of the dynamics model (a joint link with the links fixed to it, inertial origins
    and rpy applied) against the inertia Pinocchio's URDF parser gives that joint's body."""
    tree = load_tree(ARMS[name])
    model = pin.buildModelFromUrdf(str(ARMS[name]))
    for body in Dynamics(tree).bodies:
        joint = tree.link(body.link).joint_name
        assert_same_inertia(body.inertial, model.inertias[model.getJointId(joint)])


def test_the_json_writer_round_trips_inertials(tmp_path: Path) -> None:
    panda = load_tree(PANDA_URDF)
    doc = tree_to_dict(panda)
    assert doc["links"][1]["inertial"] == {
        "mass": 4.970684,
        "com": [0.003875, 0.002081, -0.04762],
        "inertia": [0.70337, -0.000139, 0.006772, 0.70661, 0.019169, 0.009117],
    }
    again = tree_from_dict(json.loads(json.dumps(doc)))
    assert [link.inertial for link in again.links] == [link.inertial for link in panda.links]
    save_tree(panda, tmp_path / "panda.kinematic.json")
    saved = load_tree(tmp_path / "panda.kinematic.json")
    q = np.linspace(-0.5, 0.5, panda.dof)
    a, b = Dynamics(panda), Dynamics(saved)
    assert a.mass_matrix(q).tolist() == b.mass_matrix(q).tolist()
    assert a.gravity(q).tolist() == b.gravity(q).tolist()


def test_a_file_without_inertials_is_massless_and_writes_none() -> None:
    tree = load_tree(DESIGN_EXAMPLE)
    assert all(link.inertial is None for link in tree.links)
    assert all("inertial" not in link for link in tree_to_dict(tree)["links"])
    dynamics = Dynamics(tree)
    assert dynamics.gravity(np.zeros(tree.dof)).tolist() == [0.0] * tree.dof


def test_json_inertial_defaults_and_rotated_urdf_frames() -> None:
    doc = tree_to_dict(load_tree(DESIGN_EXAMPLE))
    doc["links"][2]["inertial"] = {"mass": 2.0}
    assert tree_from_dict(doc).link("joint1").inertial == Inertial(2.0)
    urdf = """<robot name="r"><link name="a"><inertial><origin xyz="0.1 0.2 0.3" rpy="0.3 0.2 0.1"/>
        <mass value="2"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.25"/>
        </inertial></link></robot>"""
    inertial = tree_from_urdf(urdf).link("a").inertial
    assert inertial is not None
    R = Pose((0, 0, 0), quat_from_rpy((0.3, 0.2, 0.1))).rotation_matrix
    np.testing.assert_allclose(inertial.tensor, R @ np.diag([0.1, 0.2, 0.25]) @ R.T, atol=1e-15)
    assert inertial.com == pytest.approx((0.1, 0.2, 0.3), abs=1e-15)


def _panda_with(replacement: str) -> str:
    text = PANDA_URDF.read_text(encoding="utf-8")
    old = '<mass value="3.228604" />'
    assert old in text
    return text.replace(old, replacement)


@pytest.mark.parametrize(
    ("replacement", "message"),
    [
        (
            '<mass value="-3.2" />',
            "link 'panda_link3': <inertial>: mass -3.2 kg must be >= 0",
        ),
        ("", "link 'panda_link3': <inertial>: missing <mass> (URDF requires one)"),
        (
            '<mass value="3.2" /><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="3" />',
            "link 'panda_link3': <inertial>: inertia [1.0, 0.0, 0.0, 1.0, 0.0, 3.0] kg·m² "
            "(principal moments [1, 1, 3]) break the triangle inequality: 3 > 1 + 1",
        ),
    ],
)
def test_urdf_inertial_errors_name_the_link(replacement: str, message: str) -> None:
    text = _panda_with(replacement)
    if "<inertia " in replacement:  # the second <inertia> of the link would be read otherwise
        text = re.sub(r'(<inertia ixx="1".*?/>)\s*<inertia [^>]*/>', r"\1", text, flags=re.S)
    with pytest.raises(ModelError) as excinfo:
        tree_from_urdf(text, source="panda.urdf")
    assert str(excinfo.value) == f"panda.urdf: {message}"
    assert "\n" not in str(excinfo.value)


@pytest.mark.parametrize(
    ("inertial", "message"),
    [
        ({"mass": -1}, "link 'joint1': inertial: mass -1 kg must be >= 0"),
        ({"mass": True}, "link 'joint1': inertial.mass: true must be a number"),
        ({"com": [0, 0, 0]}, "link 'joint1': inertial: missing key 'mass'"),
        (
            {"mass": 1, "inertia": [1, 0, 0]},
            "link 'joint1': inertial.inertia: [1, 0, 0] must be a list of 6 finite numbers "
            "[ixx, ixy, ixz, iyy, iyz, izz]",
        ),
        (
            {"mass": 1, "inertia": [1, 0, 0, 1, 0, -1]},
            "link 'joint1': inertial: inertia [1.0, 0.0, 0.0, 1.0, 0.0, -1.0] kg·m² "
            "(principal moments [-1, 1, 1]) must be positive semi-definite",
        ),
        (
            {"mass": 1, "moment": 2},
            "link 'joint1': inertial: unknown key 'moment' (expected 'mass', 'com', 'inertia')",
        ),
    ],
)
def test_json_inertial_errors_name_the_link(inertial: dict[str, object], message: str) -> None:
    doc = tree_to_dict(load_tree(DESIGN_EXAMPLE))
    doc["links"][2]["inertial"] = inertial
    with pytest.raises(InertialError if "kg" in message else ModelError) as excinfo:
        tree_from_dict(doc)
    assert str(excinfo.value) == message


@pytest.mark.parametrize(
    "path",
    [
        "robots/pr2_description/urdf/pr2.urdf",
        "robots/tiago_description/robots/tiago.urdf",
        "robots/allegro_hand_description/urdf/allegro_right_hand.urdf",
        "robots/go1_description/urdf/go1.urdf",
    ],
)
def test_published_urdfs_with_impossible_inertias_are_refused(path: str) -> None:
    """Real files whose inertials no rigid body has: the error names a link, and that link's
    tensor, read here with ElementTree and numpy, does break a rule."""
    with pytest.raises(InertialError) as excinfo:
        load_tree(EXAMPLE_ROBOTS / path)
    message = str(excinfo.value)
    assert "\n" not in message
    found = re.search(r"link '([^']+)': <inertial>: ", message)
    assert found is not None, message
    root = ET.parse(EXAMPLE_ROBOTS / path).getroot()
    link = next(e for e in root.findall("link") if e.get("name") == found.group(1))
    inertia = link.find("inertial/inertia")
    assert inertia is not None
    v = {key: float(inertia.get(key, "0")) for key in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
    tensor = np.array(
        [
            [v["ixx"], v["ixy"], v["ixz"]],
            [v["ixy"], v["iyy"], v["iyz"]],
            [v["ixz"], v["iyz"], v["izz"]],
        ]
    )
    low, mid, high = np.linalg.eigvalsh(tensor)
    assert low < -1e-6 * abs(high) or high > (low + mid) * (1 + 1e-6)


def test_the_shipped_arms_load_with_their_inertials() -> None:
    for path in sorted(ROBOTS.glob("*.urdf")):
        tree = load_tree(path)
        with_inertial = [link.name for link in tree.links if link.inertial is not None]
        assert len(with_inertial) == len(ET.parse(path).getroot().findall("link/inertial"))
