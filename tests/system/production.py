"""Mosquitto as configured for production, for the system tests: config/mosquitto/mosquitto.conf
and armd.acl loaded as they are, only the installed paths and the well-known ports replaced by
the test's own (and ``user root`` added when the test runs as root: Mosquitto would switch to a
user who cannot read the test's files). Used by test_security.py and test_bridge.py."""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.broker import MosquittoBroker, TlsFiles, make_password_file
from tests.system.helpers import ROOT, Rig, start_rig

__all__ = [
    "ACL",
    "BRIDGE",
    "MOSQUITTO_CONFIG",
    "OPERATOR",
    "ProductionBroker",
    "SecuredArm",
    "password_file",
    "secured_arm",
]

MOSQUITTO_CONFIG = ROOT / "config" / "mosquitto" / "mosquitto.conf"
ACL = ROOT / "config" / "mosquitto" / "armd.acl"
BRIDGE = ROOT / "config" / "mosquitto" / "bridge.conf"
OPERATOR = "operator"  # armd.acl's account that reads every arm and commands them
RECONNECT = {"reconnect_min_s": 0.2, "reconnect_max_s": 1.0}  # s: quick retries for the tests


class ProductionBroker(MosquittoBroker):
    """Mosquitto running config/mosquitto/mosquitto.conf with the test's files and free ports in
    place of the installed paths and the well-known ports; `appended` goes at the end of the
    config, where an included file would (e.g. a bridge: everything after its ``connection``
    line belongs to it)."""

    def __init__(
        self, workdir: Path, password_file: Path, tls: TlsFiles, appended: str = ""
    ) -> None:
        super().__init__(workdir, password_file=password_file, tls=tls)
        self.appended = appended

    def _config(self) -> str:
        assert self.password_file is not None
        assert self.tls is not None
        values = {
            "password_file": str(self.password_file),
            "acl_file": str(ACL),
            "persistence_location": f"{self.workdir}/",
            "log_dest": f"file {self.log_path}",
            "cafile": str(self.tls.ca_cert),
            "certfile": str(self.tls.server_cert),
            "keyfile": str(self.tls.server_key),
        }
        listeners = {"1883": f"{self.port} {self.host}", "8883": f"{self.tls_port} {self.host}"}
        lines = []
        for original in MOSQUITTO_CONFIG.read_text(encoding="utf-8").splitlines():
            option, _, value = original.partition(" ")
            if option in values:
                lines.append(f"{option} {values.pop(option)}")
            elif option == "listener":
                lines.append(f"listener {listeners.pop(value.split()[0])}")
            else:
                lines.append(original)
        assert not values, (
            f"{MOSQUITTO_CONFIG.name} no longer sets {sorted(values)}: adapt the test"
        )
        assert not listeners, f"{MOSQUITTO_CONFIG.name}: no listener on port(s) {sorted(listeners)}"
        lines += self.appended.splitlines()
        options = [line for line in lines if line.strip() and not line.startswith("#")]
        installed = [line for line in options if "/etc/" in line or "/var/" in line]
        assert not installed, f"paths the test does not replace: {installed}"
        if os.geteuid() == 0:
            lines.insert(0, f"user {pwd.getpwuid(0).pw_name}")
        return "\n".join(lines) + "\n"


def password_file(directory: Path, password: str) -> Path:
    """A daemon's ``mqtt.password_file``: the password on the first line, owner-only."""
    path = directory / "mqtt-password"
    directory.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(password + "\n", encoding="utf-8")
    return path


@dataclass(frozen=True)
class SecuredArm:
    """The daemon on a production broker; `passwords` of that broker's accounts (the arm's,
    the operator's)."""

    rig: Rig
    passwords: dict[str, str]


@contextlib.contextmanager
def secured_arm(
    directory: Path,
    arm: str,
    tls: TlsFiles,
    appended: str = "",
    overrides: Mapping[str, Any] | None = None,
) -> Iterator[SecuredArm]:
    """A `ProductionBroker` (`appended` to its config) whose accounts are the arm's and the
    operator's, with random passwords, and the daemon on the simulated arm named `arm` (its
    config with `overrides`), logged in with its account; the rig's probe logs in as the
    operator."""
    passwords = {user: secrets.token_urlsafe(24) for user in (arm, OPERATOR)}
    accounts = make_password_file(directory / "mosquitto" / "passwd", passwords)
    broker = ProductionBroker(directory / "mosquitto", accounts, tls, appended=appended)
    broker.start()
    try:
        secret = password_file(directory / "secrets", passwords[arm])
        mqtt = {"username": arm, "password_file": str(secret), **RECONNECT}
        rig = start_rig(
            directory,
            broker,
            overrides={"name": arm, "mqtt": mqtt, **(overrides or {})},
            probe_options={"arm": arm, "username": OPERATOR, "password": passwords[OPERATOR]},
        )
        try:
            yield SecuredArm(rig, passwords)
        finally:
            rig.close()
    finally:
        broker.stop()
