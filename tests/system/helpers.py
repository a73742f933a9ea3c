"""Helpers of the system tests: a config derived from config/sim.yaml, the daemon as a
subprocess, the `Rig` (broker + daemon + test client), a listener on a test ``NOTIFY_SOCKET`` and
a reader of the systemd unit.

Everything waits for conditions with generous timeouts; nothing asserts speed."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.broker import MosquittoBroker
from tests.system.probe import WAIT_S, MqttProbe

ROOT = Path(__file__).resolve().parents[2]
SIM_CONFIG = ROOT / "config" / "sim.yaml"
SIM_LEADER_CONFIG = ROOT / "config" / "sim_leader.yaml"
UNIT = ROOT / "systemd" / "armd.service"
START_S = 60.0  # daemon start-up (imports numpy and numba; compiles when the cache is cold)
# The simulated devices' watchdog (the sim driver's default, 0.1 s) trips when the control process
# commands nothing for that long: a fault, the documented answer to a stalled loop. Beside
# CPU-bound work this class of VM held a real-time control process up to 231 ms (the host:
# docs/performance.md), so the system tests' arms, which are not about the watchdog, get twice
# that; the tests that stall the loop on purpose stop it for longer.
SIM_WATCHDOG_S = 0.5
DAEMON_NICE = -10  # systemd/armd.service's Nice=
_SYSTEMD_VARIABLES = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"}


# -- configuration -------------------------------------------------------------------------------


def write_config(
    directory: Path, broker_port: int, overrides: Mapping[str, Any] | None = None
) -> Path:
    """config/sim.yaml with absolute model and collision geometry paths, the test broker's port,
    a lock file in `directory` and the devices' watchdog at `SIM_WATCHDOG_S`, deep-merged with
    `overrides` (a None value deletes a key); returns its path."""
    config = yaml.safe_load(SIM_CONFIG.read_text(encoding="utf-8"))
    config["model"] = str((SIM_CONFIG.parent / config["model"]).resolve())
    geometry = config["collision"]["geometry"]
    config["collision"]["geometry"] = str((SIM_CONFIG.parent / geometry).resolve())
    config["mqtt"]["port"] = broker_port
    config["lock_file"] = str(directory / "armd.lock")
    for device in config["drivers"]["sim"]["params"]["devices"].values():
        device["watchdog_s"] = SIM_WATCHDOG_S
    _merge(config, overrides or {})
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "armd.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def write_leader_config(
    directory: Path, broker_port: int, overrides: Mapping[str, Any] | None = None
) -> tuple[Path, Hand]:
    """config/sim_leader.yaml (a sim UR5 leader streaming joint to joint) like `write_config`:
    absolute model paths, the test broker's port, its lock file and hand file in `directory`,
    deep-merged with `overrides`. Returns its path and the `Hand` that moves its devices."""
    config = yaml.safe_load(SIM_LEADER_CONFIG.read_text(encoding="utf-8"))
    for section, key in ((config, "model"), (config["leader"], "follower_model")):
        section[key] = str((SIM_LEADER_CONFIG.parent / section[key]).resolve())
    config["mqtt"]["port"] = broker_port
    config["lock_file"] = str(directory / "leader.lock")
    hand = Hand(directory / "leader-hand.json")
    config["drivers"]["sim"]["params"]["hand_file"] = str(hand.path)
    _merge(config, overrides or {})
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "leader.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path, hand


class Hand:
    """Moves simulated devices whose torque is off through the sim driver's hand file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def put(self, **positions: float) -> None:
        """Put the named devices at these positions (rad at the shaft)."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(positions), encoding="utf-8")
        os.replace(tmp, self.path)  # whole, never half-written


def _merge(base: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    for key, value in overrides.items():
        if value is None:
            base.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


# -- the daemon ----------------------------------------------------------------------------------


class ArmdProcess:
    """``python -m armd run --config CONFIG`` as a subprocess; its output goes to `log_path`.

    `argv` replaces the command line (e.g. a shell wrapper), `env` adds environment variables
    (systemd's own are not inherited: pytest may itself run under systemd).
    """

    def __init__(
        self,
        config: Path,
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        argv: Sequence[str] | None = None,
    ) -> None:
        self.config = config
        self.log_path = log_path
        self.argv = list(argv) if argv is not None else armd_command("run", "--config", config)
        inherited = {k: v for k, v in os.environ.items() if k not in _SYSTEMD_VARIABLES}
        self.env = {**inherited, **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ArmdProcess:
        """Start it, favoured as systemd/armd.service runs it (``Nice=-10``; without the
        privilege, at the test's own niceness): a daemon at the niceness of CPU-bound neighbours
        falls behind a 100 Hz stream on a loaded machine, which the deployed one is not."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT
            )
        with contextlib.suppress(PermissionError):  # before it starts a thread: they inherit it
            os.setpriority(os.PRIO_PROCESS, self.process.pid, DAEMON_NICE)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def control_pid(self) -> int:
        """The pid of the daemon's control process (`armd.control.process`), its only child."""
        children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text(encoding="ascii")
        (child,) = children.split()
        return int(child)

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def wait(self, timeout_s: float = WAIT_S) -> int:
        """The exit code; fails the test when the daemon does not exit in time."""
        assert self.process is not None
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"armd did not exit within {timeout_s:g} s:\n{self.output()}"
            ) from None

    def stop(self, timeout_s: float = WAIT_S) -> int | None:
        """SIGTERM, wait, SIGKILL if needed (teardown: never raises)."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout_s)
        return process.returncode

    def output(self) -> str:
        with contextlib.suppress(FileNotFoundError):
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        return ""


def armd_command(*args: object) -> list[str]:
    return [sys.executable, "-m", "armd", *map(str, args)]


# -- the rig: broker, daemon, probe ------------------------------------------------------------


DIAGNOSTICS = pytest.StashKey[list[Callable[[], list[tuple[str, str]]]]]()


def attach_diagnostics(request: pytest.FixtureRequest, rig: Rig) -> None:
    """A failure of the requesting test reports `rig`'s logs (daemon, broker, MQTT messages)."""
    request.node.stash.setdefault(DIAGNOSTICS, []).append(rig.diagnostics)


