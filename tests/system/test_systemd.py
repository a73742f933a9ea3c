"""The files under systemd/: the unit passes ``systemd-analyze verify`` (where it is installed)
and agrees with the daemon (notify protocol, lock file, shutdown budget, numba cache), and the
udev rule is well formed. The notify messages themselves are tested against the running daemon
in test_daemon.py."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from armd.config.broker import MqttSettings
from armd.config.load import load_config
from armd.daemon.process import SHUTDOWN_STOP_TIMEOUT_S
from tests.system.helpers import ROOT, UNIT, unit_seconds, unit_settings, write_config

RULES = ROOT / "systemd" / "99-armd-dynamixel.rules"
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (apt install systemd)"
)


def unit_with_real_binary(directory: Path, text: str | None = None) -> Path:
    """A copy of the unit whose ExecStart runs this environment's `armd` (verify refuses a unit
    whose binary is missing, and /usr/local/bin/armd is only there once installed)."""
    armd = Path(sys.executable).parent / "armd"
    assert armd.exists(), f"{armd}: the console script is missing (pip install -e .)"
    text = UNIT.read_text(encoding="utf-8") if text is None else text
    copy = directory / "armd.service"  # verify derives the unit's name from the file name
    copy.write_text(
        text.replace("ExecStart=/usr/local/bin/armd ", f"ExecStart={armd} "), encoding="utf-8"
    )
    return copy


def verify(unit: Path) -> str:
    """Everything ``systemd-analyze verify`` says: any output is a problem (an unknown key is only
    a warning and leaves the exit code 0)."""
    assert SYSTEMD_ANALYZE is not None
    result = subprocess.run(
        [SYSTEMD_ANALYZE, "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = (result.stdout + result.stderr).strip()
    return output or ("" if result.returncode == 0 else f"exit code {result.returncode}")


@needs_systemd_analyze
def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    assert verify(unit_with_real_binary(tmp_path)) == ""


@needs_systemd_analyze
def test_verify_would_report_a_mistake(tmp_path: Path) -> None:
    """The check above has teeth: a misspelt key is reported."""
    text = UNIT.read_text(encoding="utf-8").replace("WatchdogSec=", "WachdogSec=")
    assert "WachdogSec" in verify(unit_with_real_binary(tmp_path, text))


@needs_systemd_analyze
def test_unit_sandboxing_keeps_the_exposure_low(tmp_path: Path) -> None:
    assert SYSTEMD_ANALYZE is not None
    unit = unit_with_real_binary(tmp_path)
    result = subprocess.run(
        [SYSTEMD_ANALYZE, "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found = re.search(r"Overall exposure level for armd\.service: (\d+\.\d+)", result.stdout)
    if found is None:
        pytest.skip(f"systemd-analyze security --offline is not supported here: {result.stderr}")
    # 0 = fully sandboxed ... 10 = unprotected; what remains is what armd needs (network,
    # serial devices, supplementary group, W+X memory for numba).
    assert float(found.group(1)) <= 3.0, result.stdout


def test_unit_speaks_the_daemons_notify_protocol() -> None:
    service = unit_settings()["Service"]
    assert service["Type"] == ["notify"]  # READY=1 after the first valid read
    assert service["NotifyAccess"] == ["main"]
    # armd pings every WATCHDOG_USEC / 2 from its control loop; a stall of a second is a fault
    # long before the watchdog fires, so the watchdog only catches a dead loop.
    assert 1.0 <= unit_seconds("WatchdogSec") <= 10.0
    assert service["Restart"] == ["on-failure"]
    assert unit_seconds("RestartSec") > 0


def test_unit_leaves_time_for_a_clean_stop() -> None:
    # SIGTERM: the motion stops (bounded by SHUTDOWN_STOP_TIMEOUT_S), then the MQTT bridge
    # flushes its statuses and publishes offline (bounded by its shutdown timeout).
    budget = SHUTDOWN_STOP_TIMEOUT_S + MqttSettings(arm_name="x").shutdown_timeout_s
    assert unit_seconds("TimeoutStopSec") > budget


def test_unit_runs_the_installed_command_on_the_system_config() -> None:
    (command,) = unit_settings()["Service"]["ExecStart"]
    assert shlex.split(command) == ["/usr/local/bin/armd", "run", "--config", "/etc/armd/armd.yaml"]


def test_unit_runs_as_armd_with_serial_access() -> None:
    service = unit_settings()["Service"]
    assert service["User"] == ["armd"]
    assert service["Group"] == ["armd"]
    assert "dialout" in service["SupplementaryGroups"][0].split()
    assert service["DevicePolicy"] == ["closed"]
    assert {"char-ttyUSB rw", "char-ttyACM rw"} <= set(service["DeviceAllow"])
    assert service.get("PrivateDevices", ["no"]) == ["no"]  # it would hide the serial ports
    families = {f for value in service["RestrictAddressFamilies"] for f in value.split()}
    assert {"AF_UNIX", "AF_INET", "AF_INET6", "AF_CAN"} <= families
    assert "PrivateNetwork" not in service  # CAN interfaces live in the host's namespace
    assert "MemoryDenyWriteExecute" not in service  # numba's JIT maps executable memory
    assert service["NoNewPrivileges"] == ["yes"]
    assert service["ProtectSystem"] == ["strict"]


def test_unit_provides_the_default_lock_directory(tmp_path: Path) -> None:
    config = write_config(tmp_path, 1883, {"lock_file": None})
    lock_file = load_config(config).lock_file
    (runtime,) = unit_settings()["Service"]["RuntimeDirectory"]
    assert lock_file.parent == Path("/run") / runtime, (lock_file, runtime)


def test_unit_gives_numba_a_writable_cache() -> None:
    service = unit_settings()["Service"]
    (cache,) = service["CacheDirectory"]
    assignments = [item for value in service["Environment"] for item in shlex.split(value)]
    environment = dict(item.split("=", 1) for item in assignments)
    assert environment["NUMBA_CACHE_DIR"] == f"/var/cache/{cache}"


# -- the udev rule --------------------------------------------------------------------------------

_RULE_TOKEN = re.compile(r'\s*([A-Z_]+)(?:\{([^}]+)\})?\s*(==|!=|\+=|-=|:=|=)\s*"([^"]*)"\s*(,|$)')
_MATCH_KEYS = {
    *("ACTION", "SUBSYSTEM", "SUBSYSTEMS", "DRIVER", "DRIVERS", "KERNEL", "ATTR", "ATTRS", "ENV")
}
_ASSIGN_KEYS = {"ATTR", "ENV", "GROUP", "MODE", "OWNER", "SYMLINK", "TAG", "RUN"}


def udev_rules() -> list[list[tuple[str, str | None, str, str]]]:
    """The rules as lists of (key, attribute, operator, value); fails on a malformed line."""
    rules = []
    for number, line in enumerate(RULES.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        tokens, position = [], 0
        while position < len(line):
            token = _RULE_TOKEN.match(line, position)
            assert token is not None, f"{RULES.name}:{number}: cannot parse {line[position:]!r}"
            key, attribute, operator, value, _ = token.groups()
            known = _MATCH_KEYS if operator in ("==", "!=") else _ASSIGN_KEYS
            assert key in known, f"{RULES.name}:{number}: {key}{operator} is not used like this"
            tokens.append((key, attribute, operator, value))
            position = token.end()
        rules.append(tokens)
    return rules


def test_udev_rule_sets_the_u2d2_latency_timer_to_1_ms() -> None:
    latency = [r for r in udev_rules() if ("ATTR", "latency_timer", "=", "1") in r]
    assert len(latency) == 1
    (rule,) = latency
    # the attribute lives on the usb-serial device the FTDI driver creates (not on the tty)
    assert ("SUBSYSTEM", None, "==", "usb-serial") in rule
    assert ("DRIVER", None, "==", "ftdi_sio") in rule
    assert ("ATTRS", "idVendor", "==", "0403") in rule
    assert ("ATTRS", "idProduct", "==", "6014") in rule


def test_udev_rule_gives_the_dialout_group_the_serial_port() -> None:
    tty = [r for r in udev_rules() if ("SUBSYSTEM", None, "==", "tty") in r]
    assert len(tty) == 1
    (rule,) = tty
    assert ("GROUP", None, "=", "dialout") in rule
    assert ("MODE", None, "=", "0660") in rule
    assert ("ATTRS", "idVendor", "==", "0403") in rule
    assert "dialout" in unit_settings()["Service"]["SupplementaryGroups"][0].split()
