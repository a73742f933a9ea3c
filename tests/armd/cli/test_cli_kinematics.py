"""`armd model show|convert`, `armd fk` and `armd ik`, called through `armd.cli.main`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from armd.cli.main import main
from kinematics import Pose, load_tree
from kinematics.quaternion import quat_from_rpy

ROBOTS = Path(__file__).resolve().parents[3] / "config" / "robots"
PANDA = ROBOTS / "panda.urdf"
UR5 = ROBOTS / "ur5.urdf"
PANDA_Q = [0.1, -0.4, 0.2, -2.0, 0.3, 1.8, 0.5, 0.02]
UR5_Q = [0.3, -1.2, 1.4, -0.5, 1.1, 0.2]


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str, start: str) -> None:
    assert err.startswith(f"armd: error: {start}"), err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err


# -- model show / convert -------------------------------------------------------------------------


def test_model_show_prints_the_tree_dof_and_limits(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "model", "show", PANDA)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:4] == ["model  panda", f"file   {PANDA}", "root   panda_link0", "dof    8"]
    assert "  panda_link0  [constant]" in lines
    assert "    panda_link1  [revolute 'panda_joint1']" in lines
    assert (
        "                      panda_rightfinger  [prismatic 'panda_finger_joint2' "
        "(mimics 'panda_finger_joint1')]"
    ) in lines
    joints = lines[lines.index("joints (q order):") + 1 :]
    assert joints[0].split()[:2] == ["0", "panda_joint1"]
    assert "[-2.8973 rad, 2.8973 rad]  velocity 2.1750 rad/s  acceleration unlimited" in joints[0]
    assert "[-3.0718 rad, -0.0698 rad]" in joints[3]
    assert "prismatic  [0 m, 0.04 m]  velocity 0.2 m/s" in joints[7]
    assert joints[8] == "mimic  panda_finger_joint2 = 1 * panda_finger_joint1 + 0"


def test_model_show_in_degrees_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "model", "show", PANDA, "--degrees")
    assert code == 0
    joints = out.splitlines()[out.splitlines().index("joints (q order):") + 1 :]
    assert "[-166.00°, 166.00°]  velocity 124.62°/s  acceleration unlimited" in joints[0]
    assert "prismatic  [0 m, 0.04 m]" in joints[7]


def test_model_convert_refuses_to_overwrite_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "panda.kinematic.json"
    target.write_text("keep me", encoding="utf-8")
    code, out, err = run(capsys, "model", "convert", PANDA, target)
    assert (code, out) == (1, "")
    assert_one_line_error(err, f"{target}: exists; add --force to overwrite it")
    assert target.read_text(encoding="utf-8") == "keep me"
    code, out, err = run(capsys, "model", "convert", PANDA, target, "--force")
    assert (code, err) == (0, "")
    assert load_tree(target).joint_names == load_tree(PANDA).joint_names


def test_model_show_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "model", "show", UR5, "--json")
    assert code == 0
    doc = json.loads(out)
    assert (doc["name"], doc["root"], doc["dof"], doc["file"]) == ("ur5", "world", 6, str(UR5))
    assert [j["name"] for j in doc["joints"]] == list(load_tree(UR5).joint_names)
    assert doc["joints"][2] == {
        "name": "elbow_joint",
        "type": "revolute",
        "lower": -3.14159265359,
        "upper": 3.14159265359,
        "velocity": 3.15,
        "acceleration": None,
    }
    assert doc["links"][0] == {"name": "world", "parent": None, "motor": "constant"}
    assert doc["links"][2] == {
        "name": "shoulder_link",
        "parent": "base_link",
        "motor": "revolute",
        "joint": "shoulder_pan_joint",
    }


def test_model_show_continuous_joints(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[2] / "kinematics/data/design_example.kinematic.json"
    code, out, _ = run(capsys, "model", "show", example)
    assert code == 0
    assert "   0  joint1  revolute   continuous  velocity unlimited  acceleration unlimited" in out


def test_model_convert_writes_kinematic_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "panda.kinematic.json"
    code, out, err = run(capsys, "model", "convert", PANDA, target)
    assert (code, err) == (0, "")
    assert out == f"wrote {target} (13 links, dof 8)\n"
    original, converted = load_tree(PANDA), load_tree(target)
    assert converted.joint_names == original.joint_names
    for link in ("panda_link8", "panda_rightfinger"):
        assert converted.fk(PANDA_Q, link).is_close(
            original.fk(PANDA_Q, link), position_tol=1e-12, rotation_tol=1e-9
        )


def test_model_convert_to_another_format_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "model", "convert", PANDA, tmp_path / "out.urdf")
    assert (code, out) == (1, "")
    assert_one_line_error(err, f"{tmp_path / 'out.urdf'}: can only write .kinematic.json")


# -- fk -------------------------------------------------------------------------------------------


def test_fk_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "fk", UR5, "--link", "tool0", "--q", *map(str, UR5_Q))
    assert (code, err) == (0, "")
    pose = load_tree(UR5).fk(UR5_Q, "tool0")
    lines = out.splitlines()
    assert lines[0] == "link        tool0"
    position = [float(v) for v in lines[1].split()[1:4]]
    quaternion = [float(v) for v in lines[2].split()[1:5]]
    rpy = [float(v) for v in lines[3].split()[1:4]]
    np.testing.assert_allclose(position, pose.translation, atol=1e-6, rtol=0)
    assert Pose(position, quaternion).is_close(pose, position_tol=1e-6, rotation_tol=1e-5)
    assert Pose(position, quat_from_rpy(rpy)).is_close(pose, position_tol=1e-6, rotation_tol=1e-5)
    assert lines[3].endswith("rad (fixed axes x, y, z)")

    code, out, _ = run(capsys, "fk", UR5, "--degrees", "--q", *map(str, UR5_Q))
    assert code == 0
    degrees = [math.radians(float(v)) for v in out.splitlines()[3].split()[1:4]]
    np.testing.assert_allclose(degrees, rpy, atol=1e-5, rtol=0)
    assert out.splitlines()[3].endswith("deg (fixed axes x, y, z)")


@pytest.mark.parametrize(("model", "link"), [(UR5, "tool0"), (PANDA, "panda_hand_tcp")])
def test_ik_as_the_readme_shows_uses_the_tool_link(
    model: Path, link: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both shipped models branch; without --link, ik and fk use the leaf named like a tool."""
    code, out, err = run(capsys, "ik", model, "--position", "0.4", "0.2", "0.4")
    assert (code, out.splitlines()[1]) == (0, f"link        {link}"), err
    assert all(line.endswith(" rad") for line in out.splitlines()[2:8])
    code, out, _ = run(capsys, "fk", model, "--q", *map(str, UR5_Q if model == UR5 else PANDA_Q))
    assert (code, out.splitlines()[0]) == (0, f"link        {link}")


