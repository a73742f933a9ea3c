"""``armd calibrate --auto`` on an SO-101 (config/so101.yaml) whose Feetech servos are simulated
byte for byte on a pty (`SimulatedFeetechChain`, the servos of ``armd sim-device feetech``):

- with end stops on two of their motors: the recorded ranges match the stops, the torque limit
  written to the servos is the lowered one, and torque is off at the end;
- the README's simulated SO-101 (its ``armd sim-device feetech`` line, run as written but for the
  link's path): ``--auto --joint gripper``, then every joint, finds the arm's end stops (the
  model's joint limits) with no warning, and the file records them;
- servos without end stops (``--end-stops none``), and one whose position limits (EEPROM 9, 11)
  a LeRobot calibration narrowed: the search ends at the end of the servo's range, which is
  recorded as the end of travel with a warning; the servo is never commanded beyond it.

Tolerance: a simulated shaft stops exactly at its end stop and the servo reports it to the nearest
of its 4096 counts per turn, so each stop is read within half a count (0.77 mrad), the offset (the
middle) and the range's ends (a stop minus the middle) within one count. The end of a servo's
range is where it rests on the last goal it accepts: its limit's count, read exactly."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from armd.config.calibration import JointCalibration, read_calibration
from drivers.feetech.sim import SimulatedFeetechChain
from drivers.feetech.table import Addr, counts_to_rad
from kinematics import load_tree
from tests.armd.cli.test_sim_device_cmd import Spawn, read_line, spawn
from tests.armd.terminal import Terminal

__all__ = ["spawn"]  # the fixture

ROOT = Path(__file__).resolve().parents[3]
SO101 = ROOT / "config" / "so101.yaml"
COUNT = 2 * math.pi / 4096  # rad
STOPS = {1: (-0.6, 0.9), 6: (-0.2, 1.4)}  # servo id: its end stops, rad at the shaft
JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


MODEL_LIMITS = load_tree(SO101.parent / "robots" / "so101.urdf").limits


def assert_centred(entry: JointCalibration, joint: str, low: float, high: float) -> None:
    """The middle of the travel [low, high] (rad at the shaft, gear 1, sign 1) reads the middle of
    the joint's model limits; the range is the travel around it (each within a count)."""
    middle = (MODEL_LIMITS[joint].lower + MODEL_LIMITS[joint].upper) / 2
    half = (high - low) / 2
    assert entry.offset == pytest.approx(middle - (low + high) / 2, abs=COUNT)
    assert entry.range == pytest.approx([middle - half, middle + half], abs=COUNT)


@pytest.fixture
def chain() -> Iterator[SimulatedFeetechChain]:
    with SimulatedFeetechChain([1, 2, 3, 4, 5, 6], initial_positions={6: 0.5}) as chain:
        for servo_id, stops in STOPS.items():
            with chain.device(servo_id) as servo:
                servo.motor.faults.end_stops = stops
        yield chain


def so101_config(tmp_path: Path, port: str) -> Path:
    """config/so101.yaml on `port`, its lock file in `tmp_path`; the calibration goes next to it."""
    doc = yaml.safe_load(SO101.read_text(encoding="utf-8"))
    doc["model"] = str((SO101.parent / doc["model"]).resolve())
    if doc.get("collision"):
        geometry = doc["collision"]["geometry"]
        doc["collision"]["geometry"] = str((SO101.parent / geometry).resolve())
    doc["drivers"]["bus"]["params"]["port"] = port
    doc["lock_file"] = str(tmp_path / "armd.lock")
    path = tmp_path / "so101.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def config(tmp_path: Path, chain: SimulatedFeetechChain) -> Path:
    return so101_config(tmp_path, chain.port)


@pytest.fixture
def terminal() -> Iterator[list[Terminal]]:
    started: list[Terminal] = []
    yield started
    for t in started:
        t.close()


