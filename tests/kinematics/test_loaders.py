"""Model files: the .kinematic.json format of docs/kinematic-json.md (loads exactly as written),
its error messages, file handling by suffix, and export round trips."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kinematics import JointLimit, KinematicTree, ModelError, Pose
from kinematics.models.loaders import (
    load_tree,
    model_name,
    save_tree,
    tree_from_dict,
    tree_to_dict,
)

DATA = Path(__file__).resolve().parent / "data"
ROBOTS = Path(__file__).resolve().parents[2] / "config" / "robots"
DESIGN_EXAMPLE = DATA / "design_example.kinematic.json"
SLIDER_MIMIC = DATA / "slider_mimic.kinematic.json"
TOL = 1e-12
HALF = math.sqrt(0.5)


# -- the documented example ----------------------------------------------------------------------


def test_design_example_loads_with_the_expected_dof_and_poses() -> None:
    tree = load_tree(DESIGN_EXAMPLE)
    assert tree.name == "design_example"
    assert tree.root == "base"
    assert tree.link_names == ("base", "axis1", "joint1")
    assert tree.dof == 1
    assert tree.joint_names == ("joint1",)
    assert tree.limits["joint1"].is_continuous  # no limits given: a continuous revolute joint
    assert tree.fk([0.0], "base").is_close(Pose(), position_tol=0.0, rotation_tol=TOL)
    # axis1: up 0.1373, then a half turn about (1, 1, 0)/√2, which swaps x and y and flips z.
    swap_flip = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
    axis1 = tree.fk([0.0], "axis1")
    np.testing.assert_allclose(axis1.translation, [0.0, 0.0, 0.1373], atol=TOL, rtol=0)
    np.testing.assert_allclose(axis1.rotation_matrix, swap_flip, atol=TOL, rtol=0)
    np.testing.assert_allclose(np.abs(axis1.quaternion), [0.0, HALF, HALF, 0.0], atol=TOL, rtol=0)
    # joint1 turns about axis1's z: at q = 0 it is axis1; at q = π/2, R = swap_flip @ Rz(π/2).
    assert tree.fk([0.0], "joint1").is_close(axis1, position_tol=TOL, rotation_tol=1e-9)
    joint1 = tree.fk([math.pi / 2], "joint1")
    np.testing.assert_allclose(joint1.translation, [0.0, 0.0, 0.1373], atol=TOL, rtol=0)
    np.testing.assert_allclose(
        joint1.rotation_matrix,
        [[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]],
        atol=TOL,
        rtol=0,
    )
    assert tree.jacobian([0.3], "joint1")[3:, 0] == pytest.approx([0.0, 0.0, -1.0], abs=TOL)


def assert_same_document(actual: Any, expected: Any, where: str = "") -> None:
    """Same structure and strings; numbers equal within TOL."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), where
        assert list(actual) == list(expected), where
        for key in expected:
            assert_same_document(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), where
        assert len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same_document(a, e, f"{where}[{i}]")
    elif isinstance(expected, str) or expected is None:
        assert actual == expected, where
    else:
        assert abs(actual - expected) <= TOL, f"{where}: {actual} != {expected}"


def test_a_plain_file_exports_to_the_same_structure() -> None:
    original = json.loads(DESIGN_EXAMPLE.read_text())
    exported = tree_to_dict(load_tree(DESIGN_EXAMPLE), include_name=False)
    expected = copy.deepcopy(original)
    # Axes come back normalised and angles in radians; nothing else changes.
    rotation = expected["links"][1]["motor"]["properties"]["pose"]["rotation"]
    rotation["axis"] = [HALF, HALF, 0.0]
    del rotation["angle_degrees"]
    rotation["angle_radians"] = math.pi
    assert_same_document(exported, expected)


# -- limits and the extensions -------------------------------------------------------------------


def revolute_link(props: dict[str, Any], name: str = "j", parent: str = "base") -> dict[str, Any]:
    return {"name": name, "parent": parent, "motor": {"type": "revolute", "properties": props}}


BASE_LINK = {
    "name": "base",
    "motor": {
        "type": "constant",
        "properties": {
            "pose": {"translation": [0, 0, 0], "rotation": {"axis": [0, 0, 1], "angle_radians": 0}}
        },
    },
}


