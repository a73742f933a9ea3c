"""How to reach the broker: `MqttSettings` (built once, by `armd.config.load.load_config`, for the
daemon and the command-line client alike), the `aiomqtt.Client` keywords they make, and the
reconnection backoff."""

from __future__ import annotations

import random
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import aiomqtt
from pydantic import SecretStr

from armd.errors import ConfigError

__all__ = ["MqttSettings", "connection_options", "reconnect_delay_s"]


@dataclass(frozen=True, slots=True)
class MqttSettings:
    """How to reach the broker. Times in seconds; TLS is used when `tls` is set or any TLS file
    is given (`tls_ca_file` None: the system's CAs)."""

    arm_name: str
    host: str = "localhost"
    port: int = 1883
    client_id: str | None = None  # default "armd-<arm_name>"
    keepalive_s: int = 30
    username: str | None = None
    password: SecretStr | str | None = field(default=None, repr=False)
    tls: bool = False
    tls_ca_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    reconnect_min_s: float = 0.5
    reconnect_max_s: float = 30.0
    timeout_s: float = 10.0  # CONNACK, SUBACK, PUBACK
    shutdown_timeout_s: float = 3.0
    status_queue_max: int = 10_000

    def __post_init__(self) -> None:
        if not self.arm_name or any(c in self.arm_name for c in "/+#\0"):
            raise ConfigError(f"mqtt: arm name {self.arm_name!r} is not a valid topic level")
        if not 0 < self.reconnect_min_s <= self.reconnect_max_s:
            raise ConfigError(
                f"mqtt: reconnect backoff [{self.reconnect_min_s}, {self.reconnect_max_s}] s "
                "must satisfy 0 < min <= max"
            )

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def password_text(self) -> str | None:
        """The password itself (the field keeps it out of reprs and logs)."""
        password = self.password
        return password.get_secret_value() if isinstance(password, SecretStr) else password

    @property
    def uses_tls(self) -> bool:
        return self.tls or any((self.tls_ca_file, self.tls_cert_file, self.tls_key_file))

    @property
    def tls_files(self) -> TlsFiles:
        """The TLS files as keywords of both paho's `tls_set` and aiomqtt's `TLSParameters`."""
        return TlsFiles(
            ca_certs=_text(self.tls_ca_file),
            certfile=_text(self.tls_cert_file),
            keyfile=_text(self.tls_key_file),
        )


class TlsFiles(TypedDict):
    ca_certs: str | None
    certfile: str | None
    keyfile: str | None


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


def connection_options(settings: MqttSettings) -> dict[str, Any]:
    """The broker address, credentials, TLS and socket options (TCP_NODELAY) of `settings` as
    `aiomqtt.Client` keywords (for `armd goal` and `armd leader`; the daemon's bridge gives the
    same settings to paho in `armd.api.session`)."""
    tls = None
    if settings.uses_tls:
        tls = aiomqtt.TLSParameters(**settings.tls_files)
    return {
        "hostname": settings.host,
        "port": settings.port,
        "username": settings.username,
        "password": settings.password_text,
        "tls_params": tls,
        # Nagle's algorithm would hold a small message until the broker acknowledges the one
        # before: a QoS 0 stream (no PUBACK to carry that acknowledgement) then leaves in bursts
        # at the rate the broker happens to send us something (25 Hz telemetry), tens of ms late
        "socket_options": ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
    }


def reconnect_delay_s(attempt: int, min_s: float, max_s: float, rng: random.Random) -> float:
    """The wait before reconnection attempt `attempt` (0 after a connection that was accepted):
    exponential from `min_s` up to `max_s`, with "equal jitter" (between half the ceiling and
    the ceiling, never below `min_s`) so that many daemons do not reconnect in step."""
    ceiling = min(max_s, min_s * 2.0 ** min(attempt, 64))
    return max(min_s, rng.uniform(ceiling / 2.0, ceiling))