def test_fk_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "fk", PANDA, "--q", *map(str, PANDA_Q), "--link", "panda_link8", "--json"
    )
    assert (code, err) == (0, "")
    doc = json.loads(out)
    pose = load_tree(PANDA).fk(PANDA_Q, "panda_link8")
    assert doc["link"] == "panda_link8"
    assert doc["q"] == PANDA_Q
    assert doc["outside_limits"] == []
    np.testing.assert_allclose(doc["position"], pose.translation, atol=1e-15, rtol=0)
    np.testing.assert_allclose(doc["orientation"], pose.quaternion, atol=1e-15, rtol=0)


def test_fk_outside_the_limits_warns(capsys: pytest.CaptureFixture[str]) -> None:
    q = [*PANDA_Q[:3], 0.5, *PANDA_Q[4:]]
    code, out, err = run(capsys, "fk", PANDA, "--q", *map(str, q), "--link", "panda_hand", "--json")
    assert code == 0
    assert json.loads(out)["outside_limits"] == [
        "joint 'panda_joint4': 0.5 outside [-3.0718, -0.0698]"
    ]
    assert err == "armd: warning: joint 'panda_joint4': 0.5 outside [-3.0718, -0.0698]\n"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["--q", "1", "2", "--link", "tool0"],
            2,
            "--q: expected 6 values (shoulder_pan_joint, shoulder_lift_joint, elbow_joint, "
            "wrist_1_joint, wrist_2_joint, wrist_3_joint), got 2",
        ),
        (["--link", "tool0"], 2, "--q: expected 6 values"),
        (
            ["--q", "0", "0", "nan", "0", "0", "0", "--link", "tool0"],
            2,
            "--q: values must be finite",
        ),
        (
            ["--q", *map(str, UR5_Q), "--link", "hand"],
            2,
            "--link: unknown link 'hand' (links: world, base_link, shoulder_link",
        ),
    ],
)
def test_fk_argument_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], code: int, message: str
) -> None:
    result, out, err = run(capsys, "fk", UR5, *args)
    assert (result, out) == (code, "")
    assert_one_line_error(err, message)


