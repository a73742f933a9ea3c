"""The serial port of a servo bus, and what is found out about it at open: whether it is a
pseudo-terminal (a simulated chain) and its USB adapter's latency timer. Every `SerialPort` method
blocks: the link calls them on its I/O thread only."""

from __future__ import annotations

import logging
import os
import select
from collections.abc import Callable
from typing import TypeVar

import serial

from drivers.errors import DriverIOError, DriverOpenError

__all__ = ["SerialPort", "is_pty", "latency_timer_s"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_PTY_SLAVE_MAJORS = range(136, 144)  # Unix98 pseudo-terminal slaves (/dev/pts/N), Linux


def is_pty(port: str) -> bool:
    """Whether `port` is a pseudo-terminal: a process on the other end, not a bus."""
    try:
        return os.major(os.stat(port).st_rdev) in _PTY_SLAVE_MAJORS
    except OSError:
        return False


def latency_timer_s(port: str) -> float:
    """The FTDI latency timer of a USB serial port (0 when there is none, e.g. a pty)."""
    name = os.path.basename(os.path.realpath(port))
    try:
        with open(f"/sys/bus/usb-serial/devices/{name}/latency_timer") as file:
            return int(file.read()) / 1000.0
    except (OSError, ValueError):
        return 0.0


class SerialPort:
    """The serial port. Every method blocks: call them on the link's I/O thread only."""

    def __init__(self, port: str, baudrate: int) -> None:
        self.port = port
        try:
            self._serial = serial.Serial(
                port, baudrate, timeout=0, write_timeout=1.0, exclusive=True
            )
        except (serial.SerialException, OSError, ValueError) as exc:
            raise DriverOpenError(f"port {port!r} at {baudrate} baud: cannot open: {exc}") from exc

    def transact(self, request: bytes, collect: Callable[[SerialPort], T]) -> T:
        """Drop what is waiting (a late reply to an earlier transaction), send `request`, then
        `collect(self)` the replies. Raises DriverIOError."""
        try:
            stale = self._serial.in_waiting
            if stale:
                self._serial.read(stale)
            self._serial.write(request)
            return collect(self)
        except (serial.SerialException, OSError) as exc:
            raise DriverIOError(f"port {self.port!r}: {exc}") from exc

    def read(self, wait_s: float) -> bytes:
        """What has arrived, waiting at most `wait_s` for a first byte."""
        select.select([self._serial.fileno()], [], [], wait_s)
        return bytes(self._serial.read(self._serial.in_waiting or 1))

    def read_waiting(self) -> bytes:
        """What has arrived, without waiting."""
        return bytes(self._serial.read(self._serial.in_waiting or 0))

    def close(self) -> None:
        try:
            self._serial.close()
        except (serial.SerialException, OSError) as exc:
            log.debug("port %r: error while closing: %s", self.port, exc)
