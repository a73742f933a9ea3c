"""The systemd notify protocol (``sd_notify``), without dependencies.

systemd passes the address of a datagram socket in ``NOTIFY_SOCKET``: a filesystem path, or an
abstract-namespace name written with a leading ``@``. Each message is one datagram of
``KEY=value`` lines. See ``man sd_notify``.

Notification is best effort: `SystemdNotifier` never raises into its caller and never blocks (a
full socket buffer drops the message); the first failure is logged, later ones are not. Without
``NOTIFY_SOCKET`` (not started by systemd, or ``Type=`` is not ``notify``) every call is a no-op.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Mapping

__all__ = ["SystemdNotifier"]

_log = logging.getLogger(__name__)


class SystemdNotifier:
    """Sends ``READY=1``, ``WATCHDOG=1``, ``STATUS=...`` and ``STOPPING=1`` to systemd.

    `environ` defaults to `os.environ`; it is read once, at construction. Call `close` when done
    (also usable as a context manager). Thread-safe.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self._address = _address(env.get("NOTIFY_SOCKET", ""))
        self._watchdog_s = _watchdog_interval_s(env)
        self._socket: socket.socket | None = None
        self._failed = False
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """True when a notify socket was given (the service runs under systemd)."""
        return self._address is not None

    def ready(self, status: str | None = None) -> None:
        """The service finished starting up (``Type=notify``)."""
        self._send("READY=1", status)

    def watchdog(self) -> None:
        """Keep-alive for ``WatchdogSec=``: send it at least every `watchdog_interval_s` / 2."""
        self._send("WATCHDOG=1")

    def status(self, text: str) -> None:
        """A one-line status shown by ``systemctl status`` (newlines are replaced by spaces)."""
        self._send(None, text)

    def stopping(self, status: str | None = None) -> None:
        """The service is beginning its shutdown."""
        self._send("STOPPING=1", status)

    def watchdog_interval_s(self) -> float | None:
        """The watchdog timeout systemd expects (``WATCHDOG_USEC``), in seconds; None when the
        watchdog is off or meant for another process (``WATCHDOG_PID``)."""
        return self._watchdog_s

    def close(self) -> None:
        with self._lock:
            if self._socket is not None:
                self._socket.close()
                self._socket = None

    def __enter__(self) -> SystemdNotifier:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _send(self, field: str | None, status: str | None = None) -> None:
        if self._address is None:
            return
        lines = [field] if field else []
        if status is not None:
            lines.append("STATUS=" + " ".join(status.splitlines()))
        message = "\n".join(lines).encode("utf-8", errors="replace")
        try:
            with self._lock:
                if self._socket is None:
                    self._socket = socket.socket(
                        socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC
                    )
                    self._socket.setblocking(False)
                self._socket.sendto(message, self._address)
        except OSError as exc:
            if not self._failed:
                self._failed = True
                _log.warning("systemd notification to %r failed: %s", self._address, exc)


def _address(value: str) -> str | bytes | None:
    if not value:
        return None
    if value.startswith("@"):
        return b"\0" + value[1:].encode()  # abstract namespace (Linux)
    return value


def _watchdog_interval_s(env: Mapping[str, str]) -> float | None:
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
        pid = int(env["WATCHDOG_PID"]) if env.get("WATCHDOG_PID") else os.getpid()
    except ValueError:
        return None
    if usec <= 0 or pid != os.getpid():
        return None
    return usec / 1e6