def test_limits_are_read_in_si_units_and_absent_bounds_are_unbounded() -> None:
    tree = tree_from_dict(
        {
            "links": [
                BASE_LINK,
                revolute_link(
                    {
                        "axis": [0, 0, 1],
                        "limits": {
                            "lower": -2.9,
                            "upper": 2.9,
                            "velocity": 2.0,
                            "acceleration": 10.0,
                        },
                    }
                ),
                revolute_link({"axis": [0, 1, 0], "limits": {"lower": -1}}, "half", "j"),
                {
                    "name": "slide",
                    "parent": "half",
                    "motor": {"type": "prismatic", "properties": {"axis": [0, 0, 2]}},
                },
            ]
        }
    )
    assert tree.limits["j"] == JointLimit(-2.9, 2.9, 2.0, 10.0)
    assert tree.limits["half"] == JointLimit(lower=-1.0)
    assert tree.limits["slide"] == JointLimit()
    assert tree.link("slide").motor.axis == (0.0, 0.0, 1.0)  # type: ignore[union-attr]


def test_degrees_and_radians_give_the_same_pose() -> None:
    def tree_with(rotation: dict[str, Any]) -> KinematicTree:
        return tree_from_dict(
            {
                "links": [
                    {
                        "name": "b",
                        "motor": {
                            "type": "constant",
                            "properties": {
                                "pose": {"translation": [1, 2, 3], "rotation": rotation}
                            },
                        },
                    }
                ]
            }
        )

    degrees = tree_with({"axis": [1, 2, 3], "angle_degrees": 57.0}).fk([], "b")
    radians = tree_with({"axis": [1, 2, 3], "angle_radians": math.radians(57.0)}).fk([], "b")
    assert degrees.is_close(radians, position_tol=0.0, rotation_tol=TOL)
    expected = Pose.from_axis_angle([1, 2, 3], [1, 2, 3], math.radians(57.0))
    assert degrees.is_close(expected, position_tol=0.0, rotation_tol=TOL)


def test_extensions_pose_joint_and_mimic(slider_mimic: KinematicTree) -> None:
    assert slider_mimic.name == "slider-mimic"  # the document's name wins over the file's
    assert slider_mimic.joint_names == ("turntable", "slide", "elbow")
    assert slider_mimic.link("carriage").joint_name == "slide"
    wrist = slider_mimic.link("wrist").motor
    assert wrist.mimic is not None  # type: ignore[union-attr]
    assert (wrist.mimic.joint, wrist.mimic.multiplier, wrist.mimic.offset) == (  # type: ignore[union-attr]
        "turntable",
        -0.5,
        0.1,
    )
    # pose is applied before the motion: at turntable = 0 the turntable sits at base @ pose.
    base = slider_mimic.fk(np.zeros(3), "base")
    pose = Pose.from_axis_angle([0, 0, 0.3], [1, 0, 0], 0.2)
    assert slider_mimic.fk(np.zeros(3), "turntable").is_close(
        base @ pose, position_tol=TOL, rotation_tol=1e-9
    )
    turned = slider_mimic.fk([0.7, 0.0, 0.0], "turntable")
    expected = base @ pose @ Pose.from_axis_angle([0, 0, 0], [0, 0, 1], 0.7)
    assert turned.is_close(expected, position_tol=TOL, rotation_tol=1e-9)


# -- errors ---------------------------------------------------------------------------------------


def valid_document() -> dict[str, Any]:
    return {
        "links": [
            copy.deepcopy(BASE_LINK),
            {
                "name": "axis1",
                "parent": "base",
                "motor": {
                    "type": "constant",
                    "properties": {
                        "pose": {
                            "translation": [0.0, 0.0, 0.1373],
                            "rotation": {"axis": [0.7071, 0.7071, 0.0], "angle_degrees": 180.0},
                        }
                    },
                },
            },
            revolute_link(
                {"axis": [0, 0, 1], "limits": {"lower": -1.0, "upper": 1.0}}, "joint1", "axis1"
            ),
            {
                "name": "slider",
                "parent": "joint1",
                "motor": {"type": "prismatic", "properties": {"axis": [1, 0, 0]}},
            },
        ]
    }


def test_the_valid_document_is_valid() -> None:
    assert tree_from_dict(valid_document()).dof == 2


Edit = Callable[[dict[str, Any]], object]


def props(doc: dict[str, Any], link: int) -> dict[str, Any]:
    return doc["links"][link]["motor"]["properties"]  # type: ignore[no-any-return]


def rotation(doc: dict[str, Any]) -> dict[str, Any]:
    return props(doc, 1)["pose"]["rotation"]  # type: ignore[no-any-return]


