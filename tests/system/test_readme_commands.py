"""Every command of the README's ``console`` blocks runs as written, in order, as a reader would
type them: ``make run`` first (the daemon on the simulated arm), then the goals, e-stops and MQTT
clients, each checked against the output the README shows (goal ids are random).

What the test changes, and only that: the broker is one it starts on a free loopback port (the
config copies and the ``mosquitto_*`` commands point there), the commands run in a folder holding
copies of ``config/`` and ``docs/examples/`` and a ``.venv/bin/armd`` of this interpreter, and
``make run`` runs in the repository with the venv already installed. Commands ending in ``&`` run
in the background; their output is checked at the end. ``make run`` ends with Ctrl-C.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.broker import MosquittoBroker
from tests.system.helpers import START_S
from tests.system.probe import WAIT_S, MqttProbe

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
RANDOM_ID = re.compile(r'"id": "[0-9a-f]{12}"')  # `armd goal` without --id: a random one


@dataclass
class Command:
    line: str
    expected: list[str] = field(default_factory=list)

    @property
    def background(self) -> bool:
        return self.line.endswith("&")


def readme_commands() -> list[Command]:
    """Every ``$ command`` of the README's console blocks with the output shown under it."""
    commands: list[Command] = []
    for block in re.findall(r"```console\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                commands.append(Command(line[2:].split("  #")[0].strip()))
            elif commands and line.strip():
                commands[-1].expected.append(line)
    return commands


def _pattern(line: str) -> str:
    parts = RANDOM_ID.split(line)
    return '"id": "[0-9a-f]{12}"'.join(re.escape(part) for part in parts)


def _matches(expected: list[str], lines: list[str]) -> bool:
    patterns = [_pattern(line) for line in expected]
    return len(patterns) == len(lines) and all(
        re.fullmatch(p, line) for p, line in zip(patterns, lines, strict=True)
    )


@pytest.fixture
def workdir(tmp_path: Path, mosquitto: MosquittoBroker) -> Path:
    """config/ and docs/examples/ as the README's commands see them, on the test's broker."""
    shutil.copytree(ROOT / "config", tmp_path / "config")
    shutil.copytree(ROOT / "docs" / "examples", tmp_path / "docs" / "examples")
    sim = tmp_path / "config" / "sim.yaml"
    text = sim.read_text(encoding="utf-8")
    for old, new in {
        "port: 1883": f"port: {mosquitto.port}",
        "lock_file: /tmp/armd-ur5-sim.lock": f"lock_file: {tmp_path / 'armd.lock'}",
    }.items():
        assert old in text, f"config/sim.yaml no longer has {old!r}: update this test"
        text = text.replace(old, new)
    sim.write_text(text, encoding="utf-8")
    leader = tmp_path / "config" / "sim_leader.yaml"  # the Teleoperation section's leader
    text = leader.read_text(encoding="utf-8")
    for old, new in {
        "port: 1883": f"port: {mosquitto.port}",
        "lock_file: /tmp/armd-ur5-leader.lock": f"lock_file: {tmp_path / 'leader.lock'}",
    }.items():
        assert old in text, f"config/sim_leader.yaml no longer has {old!r}: update this test"
        text = text.replace(old, new)
    leader.write_text(text, encoding="utf-8")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "armd").symlink_to(BIN / "armd")
    return tmp_path


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[MosquittoBroker]:
    """The test's broker, with a WebSockets listener: `make run` finds the dashboard's listener
    there (its WS_PORT) rather than starting a bridged broker of its own that would outlive the
    test."""
    with MosquittoBroker(tmp_path / "mosquitto", websockets=True) as broker:
        yield broker


def _shell_line(command: Command, broker: MosquittoBroker, workdir: Path) -> list[str] | str:
    """How the test runs `command`: `make run` on the test's broker and config copy; the
    mosquitto clients with the broker's port; everything else exactly as written."""
    line = command.line.removesuffix("&").strip()
    if line == "make run":
        return [
            "make", "-C", str(ROOT), "-o", ".venv/.installed", f"BIN={BIN}",
            f"CONFIG={workdir / 'config' / 'sim.yaml'}", f"MQTT_PORT={broker.port}",
            f"WS_PORT={broker.websockets_port}", "run",
        ]  # fmt: skip
    words = shlex.split(line)
    if words[0] not in ("mosquitto_sub", "mosquitto_pub"):
        return line  # as written: redirections and pipes stay the shell's
    words[1:1] = ["-p", str(broker.port)]
    return shlex.join(words)


