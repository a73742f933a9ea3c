"""Single instance: a second daemon for the same arm refuses to start before it opens any bus."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from armd.errors import ArmdError

__all__ = ["InstanceLock"]


class InstanceLock:
    """An exclusive `flock` on `path`, held while the context is open; the file records the pid.

    The lock dies with the process (the kernel releases it), so a crashed daemon never leaves a
    stale lock behind. Raises `ArmdError` naming the holder when another process has it.
    """

    def __init__(self, path: Path, arm_name: str) -> None:
        self.path = path
        self.arm_name = arm_name
        self._fd: int | None = None

    def __enter__(self) -> InstanceLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ArmdError(
                f"lock file {self.path}: {exc.strerror}; set lock_file in the config to a "
                "writable path"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ArmdError(
                f"another armd is already running arm {self.arm_name!r} "
                f"(lock {self.path} held by pid {holder})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the lock; the file stays (removing it would race)
            self._fd = None
