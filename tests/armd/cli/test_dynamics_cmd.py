"""`armd dynamics`, called through `armd.cli.main`, against Pinocchio (`tests.peers`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from armd.cli.main import main
from kinematics import Inertial, load_tree
from tests.peers.pinocchio_dynamics import PinocchioArm

ROBOTS = Path(__file__).resolve().parents[3] / "config" / "robots"
PANDA, UR5 = ROBOTS / "panda.urdf", ROBOTS / "ur5.urdf"
UR5_Q = [0.3, -1.2, 1.4, -0.5, 1.1, 0.2]
UR5_QD = [0.2, -0.4, 0.5, 0.1, -0.3, 0.6]
UR5_QDD = [1.0, -0.5, 0.3, 2.0, -1.0, 0.4]


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def named(names: tuple[str, ...], values: list[float]) -> list[str]:
    return [f"{name}={value}" for name, value in zip(names, values, strict=True)]


def close(actual: list[float] | list[list[float]], expected: np.ndarray) -> bool:
    tolerance = 1e-9 * float(np.max(np.abs(expected))) + 1e-12
    return bool(np.max(np.abs(np.array(actual) - expected)) <= tolerance)


def test_ur5_with_a_payload_and_a_wall_mount_matches_pinocchio(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tree = load_tree(UR5)
    names = tree.joint_names
    code, out, err = run(
        capsys,
        "dynamics",
        UR5,
        "--q",
        *named(names, UR5_Q),
        "--qd",
        *named(names, UR5_QD),
        "--qdd",
        *named(names, UR5_QDD),
        "--payload-mass",
        "1.5",
        "--payload-com",
        "0.01",
        "0",
        "0.05",
        "--payload-inertia",
        "0.002",
        "0",
        "0",
        "0.002",
        "0",
        "0.001",
        "--gravity",
        "9.81",
        "0",
        "0",
        "--json",
    )
    assert (code, err) == (0, ""), err
    doc = json.loads(out)
    assert doc["joints"] == list(names)
    arm = PinocchioArm.load(UR5, tree)
    load = Inertial(1.5, (0.01, 0.0, 0.05), (0.002, 0.0, 0.0, 0.002, 0.0, 0.001))
    model = arm.with_payload("tool0", load)
    model.gravity.linear = np.array([9.81, 0.0, 0.0])
    q, qd, qdd = (np.array(v) for v in (UR5_Q, UR5_QD, UR5_QDD))
    assert close(doc["gravity"], arm.gravity(model, q))
    assert close(doc["tau"], arm.rnea(model, q, qd, qdd))
    assert close(doc["mass_matrix"], arm.mass_matrix(model, q))


def test_plain_values_in_q_order_and_the_default_state(capsys: pytest.CaptureFixture[str]) -> None:
    """Values in q order as `armd fk` takes them; qd and qdd 0: tau is the gravity torque."""
    code, out, err = run(capsys, "dynamics", UR5, "--q", *map(str, UR5_Q), "--json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    arm = PinocchioArm.load(UR5, load_tree(UR5))
    expected = arm.gravity(arm.with_payload(None, None), np.array(UR5_Q))
    assert close(doc["gravity"], expected)
    assert close(doc["tau"], expected)


def test_a_branching_model_takes_the_payload_on_its_tool_link(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The Panda branches (two fingers): the payload goes on panda_hand_tcp, the leaf named like
    a tool; its finger mimic joint folds into its driver as Pinocchio's own mimic joint."""
    tree = load_tree(PANDA)
    q = [0.1, -0.4, 0.2, -2.0, 0.3, 1.8, 0.5, 0.02]
    code, out, err = run(
        capsys, "dynamics", PANDA, "--q", *named(tree.joint_names, q), "--payload-mass", "0.8"
    )
    assert (code, err) == (0, ""), err
    assert "payload  0.8 kg on panda_hand_tcp" in out
    assert "mass matrix (kg·m², kg for sliders; rows and columns in q order):" in out
    code, out, _ = run(
        capsys,
        "dynamics",
        PANDA,
        "--q",
        *named(tree.joint_names, q),
        "--payload-mass",
        "0.8",
        "--json",
    )
    arm = PinocchioArm.load(PANDA, tree)
    model = arm.with_payload("panda_hand_tcp", Inertial(0.8))
    assert close(json.loads(out)["gravity"], arm.gravity(model, np.array(q)))


def test_text_output_lists_every_joint(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "dynamics", UR5, "--q", *map(str, UR5_Q))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "model    ur5"
    assert lines[1] == "gravity  [0.0, 0.0, -9.81] m/s² (root frame)"
    rows = [line.split() for line in lines[3:9]]
    assert [row[0] for row in rows] == list(load_tree(UR5).joint_names)
    assert [float(row[1]) for row in rows] == pytest.approx(UR5_Q, abs=1e-6)


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["--q", "shoulder_pan_joint=0.1"], "--q: no value for shoulder_lift_joint"),
        (["--q", "0.1", "0.2"], "--q: expected 6 values"),
        (["--q", *map(str, UR5_Q), "--qd", "wrist=1"], "--qd: unknown joint 'wrist'"),
        (["--q", *map(str, UR5_Q), "--qd", "elbow_joint=x"], "--qd elbow_joint: 'x' must be"),
        (["--q", *map(str, UR5_Q), "--payload-mass", "-1"], "--payload-mass: -1 must be"),
        (["--q", *map(str, UR5_Q), "--payload-com", "0", "0", "1"], "--payload-com and"),
        (["--q", *map(str, UR5_Q), "--link", "nowhere", "--payload-mass", "1"], "--link: unknown"),
        (["--q", *map(str, UR5_Q), "--gravity", "0", "0", "nan"], "--gravity: [0.0, 0.0, nan]"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], start: str
) -> None:
    code, out, err = run(capsys, "dynamics", UR5, *argv)
    assert (code, out) == (2, "")
    assert err.startswith(f"armd: error: {start}"), err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_a_payload_inertia_no_rigid_body_has_names_the_link_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    inertia = ["1", "0", "0", "0.1", "0", "0.1"]  # 1 > 0.1 + 0.1: the triangle inequality
    code, out, err = run(
        capsys,
        "dynamics",
        UR5,
        "--q",
        *map(str, UR5_Q),
        "--payload-mass",
        "1",
        "--payload-inertia",
        *inertia,
    )
    assert (code, out) == (1, "")
    assert err.startswith("armd: error: payload on link 'tool0': inertia [1.0, 0.0"), err
    assert "triangle inequality" in err
    assert err.count("\n") == 1


def test_a_model_whose_inertia_no_rigid_body_has_names_the_link(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = UR5.read_text().replace('ixx="0.010267495893"', 'ixx="5.0"', 1)
    assert text != UR5.read_text()
    bad = tmp_path / "bad.urdf"
    bad.write_text(text)
    code, out, err = run(capsys, "dynamics", bad, "--q", *map(str, UR5_Q))
    assert (code, out) == (1, "")
    assert "link 'shoulder_link'" in err, err
    assert err.count("\n") == 1
