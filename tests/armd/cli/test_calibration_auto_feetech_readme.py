"""``armd calibrate --auto`` on the README's simulated SO-101: its ``armd sim-device feetech`` line,
run as written but for the link's path (the SO-101's end stops, the wrist roll free), and
config/so101.yaml pointed at it. ``--auto --joint gripper`` as documented finds the gripper's end
stops (the model's joint limits) with no warning, and the file records them; asked for every
joint, it refuses the sweeps into the arm's table before anything moves; the joints the table
allows are found, the wrist roll, which has no end stop, at the ends of its servo's range (the
end of travel is recorded there with a warning; the servo is never commanded beyond it).

The in-process servos (end stops of the test's choosing, narrowed position limits) are
test_calibration_auto_feetech.py, whose tolerances hold here."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from armd.config.calibration import read_calibration
from drivers.feetech.table import counts_to_rad
from tests.armd.cli.test_calibration_auto_feetech import (
    COUNT,
    MODEL_LIMITS,
    ROOT,
    SO101,
    assert_centred,
    calibrate,
    calibrate_through_stalls,
    confirm,
    so101_config,
    terminal,
)
from tests.armd.cli.test_sim_device_cmd import Spawn, read_line, spawn
from tests.armd.terminal import Terminal
from tests.realtime import PtyStallProbe

__all__ = ["spawn", "terminal"]  # the fixtures

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
# Swept into their end stops from the simulated arm's start pose, these joints would bring the
# gripper into the table config/so101.yaml stands on: --auto refuses them before anything moves.
SWEEPS_INTO_THE_TABLE = ("shoulder_lift", "elbow_flex")


def readme_sim_device(link: Path) -> list[str]:
    """The README's command that starts the simulated SO-101 (``armd sim-device feetech ...
    &``), its arguments after ``armd``, with `link` for the README's link path (which
    config/so101.yaml's port names)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (command,) = re.findall(r"`armd (sim-device feetech [^`]*?) &`", text)
    args = command.split()
    at = args.index("--link") + 1
    so101 = yaml.safe_load(SO101.read_text(encoding="utf-8"))
    assert args[at] == so101["drivers"]["bus"]["params"]["port"], "the README and config differ"
    return [*args[:at], str(link), *args[at + 1 :]]


@pytest.fixture
def readme_so101(spawn: Spawn, tmp_path: Path) -> Path:
    """The README's simulated SO-101 serving, and config/so101.yaml pointed at it."""
    link = tmp_path / "armd-so101"
    read_line(spawn(*readme_sim_device(link)))  # its pty: it serves
    return so101_config(tmp_path, str(link))


@pytest.fixture
def pty_stalls() -> Iterator[PtyStallProbe]:
    """The kernel's pty path timed beside the search (stalls of 10 ms or more)."""
    with PtyStallProbe(late_s=0.01, cpus=True) as probe:
        yield probe


def test_the_readme_so101_calibrates_its_gripper_into_its_end_stops(
    readme_so101: Path, terminal: list[Terminal], pty_stalls: PtyStallProbe
) -> None:
    limit = MODEL_LIMITS["gripper"]

    def search(t: Terminal) -> None:
        found = t.expect(r"gripper: end stops at (\S+) and (\S+) rad", timeout_s=120)
        assert (float(found[1]), float(found[2])) == pytest.approx(
            (limit.lower, limit.upper), abs=1e-4 + COUNT
        )

    # the options as documented
    t = calibrate_through_stalls(terminal, readme_so101, ["--joint", "gripper"], search, pty_stalls)
    confirm(t)
    assert "warning" not in t.output, t.output[-3000:]
    entry = read_calibration(readme_so101.with_name("so101.calibration.yaml"))[0].joints["gripper"]
    assert_centred(entry, "gripper", limit.lower, limit.upper)
    # the gripper's travel is its model range, so it reads its model limits: open and closed fit
    assert entry.range == pytest.approx([limit.lower, limit.upper], abs=COUNT)


def test_the_readme_so101_refuses_a_search_into_its_table(
    readme_so101: Path, terminal: list[Terminal]
) -> None:
    """Every joint asked for: the sweeps are checked from the arm's first reading, before any
    drive is enabled, and the first that would reach the table is refused; nothing is written."""
    t = calibrate(terminal, readme_so101)
    t.expect(
        rf"collision: searching ({'|'.join(SWEEPS_INTO_THE_TABLE)})'s end stops would bring \w+ "
        r"and table within the margin"
    )
    assert t.wait() != 0
    assert "searching the" not in t.output  # no joint was driven
    assert not readme_so101.with_name("so101.calibration.yaml").exists()


def expect_range_ends(t: Terminal, joint: str, servo: str, low: float, high: float) -> None:
    """The two warnings of `joint`, without end stops, whose `servo` accepts one turn (its
    position limits [0, 4095], ends `low` and `high` rad): each names the first goal it refused
    (within `EDGE` of the boundary: its count is the first beyond the limit) and where the end
    of travel is recorded (the limit's count, read exactly)."""
    for sign, counts, end in (("+", 4096, high), ("-", -1, low)):
        found = t.expect(
            rf"warning: joint '{joint}': no end stop in the \{sign} direction before the end of "
            rf"its device's range \(servo {re.escape(servo)}: (\S+) rad is {counts} counts, "
            r"outside its position limits \[0, 4095\]\): the end of travel is recorded there, "
            r"at (\S+) \(uncalibrated\)",
        )
        assert float(found[2]) == pytest.approx(end, abs=1e-4)
        assert abs(float(found[1]) - end) <= 1.5 * COUNT  # refused within EDGE of the boundary


def test_the_readme_so101_calibrates_every_joint_its_table_allows(
    readme_so101: Path, terminal: list[Terminal], pty_stalls: PtyStallProbe
) -> None:
    """Three joints into their end stops; the wrist roll, which has none, to the ends of its
    servo's range, with a warning for each. (A servo without end stops, ``--end-stops none``,
    takes the same path: the wrist roll's here.)"""
    joints = [joint for joint in JOINTS if joint not in SWEEPS_INTO_THE_TABLE]
    ends = {joint: (MODEL_LIMITS[joint].lower, MODEL_LIMITS[joint].upper) for joint in joints}
    ends["wrist_roll"] = (counts_to_rad(0), counts_to_rad(4095))
    chosen = [word for joint in joints for word in ("--joint", joint)]

    def search(t: Terminal) -> None:
        for joint in joints:  # the config's order
            stops = "ends of travel" if joint == "wrist_roll" else "end stops"
            found = t.expect(rf"{joint}: {stops} at (\S+) and (\S+) rad", timeout_s=120)
            assert (float(found[1]), float(found[2])) == pytest.approx(
                ends[joint], abs=1e-4 + COUNT
            )
            if joint == "wrist_roll":
                expect_range_ends(t, joint, "'wrist_roll' (id 5)", *ends[joint])

    # at the joints' velocity limit (config/so101.yaml: 3 rad/s): the ramps are as short as the
    # search's 1 rad/s² allows; what is found does not depend on the speed
    args = ["--auto-speed", "3", *chosen]
    t = calibrate_through_stalls(terminal, readme_so101, args, search, pty_stalls)
    confirm(t)
    warnings = re.findall(r"warning: joint '(\w+)': no end stop in the (.) direction", t.output)
    assert warnings == [("wrist_roll", "+"), ("wrist_roll", "-")]
    file, _ = read_calibration(readme_so101.with_name("so101.calibration.yaml"))
    assert set(file.joints) == set(joints)
    for joint, entry in file.joints.items():
        assert_centred(entry, joint, *ends[joint])
