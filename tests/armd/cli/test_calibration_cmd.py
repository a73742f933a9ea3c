"""``armd calibrate``: the guided procedure as a user at a terminal sees it (a real
``python -m armd calibrate`` on a pty, the simulated arm of config/sim.yaml moved by hand through
the sim driver's `hand_file`), its aborts, and its refusals."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from armd.config.calibration import read_calibration
from armd.config.load import load_config
from armd.errors import ConfigError
from tests.armd.terminal import CTRL_C, CTRL_D, Terminal
from tests.system.helpers import Hand, write_config

ROOT = Path(__file__).resolve().parents[3]
RESOLUTION = 2 * math.pi / 16384  # the sim devices' encoder count, rad


def counts(position: float) -> float:
    """`position` (rad) on a whole encoder count, so the readings are exactly it."""
    return round(position / RESOLUTION) * RESOLUTION


@pytest.fixture
def arm(tmp_path: Path) -> tuple[Path, Hand]:
    hand = tmp_path / "hand.json"
    # no named poses: the calibrated ranges of the test's hand are narrower than the poses
    overrides = {"drivers": {"sim": {"params": {"hand_file": str(hand)}}}, "poses": None}
    config = write_config(tmp_path, 1883, overrides)
    return config, Hand(hand)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    started: list[Terminal] = []
    yield started
    for terminal in started:
        terminal.close()


def calibrate(terminals: list[Terminal], config: Path, *args: str) -> Terminal:
    argv = [sys.executable, "-m", "armd", "calibrate", "--config", str(config), *args]
    terminals.append(Terminal(argv, ROOT))
    return terminals[-1]


def shown(low: float, high: float) -> str:
    """The live line's min and max, as a regex."""
    return rf"min\s+{re.escape(f'{low:+.4f}')}\s+max\s+{re.escape(f'{high:+.4f}')}"


def test_a_guided_calibration_of_two_joints(
    arm: tuple[Path, Hand], terminals: list[Terminal]
) -> None:
    config, hand = arm
    # shoulder_lift_joint: gear ratio 4, its motor starts at -2π (joint -π/2);
    # wrist_2_joint: sign -1, its motor starts at π/2 (joint -π/2).
    t = calibrate(terminals, config, "--joint", "shoulder_lift_joint", "--joint", "wrist_2_joint")
    t.expect(r"joint 1/2: shoulder_lift_joint \(sim/shoulder\)")
    t.expect(r"shoulder_lift_joint\s+now\s+-1\.5708")
    t.line()  # not moved: refused, and asked again
    t.expect(
        r"refused: shoulder_lift_joint moved through 0\.0000 rad, less than the 0\.1 rad a "
        r"calibrated range needs"
    )
    t.expect("Move it by hand through its whole range")
    t.expect(r"shoulder_lift_joint\s+now\s+-1\.5708")  # recording again, from where it is
    hand.put(shoulder=counts(-4.0))
    t.expect(shown(-math.pi / 2, counts(-4.0) / 4))
    hand.put(shoulder=counts(-8.0))
    t.expect(shown(counts(-8.0) / 4, counts(-4.0) / 4))
    t.line()
    t.expect(r"joint 2/2: wrist_2_joint \(sim/wrist2\)")
    t.expect(r"wrist_2_joint\s+now\s+-1\.5708")
    hand.put(wrist2=counts(2.5))
    t.expect(shown(-counts(2.5), -math.pi / 2))
    hand.put(wrist2=counts(0.5))
    t.expect(shown(-counts(2.5), -counts(0.5)))
    t.line()
    t.expect(r"reference pose \(the model's zero")
    hand.put(shoulder=counts(-6.4), wrist2=counts(1.0))
    t.expect(re.escape(f"now [{counts(-6.4) / 4:+.3f} {-counts(1.0):+.3f}]"))
    t.line()
    # offset = -reference / (sign × gear); range = extremes / (sign × gear) + offset, sorted
    lift = (-counts(-6.4) / 4, (counts(-8) - counts(-6.4)) / 4, (counts(-4) - counts(-6.4)) / 4)
    wrist = (counts(1.0), counts(1.0) - counts(2.5), counts(1.0) - counts(0.5))
    for joint, device, (offset, low, high) in (
        ("shoulder_lift_joint", "sim/shoulder", lift),
        ("wrist_2_joint", "sim/wrist2", wrist),
    ):
        t.expect(
            re.escape(f"{joint:<24} {device:<16} {offset:+10.5f}  [{low:+.5f}, {high:+.5f}] rad")
        )
    t.expect(r"Write the calibration\? \[y/N\]")
    t.line("y")
    out = config.with_name("armd.calibration.yaml")
    t.expect(re.escape(f"wrote {out} (2 joint(s) calibrated, 0 kept)"))
    t.expect(re.escape(f"add this line to {config} to use it: calibration: armd.calibration.yaml"))
    assert t.wait() == 0

    file, _ = read_calibration(out)
    for joint, expected in (("shoulder_lift_joint", lift), ("wrist_2_joint", wrist)):
        entry = file.joints[joint]
        assert [entry.offset, *entry.range] == pytest.approx(list(expected), abs=1e-12)
    entry = file.joints["shoulder_lift_joint"]
    assert (entry.driver, entry.device, entry.device_id, entry.source) == (
        "sim", "shoulder", None, "armd calibrate"
    )  # fmt: skip

    # the config that names it requires every joint, unless told otherwise
    doc = yaml.safe_load(config.read_text())
    doc["calibration"] = "armd.calibration.yaml"
    config.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=r"joints\.elbow_joint: missing"):
        load_config(config, kernels=False)
    for joint in ("shoulder_pan_joint", "elbow_joint", "wrist_1_joint", "wrist_3_joint"):
        doc["joints"][joint]["calibrated"] = False
    config.write_text(yaml.safe_dump(doc))
    setup = load_config(config, kernels=False)
    assert setup.limits["shoulder_lift_joint"].lower == pytest.approx(lift[1], abs=1e-12)
    assert setup.limits["wrist_2_joint"].upper == pytest.approx(wrist[2], abs=1e-12)
    assert setup.joints["wrist_2_joint"].offset == pytest.approx(wrist[0], abs=1e-12)


