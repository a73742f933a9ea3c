"""``armd map``: the recorded chains of config/chains mapped onto their arm, text and JSON output,
one-line errors and exit codes."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pytest

from armd.cli import map_cmd
from kinematics import KinematicTree, load_tree

CONFIG = Path(__file__).resolve().parents[3] / "config"
UR5 = CONFIG / "robots" / "ur5.urdf"
LEADER = CONFIG / "chains" / "ur5_leader.json"
RECORDED_Q = [0.6, -1.1, 1.3, -1.9, -1.3, 0.0]  # the leader's pose, from its description
CHAINS = sorted((CONFIG / "chains").glob("*.json"))


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="armd")
    map_cmd.register(parser.add_subparsers())
    args = parser.parse_args([str(a) for a in argv])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str, start: str) -> None:
    assert err.startswith(f"armd: error: {start}"), err
    assert err.count("\n") == 1, err


def segment_errors(tree: KinematicTree, links: list[str], q: list[float], points: np.ndarray):  # type: ignore[no-untyped-def]
    ours = np.diff([tree.fk(np.array(q), link).translation for link in links], axis=0)
    theirs = np.diff(points, axis=0)
    return [
        math.atan2(float(np.linalg.norm(np.cross(o, t))), float(np.dot(o, t)))
        for o, t in zip(ours, theirs, strict=True)
    ]


@pytest.mark.parametrize("chain", CHAINS, ids=lambda p: p.name)
def test_every_recorded_chain_maps_onto_the_ur5(
    capsys: pytest.CaptureFixture[str], chain: Path
) -> None:
    """The files of config/chains are loaded here (tests/test_config_files.py skips the folder)."""
    code, out, err = run(capsys, "map", UR5, "--chain", chain, "--json", "--tolerance", "1e-6")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    tree = load_tree(UR5)
    links, points = map_cmd.load_chain(chain, tree)
    assert doc["links"] == links
    assert max(segment_errors(tree, links, doc["q"], points)) < 1e-9
    assert tree.limits.within(doc["q"])


def test_the_leader_chain_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "map", UR5, "--chain", LEADER)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("mapped      yes (worst segment error ")
    assert lines[0].endswith(" rad, tolerance 0.05 rad)")
    assert lines[1] == "chain       upper_arm_link -> forearm_link -> wrist_2_link -> tool0"
    assert lines[2] == "joints:"
    assert lines[3].split()[:2] == ["shoulder_pan_joint", "+0.600000000"]
    assert lines[3].endswith("from the directions")
    assert lines[8].split()[:2] == ["wrist_3_joint", "+0.000000000"]
    assert lines[8].endswith("seed (no direction decides it)")
    assert lines[9] == "segments:"
    assert [line.split()[0] for line in lines[10:]] == [
        "upper_arm_link",
        "forearm_link",
        "wrist_2_link",
    ]


def test_the_chain_files_recorded_joints_pick_the_recorded_wrist(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As the README shows it (no --seed), the chain file's recorded joints seed the mapping:
    the recorded wrist, not its flipped twin, which is closer to zeros."""
    code, out, _ = run(capsys, "map", UR5, "--chain", LEADER, "--json")
    assert code == 0
    assert json.loads(out)["q"] == pytest.approx(RECORDED_Q, abs=1e-9)