def test_model_file_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.kinematic.json"
    broken.write_text('{"links": [\n}')
    floating = tmp_path / "floating.urdf"
    floating.write_text(
        '<robot name="r"><link name="a"/><link name="b"/><joint name="j" '
        'type="floating"><parent link="a"/><child link="b"/></joint></robot>'
    )
    cases = [
        (tmp_path / "missing.urdf", f"{tmp_path / 'missing.urdf'}: cannot read"),
        (tmp_path / "model.yaml", f"{tmp_path / 'model.yaml'}: unsupported model file suffix"),
        (broken, f"{broken}: invalid JSON at line 2, column 1"),
        (floating, f"{floating}: joint 'j': type 'floating' is not supported"),
    ]
    for path, message in cases:
        argvs: list[list[str | Path]] = [
            ["model", "show", path],
            ["fk", path, "--q", "0"],
            ["ik", path, "--position", "0", "0", "0"],
            ["model", "convert", path, tmp_path / "out.kinematic.json"],
        ]
        for argv in argvs:
            code, out, err = run(capsys, *argv)
            assert (code, out) == (1, ""), argv
            assert_one_line_error(err, message)


@pytest.mark.parametrize(
    "argv",
    [
        ["fk"],
        ["fk", str(PANDA), "--q", "x"],
        ["ik", str(PANDA)],
        ["ik", str(PANDA), "--position", "1", "2"],
        ["model"],
        ["model", "show"],
        ["model", "explode", str(PANDA)],
        ["sim-device", "bogus"],
        ["run"],
        ["bogus"],
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(argv)
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line, not argparse's usage block
    assert err.startswith(("armd ", "armd:")), err
    assert "error:" in err, err
    assert "--help" in err, err


# -- ik -------------------------------------------------------------------------------------------


def test_ik_full_pose_json(capsys: pytest.CaptureFixture[str]) -> None:
    tree = load_tree(UR5)
    target = tree.fk(UR5_Q, "tool0")
    seed = np.array(UR5_Q) + 0.1
    code, out, err = run(
        capsys,
        "ik",
        UR5,
        "--link",
        "tool0",
        "--json",
        "--position",
        *map(str, target.translation),
        "--orientation",
        *map(str, target.quaternion),
        "--seed",
        *map(str, seed),
    )
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["success"] is True
    assert doc["link"] == "tool0"
    assert list(doc["joints"]) == list(tree.joint_names)
    assert doc["position_error"] <= 1e-5
    assert doc["rotation_error"] <= 1e-4
    assert isinstance(doc["iterations"], int)
    reached = tree.fk(doc["q"], "tool0")
    assert reached.is_close(target, position_tol=1e-5, rotation_tol=1e-4)
    np.testing.assert_allclose(doc["position"], reached.translation, atol=1e-15, rtol=0)


def test_ik_position_only_text_from_the_default_seed(capsys: pytest.CaptureFixture[str]) -> None:
    target = load_tree(PANDA).fk(PANDA_Q, "panda_link8").translation
    code, out, err = run(
        capsys, "ik", PANDA, "--link", "panda_link8", "--position", *map(str, target)
    )
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("converged   yes (")
    assert lines[1] == "link        panda_link8"
    assert lines[2].split()[0] == "panda_joint1"
    assert lines[-1].startswith("position error ")
    position = [float(v) for v in next(x for x in lines if x.startswith("position ")).split()[1:4]]
    np.testing.assert_allclose(position, target, atol=2e-5, rtol=0)


def test_ik_that_does_not_converge_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys,
        "ik",
        UR5,
        "--link",
        "tool0",
        "--position",
        "3",
        "0",
        "0",
        "--time-budget",
        "0.01",
        "--json",
    )
    assert code == 1
    assert json.loads(out)["success"] is False
    assert err.startswith("armd: ik did not converge: position error ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--position", "0.3", "0", "0.4", "--seed", "0", "0"], "--seed: expected 6 values"),
        (
            ["--position", "0.3", "0", "0.4", "--orientation", "0", "0", "0", "0"],
            "--orientation: [0.0, 0.0, 0.0, 0.0] must be a non-zero quaternion",
        ),
        (["--position", "0.3", "inf", "0.4"], "--position: values must be finite"),
        (
            ["--position", "0.3", "0", "0.4", "--time-budget", "-1"],
            "--time-budget: -1.0 must be >= 0 seconds",
        ),
        (["--position", "0.3", "0", "0.4", "--link", "nope"], "--link: unknown link 'nope'"),
    ],
)
def test_ik_argument_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = run(capsys, "ik", UR5, "--link", "tool0", *args)
    assert (code, out) == (2, "")
    assert_one_line_error(err, message)
