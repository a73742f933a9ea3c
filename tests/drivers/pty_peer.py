"""A servo played by the test on a raw pseudo-terminal, byte for byte: the link under test opens
the slave end, the test answers on the master end."""

from __future__ import annotations

import contextlib
import os
import select
import threading
import tty
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def raw_pty() -> Iterator[tuple[int, str]]:
    """(master fd, slave path) of a raw pseudo-terminal."""
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        yield master, os.ttyname(slave)
    finally:
        os.close(master)
        os.close(slave)


def answer_once(master: int, reply: bytes, parser: Any) -> threading.Thread:
    """A device that writes `reply` as soon as `parser` (its protocol's packet parser) has read
    a whole request."""

    def serve() -> None:
        while True:
            select.select([master], [], [], 5.0)
            if parser.feed(os.read(master, 4096)):
                os.write(master, reply)
                return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread
