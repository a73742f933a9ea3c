"""The daemon's handle on its control process (`armd.control.process`).

`ControlClient` starts the process, sends it the `ControlSetup`, and then carries the control
protocol (`armd.link.protocol`) across the seam: `port` (a `LoopPort`) sends commands and holds the
latest `Sample`; every event the loop emits goes to `on_event` (called on the daemon's event
loop, as the link reads it), systemd's watchdog keep-alives to `on_watchdog`.

Lifecycle: `start` (the process opens the drivers; raises `ArmdError` if it cannot), `run` (reads
the events until the process closes; raises `ArmdError` if it ends without `Closed`), `shutdown`
(the arm comes to rest, the drives are disabled and closed), `close` (kills a process that is
still there).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
from collections.abc import Callable

from armd.control.wiring import ControlSetup
from armd.errors import ArmdError
from armd.link.channel import Closed, Link, Opened, OpenFailed, Watchdog
from armd.link.messages import StatusUpdate
from armd.link.protocol import Command, Event, LoopPort, Sample, Shutdown

__all__ = ["ControlClient"]

log = logging.getLogger(__name__)
START_TIMEOUT_S = 60.0
KILL_TIMEOUT_S = 5.0


class ControlClient:
    """The control process, as the daemon sees it: see the module docstring."""

    def __init__(
        self,
        setup: ControlSetup,
        on_event: Callable[[Event], None],
        on_watchdog: Callable[[], None] = lambda: None,
        watchdog_interval_s: float | None = None,
        log_level: str = "INFO",
    ) -> None:
        self.setup = setup
        self._on_event = on_event
        self._on_watchdog = on_watchdog
        self._watchdog_interval_s = watchdog_interval_s
        self._log_level = log_level  # an `armd.logs` spec
        self._process: asyncio.subprocess.Process | None = None
        self._link: Link | None = None
        self._closed = asyncio.Event()
        self.port = LoopPort(self._transmit, self._report, len(setup.joint_names))

    def _report(self, update: StatusUpdate) -> None:
        self._on_event(update)

    def _transmit(self, command: Command) -> None:
        if self._link is None or self._link.closing:
            raise ArmdError("the control process is not running")
        self._link.send(command)

    def _dispatch(self, message: object) -> None:
        """A message of the control process, as the link reads it."""
        if isinstance(message, Sample):
            self.port.take(message)
            self._on_event(message)
        elif isinstance(message, Watchdog):
            self._on_watchdog()
        elif isinstance(message, Closed):
            self._closed.set()
        else:
            self._on_event(message)  # type: ignore[arg-type]

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The control process's pid (None before `start`)."""
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self) -> None:
        """Start the control process, send it the setup, wait until it has opened the drivers."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}  # we notify
        # 6 × 6 matrices need no BLAS worker threads in a real-time process.
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        env.setdefault("OMP_NUM_THREADS", "1")
        command = [sys.executable, "-m", "armd.control.process", "--fd", str(theirs.fileno())]
        command += ["--log-level", self._log_level]
        command += ["--watchdog-interval", str(self._watchdog_interval_s or 0.0)]
        try:
            self._process = await asyncio.create_subprocess_exec(
                *command, pass_fds=(theirs.fileno(),), env=env
            )
        finally:
            theirs.close()
        self._link = await Link.connect(ours)
        self._link.send(self.setup)
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                first = await self._link.next()
        except (TimeoutError, ConnectionError) as exc:
            await self.close()
            raise ArmdError(f"the control process did not start: {exc}") from exc
        if isinstance(first, Opened):
            log.info("control process %d: drivers open", self._process.pid)
            self._link.handle_with(self._dispatch)
            return
        code = await self.close()
        if isinstance(first, OpenFailed):
            raise ArmdError(first.message)
        raise ArmdError(f"the control process ended before opening the drivers (exit code {code})")

    async def run(self) -> None:
        """Wait while the link dispatches the process's events, until it closes (after `Closed`,
        the process's last message); raises `ArmdError` if it dies."""
        assert self._link is not None
        broken = ""
        try:
            await self._link.closed()
        except ConnectionError as exc:  # the process died, or handling an event raised
            broken = f"; {exc}"
        if self._closed.is_set():
            return
        code = await self._exit_code()
        raise ArmdError(f"the control process ended unexpectedly (exit code {code}){broken}")

    async def shutdown(self, timeout_s: float) -> None:
        """Ask the process to bring the arm to rest and close the drives; wait for it (`run`
        returns then)."""
        if self._link is None or self._link.closing:
            return
        self.port.drop_held("daemon stopping")  # accepted, never sent: answer it
        self._link.send(Shutdown())
        try:
            async with asyncio.timeout(timeout_s):
                await self._closed.wait()
        except TimeoutError:
            log.error("the control process did not close within %g s", timeout_s)

    async def close(self) -> int | None:
        """Close the link and wait for the process (killed if it does not end); its exit code."""
        if self._link is not None:
            self._link.close()
            with contextlib.suppress(ConnectionError):
                await self._link.closed()
        return await self._exit_code()

    async def _exit_code(self) -> int | None:
        process = self._process
        if process is None:
            return None
        try:
            async with asyncio.timeout(KILL_TIMEOUT_S):
                return await process.wait()
        except TimeoutError:
            log.error("control process %d did not end: killing it", process.pid)
            process.kill()
            return await process.wait()