@dataclass
class Rig:
    """A broker, a daemon on it and a test client subscribed to the arm's topics."""

    directory: Path
    broker: MosquittoBroker
    config: Path
    daemon: ArmdProcess
    probe: MqttProbe
    extra: list[ArmdProcess] = field(default_factory=list)

    def diagnostics(self) -> list[tuple[str, str]]:
        sections = [(f"armd output ({d.log_path.name})", d.output()) for d in self.processes()]
        sections.append(("mosquitto log", self.broker.log()[-8000:]))
        sections.append(("MQTT messages (latest)", self.probe.summary(40)))
        return sections

    def processes(self) -> list[ArmdProcess]:
        return [self.daemon, *self.extra]

    def close(self) -> None:
        for process in reversed(self.processes()):
            process.stop()
        self.probe.close()


def start_rig(
    directory: Path,
    broker: MosquittoBroker,
    *,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    wrapper: Sequence[str] = (),
    probe_options: Mapping[str, Any] | None = None,
    daemon_port: int | None = None,
) -> Rig:
    """Write the config, connect the probe, start the daemon (``wrapper`` + its command line)
    and wait until it is online and publishing ``state``. `probe_options` are keyword arguments
    of `MqttProbe` (credentials, a kept session); `daemon_port` points the daemon at another
    listener of the broker (e.g. its TLS port), the probe stays on ``broker.port``."""
    config = write_config(directory, daemon_port or broker.port, overrides)
    probe = MqttProbe(broker.host, broker.port, **(probe_options or {}))
    argv = [*wrapper, *armd_command("run", "--config", config)]
    daemon = ArmdProcess(config, directory / "armd.out", env=env, argv=argv)
    rig = Rig(directory, broker, config, daemon, probe)
    daemon.start()
    try:
        probe.wait_for(
            lambda: _started(rig),
            START_S,
            "the daemon to be online and publish state",
        )
    except AssertionError as exc:
        rig.close()
        details = "\n".join(f"--- {title}\n{text}" for title, text in rig.diagnostics())
        raise AssertionError(f"{exc}\n{details}") from None
    except BaseException:
        rig.close()
        raise
    return rig


def _started(rig: Rig) -> bool:
    if not rig.daemon.running:
        raise AssertionError(f"armd exited on start (exit code {rig.daemon.returncode})")
    return rig.probe.availability() == "online" and bool(rig.probe.on("state"))


# -- systemd notify ------------------------------------------------------------------------------


def status_modes(fields: Sequence[str]) -> list[str]:
    """The modes of the ``STATUS=mode: <mode>[, missed ticks: N]`` fields, in order."""
    return [m.group(1) for f in fields if (m := re.match(r"STATUS=mode: (\w+)", f))]


class NotifyListener:
    """A datagram socket standing in for systemd's ``NOTIFY_SOCKET``; records each datagram with
    its arrival time from a background thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.datagrams: list[tuple[float, str]] = []
        self._changed = threading.Condition()
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(str(path))
        self._socket.settimeout(0.1)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._receive, name="notify", daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._closed.is_set():
            try:
                data = self._socket.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            with self._changed:
                self.datagrams.append((time.monotonic(), data.decode("utf-8", "replace")))
                self._changed.notify_all()

    def messages(self) -> list[str]:
        with self._changed:
            return [text for _, text in self.datagrams]

    def fields(self) -> list[str]:
        """Every ``KEY=value`` line, in arrival order."""
        return [line for text in self.messages() for line in text.splitlines()]

    def wait_for(self, predicate: Callable[[list[str]], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        with self._changed:
            while not predicate(self.fields()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no {what} on NOTIFY_SOCKET; got {self.fields()}")
                self._changed.wait(min(remaining, 0.1))

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5.0)
        self._socket.close()


# -- the systemd unit ----------------------------------------------------------------------------


def unit_settings(path: Path = UNIT) -> dict[str, dict[str, list[str]]]:
    """A unit file as {section: {key: [values in order]}} (repeated keys accumulate)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}:{number}: not a setting: {raw!r}"
        assert current is not None, f"{path.name}:{number}: a setting before any section"
        assert not value.endswith("\\"), f"{path.name}:{number}: no continuation lines"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


_SECONDS = {"": 1.0, "ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0}


def unit_seconds(key: str, section: str = "Service") -> float:
    """A time span of the unit (``10s``, ``5min``, ``500ms``), in seconds."""
    (value,) = unit_settings()[section][key]
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        total += float(number) * _SECONDS[unit]
    return total
