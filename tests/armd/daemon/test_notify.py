"""The systemd notify protocol against a real datagram socket standing in for systemd."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from armd.daemon.notify import SystemdNotifier


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """A bound AF_UNIX datagram socket and its path, as systemd would create."""
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(10.0)
        yield sock, str(path)


def receive(sock: socket.socket) -> str:
    return sock.recv(4096).decode()


def test_messages_arrive_on_a_path_socket(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    with SystemdNotifier({"NOTIFY_SOCKET": path}) as notifier:
        assert notifier.enabled
        notifier.ready()
        assert receive(sock) == "READY=1"
        notifier.watchdog()
        assert receive(sock) == "WATCHDOG=1"
        notifier.status("holding at 250 Hz")
        assert receive(sock) == "STATUS=holding at 250 Hz"
        notifier.stopping()
        assert receive(sock) == "STOPPING=1"


def test_status_can_ride_along_and_is_one_line(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    with SystemdNotifier({"NOTIFY_SOCKET": path}) as notifier:
        notifier.ready(status="ready")
        assert receive(sock) == "READY=1\nSTATUS=ready"
        notifier.status("fault:\njoint 'elbow'")
        assert receive(sock) == "STATUS=fault: joint 'elbow'"


def test_abstract_namespace_socket() -> None:
    name = f"armd-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(10.0)
        with SystemdNotifier({"NOTIFY_SOCKET": "@" + name}) as notifier:
            notifier.ready()
            assert receive(sock) == "READY=1"


def test_without_notify_socket_everything_is_a_no_op() -> None:
    notifier = SystemdNotifier({})
    assert not notifier.enabled
    notifier.ready()
    notifier.watchdog()
    notifier.status("x")
    notifier.stopping()
    assert notifier.watchdog_interval_s() is None
    notifier.close()


def test_a_missing_socket_never_raises_and_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    notifier = SystemdNotifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})
    with caplog.at_level(logging.WARNING, logger="armd.daemon.notify"):
        for _ in range(3):
            notifier.watchdog()
    notifier.close()
    assert len(caplog.records) == 1
    assert "gone.sock" in caplog.records[0].getMessage()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"WATCHDOG_USEC": "2000000"}, 2.0),
        ({"WATCHDOG_USEC": "500000", "WATCHDOG_PID": str(os.getpid())}, 0.5),
        ({"WATCHDOG_USEC": "500000", "WATCHDOG_PID": str(os.getpid() + 1)}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval(env: dict[str, str], expected: float | None) -> None:
    interval = SystemdNotifier(env).watchdog_interval_s()
    if expected is None:
        assert interval is None
    else:
        assert interval == pytest.approx(expected, abs=1e-9)


def test_reads_the_process_environment_by_default(
    listener: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, path = listener
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    with SystemdNotifier() as notifier:
        notifier.ready()
    assert receive(sock) == "READY=1"
