"""The config's ``mqtt`` section resolved: the password read from its file, the TLS files checked
to be readable (relative to the config file's folder), and the `MqttSettings` they make with the
section's options. Errors name the file, never the password.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from armd.config.broker import MqttSettings
from armd.config.checks import Problems, resolve_path
from armd.config.schema import ArmConfig, Loc, MqttConfig

__all__ = ["TlsSetup", "mqtt_files", "mqtt_settings"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TlsSetup:
    """TLS files, resolved against the config file's folder and checked to be readable."""

    ca_file: Path | None
    cert_file: Path | None
    key_file: Path | None


def mqtt_settings(
    config: ArmConfig, password: SecretStr | None, tls: TlsSetup | None
) -> MqttSettings:
    """The broker settings of `config`'s ``mqtt`` section, with the password and TLS files that
    `mqtt_files` read and checked."""
    m = config.mqtt
    return MqttSettings(
        arm_name=config.name,
        host=m.host,
        port=m.port,
        client_id=m.client_id or f"armd-{config.name}",
        keepalive_s=m.keepalive_s,
        username=m.username,
        password=password,
        tls=tls is not None,
        tls_ca_file=tls.ca_file if tls else None,
        tls_cert_file=tls.cert_file if tls else None,
        tls_key_file=tls.key_file if tls else None,
        reconnect_min_s=m.reconnect_min_s,
        reconnect_max_s=m.reconnect_max_s,
    )


def mqtt_files(
    mqtt: MqttConfig | None, base: Path, problems: Problems
) -> tuple[SecretStr | None, TlsSetup | None]:
    """The password read from its file, and the TLS files, checked to be readable."""
    if mqtt is None:
        return None, None
    password = None
    if mqtt.password_file is not None:
        password = _read_password(resolve_path(base, mqtt.password_file), problems)
    tls = None
    if mqtt.tls is not None:
        files = [
            _readable_file(base, getattr(mqtt.tls, key), ("mqtt", "tls", key), problems)
            for key in ("ca_file", "cert_file", "key_file")
        ]
        tls = TlsSetup(*files)
    return password, tls


def _readable_file(base: Path, raw: str | None, loc: Loc, problems: Problems) -> Path | None:
    if raw is None:
        return None
    path = resolve_path(base, raw)
    if not path.is_file():
        problems.add(loc, f"{path}: no such file")
    elif not os.access(path, os.R_OK):
        problems.add(loc, f"{path}: not readable by this user")
    return path


def _read_password(path: Path, problems: Problems) -> SecretStr | None:
    """The file's first line. Errors name the file, never its content."""
    loc = ("mqtt", "password_file")
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        problems.add(loc, f"{path}: no such file")
        return None
    except OSError as exc:
        problems.add(loc, f"{path}: cannot read: {exc.strerror}")
        return None
    except UnicodeDecodeError:
        problems.add(loc, f"{path}: not UTF-8 text")
        return None
    password = text.splitlines()[0] if text else ""
    if not password:
        problems.add(loc, f"{path}: the file is empty")
        return None
    if path.stat().st_mode & 0o004:  # the path is safe to log, the content never
        _log.warning("%s: the MQTT password file is readable by every user; chmod o-r it", path)
    return SecretStr(password)
