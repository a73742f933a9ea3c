"""The commands a person types most start without numba: ``armd --help``, ``--version``, ``goal``,
``estop`` and ``check`` never import it, nor compile the kinematics kernels (they load on first
use: `kinematics.compiled`). ``check`` of a config with a ``collision:`` section is the exception:
it lists the pairs the collision model checks and the poses in contact, which the collision
kernels compute. Speed itself is measured, not asserted (see the README)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import numba
import pytest
import yaml
from numba.core import event

from kinematics import load_tree
from kinematics.compiled import COMPILE_ESTIMATE, _cold_cache_listener, _heartbeat, load_kernels

ROOT = Path(__file__).resolve().parents[3]
SIM = ROOT / "config" / "sim.yaml"

PROBE = """
import sys
from armd.cli.main import main
code = main(sys.argv[1:])
assert "numba" not in sys.modules, "numba was imported"
print("exit", code)
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config_without_broker(tmp_path: Path) -> Path:
    text = SIM.read_text(encoding="utf-8")
    text = text.replace("model: robots/", f"model: {SIM.parent}/robots/")
    text = text.replace("geometry: collision/", f"geometry: {SIM.parent}/collision/")
    text = text.replace("port: 1883", f"port: {_closed_port()}")
    path = tmp_path / "arm.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--help"], None),
        (["--version"], None),
        (["goal", "--help"], None),
        (["check", "--config", "{config_without_collision}"], 0),
        (["goal", "--config", "{config}", "stop"], 1),  # no broker: one line, exit 1
        (["goal", "--config", "{config}", "joints", "elbow_joint=1"], 1),
        (["estop", "--config", "{config}", "engage"], 1),
        (["payload", "--config", "{config}", "--mass", "1.5"], 1),
    ],
)
def test_command_does_not_import_numba(argv: list[str], code: int | None, tmp_path: Path) -> None:
    if "port: 1883" not in SIM.read_text(encoding="utf-8"):
        pytest.fail("config/sim.yaml no longer names port 1883: update this test")
    config = _config_without_broker(tmp_path)
    doc = yaml.safe_load(config.read_text(encoding="utf-8"))
    del doc["collision"]
    without_collision = tmp_path / "without-collision.yaml"
    without_collision.write_text(yaml.safe_dump(doc), encoding="utf-8")
    args = [a.format(config=config, config_without_collision=without_collision) for a in argv]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "numba was imported" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr or code is None, done.stderr
    if code is not None:
        assert done.stdout.splitlines()[-1] == f"exit {code}", done.stdout + done.stderr
        if code:
            assert done.stderr.count("\n") == 1, done.stderr


def test_a_model_loads_without_numba_and_computes_once_kernels_load() -> None:
    program = (
        "import sys; from kinematics import load_tree;"
        "t = load_tree('config/robots/ur5.urdf');"
        "assert 'numba' not in sys.modules; print(t.fk([0.0] * 6, 'tool0').translation)"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_warm_kernels_load_silently_and_once() -> None:
    lines: list[str] = []
    load_tree(ROOT / "config" / "robots" / "ur5.urdf").fk([0.0] * 6, "tool0")
    kernels = load_kernels()
    assert load_kernels(progress=lines.append) is not None
    assert load_kernels() is kernels
    assert lines == []  # the cache (or this process) has them: nothing to say


def test_a_cold_cache_says_what_it_compiles_first() -> None:
    """The announcement comes before numba's first compilation (the whole compilation of the
    kernels takes ~30 s: `armd compile` runs it, with progress, in `make run` and `make test`)."""
    lines: list[str] = []
    listener = _cold_cache_listener(lines.append, COMPILE_ESTIMATE)

    @numba.njit
    def increment(x: int) -> int:
        return x + 1

    with event.install_listener("numba:compile", listener):
        assert increment(1) == 2
        assert increment(2) == 3  # compiled once
    assert lines == [COMPILE_ESTIMATE]
    assert listener.compiled == 1


def test_a_long_compilation_is_never_silent() -> None:
    lines: list[str] = []
    with _heartbeat(lines.append, "kernel 6/6 ik_attempt", lambda: True, interval_s=0.01):
        deadline = time.monotonic() + 10.0  # a busy machine may hold the heartbeat's thread up
        while not lines and time.monotonic() < deadline:
            time.sleep(0.01)
    assert lines
    assert all(line.startswith("  kernel 6/6 ik_attempt: still compiling (") for line in lines)
