"""Logging set-up shared by the `armd` command and its control process.

A level spec is a level, optionally followed by per-logger levels: ``INFO`` or
``INFO,armd.loop=DEBUG,aiomqtt=WARNING`` (debug one part without the rest's noise). The daemon
hands its spec on to the control process, so both log alike.
"""

from __future__ import annotations

import logging

__all__ = ["LEVELS", "configure_logging", "parse_level_spec"]

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def parse_level_spec(spec: str) -> tuple[str, dict[str, str]]:
    """(root level, {logger: level}); raises ValueError naming the part that is wrong."""
    root, *parts = [part.strip() for part in spec.split(",")]
    loggers = {}
    for part in parts:
        name, sep, level = part.partition("=")
        if not sep or not name:
            raise ValueError(f"{part!r}: expected LOGGER=LEVEL")
        loggers[name] = _level(level.upper())
    return _level(root.upper()), loggers


def _level(level: str) -> str:
    if level not in LEVELS:
        raise ValueError(f"{level!r}: expected one of {', '.join(LEVELS)}")
    return level


def configure_logging(spec: str) -> None:
    root, loggers = parse_level_spec(spec)
    logging.basicConfig(level=root, format=FORMAT)
    for name, level in loggers.items():
        logging.getLogger(name).setLevel(level)
