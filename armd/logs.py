"""Logging set-up shared by the `armd` command and its control process.

A level spec is a level, optionally followed by per-logger levels: ``INFO`` or
``INFO,armd.control.loop=DEBUG,aiomqtt=WARNING`` (debug one part without the rest's noise). The
daemon
hands its spec on to the control process, so both log alike.

The control process writes its log from a thread of its own (`write_in_background`): under
systemd stderr is the journal's socket, and a journal slow to read it blocks whoever writes, so
a control tick that logged (a fault, a missed-tick warning) could wait on it. There a record is
formatted where it is logged and queued; the writer thread, at normal priority, writes it.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import queue
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "LEVELS",
    "WRITER_THREAD",
    "configure_logging",
    "parse_level_spec",
    "write_in_background",
]

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


# Libraries that log every step of a bring-up at INFO (canopen: each PDO mapped, each NMT state):
# their warnings and errors reach the journal, their chatter only when a level spec asks for it.
QUIET_LIBRARIES = {"canopen": logging.WARNING}


def configure_logging(spec: str) -> None:
    root, loggers = parse_level_spec(spec)
    logging.basicConfig(level=root, format=FORMAT)
    levels: dict[str, int | str] = {**QUIET_LIBRARIES, **loggers}
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


WRITER_THREAD = "armd-log"  # its name in /proc/<pid>/task/<tid>/comm
STOP_TIMEOUT_S = 2.0


def write_in_background(root: logging.Logger | None = None) -> Callable[[], None]:
    """From now on the handlers of `root` (the root logger) write from a thread of their own,
    which keeps the scheduling of the thread that calls this (start it before raising the
    priority). Returns the function that writes what is still queued and ends the thread
    (waiting at most `STOP_TIMEOUT_S` for the stream)."""
    root = logging.getLogger() if root is None else root
    handlers = root.handlers[:]
    records: queue.SimpleQueue[logging.LogRecord | None] = queue.SimpleQueue()
    writer = threading.Thread(
        target=_write, args=(records, handlers), name=WRITER_THREAD, daemon=True
    )
    writer.start()
    with contextlib.suppress(OSError):  # the name only shows in ps and top; not everywhere
        Path(f"/proc/self/task/{writer.native_id}/comm").write_text(WRITER_THREAD)
    for handler in handlers:
        root.removeHandler(handler)
    root.addHandler(logging.handlers.QueueHandler(records))

    def stop() -> None:
        records.put(None)
        writer.join(STOP_TIMEOUT_S)  # a stream that never drains does not keep the process

    return stop


def _write(
    records: queue.SimpleQueue[logging.LogRecord | None], handlers: list[logging.Handler]
) -> None:
    """`logging.handlers.QueueListener`'s loop (with `respect_handler_level`). Not the listener
    itself: its thread is private (no id to name it by) and its `stop` waits for the stream
    without a bound."""
    while (record := records.get()) is not None:
        for handler in handlers:
            if record.levelno >= handler.level:
                handler.handle(record)
