"""``armd calibrate --auto`` on an SO-101 (config/so101.yaml) whose Feetech servos are simulated
byte for byte on a pty (`SimulatedFeetechChain`, the servos of ``armd sim-device feetech``), with
end stops on two of their motors: the recorded ranges match the stops, the torque limit written
to the servos is the lowered one, and torque is off at the end.

Tolerance: a simulated shaft stops exactly at its end stop and the servo reports it to the nearest
of its 4096 counts per turn, so each stop is read within half a count (0.77 mrad), the offset (the
middle) and the range's ends (a stop minus the middle) within one count."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from armd.config.calibration import read_calibration
from drivers.feetech.sim import SimulatedFeetechChain
from drivers.feetech.table import Addr
from tests.armd.terminal import Terminal

ROOT = Path(__file__).resolve().parents[3]
COUNT = 2 * math.pi / 4096  # rad
STOPS = {1: (-0.6, 0.9), 6: (-0.2, 1.4)}  # servo id: its end stops, rad at the shaft


@pytest.fixture
def chain() -> Iterator[SimulatedFeetechChain]:
    with SimulatedFeetechChain([1, 2, 3, 4, 5, 6], initial_positions={6: 0.5}) as chain:
        for servo_id, stops in STOPS.items():
            with chain.device(servo_id) as servo:
                servo.motor.faults.end_stops = stops
        yield chain


@pytest.fixture
def config(tmp_path: Path, chain: SimulatedFeetechChain) -> Path:
    source = ROOT / "config" / "so101.yaml"
    doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    doc["model"] = str((source.parent / doc["model"]).resolve())
    if doc.get("collision"):
        geometry = doc["collision"]["geometry"]
        doc["collision"]["geometry"] = str((source.parent / geometry).resolve())
    doc["drivers"]["bus"]["params"]["port"] = chain.port
    doc["lock_file"] = str(tmp_path / "armd.lock")
    path = tmp_path / "so101.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


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
        assert entry.offset == pytest.approx(-(low + high) / 2, abs=COUNT)
        assert entry.range == pytest.approx([-(high - low) / 2, (high - low) / 2], abs=COUNT)
        assert entry.device_id == servo_id