def test_the_seed_picks_the_wrist_closest_to_it(capsys: pytest.CaptureFixture[str]) -> None:
    """From zeros the wrist takes its other (flipped) solution, from the recorded pose its own."""
    zeros = ["0"] * 6
    _, out, _ = run(capsys, "map", UR5, "--chain", LEADER, "--json", "--seed", *zeros)
    from_zeros = json.loads(out)
    assert from_zeros["q"][:3] == pytest.approx(RECORDED_Q[:3], abs=1e-9)
    assert from_zeros["q"][3:5] != pytest.approx(RECORDED_Q[3:5], abs=1e-3)
    # the flipped wrist is the closer one to zeros: the mapping takes the branch nearest its seed
    assert np.linalg.norm(from_zeros["q"]) < np.linalg.norm(RECORDED_Q)
    seed = [str(v) for v in np.array(RECORDED_Q) + 0.1]
    code, out, _ = run(capsys, "map", UR5, "--chain", LEADER, "--json", "--seed", *seed)
    assert code == 0
    doc = json.loads(out)
    assert doc["q"][:5] == pytest.approx(RECORDED_Q[:5], abs=1e-9)
    assert doc["q"][5] == pytest.approx(RECORDED_Q[5] + 0.1, abs=1e-12)
    assert doc["determined"]["wrist_3_joint"] is False
    assert doc["success"] is True
    assert max(doc["segment_errors"]) < 1e-9
    assert set(doc["joint_residuals"]) == set(doc["joints"])


def write(tmp_path: Path, content: object) -> Path:
    path = tmp_path / "chain.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{nope", "not valid JSON"),
        ([1, 2], "must be a JSON object with 'points'"),
        ({"points": {}, "colour": 1}, "unknown key(s) ['colour']"),
        ({"points": [[0, 0, 0]]}, "points: must be an object {link name: [x, y, z]}"),
        ({"points": {"hand": [0, 0, 0], "tool0": [1, 0, 0]}}, "points.hand: unknown link"),
        ({"points": {"tool0": [0, 0], "world": [1, 0, 0]}}, "points.tool0: must be 3 finite"),
        ({"points": {"tool0": [0, 0, True], "world": [1, 0, 0]}}, "points.tool0: must be 3"),
        ('{"points": {"tool0": [0, 0, NaN], "world": [1, 0, 0]}}', "points.tool0: must be 3"),
        ({"points": {"tool0": [0, 0, 10**400], "world": [1, 0, 0]}}, "points.tool0: must be 3"),
        ({"points": {"tool0": [0, 0, 0]}}, "points: must name at least 2 links"),
        ({"points": {"tool0": [1, 2, 3], "forearm_link": [1, 2, 3]}}, "targets[0] -> targets[1]"),
        ({"points": {"tool0": [1, 2, 3], "ee_link": [0, 0, 0]}}, "links[1]: 'tool0' is not a"),
    ],
)
def test_invalid_chain_files_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: object, message: str
) -> None:
    path = write(tmp_path, content)
    code, out, err = run(capsys, "map", UR5, "--chain", path)
    assert (code, out) == (1, "")
    assert_one_line_error(err, f"{path}: ")
    assert message in err


def test_missing_files_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "map", UR5, "--chain", tmp_path / "none.json")
    assert code == 1
    assert_one_line_error(err, "")
    assert "none.json" in err
    code, _, err = run(capsys, "map", tmp_path / "none.urdf", "--chain", LEADER)
    assert code == 1
    assert_one_line_error(err, "")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seed", "0", "1"], "--seed: expected 6 values"),
        (["--seed", "0", "0", "0", "0", "0", "nan"], "--seed: values must be finite"),
        (["--tolerance", "0"], "--tolerance: 0.0 must be in (0, pi) rad"),
    ],
)
def test_bad_arguments_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "map", UR5, "--chain", LEADER, *argv)
    assert (code, out) == (2, "")
    assert_one_line_error(err, message)


def test_a_shape_out_of_reach_prints_the_result_and_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = json.loads(LEADER.read_text("utf-8"))
    doc["points"]["wrist_2_link"][2] += 0.5  # the forearm out of the elbow's plane
    code, out, err = run(capsys, "map", UR5, "--chain", write(tmp_path, doc), "--json")
    assert code == 1
    assert json.loads(out)["success"] is False
    assert err.startswith("armd: map did not reach the shape: segment 'forearm_link' -> ")
    assert err.count("\n") == 1
