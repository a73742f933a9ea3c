"""``armd calibrate --auto`` as a user at a terminal sees it: a real ``python -m armd calibrate``
on a pty, against the simulated arm of config/sim.yaml whose devices have end stops (the sim
driver's `end_stops`); its refusals, Ctrl-C, the time-out and a joint without end stops.

Tolerance: a simulated shaft stops exactly at its end stop and the driver reads it to the nearest
encoder count, so each recorded stop is within half a count of the simulated one; the offset (the
middle of two stops) and the range's ends (a stop minus the middle) within one count."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from armd.config.calibration import read_calibration
from tests.armd.terminal import CTRL_C, CTRL_D, Terminal
from tests.system.helpers import write_config

ROOT = Path(__file__).resolve().parents[3]
COUNT = 2 * math.pi / 16384  # the sim devices' encoder count, rad
# motor units (rad at the shaft); config/sim.yaml starts the elbow at π/2, the wrist 2 at π/2
# (sign -1), the shoulder at -2π (gear ratio 4); the stops lie close to where they start, so each
# search is a few seconds of ramping at its 1 rad/s² (docs/calibration.md)
STOPS = {"elbow": (1.3, 1.9), "wrist2": (1.4, 1.8), "shoulder": (-7.0, -5.5)}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    # a generous watchdog: the devices' 0.1 s would fault when a loaded machine (the tests share
    # their cores) delays the command process's writes; the search itself is what is tested
    devices: dict[str, dict[str, object]] = {
        name: {"watchdog_s": 1.0} for name in ("base", "wrist1", "wrist3")
    }
    devices.update(
        {name: {"end_stops": list(stops), "watchdog_s": 1.0} for name, stops in STOPS.items()}
    )
    # without the table and the collision geometry: the searches sweep 2π (test_a_search_...
    # _that_would_collide_is_refused keeps them)
    overrides = {"drivers": {"sim": {"params": {"devices": devices}}}, "collision": None}
    return write_config(tmp_path, 1883, overrides)


def test_a_search_that_would_collide_is_refused_before_anything_moves(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    """The elbow's search sweeps up to 2π within its limits: folded, the forearm meets the
    base, so the search is refused (the drives opened, never enabled)."""
    config = write_config(tmp_path, 1883)
    t = calibrate(terminals, config, "--joint", "elbow_joint")
    t.expect("Press Enter to start")
    t.line()
    t.expect(
        r"armd: error: collision: searching elbow_joint's end stops would bring \S+ and \S+ "
        r"within the margin at elbow_joint = "
    )
    assert t.wait() == 1
    assert "searching the" not in t.output
    assert not config.with_name("armd.calibration.yaml").exists()


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    started: list[Terminal] = []
    yield started
    for terminal in started:
        terminal.close()


def calibrate(terminals: list[Terminal], config: Path, *args: str) -> Terminal:
    argv = [sys.executable, "-m", "armd", "calibrate", "--config", str(config), "--auto", *args]
    terminals.append(Terminal(argv, ROOT))
    return terminals[-1]


def test_an_automatic_calibration_finds_the_end_stops(
    config: Path, terminals: list[Terminal]
) -> None:
    joints = ("elbow_joint", "wrist_2_joint", "shoulder_lift_joint")
    t = calibrate(terminals, config, *(f"--joint={j}" for j in joints), "--auto-speed", "1")
    t.expect(r"elbow_joint \(sim/elbow\): torque limit 0\.20 of stall, 1 rad/s, at most 6\.28")
    t.expect("Press Enter to start")
    t.line()
    # joint units before calibration: motor / (sign × gear ratio)
    for joint, low, high in (
        ("elbow_joint", 1.3, 1.9),
        ("wrist_2_joint", -1.8, -1.4),
        ("shoulder_lift_joint", -7.0 / 4, -5.5 / 4),
    ):
        found = t.expect(rf"{joint}: end stops at (\S+) and (\S+) rad", timeout_s=60)
        shown = (float(found[1]), float(found[2]))
        assert shown == pytest.approx((low, high), abs=1e-4 + COUNT)  # printed to 4 places
    t.expect("the drives are disabled")
    # the middle of the range is the zero: offset = -middle / (sign × gear), range = ±half span
    expected = {
        "elbow_joint": (-1.6, -0.3, 0.3),
        "wrist_2_joint": (1.6, -0.2, 0.2),
        "shoulder_lift_joint": (6.25 / 4, -0.75 / 4, 0.75 / 4),
    }
    t.expect(r"Write the calibration\? \[y/N\]")
    t.line("y")
    out = config.with_name("armd.calibration.yaml")
    t.expect(re.escape(f"wrote {out} (3 joint(s) calibrated, 0 kept)"))
    assert t.wait() == 0
    file, _ = read_calibration(out)
    for joint, (offset, low, high) in expected.items():
        entry = file.joints[joint]
        gear = 4.0 if joint == "shoulder_lift_joint" else 1.0
        assert entry.offset == pytest.approx(offset, abs=COUNT / gear)
        assert entry.range == pytest.approx([low, high], abs=COUNT / gear)
        assert entry.source == "armd calibrate --auto"


def test_ctrl_c_disables_the_drives_and_writes_nothing(
    config: Path, terminals: list[Terminal]
) -> None:
    t = calibrate(terminals, config, "--joint", "elbow_joint", "--auto-speed", "0.1")
    t.expect("Press Enter to start")
    t.line()
    t.expect(r"elbow_joint: searching the \+ end stop")
    t.type(CTRL_C)
    t.expect("the drives are disabled")
    t.expect(r"aborted \(Ctrl-C\): nothing written")
    assert t.wait() == 130
    assert not config.with_name("armd.calibration.yaml").exists()


def test_a_search_beyond_the_time_out_or_the_travel_fails(
    config: Path, terminals: list[Terminal]
) -> None:
    t = calibrate(terminals, config, "--joint", "elbow_joint", "--auto-timeout", "1")
    t.line()
    t.expect("the drives are disabled", timeout_s=30)
    t.expect(
        r"aborted \(joint 'elbow_joint': its end stops were not found within 1 s "
        r"\(--auto-timeout\)\): nothing written"
    )
    assert t.wait() == 1

    # wrist 1 has no end stops: it goes no farther than --auto-max-travel
    t = calibrate(terminals, config, "--joint", "wrist_1_joint", "--auto-max-travel", "0.3")
    t.line()
    t.expect(
        r"aborted \(joint 'wrist_1_joint': no end stop in the \+ direction within 0\.3 of "
        r"where it started",
        timeout_s=30,
    )
    assert t.wait() == 1
    assert not config.with_name("armd.calibration.yaml").exists()


def test_refusals(terminals: list[Terminal]) -> None:
    for name, refused in (
        ("mit_arm.yaml", "joint 'shoulder_pan_joint' (can/j1, driver type mit)"),
        ("armd.example.yaml", "joint 'wrist_1_joint' (servos/wrist1, driver type dynamixel)"),
    ):
        t = calibrate(terminals, ROOT / "config" / name)
        t.expect(
            rf"armd: error: calibrate --auto: refused: .*{re.escape(refused)} has no torque "
            r"limit armd can set"
        )
        assert t.wait() == 1
    t = calibrate(terminals, ROOT / "config" / "sim.yaml", "--auto-torque", "1.5")
    t.expect(r"armd: error: calibrate: --auto-torque 1\.5: must be in \(0, 1\]")
    assert t.wait() == 2


def test_end_of_input_before_the_start_moves_nothing(
    config: Path, terminals: list[Terminal]
) -> None:
    t = calibrate(terminals, config, "--joint", "elbow_joint")
    t.expect("Press Enter to start")
    t.type(CTRL_D)
    t.expect(r"aborted \(end of input\): nothing written")
    assert t.wait() == 1
    assert "searching" not in t.output
    assert "\nthe drives are disabled" not in t.output  # never opened