ERRORS: list[tuple[str, Edit, str]] = [
    (
        "not an object",
        lambda d: d.update({"links": "x"}),
        'document: links: "x" must be a non-empty list of links',
    ),
    (
        "no links",
        lambda d: d.update({"links": []}),
        "document: links: [] must be a non-empty list of links",
    ),
    (
        "unknown top key",
        lambda d: d.update({"link": 1}),
        "document: unknown key 'link' (expected 'links', 'name'); did you mean 'links'?",
    ),
    ("missing links", lambda d: d.pop("links"), "document: missing key 'links'"),
    (
        "name not a string",
        lambda d: d.update({"name": 3}),
        "document: name: 3 must be a non-empty string",
    ),
    (
        "huge integer",
        lambda d: props(d, 2)["limits"].update({"upper": 10**400}),
        f"link 'joint1': motor.properties.limits.upper: {str(10**400)[:77]}... must be a finite "
        "number",
    ),
    (
        "huge integer in a vector",
        lambda d: props(d, 3).update({"axis": [10**400, 0, 0]}),
        f"link 'slider': motor.properties.axis: [{str(10**400)[:76]}... must be a list of 3 "
        "finite numbers",
    ),
    (
        "link not an object",
        lambda d: d["links"].append(5),
        "links[4]: 5 must be an object with keys name, parent, motor, inertial",
    ),
    ("link without name", lambda d: d["links"][3].pop("name"), "links[3]: missing key 'name'"),
    (
        "name not a string",
        lambda d: d["links"][3].update({"name": 7}),
        "links[3]: name: 7 must be a non-empty string",
    ),
    (
        "parent null",
        lambda d: d["links"][1].update({"parent": None}),
        "link 'axis1': parent: null must be a link name (omit it for the root)",
    ),
    (
        "typo in a link key",
        lambda d: d["links"][1].update({"parnet": "base"}),
        "link 'axis1': unknown key 'parnet' (expected 'name', 'parent', 'motor', 'inertial'); "
        "did you mean 'parent'?",
    ),
    (
        "link without motor",
        lambda d: d["links"][1].pop("motor"),
        "link 'axis1': missing key 'motor'",
    ),
    (
        "unknown motor type",
        lambda d: d["links"][2]["motor"].update({"type": "spherical"}),
        "link 'joint1': motor.type: \"spherical\" must be one of 'constant', 'revolute', "
        "'prismatic'",
    ),
    (
        "motor without properties",
        lambda d: d["links"][2]["motor"].pop("properties"),
        "link 'joint1': motor: missing key 'properties'",
    ),
    (
        "unknown motor key",
        lambda d: d["links"][2]["motor"].update({"limits": {}}),
        "link 'joint1': motor: unknown key 'limits' (expected 'type', 'properties')",
    ),
    (
        "zero axis",
        lambda d: props(d, 2).update({"axis": [0, 0, 0]}),
        "link 'joint1': motor.properties.axis: [0, 0, 0] must be non-zero",
    ),
    (
        "short axis",
        lambda d: props(d, 2).update({"axis": [0, 1]}),
        "link 'joint1': motor.properties.axis: [0, 1] must be a list of 3 finite numbers",
    ),
    (
        "string in axis",
        lambda d: props(d, 2).update({"axis": [0, "1", 0]}),
        "link 'joint1': motor.properties.axis: [0, \"1\", 0] must be a list of 3 finite numbers",
    ),
    (
        "boolean in axis",
        lambda d: props(d, 3).update({"axis": [True, 0, 0]}),
        "link 'slider': motor.properties.axis: [true, 0, 0] must be a list of 3 finite numbers",
    ),
    (
        "NaN translation",
        lambda d: props(d, 1)["pose"].update({"translation": [0, math.nan, 0]}),
        "link 'axis1': motor.properties.pose.translation: [0, NaN, 0] must be a list of 3 finite "
        "numbers",
    ),
    (
        "revolute without axis",
        lambda d: props(d, 2).pop("axis"),
        "link 'joint1': motor.properties: missing key 'axis'",
    ),
    (
        "typo in a property",
        lambda d: props(d, 2).update({"axsi": [0, 0, 1]}),
        "link 'joint1': motor.properties: unknown key 'axsi' (expected 'axis', 'limits', 'pose', "
        "'joint', 'mimic'); did you mean 'axis'?",
    ),
    (
        "axis on a constant motor",
        lambda d: props(d, 1).update({"axis": [0, 0, 1]}),
        "link 'axis1': motor.properties: unknown key 'axis' (expected 'pose')",
    ),
    (
        "constant without pose",
        lambda d: props(d, 1).pop("pose"),
        "link 'axis1': motor.properties: missing key 'pose'",
    ),
    (
        "pose without translation",
        lambda d: props(d, 1)["pose"].pop("translation"),
        "link 'axis1': motor.properties.pose: missing key 'translation'",
    ),
    (
        "both angles",
        lambda d: rotation(d).update({"angle_radians": 3.14}),
        "link 'axis1': motor.properties.pose.rotation: needs exactly one of 'angle_radians', "
        "'angle_degrees'",
    ),
    (
        "no angle",
        lambda d: rotation(d).pop("angle_degrees"),
        "link 'axis1': motor.properties.pose.rotation: needs exactly one of 'angle_radians', "
        "'angle_degrees'",
    ),
    (
        "angle as a string",
        lambda d: rotation(d).update({"angle_degrees": "180"}),
        "link 'axis1': motor.properties.pose.rotation.angle_degrees: \"180\" must be a number",
    ),
    (
        "infinite angle",
        lambda d: rotation(d).update({"angle_degrees": math.inf}),
        "link 'axis1': motor.properties.pose.rotation.angle_degrees: Infinity must be a finite "
        "number",
    ),
    (
        "zero rotation axis",
        lambda d: rotation(d).update({"axis": [0.0, 0.0, 0.0]}),
        "link 'axis1': motor.properties.pose.rotation.axis: [0.0, 0.0, 0.0] must be non-zero",
    ),
    (
        "rotation without axis",
        lambda d: rotation(d).pop("axis"),
        "link 'axis1': motor.properties.pose.rotation: missing key 'axis'",
    ),
    (
        "limits typo",
        lambda d: props(d, 2)["limits"].update({"min": 0}),
        "link 'joint1': motor.properties.limits: unknown key 'min' (expected 'lower', 'upper', "
        "'velocity', 'acceleration')",
    ),
    (
        "boolean limit",
        lambda d: props(d, 2)["limits"].update({"lower": False}),
        "link 'joint1': motor.properties.limits.lower: false must be a number",
    ),
    (
        "null limit",
        lambda d: props(d, 2)["limits"].update({"upper": None}),
        "link 'joint1': motor.properties.limits.upper: null must be a number",
    ),
    (
        "NaN limit",
        lambda d: props(d, 2)["limits"].update({"upper": math.nan}),
        "link 'joint1': motor.properties.limits.upper: NaN must be a finite number",
    ),
    (
        "lower above upper",
        lambda d: props(d, 2)["limits"].update({"lower": 2.0}),
        "link 'joint1': motor.properties.limits: lower 2.0 must be <= upper 1.0",
    ),
    (
        "zero velocity",
        lambda d: props(d, 2)["limits"].update({"velocity": 0}),
        "link 'joint1': motor.properties.limits.velocity: 0 must be > 0",
    ),
    (
        "negative acceleration",
        lambda d: props(d, 2)["limits"].update({"acceleration": -1.5}),
        "link 'joint1': motor.properties.limits.acceleration: -1.5 must be > 0",
    ),
    (
        "limits not an object",
        lambda d: props(d, 2).update({"limits": [0, 1]}),
        "link 'joint1': motor.properties.limits: [0, 1] must be an object with keys lower, upper, "
        "velocity, acceleration",
    ),
    (
        "empty joint name",
        lambda d: props(d, 2).update({"joint": ""}),
        "link 'joint1': motor.properties.joint: \"\" must be a non-empty joint name",
    ),
    (
        "null joint name",
        lambda d: props(d, 2).update({"joint": None}),
        "link 'joint1': motor.properties.joint: null must be a non-empty joint name",
    ),
    (
        "mimic of an unknown joint",
        lambda d: props(d, 3).update({"mimic": {"joint": "ghost"}}),
        "link 'slider': motor.properties.mimic.joint: \"ghost\" is not a joint of this model "
        "(joints: 'joint1', 'slider')",
    ),
    (
        "mimic of itself",
        lambda d: props(d, 3).update({"mimic": {"joint": "slider"}}),
        "link 'slider': motor.properties.mimic.joint: \"slider\" must be an independent joint "
        "(not a mimic joint, not itself)",
    ),
    (
        "mimic without joint",
        lambda d: props(d, 3).update({"mimic": {"multiplier": 2}}),
        "link 'slider': motor.properties.mimic: missing key 'joint'",
    ),
    (
        "mimic typo",
        lambda d: props(d, 3).update({"mimic": {"joint": "joint1", "ofset": 1}}),
        "link 'slider': motor.properties.mimic: unknown key 'ofset' (expected 'joint', "
        "'multiplier', 'offset'); did you mean 'offset'?",
    ),
    (
        "NaN mimic multiplier",
        lambda d: props(d, 3).update({"mimic": {"joint": "joint1", "multiplier": math.nan}}),
        "link 'slider': motor.properties.mimic.multiplier: NaN must be a finite number",
    ),
    (
        "duplicate link name",
        lambda d: d["links"][3].update({"name": "joint1"}),
        "link 'joint1': duplicate name",
    ),
    (
        "duplicate joint name",
        lambda d: props(d, 3).update({"joint": "joint1"}),
        "link 'slider': duplicate joint name 'joint1'",
    ),
    (
        "unknown parent",
        lambda d: d["links"][3].update({"parent": "ghost"}),
        "link 'slider': key 'parent': unknown link 'ghost'",
    ),
    (
        "cycle",
        lambda d: d["links"][1].update({"parent": "slider"}),
        "links ['axis1', 'joint1', 'slider']: not connected to the root (their parents form a "
        "cycle)",
    ),
    (
        "several roots",
        lambda d: d["links"][3].pop("parent"),
        "a tree needs exactly one root link (one without 'parent'), got ['base', 'slider']",
    ),
    (
        "no root",
        lambda d: d["links"][0].update({"parent": "slider"}),
        "a tree needs exactly one root link (one without 'parent'), got []",
    ),
]


