"""``armd calibrate --auto`` on an SO-101 (config/so101.yaml) whose Feetech servos are simulated
byte for byte on a pty (`SimulatedFeetechChain`, the servos of ``armd sim-device feetech``), served
from a process of its own at real-time priority (`ChainProcess`), whose hooks let the test read
and write the servos' tables:

- with end stops on two of their motors: the recorded ranges match the stops, the torque limit
  written to the servos is the lowered one, and torque is off at the end;
- a servo whose position limits (EEPROM 9, 11) a LeRobot calibration narrowed: the search ends at
  the end of the servo's range, which is recorded as the end of travel with a warning; the servo
  is never commanded beyond it.

The README's simulated SO-101 (``armd sim-device feetech``) is in
test_calibration_auto_feetech_readme.py. The stops and limits here lie close to where the shafts
start: each search is a few seconds of ramping at the search's 1 rad/s² (docs/calibration.md),
and what is checked does not depend on how far apart they are.

Tolerance: a simulated shaft stops exactly at its end stop and the servo reports it to the nearest
of its 4096 counts per turn, so each stop is read within half a count (0.77 mrad), the offset (the
middle) and the range's ends (a stop minus the middle) within one count. The end of a servo's
range is where it rests on the last goal it accepts: its limit's count, read exactly."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from armd.config.calibration import JointCalibration, read_calibration
from armd.tools.autocal import STALE_S, AutoSettings
from drivers.feetech.sim import SimulatedFeetechChain
from drivers.feetech.table import Addr, counts_to_rad
from kinematics import load_tree
from tests.armd.terminal import Terminal
from tests.drivers.chain_process import ChainProcess
from tests.realtime import PtyStallProbe, held_long_enough

ROOT = Path(__file__).resolve().parents[3]
SO101 = ROOT / "config" / "so101.yaml"
COUNT = 2 * math.pi / 4096  # rad
STOPS = {1: (-0.3, 0.4), 6: (0.2, 0.9)}  # servo id: its end stops, rad at the shaft
# A search runs again after a measured hold-up of the bus (`calibrate_through_stalls`) at most this
# often: beside `stress-ng --cpu 2` and the suite (load 13), three README searches in a row (50 s
# each) stopped on a bus gone quiet, the first two after measured hold-ups of the pty path (the
# kernel's, at normal priority)
RESENDS = 4


MODEL_LIMITS = load_tree(SO101.parent / "robots" / "so101.urdf").limits


def assert_centred(entry: JointCalibration, joint: str, low: float, high: float) -> None:
    """The middle of the travel [low, high] (rad at the shaft, gear 1, sign 1) reads the middle of
    the joint's model limits; the range is the travel around it (each within a count)."""
    middle = (MODEL_LIMITS[joint].lower + MODEL_LIMITS[joint].upper) / 2
    half = (high - low) / 2
    assert entry.offset == pytest.approx(middle - (low + high) / 2, abs=COUNT)
    assert entry.range == pytest.approx([middle - half, middle + half], abs=COUNT)


def so101_chain(**kwargs: Any) -> SimulatedFeetechChain:
    """The SO-101's six servos (`SimulatedFeetechChain` keyword arguments), with `STOPS`."""
    chain = SimulatedFeetechChain([1, 2, 3, 4, 5, 6], **kwargs)
    for servo_id, stops in STOPS.items():
        with chain.device(servo_id) as servo:
            servo.motor.faults.end_stops = stops
    return chain


@pytest.fixture
def chain() -> Iterator[ChainProcess]:
    """The chain in a process of its own at real-time priority (`ChainProcess`), as ``armd
    sim-device`` serves it: what is left between the search and its servos is the kernel's pty
    path, which `pty_stalls` times."""
    with ChainProcess(so101_chain, initial_positions={6: 0.5}) as chain:
        yield chain


@pytest.fixture
def pty_stalls() -> Iterator[PtyStallProbe]:
    """The kernel's pty path timed beside the test (stalls of 10 ms or more)."""
    with PtyStallProbe(late_s=0.01, cpus=True) as probe:
        yield probe


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
def config(tmp_path: Path, chain: ChainProcess) -> Path:
    return so101_config(tmp_path, chain.port)


@pytest.fixture
def terminal() -> Iterator[list[Terminal]]:
    started: list[Terminal] = []
    yield started
    for t in started:
        t.close()


def calibrate(terminal: list[Terminal], config: Path, *args: str, start: str = "") -> Terminal:
    """``armd calibrate --config CONFIG --auto ARGS`` on a terminal, `start` (a pattern) seen
    before it waits for Enter; Enter pressed, it runs at the config's real-time priority (as the
    daemon's control process: `raise_priority`; refused without root or RLIMIT_RTPRIO)."""
    argv = [sys.executable, "-m", "armd", "calibrate", "--config", str(config), "--auto", *args]
    terminal.append(Terminal(argv, ROOT))
    t = terminal[-1]
    if start:
        t.expect(start)
    t.expect("Press Enter to start")
    t.line()
    return t


