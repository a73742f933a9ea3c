"""The daemon's exceptions: one root, `ArmdError`."""

from __future__ import annotations

__all__ = ["ArmdError", "ConfigError"]


class ArmdError(Exception):
    """Root of every error raised by `armd`."""


class ConfigError(ArmdError):
    """A configuration file is invalid; the message lists every problem with its path."""
