"""`armd`'s entry point (`armd.cli.main`): a command whose reader leaves (``armd ... | true``,
``| head -1``) exits 141 with nothing on stderr, whether the reader left before the first write
or in the middle, with stdout buffered (into a pipe: the default) or not (``PYTHONUNBUFFERED``).
Real subprocesses and real pipes; the commands that need a broker are in
tests/system/test_cli_client.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from armd.cli.common import EXIT_READER_LEFT

ROOT = Path(__file__).resolve().parents[3]
UR5 = str(ROOT / "config" / "robots" / "ur5.urdf")
SIM = str(ROOT / "config" / "sim.yaml")
CHAIN = str(ROOT / "config" / "chains" / "ur5_leader.json")
WAIT_S = 120.0  # a cold start on a busy machine; never a speed assertion
WIDE_JOINTS = 1000  # `model show` of such a model prints ~125 KB: more than a pipe holds (64 KiB)

COMMANDS = {
    "help": ["--help"],
    "version": ["--version"],
    "goal-help": ["goal", "--help"],
    "model-show": ["model", "show", UR5],
    "fk": ["fk", UR5, "--q", "0", "-1.2", "1.4", "-1.6", "-1.5", "0.3"],
    "check": ["check", "--config", SIM],
    "map": ["map", UR5, "--chain", CHAIN],
}


@pytest.fixture(params=["buffered", "unbuffered"])
def env(request: pytest.FixtureRequest) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if request.param == "unbuffered":
        env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def wide_model(tmp_path: Path) -> Path:
    """A model of `WIDE_JOINTS` revolute joints on one base: a long `model show`."""
    joints = "".join(
        f'<link name="l{i}"/><joint name="j{i}" type="revolute"><parent link="base"/>'
        f'<child link="l{i}"/><origin xyz="0 0 0.01"/><axis xyz="0 0 1"/>'
        '<limit lower="-1" upper="1" velocity="1" effort="1"/></joint>\n'
        for i in range(WIDE_JOINTS)
    )
    path = tmp_path / "wide.urdf"
    path.write_text(f'<robot name="wide"><link name="base"/>\n{joints}</robot>\n', "utf-8")
    return path


def armd(*args: str) -> list[str]:
    return [sys.executable, "-m", "armd", *args]


def run_reader_gone(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run `armd args` with stdout a pipe whose reader has already left: (exit code, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            armd(*args),
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            timeout=WAIT_S,
            check=False,
        )
    finally:
        os.close(write_end)
    return done.returncode, done.stderr


def run_reader_leaving(args: list[str], env: dict[str, str]) -> tuple[int, bytes, str]:
    """Run `armd args`, read its first line, then close the pipe while it writes: (exit code,
    what was read, stderr)."""
    process = subprocess.Popen(armd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert process.stdout is not None
    assert process.stderr is not None
    read = b""
    while b"\n" not in read:
        chunk = os.read(process.stdout.fileno(), 100)
        assert chunk, process.communicate(timeout=WAIT_S)
        read += chunk
    process.stdout.close()
    err = process.stderr.read().decode()
    return process.wait(timeout=WAIT_S), read, err


@pytest.mark.parametrize("args", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_reader_gone_before_the_first_write_ends_the_command_quietly(
    args: list[str], env: dict[str, str]
) -> None:
    assert run_reader_gone(args, env) == (EXIT_READER_LEFT, "")


def test_a_reader_leaving_in_the_middle_ends_the_command_quietly(
    wide_model: Path, env: dict[str, str]
) -> None:
    code, read, err = run_reader_leaving(["model", "show", str(wide_model)], env)
    assert read.startswith(b"model  wide\n")
    assert (code, err) == (EXIT_READER_LEFT, "")


@pytest.mark.parametrize("reader", ["true", "head -1"])
def test_a_shell_pipe_into_a_reader_that_leaves(reader: str, env: dict[str, str]) -> None:
    """As people type it. Whether the reader leaves before the command has written everything
    depends on the machine's timing: 0 when it had, else 141; never a word on stderr."""
    done = subprocess.run(
        f"{sys.executable} -m armd model show {UR5} | {reader}; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode in (0, EXIT_READER_LEFT)
    assert done.stderr == ""
    assert done.stdout == ("model  ur5\n" if reader == "head -1" else "")


def test_a_reader_that_stays_sees_exit_0() -> None:
    done = subprocess.run(armd("model", "show", UR5), capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("model  ur5\n")
