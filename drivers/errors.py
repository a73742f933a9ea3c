"""The driver package's exceptions: one root, `DriverError`.

Third-party exceptions (pyserial, python-can, OS errors) are wrapped at the boundary with the cause
chained: ``raise DriverIOError(...) from exc``.
"""

from __future__ import annotations

__all__ = [
    "DeviceFaultError",
    "DriverConfigError",
    "DriverError",
    "DriverIOError",
    "DriverOpenError",
    "DriverStateError",
    "DriverTimeoutError",
    "UnknownDriverError",
    "UnsupportedCommandError",
]


class DriverError(Exception):
    """Root of every error raised by `drivers`."""


class DriverConfigError(DriverError):
    """A driver's parameters are invalid (names the parameter, the value and what was expected)."""


class UnknownDriverError(DriverConfigError):
    """No driver is registered under the requested name, or its module cannot be imported."""


class DriverOpenError(DriverError):
    """The bus could not be opened (port missing, permission denied, interface unavailable)."""


class DriverIOError(DriverError):
    """Communication on an open bus failed (write error, bus gone, port closed under us)."""


class DriverTimeoutError(DriverIOError):
    """A device did not answer within its reply deadline."""


class DeviceFaultError(DriverError):
    """A device reports a fault that prevents the requested operation (e.g. enabling)."""


class DriverStateError(DriverError):
    """An operation was requested in the wrong lifecycle state (e.g. `write` before `enable`)."""


class UnsupportedCommandError(DriverError):
    """The device or driver cannot carry out the requested command."""