@pytest.mark.parametrize(("edit", "message"), [pytest.param(e, m, id=i) for i, e, m in ERRORS])
def test_model_errors_name_the_link_the_key_and_the_value(edit: Edit, message: str) -> None:
    doc = valid_document()
    edit(doc)
    with pytest.raises(ModelError) as excinfo:
        tree_from_dict(doc)
    assert str(excinfo.value) == message


def test_a_document_that_is_not_an_object() -> None:
    with pytest.raises(ModelError, match=r"^document: \[1\] must be an object with keys links"):
        tree_from_dict([1])


def test_errors_are_prefixed_with_the_source() -> None:
    doc = valid_document()
    props(doc, 2)["axis"] = [0, 0, 0]
    with pytest.raises(ModelError, match=r"^arm\.kinematic\.json: link 'joint1': motor\."):
        tree_from_dict(doc, source="arm.kinematic.json")


# -- files ----------------------------------------------------------------------------------------


def test_format_is_chosen_by_suffix(tmp_path: Path) -> None:
    plain = tmp_path / "model.json"
    plain.write_text(DESIGN_EXAMPLE.read_text())
    assert load_tree(plain).dof == 1
    assert load_tree(plain).name == "model"
    upper = tmp_path / "PANDA.URDF"
    upper.write_bytes((ROBOTS / "panda.urdf").read_bytes())
    assert load_tree(upper).dof == 8
    assert model_name("x/ur5.kinematic.json") == "ur5"
    assert model_name("x/ur5.urdf") == "ur5"


