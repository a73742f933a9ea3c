"""A real process on a pseudo-terminal, driven like a user at a keyboard: what it prints is read
from the pty's master side, what the user types is written to it (Enter, Ctrl-C, Ctrl-D go
through the terminal's line discipline, as from a keyboard)."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["Terminal"]

CTRL_C, CTRL_D = b"\x03", b"\x04"


# Run in the child after setsid (start_new_session): the pty on stdin becomes its controlling
# terminal, then the command replaces it (no preexec_fn, which is unsafe with threads).
_ATTACH = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


class Terminal:
    """`argv` running on a new pty as its controlling terminal (so Ctrl-C is a SIGINT)."""

    def __init__(self, argv: Sequence[str], cwd: Path) -> None:
        master, slave = os.openpty()
        self.master = master
        self.output = ""
        self._seen = 0
        self.process = subprocess.Popen(
            [sys.executable, "-c", _ATTACH, *argv],
            cwd=cwd,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            env={**os.environ, "COLUMNS": "200", "TERM": "xterm"},
        )
        os.close(slave)

    def _pump(self, timeout_s: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout_s)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the process closed the terminal (it ended)
            return False
        if not data:
            return False
        self.output += data.decode(errors="replace")
        return True

    def expect(self, pattern: str, timeout_s: float = 20.0) -> re.Match[str]:
        """Wait for `pattern` (a regex) in the output after the previous match."""
        deadline = time.monotonic() + timeout_s
        while True:
            match = re.compile(pattern).search(self.output, self._seen)
            if match:
                self._seen = match.end()
                return match
            left = deadline - time.monotonic()
            if left <= 0 or not self._pump(min(left, 0.5)):
                match = re.compile(pattern).search(self.output, self._seen)
                if match:
                    self._seen = match.end()
                    return match
                raise AssertionError(f"{pattern!r} not in the output:\n{self.output[-3000:]}")

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def line(self, text: str = "") -> None:
        self.type(text.encode() + b"\n")

    def wait(self, timeout_s: float = 60.0) -> int:
        """The exit code, once the process ended (its output read to the end)."""
        deadline = time.monotonic() + timeout_s
        while self._pump(0.2) and time.monotonic() < deadline:
            pass
        return self.process.wait(timeout=max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        """Kill the process if it still runs and close the terminal. Idempotent."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        if self.master >= 0:
            os.close(self.master)
            self.master = -1