def test_ctrl_c_aborts_with_nothing_written(
    arm: tuple[Path, Hand], terminals: list[Terminal]
) -> None:
    config, _hand = arm
    t = calibrate(terminals, config, "--joint", "elbow_joint")
    t.expect(r"elbow_joint\s+now")
    t.type(CTRL_C)
    t.expect(r"aborted \(Ctrl-C\): nothing written")
    assert t.wait() == 130
    assert not config.with_name("armd.calibration.yaml").exists()


def test_end_of_input_or_a_no_writes_nothing(
    arm: tuple[Path, Hand], terminals: list[Terminal]
) -> None:
    config, hand = arm
    t = calibrate(terminals, config, "--joint", "elbow_joint")
    t.expect(r"elbow_joint\s+now")
    t.type(CTRL_D)
    t.expect(r"aborted \(end of input\): nothing written")
    assert t.wait() == 1

    t = calibrate(terminals, config, "--joint", "elbow_joint")
    t.expect(r"elbow_joint\s+now\s+\+1\.5708")
    hand.put(elbow=counts(1.0))
    t.expect(shown(counts(1.0), math.pi / 2))
    t.line()
    t.expect("reference pose")
    t.line()  # the reference at 1.0 rad: the range [0, 0.57] after the offset
    t.expect(r"\[y/N\]")
    t.line("n")
    t.expect("declined: nothing written")
    assert t.wait() == 1
    assert not config.with_name("armd.calibration.yaml").exists()


def test_a_reference_pose_outside_the_recorded_range_is_refused(
    arm: tuple[Path, Hand], terminals: list[Terminal]
) -> None:
    config, hand = arm
    t = calibrate(terminals, config, "--joint", "elbow_joint")
    t.expect(r"elbow_joint\s+now\s+\+1\.5708")
    hand.put(elbow=counts(1.0))
    t.expect(shown(counts(1.0), math.pi / 2))
    t.line()
    t.expect("reference pose")
    hand.put(elbow=counts(2.5))
    t.expect(re.escape(f"now [{counts(2.5):+.3f}]"))
    t.line()
    t.expect(r"aborted \(the reference pose lies outside the range recorded for elbow_joint")
    assert t.wait() == 1
    assert not config.with_name("armd.calibration.yaml").exists()


def run_armd(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "armd", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def test_refusals(arm: tuple[Path, Hand]) -> None:
    config, _ = arm
    piped = run_armd("calibrate", "--config", str(config))
    assert piped.returncode == 2
    assert "run it in a terminal" in piped.stderr
    unknown = run_armd("calibrate", "--config", str(config), "--joint", "elbow")
    assert unknown.returncode == 2
    assert "calibrate: --joint elbow: not a driven joint" in unknown.stderr
    assert not config.with_name("armd.calibration.yaml").exists()