def test_an_so101_on_simulated_feetech_servos(
    chain: SimulatedFeetechChain, config: Path, terminal: list[Terminal]
) -> None:
    argv = [sys.executable, "-m", "armd", "calibrate", "--config", str(config), "--auto"]
    argv += ["--joint", "shoulder_pan", "--joint", "gripper", "--auto-speed", "1"]
    terminal.append(Terminal(argv, ROOT))
    t = terminal[0]
    t.expect(r"gripper \(bus/gripper\): torque limit 0\.20 of stall")
    t.expect("Press Enter to start")
    t.line()
    t.expect(r"shoulder_pan: searching the \+ end stop")
    with chain.device(1) as servo:  # lowered from the configured 1.0 to --auto-torque
        assert servo.get(Addr.TORQUE_LIMIT) == 200
    for joint, (low, high) in (("shoulder_pan", STOPS[1]), ("gripper", STOPS[6])):
        found = t.expect(rf"{joint}: end stops at (\S+) and (\S+) rad", timeout_s=60)
        assert (float(found[1]), float(found[2])) == pytest.approx((low, high), abs=1e-4 + COUNT)
    t.expect("the drives are disabled")
    t.expect(r"Write the calibration\? \[y/N\]")
    t.line("y")
    assert t.wait() == 0
    for servo_id in range(1, 7):
        with chain.device(servo_id) as servo:
            assert servo.get(Addr.TORQUE_ENABLE) == 0
    file, _ = read_calibration(config.with_name("so101.calibration.yaml"))
    for joint, servo_id in (("shoulder_pan", 1), ("gripper", 6)):
        low, high = STOPS[servo_id]
        entry = file.joints[joint]
        assert_centred(entry, joint, low, high)
        assert entry.device_id == servo_id


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


def calibrate(terminal: list[Terminal], config: Path, *args: str) -> Terminal:
    argv = [sys.executable, "-m", "armd", "calibrate", "--config", str(config), "--auto", *args]
    terminal.append(Terminal(argv, ROOT))
    terminal[-1].expect("Press Enter to start")
    terminal[-1].line()
    return terminal[-1]


def confirm(t: Terminal) -> None:
    t.expect("the drives are disabled")
    t.expect(r"Write the calibration\? \[y/N\]")
    t.line("y")
    assert t.wait() == 0, t.output[-3000:]


def test_the_readme_so101_calibrates_its_gripper_into_its_end_stops(
    readme_so101: Path, terminal: list[Terminal]
) -> None:
    limit = load_tree(SO101.parent / "robots" / "so101.urdf").limits["gripper"]
    t = calibrate(terminal, readme_so101, "--joint", "gripper")  # the options as documented
    found = t.expect(r"gripper: end stops at (\S+) and (\S+) rad", timeout_s=120)
    assert (float(found[1]), float(found[2])) == pytest.approx(
        (limit.lower, limit.upper), abs=1e-4 + COUNT
    )
    confirm(t)
    assert "warning" not in t.output, t.output[-3000:]
    entry = read_calibration(readme_so101.with_name("so101.calibration.yaml"))[0].joints["gripper"]
    assert_centred(entry, "gripper", limit.lower, limit.upper)
    # the gripper's travel is its model range, so it reads its model limits: open and closed fit
    assert entry.range == pytest.approx([limit.lower, limit.upper], abs=COUNT)


# Swept into their end stops from the simulated arm's start pose, these joints would bring the
# gripper into the table config/so101.yaml stands on: --auto refuses them before anything moves.
SWEEPS_INTO_THE_TABLE = ("shoulder_lift", "elbow_flex")


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


