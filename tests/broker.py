"""A real Mosquitto broker for tests, on free loopback ports, with a generated config.

    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()            # waits until the listener accepts connections
    ...                       # connect to broker.host:broker.port
    broker.kill()             # SIGKILL: clients see the connection drop
    broker.start()            # again, on the same port(s)
    broker.stop()             # SIGTERM, then wait

Options:
- ``extra_config``: global config lines, e.g. ``["max_queued_messages 100000"]`` (by default
  Mosquitto drops QoS 1 messages beyond 1000 queued per client);
- ``persistence``: sessions and queued messages survive `stop` + `start` (not `kill`);
- ``password_file`` (``make_password_file``): anonymous clients are refused;
- ``tls`` (``make_tls_files`` makes a CA, a server certificate for 127.0.0.1/localhost and a
  client certificate with ``openssl``): a TLS listener on ``tls_port``, optionally requiring a
  client certificate;
- ``websockets``: an MQTT-over-WebSockets listener on ``websockets_port`` (what a browser, e.g.
  the dashboard, connects to: ``ws://127.0.0.1:<websockets_port>``), serving the files of
  ``http_dir`` over HTTP when given (the dashboard's build, as `make run` does).

Every listener is on 127.0.0.1 only (the WebSockets one with ``socket_domain ipv4``: without it
Mosquitto 2.0.11 binds it to every address, docs/dashboard.md).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tests.system.listening import Endpoint, listening

__all__ = [
    "MOSQUITTO",
    "MosquittoBroker",
    "TlsFiles",
    "free_port",
    "free_ports",
    "make_password_file",
    "make_tls_files",
]

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
HOST = "127.0.0.1"
START_TIMEOUT_S = 10.0


START_ATTEMPTS = 3  # a broker on ports it chose itself picks new ones when one was taken


def free_ports(count: int) -> tuple[int, ...]:
    """`count` distinct TCP ports on the loopback interface that nothing listens on right now.
    They are bound at the same time: one at a time, the kernel may hand out a port it has just
    released again. Another process may still take one before it is used (`MosquittoBroker`
    then picks again)."""
    with contextlib.ExitStack() as stack:
        sockets = [
            stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            for _ in range(count)
        ]
        for sock in sockets:
            sock.bind((HOST, 0))
        return tuple(int(sock.getsockname()[1]) for sock in sockets)


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now."""
    return free_ports(1)[0]


class PortTakenError(RuntimeError):
    """Mosquitto exited on start: one of its ports was in use."""


