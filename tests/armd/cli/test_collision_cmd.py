"""``armd collision`` (every checked pair's distance, closest first; ``--json``) and what ``armd
check`` says about collisions, on config/sim.yaml (the UR5 on its table); the distances checked
against coal."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from armd.cli import check_cmd, collision_cmd
from armd.config.load import load_config
from tests.peers.coal_collision import CoalPeer

CONFIG = Path(__file__).resolve().parents[3] / "config"
SIM = CONFIG / "sim.yaml"


def run(module: object, command: str, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="armd")
    module.register(parser.add_subparsers())  # type: ignore[attr-defined]
    args = parser.parse_args([command, *argv])
    code: int = args.func(args)
    return code


def test_json_lists_every_checked_pair_closest_first_with_coal_s_distances(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(collision_cmd, "collision", "--config", str(SIM), "--pose", "ready", "--json") == 0
    document = json.loads(capsys.readouterr().out)
    setup = load_config(SIM, kernels=False)
    model = setup.collision
    assert model is not None
    assert document["margin"] == pytest.approx(model.margin, abs=1e-12)
    assert {(p["a"], p["b"]) for p in document["pairs"]} == set(model.pair_names)
    distances = [p["distance"] for p in document["pairs"]]
    assert distances == sorted(distances)
    q = np.array([document["q"][name] for name in setup.tree.joint_names])
    expected = setup.tree.q_from_mapping(dict(setup.config.poses["ready"]), np.zeros(6))
    np.testing.assert_allclose(q, expected, atol=1e-12)
    peer = CoalPeer(setup.tree, model.spec)
    for pair in document["pairs"]:
        assert pair["distance"] == pytest.approx(peer.distance(pair["a"], pair["b"], q), abs=1e-6)
        a, b = np.array(pair["points"])
        assert float(np.linalg.norm(a - b)) == pytest.approx(abs(pair["distance"]), abs=1e-6)
    excluded = {(a, b): why for a, b, why in document["excluded"]}
    assert excluded[("base_link", "table")] == "fixed to the root"


def test_a_folded_arm_shows_its_contacts_first(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--config", str(SIM), "--q", "elbow_joint=3.1", "shoulder_lift_joint=-1.0")
    assert run(collision_cmd, "collision", *argv) == 0
    lines = capsys.readouterr().out.splitlines()
    model = load_config(SIM, kernels=False).collision
    assert model is not None
    assert lines[0].startswith(f"margin 0.01 m; {len(model.checked_pairs)} pairs checked")
    assert lines[1].endswith("IN CONTACT")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--q", "elbow=1"), "--q: 'elbow=1' must be NAME=VALUE"),
        (("--q", "elbow_joint=x"), "is not a number"),
        (("--pose", "nowhere"), "--pose: 'nowhere' is not a named pose"),
    ],
)
def test_wrong_arguments_exit_2_with_one_line(
    argv: tuple[str, ...], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(collision_cmd, "collision", "--config", str(SIM), *argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert expected in line


def test_check_lists_the_pairs_and_refuses_a_pose_in_collision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(check_cmd, "check", "--config", str(SIM)) == 0
    out = capsys.readouterr().out
    model = load_config(SIM, kernels=False).collision
    assert model is not None
    assert f"collision margin 0.01 m, {len(model.checked_pairs)} pairs checked:" in out
    assert "  wrist_3_link - table" in out
    assert "  base_link - table: fixed to the root (never moves relative to the root)" in out
    doc = yaml.safe_load(SIM.read_text(encoding="utf-8"))
    doc["model"] = str(CONFIG / doc["model"])
    doc["collision"]["geometry"] = str(CONFIG / doc["collision"]["geometry"])
    doc["poses"]["low"] = {"shoulder_lift_joint": 0.4}
    doc["drivers"]["sim"]["params"]["devices"]["shoulder"]["initial_position"] = 0.4
    path = tmp_path / "arm.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert run(check_cmd, "check", "--config", str(path)) == 1
    err = capsys.readouterr().err
    assert "poses.low: in collision: " in err
    assert "the start configuration (the sim devices' initial_position) is in collision" in err