def test_readme_console_commands_work_as_written(workdir: Path, mosquitto: MosquittoBroker) -> None:
    commands = readme_commands()
    assert commands[0].line == "make run", "the README starts with `make run`"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    probe = MqttProbe(mosquitto.host, mosquitto.port)
    background: list[tuple[Command, subprocess.Popen[str]]] = []
    heard: dict[str, str] = {}  # what a background subscriber printed before the next command
    failures: list[str] = []
    try:
        for command in commands:
            run = _shell_line(command, mosquitto, workdir)
            if command.line == "make run" or command.background:
                process = subprocess.Popen(
                    run, cwd=workdir, env=env, shell=isinstance(run, str), text=True,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
                background.append((command, process))
                if command.line == "make run":
                    _wait_online(probe, background)
                elif command.line.startswith("mosquitto_sub"):
                    heard[command.line] = _subscribed(process)
                continue
            done = subprocess.run(
                run, cwd=workdir, env=env, shell=True, capture_output=True, text=True,
                timeout=2 * WAIT_S, check=False,
            )  # fmt: skip
            out, err = done.stdout.splitlines(), done.stderr.splitlines()
            if command.expected and _matches(command.expected, err):
                ok = done.returncode != 0  # the README shows an error: it must fail
            else:
                shown = not command.expected or _matches(command.expected, out)
                ok = done.returncode == 0 and shown
            if not ok:
                failures.append(
                    f"$ {command.line}\n  exit {done.returncode}\n  stdout: {done.stdout}\n"
                    f"  stderr: {done.stderr}\n  expected: {command.expected}"
                )
        if any(command.line.startswith("armd leader") for command, _ in background):
            # Teleoperation: the follower takes the leader's stream and goes where the hand put
            # the leader (its base at 0.5 rad) before the leader is stopped
            probe.wait_status("ur5-leader", final=False, timeout_s=START_S)
            probe.wait_state(
                lambda s: abs(s["joints"]["shoulder_pan_joint"]["position"] - 0.5) < 0.01,
                what="the follower where the leader is",
            )
        outputs = _stop(background)  # make run last: Ctrl-C, as the README says
        outputs = {line: heard.get(line, "") + out for line, out in outputs.items()}
        probe.wait_availability("offline", since=0)
    finally:
        _stop(background)
        probe.close()
    assert not failures, "\n\n".join(failures)
    subscriber = next(out for line, out in outputs.items() if line.startswith("mosquitto_sub"))
    for goal_id in ("g1", "g2"):  # each got its statuses (the e-stop right after may abort them)
        assert re.search(rf'goal/status {{"id": ?"{goal_id}"', subscriber), subscriber
    assert "armd/ur5-sim/state" not in subscriber, "the README's subscription shows telemetry"
    leader = next(out for line, out in outputs.items() if line.startswith("armd leader"))
    assert '"status": "accepted"' in leader, leader  # Teleoperation: the follower took the stream
    assert "stream ended:" in leader, leader


def _wait_online(probe: MqttProbe, background: list[tuple[Command, subprocess.Popen[str]]]) -> None:
    """Wait for `make run`'s daemon to be online; if it is not, fail with what `make run` said."""
    try:
        probe.wait_availability("online", timeout_s=START_S)
    except AssertionError as exc:
        said = _stop(background).get("make run", "")
        raise AssertionError(f"{exc}\n`make run` said:\n{said[-4000:]}") from None


def _subscribed(process: subprocess.Popen[str]) -> str:
    """The first line a background ``mosquitto_sub`` prints: the retained availability, so it
    has subscribed. A reader types the next command seconds later; the test waits for this
    instead, or on a busy machine the next command's statuses could come before it subscribed."""
    assert process.stdout is not None
    fd, data = process.stdout.fileno(), b""  # read as `communicate` does: past the text buffer
    deadline = time.monotonic() + START_S
    while (
        b"\n" not in data and select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]
    ):
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode()  # without the line, the output the README shows is said missing later


def _stop(background: list[tuple[Command, subprocess.Popen[str]]]) -> dict[str, str]:
    """Ctrl-C to each background command, the last started first; their output by command."""
    outputs = {}
    while background:
        command, process = background.pop()
        os.killpg(process.pid, signal.SIGINT)
        outputs[command.line], _ = process.communicate(timeout=WAIT_S)
    return outputs