@dataclass(frozen=True)
class TlsFiles:
    """PEM files made by `make_tls_files`."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


class MosquittoBroker:
    """One Mosquitto process; `start` may be called again after `stop` or `kill`, on the same
    ports. Also a context manager (start on enter, stop on exit)."""

    def __init__(
        self,
        workdir: Path,
        *,
        port: int | None = None,
        password_file: Path | None = None,
        tls: TlsFiles | None = None,
        require_client_certificate: bool = False,
        persistence: bool = False,
        websockets: bool = False,
        http_dir: Path | None = None,
        extra_config: Sequence[str] = (),
    ) -> None:
        self.workdir = workdir
        self.host = HOST
        self._given_port = port
        self.port, self.tls_port, self.websockets_port = self._pick_ports(port, tls, websockets)
        if http_dir is not None and not websockets:
            raise ValueError("http_dir is served on the WebSockets listener: websockets=True")
        self.http_dir = http_dir
        self.password_file = password_file
        self.tls = tls
        self.require_client_certificate = require_client_certificate
        self.persistence = persistence
        self.extra_config = tuple(extra_config)
        self.log_path = workdir / "mosquitto.log"
        self.output_path = workdir / "mosquitto.out"  # start-up errors before logging is set up
        self.config_path = workdir / "mosquitto.conf"
        self._logged_before: dict[Path, int] = {}  # the files' sizes before this start
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs."""
        return self._process.pid if self.running and self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @staticmethod
    def _pick_ports(
        port: int | None, tls: TlsFiles | None, websockets: bool
    ) -> tuple[int, int | None, int | None]:
        """The listeners' ports: `port` if given, free ones otherwise (distinct)."""
        ports = list(free_ports(3))
        return (
            port if port is not None else ports.pop(),
            ports.pop() if tls is not None else None,
            ports.pop() if websockets else None,
        )

    def start(self) -> None:
        """Start the broker and wait until every listener accepts TCP connections. At its first
        start on ports it chose itself, a port another process took since it was picked is
        picked again (`START_ATTEMPTS` times in all); later starts keep the ports (its clients
        know them)."""
        first = self._process is None and not self.config_path.exists()
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self._start()
                return
            except PortTakenError:
                if not first or self._given_port is not None or attempt == START_ATTEMPTS:
                    raise
                self.port, self.tls_port, self.websockets_port = self._pick_ports(
                    None, self.tls, self.websockets_port is not None
                )

    def _start(self) -> None:
        if self.running:
            raise RuntimeError("mosquitto is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self._config(), encoding="utf-8")
        self._logged_before = {path: _size(path) for path in (self.output_path, self.log_path)}
        with self.output_path.open("ab") as output:
            self._process = subprocess.Popen(
                [MOSQUITTO, "-c", str(self.config_path)],
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        for port in (self.port, self.tls_port, self.websockets_port):
            if port is not None:
                self._wait_listening(port, deadline)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then wait (SIGKILL if it does not exit within `timeout_s`)."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout_s)
        self._process = None

    def freeze(self, frozen: bool = True) -> None:
        """SIGSTOP (or SIGCONT when `frozen` is false): the broker's connections stay open but
        nothing answers, as on a hung or overloaded broker host."""
        if self._process is None or self._process.poll() is not None:
            raise RuntimeError("mosquitto is not running")
        self._process.send_signal(signal.SIGSTOP if frozen else signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: the broker vanishes without a word to its clients."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait(10.0)
        self._process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        """The broker's output and log so far (useful in assertion messages)."""
        text = ""
        for path in (self.output_path, self.log_path):
            with contextlib.suppress(FileNotFoundError):
                text += path.read_text(encoding="utf-8", errors="replace")
        return text

    def __enter__(self) -> MosquittoBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _config(self) -> str:
        lines = [
            f"persistence {'true' if self.persistence else 'false'}",
            f"persistence_location {self.workdir}/",
            f"log_dest file {self.log_path}",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            "connection_messages true",
            f"allow_anonymous {'false' if self.password_file else 'true'}",
        ]
        if os.geteuid() == 0:  # as root, mosquitto would switch to a user who cannot read tmp
            lines.append(f"user {pwd.getpwuid(0).pw_name}")
        if self.password_file is not None:
            lines.append(f"password_file {self.password_file}")
        lines += self.extra_config  # global options, e.g. "max_queued_messages 100000"
        lines.append(f"listener {self.port} {self.host}")
        if self.tls is not None:
            lines += [
                f"listener {self.tls_port} {self.host}",
                f"cafile {self.tls.ca_cert}",
                f"certfile {self.tls.server_cert}",
                f"keyfile {self.tls.server_key}",
                f"require_certificate {'true' if self.require_client_certificate else 'false'}",
            ]
        if self.websockets_port is not None:
            lines += [
                f"listener {self.websockets_port} {self.host}",
                "protocol websockets",
                "socket_domain ipv4",
            ]
            if self.http_dir is not None:
                lines.append(f"http_dir {self.http_dir}")
        return "\n".join(lines) + "\n"

    def _port_taken(self) -> bool:
        """Whether this start's output or log says a port was in use."""
        for path, before in self._logged_before.items():
            with contextlib.suppress(FileNotFoundError), path.open("rb") as file:
                file.seek(before)
                if b"Address already in use" in file.read():
                    return True
        return False

    def _wait_listening(self, port: int, deadline: float) -> None:
        """Until Mosquitto itself listens on `port` (a connection alone could reach another
        process that took the port)."""
        while True:
            process = self._process
            if process is None or process.poll() is not None:
                error = PortTakenError if self._port_taken() else RuntimeError
                raise error(f"mosquitto exited on start:\n{self.log()}")
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # it exited
                ours = listening(process.pid)
                if Endpoint("tcp", self.host, port) in ours:
                    return
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(
                    f"mosquitto is not listening on {self.host}:{port}:\n{self.log()}"
                )
            time.sleep(0.02)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def make_password_file(path: Path, users: dict[str, str]) -> Path:
    """A Mosquitto password file with hashed passwords, made with ``mosquitto_passwd``."""
    tool = shutil.which("mosquitto_passwd")
    if tool is None:
        raise RuntimeError("mosquitto_passwd is not installed")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("", encoding="utf-8")
    path.chmod(0o600)
    for user, password in users.items():
        subprocess.run([tool, "-b", str(path), user, password], check=True, capture_output=True)
    return path


def make_tls_files(directory: Path) -> TlsFiles:
    """A throw-away CA, a server certificate for 127.0.0.1 and localhost, and a client
    certificate, all made with ``openssl`` (EC P-256 keys, valid for a day)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(
        ca_cert=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
    )
    ca_key = directory / "ca.key"
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", ca_key)
    _openssl(
        "req", "-x509", "-new", "-key", ca_key, "-sha256", "-days", "1",
        "-subj", "/CN=armd test CA", "-out", files.ca_cert,
    )  # fmt: skip
    _signed(directory, "server", files.server_key, files.server_cert, ca_key, files.ca_cert,
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth")  # fmt: skip
    _signed(directory, "client", files.client_key, files.client_cert, ca_key, files.ca_cert,
            "extendedKeyUsage=clientAuth")  # fmt: skip
    return files


def _signed(
    directory: Path, name: str, key: Path, cert: Path, ca_key: Path, ca_cert: Path, ext: str
) -> None:
    csr = directory / f"{name}.csr"
    extfile = directory / f"{name}.ext"
    extfile.write_text(ext + "\n", encoding="utf-8")
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
    _openssl("req", "-new", "-key", key, "-subj", f"/CN=armd test {name}", "-out", csr)
    _openssl(
        "x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial",
        "-days", "1", "-sha256", "-extfile", extfile, "-out", cert,
    )  # fmt: skip


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)