@pytest.mark.parametrize("name", ["arm.yaml", "arm.xml", "arm", "arm.kinematic"])
def test_unsupported_suffix_names_the_path_and_the_accepted_ones(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("{}")
    with pytest.raises(ModelError) as excinfo:
        load_tree(path)
    assert str(excinfo.value) == (
        f"{path}: unsupported model file suffix (accepted: .kinematic.json, .json, .urdf)"
    )


def test_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.kinematic.json"
    with pytest.raises(ModelError, match=rf"^{missing}: cannot read: No such file or directory"):
        load_tree(missing)
    directory = tmp_path / "dir.urdf"
    directory.mkdir()
    with pytest.raises(ModelError, match=rf"^{directory}: cannot read: Is a directory"):
        load_tree(directory)


def test_invalid_json_gives_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.kinematic.json"
    path.write_text('{"links": [\n  {"name": "a",, "motor": {}}\n]}\n')
    with pytest.raises(ModelError) as excinfo:
        load_tree(path)
    assert str(excinfo.value) == (
        f"{path}: invalid JSON at line 2, column 16: Expecting property name enclosed in double "
        "quotes"
    )


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.kinematic.json"
    path.write_bytes(b'{"links": [{"name": "\xe9"}]}')
    with pytest.raises(ModelError, match=rf"^{path}: not UTF-8 text \(byte 21\)"):
        load_tree(path)


@pytest.mark.parametrize(
    ("literal", "shown"), [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity")]
)
def test_non_finite_json_literals_are_rejected(tmp_path: Path, literal: str, shown: str) -> None:
    path = tmp_path / "nan.kinematic.json"
    path.write_text(
        DESIGN_EXAMPLE.read_text().replace(
            '"translation": [0.0, 0.0, 0.1373]', f'"translation": [0.0, {literal}, 0.1]'
        )
    )
    with pytest.raises(ModelError) as excinfo:
        load_tree(path)
    assert str(excinfo.value) == (
        f"{path}: link 'axis1': motor.properties.pose.translation: [0.0, {shown}, 0.1] must be a "
        "list of 3 finite numbers"
    )


# -- export ---------------------------------------------------------------------------------------


def assert_same_fk(a: KinematicTree, b: KinematicTree, seed: int = 5) -> None:
    assert a.link_names == b.link_names
    assert a.joint_names == b.joint_names
    assert [a.limits[j] for j in a.joint_names] == [b.limits[j] for j in b.joint_names]
    rng = np.random.default_rng(seed)
    for q in rng.uniform(-2.0, 2.0, size=(25, a.dof)):
        for link in a.link_names:
            assert a.fk(q, link).is_close(b.fk(q, link), position_tol=1e-12, rotation_tol=1e-9)


@pytest.mark.parametrize(
    "source", [ROBOTS / "panda.urdf", ROBOTS / "ur5.urdf", SLIDER_MIMIC, DESIGN_EXAMPLE]
)
def test_load_save_load_gives_identical_fk(tmp_path: Path, source: Path) -> None:
    original = load_tree(source)
    path = tmp_path / "out.kinematic.json"
    save_tree(original, path)
    reloaded = load_tree(path)
    assert reloaded.name == original.name
    assert_same_fk(original, reloaded)
    # Exporting again gives the same document (up to the last bits of re-normalised axes).
    assert_same_document(tree_to_dict(reloaded), json.loads(path.read_text()))


def test_extensions_are_written_only_where_needed(tmp_path: Path) -> None:
    doc = tree_to_dict(load_tree(ROBOTS / "panda.urdf"))
    links = {link["name"]: link for link in doc["links"]}
    assert doc["name"] == "panda"
    assert "parent" not in links["panda_link0"]
    joint1 = links["panda_link1"]["motor"]["properties"]
    assert joint1["joint"] == "panda_joint1"
    assert joint1["pose"]["translation"] == [0.0, 0.0, 0.333]
    assert joint1["limits"] == {"lower": -2.8973, "upper": 2.8973, "velocity": 2.175}
    right = links["panda_rightfinger"]["motor"]["properties"]
    assert right["mimic"] == {"joint": "panda_finger_joint1", "multiplier": 1.0, "offset": 0.0}
    plain = tree_to_dict(load_tree(DESIGN_EXAMPLE))
    assert plain["links"][2]["motor"] == {"type": "revolute", "properties": {"axis": [0, 0, 1]}}


def test_the_name_is_written_only_when_the_file_name_does_not_give_it(tmp_path: Path) -> None:
    panda = load_tree(ROBOTS / "panda.urdf")
    same = tmp_path / "panda.kinematic.json"
    other = tmp_path / "arm.kinematic.json"
    save_tree(panda, same)
    save_tree(panda, other)
    assert "name" not in json.loads(same.read_text())
    assert json.loads(other.read_text())["name"] == "panda"
    assert load_tree(same).name == load_tree(other).name == "panda"


@pytest.mark.parametrize("name", ["panda.urdf", "panda.yaml"])
def test_saving_writes_kinematic_json_only(tmp_path: Path, name: str) -> None:
    tree = load_tree(DESIGN_EXAMPLE)
    with pytest.raises(ModelError, match=r"can only write \.kinematic\.json files"):
        save_tree(tree, tmp_path / name)
    assert not (tmp_path / name).exists()


def test_the_written_file_is_valid_json_without_non_finite_numbers(tmp_path: Path) -> None:
    path = tmp_path / "ur5.kinematic.json"
    save_tree(load_tree(ROBOTS / "ur5.urdf"), path)
    text = path.read_text()
    assert "Infinity" not in text
    assert "NaN" not in text
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-finite literal {c}"))