def calibrate_through_stalls(
    terminal: list[Terminal],
    config: Path,
    args: Sequence[str],
    search: Callable[[Terminal], None],
    stalls: PtyStallProbe,
    resends: int = RESENDS,
    start: str = "",
) -> Terminal:
    """`calibrate` with `args`, then `search` (the expectations of the run) on its terminal. A
    search that stops because a device's reading is older than `STALE_S` is `--auto`'s
    documented answer to a bus gone quiet; run again from where the joints are, as a user would,
    when `stalls` (the chain's pty path, timed beside) was held up that long, less two of the
    search's ticks, meanwhile (hold-ups less than a tick apart as one; at most `resends`
    times). Any other failure stands; the last one says what each attempt measured."""
    period_s = AutoSettings().period_s
    attempts: list[str] = []
    for attempt in range(1 + resends):
        since = time.monotonic()
        t = calibrate(terminal, config, *args, start=start)
        try:
            search(t)
            return t
        except AssertionError as exc:
            held_s = stalls.longest_s(since, bridge_s=period_s)
            quiet = "does not answer" in t.output
            attempts.append(f"attempt {attempt + 1}: held up {held_s:.3f} s, bus quiet: {quiet}")
            if attempt == resends or not (quiet and held_long_enough(held_s, STALE_S, period_s)):
                raise AssertionError(f"{exc}\n{'; '.join(attempts)}") from exc
            t.close()
    raise AssertionError("unreachable")


def confirm(t: Terminal) -> None:
    t.expect("the drives are disabled")
    t.expect(r"Write the calibration\? \[y/N\]")
    t.line("y")
    assert t.wait() == 0, t.output[-3000:]


def test_an_so101_on_simulated_feetech_servos(
    chain: ChainProcess, config: Path, terminal: list[Terminal], pty_stalls: PtyStallProbe
) -> None:
    chosen = ("--joint", "shoulder_pan", "--joint", "gripper", "--auto-speed", "1")

    def search(t: Terminal) -> None:
        t.expect(r"shoulder_pan: searching the \+ end stop")
        if os.geteuid() == 0:  # the search at the config's real-time priority (root may have it)
            assert os.sched_getscheduler(t.process.pid) == os.SCHED_FIFO
        # lowered from the configured 1.0 to --auto-torque
        assert chain.read_table(1, Addr.TORQUE_LIMIT, 2) == (200).to_bytes(2, "little")
        for joint, (low, high) in (("shoulder_pan", STOPS[1]), ("gripper", STOPS[6])):
            found = t.expect(rf"{joint}: end stops at (\S+) and (\S+) rad", timeout_s=60)
            assert (float(found[1]), float(found[2])) == pytest.approx(
                (low, high), abs=1e-4 + COUNT
            )

    start = r"gripper \(bus/gripper\): torque limit 0\.20 of stall"
    t = calibrate_through_stalls(terminal, config, chosen, search, pty_stalls, start=start)
    confirm(t)
    for servo_id in range(1, 7):
        assert chain.read_table(servo_id, Addr.TORQUE_ENABLE, 1) == b"\x00"
    file, _ = read_calibration(config.with_name("so101.calibration.yaml"))
    for joint, servo_id in (("shoulder_pan", 1), ("gripper", 6)):
        low, high = STOPS[servo_id]
        entry = file.joints[joint]
        assert_centred(entry, joint, low, high)
        assert entry.device_id == servo_id


def test_position_limits_narrowed_by_lerobot_end_the_travel_there(
    tmp_path: Path, terminal: list[Terminal], pty_stalls: PtyStallProbe
) -> None:
    """LeRobot writes its recorded range into the servos' position limits; armd never commands
    beyond them."""
    limits = (1536, 2560)  # ±π/4 around the middle of the turn
    with ChainProcess(SimulatedFeetechChain, [1, 2, 3, 4, 5, 6]) as chain:
        for address, value in zip(
            (Addr.MIN_POSITION_LIMIT, Addr.MAX_POSITION_LIMIT), limits, strict=True
        ):
            chain.write_table(5, address, value.to_bytes(2, "little"))
        config = so101_config(tmp_path, chain.port)

        def search(t: Terminal) -> None:
            found = t.expect(r"wrist_roll: ends of travel at (\S+) and (\S+) rad", timeout_s=120)
            expected = (counts_to_rad(limits[0]), counts_to_rad(limits[1]))
            assert (float(found[1]), float(found[2])) == pytest.approx(expected, abs=1e-4)

        args = ("--joint", "wrist_roll", "--auto-speed", "1")
        t = calibrate_through_stalls(terminal, config, args, search, pty_stalls)
        for sign in "+-":
            t.expect(rf"warning: joint 'wrist_roll': no end stop in the \{sign} direction")
        t.expect(r"Write the calibration\? \[y/N\]")
        t.line("n")
        assert t.wait() == 1