def test_the_readme_so101_calibrates_every_joint_its_table_allows(
    readme_so101: Path, terminal: list[Terminal]
) -> None:
    """Three joints into their end stops; the wrist roll, which has none, to the ends of its
    servo's range, with a warning for each."""
    joints = [joint for joint in JOINTS if joint not in SWEEPS_INTO_THE_TABLE]
    limits = load_tree(SO101.parent / "robots" / "so101.urdf").limits
    ends = {joint: (limits[joint].lower, limits[joint].upper) for joint in joints}
    ends["wrist_roll"] = (counts_to_rad(0), counts_to_rad(4095))
    chosen = [word for joint in joints for word in ("--joint", joint)]
    t = calibrate(terminal, readme_so101, "--auto-speed", "1", *chosen)
    for joint in joints:  # the config's order
        stops = "ends of travel" if joint == "wrist_roll" else "end stops"
        found = t.expect(rf"{joint}: {stops} at (\S+) and (\S+) rad", timeout_s=120)
        assert (float(found[1]), float(found[2])) == pytest.approx(ends[joint], abs=1e-4 + COUNT)
    confirm(t)
    warnings = re.findall(r"warning: joint '(\w+)': no end stop in the (.) direction", t.output)
    assert warnings == [("wrist_roll", "+"), ("wrist_roll", "-")]
    file, _ = read_calibration(readme_so101.with_name("so101.calibration.yaml"))
    assert set(file.joints) == set(joints)
    for joint, entry in file.joints.items():
        assert_centred(entry, joint, *ends[joint])


def test_a_servo_without_end_stops_ends_its_travel_at_its_range(
    spawn: Spawn, tmp_path: Path, terminal: list[Terminal]
) -> None:
    link = tmp_path / "armd-so101"
    read_line(spawn(*readme_sim_device(link), "--end-stops", "none"))
    config = so101_config(tmp_path, str(link))
    t = calibrate(terminal, config, "--joint", "gripper", "--auto-speed", "1")
    found = t.expect(r"gripper: ends of travel at (\S+) and (\S+) rad", timeout_s=120)
    low, high = counts_to_rad(0), counts_to_rad(4095)  # the servo's position limits
    assert (float(found[1]), float(found[2])) == pytest.approx((low, high), abs=1e-4)
    for sign, counts in (("+", 4096), ("-", -1)):  # the first goal count each side refuses
        found = t.expect(
            rf"warning: joint 'gripper': no end stop in the \{sign} direction before the end of "
            rf"its device's range \(servo 'gripper' \(id 6\): (\S+) rad is {counts} counts, "
            r"outside its position limits \[0, 4095\]\): the end of travel is recorded there, "
            r"at (\S+) \(uncalibrated\)",
        )
        end = high if sign == "+" else low
        assert float(found[2]) == pytest.approx(end, abs=1e-4)
        assert abs(float(found[1]) - end) <= 1.5 * COUNT  # refused within EDGE of the boundary
    t.expect(r"the drives are disabled")
    t.expect(r"Write the calibration\? \[y/N\]")
    t.line("y")
    assert t.wait() == 0
    entry = read_calibration(config.with_name("so101.calibration.yaml"))[0].joints["gripper"]
    assert_centred(entry, "gripper", low, high)


def test_position_limits_narrowed_by_lerobot_end_the_travel_there(
    tmp_path: Path, terminal: list[Terminal]
) -> None:
    """LeRobot writes its recorded range into the servos' position limits; armd never commands
    beyond them."""
    limits = (1024, 3072)  # ±π/2 around the middle of the turn
    with SimulatedFeetechChain([1, 2, 3, 4, 5, 6]) as chain:
        for address, value in zip(
            (Addr.MIN_POSITION_LIMIT, Addr.MAX_POSITION_LIMIT), limits, strict=True
        ):
            chain.write_table(5, address, value.to_bytes(2, "little"))
        config = so101_config(tmp_path, chain.port)
        t = calibrate(terminal, config, "--joint", "wrist_roll", "--auto-speed", "1")
        found = t.expect(r"wrist_roll: ends of travel at (\S+) and (\S+) rad", timeout_s=120)
        expected = (counts_to_rad(limits[0]), counts_to_rad(limits[1]))
        assert (float(found[1]), float(found[2])) == pytest.approx(expected, abs=1e-4)
        for sign in "+-":
            t.expect(rf"warning: joint 'wrist_roll': no end stop in the \{sign} direction")
        t.expect(r"Write the calibration\? \[y/N\]")
        t.line("n")
        assert t.wait() == 1
