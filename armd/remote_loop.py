"""The daemon's handle on its control process (`armd.control_process`).

`RemoteLoop` offers what the goal pipeline and the daemon use of a `ControlLoop` — its requests
(`submit`, `engage_estop`, `reset`) and its state (`mode`, `measured`, `commanded`, `fault`,
`moving`, `busy`) — over the control link, and hands the process's reports to callbacks: statuses,
faults and telemetry to the MQTT bridge, the rest to systemd. The state is the one of the last
tick reported; `busy` also counts requests sent but not yet taken in, so it never misses one on
its way. Requests are coalesced here (newest wins) so that a flood of goals reaches the control
process as at most one request per tick.

Lifecycle: `start` (the process opens the drivers; raises `ArmdError` if it cannot), `run` (reads
the reports until the process closes; raises `ArmdError` if it ends without `Closed`), `shutdown`
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
from dataclasses import dataclass
from pathlib import Path

from armd.control_link import (
    Closed,
    Estop,
    FaultChanged,
    LoopState,
    ModeChanged,
    Notice,
    Opened,
    OpenFailed,
    Ready,
    Reset,
    Shutdown,
    Status,
    Submit,
    TelemetrySample,
    Watchdog,
    read_message,
    write_message,
)
from armd.errors import ArmdError
from armd.loop import LoopSettings, MoveRequest, StopRequest
from armd.messages import Fault, GoalStatus, Mode, StatusUpdate, Telemetry
from armd.safety import MeasuredState
from armd.trajectory import Setpoint

__all__ = ["ControlReports", "RemoteLoop"]

log = logging.getLogger(__name__)
START_TIMEOUT_S = 300.0  # a cold numba cache compiles the kinematics kernels first
KILL_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class ControlReports:
    """Where the control process's reports go (called on the daemon's event loop)."""

    status: Callable[[StatusUpdate], None]
    fault: Callable[[Fault | None], None]
    telemetry: Callable[[Telemetry], None]
    mode: Callable[[Mode], None] = lambda mode: None
    ready: Callable[[int], None] = lambda drivers: None
    watchdog: Callable[[], None] = lambda: None
    notice: Callable[[str], None] = lambda text: None


class RemoteLoop:
    """The control loop, as the daemon sees it: see the module docstring."""

    def __init__(
        self,
        config: Path,
        settings: LoopSettings,
        reports: ControlReports,
        watchdog_interval_s: float | None = None,
        log_level: str = "INFO",
    ) -> None:
        self.config = config
        self.settings = settings
        self._reports = reports
        self._watchdog_interval_s = watchdog_interval_s
        self._log_level = log_level  # an `armd.logs` spec
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._state = LoopState(0, Mode.INACTIVE, 0, False, False, None, None, None)
        self._sent = 0  # the last Submit.seq
        self._held: MoveRequest | StopRequest | None = None  # waits for the one in flight
        self._closed = asyncio.Event()

    # -- ControlLoop's face -----------------------------------------------------------------------

    @property
    def mode(self) -> Mode:
        return self._state.mode

    @property
    def measured(self) -> MeasuredState | None:
        return self._state.measured

    @property
    def commanded(self) -> Setpoint | None:
        return self._state.commanded

    @property
    def fault(self) -> Fault | None:
        return self._state.fault

    @property
    def tick_count(self) -> int:
        return self._state.tick

    @property
    def moving(self) -> bool:
        return self._state.moving

    @property
    def busy(self) -> bool:
        return self._state.busy or self._held is not None or self._sent > self._state.taken

    def submit(self, request: MoveRequest | StopRequest) -> None:
        """Send `request`, or hold it while an earlier one is still on its way: at most one
        request per tick reaches the control process, however fast goals come in. A held request
        that a newer one replaces ends here as ``preempted``, as the loop would end it."""
        if self._sent > self._state.taken:
            replaced, self._held = self._held, request
            if replaced is not None and replaced.goal_id is not None:
                reason = "superseded before it started"
                self._reports.status(StatusUpdate(replaced.goal_id, GoalStatus.PREEMPTED, reason))
            return
        self._send_request(request)

    def _send_request(self, request: MoveRequest | StopRequest) -> None:
        self._sent += 1
        self._write(Submit(self._sent, request))

    def engage_estop(self) -> None:
        self._write(Estop())

    def reset(self) -> None:
        self._write(Reset())

    def _write(self, message: object) -> None:
        if self._writer is None or self._writer.is_closing():
            raise ArmdError("the control process is not running")
        write_message(self._writer, message)

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The control process's pid (None before `start`)."""
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self) -> None:
        """Start the control process and wait until it has opened the drivers."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}  # we notify
        # 6 × 6 matrices need no BLAS worker threads in a real-time process.
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        env.setdefault("OMP_NUM_THREADS", "1")
        command = [sys.executable, "-m", "armd.control_process", "--config", str(self.config)]
        command += ["--fd", str(theirs.fileno()), "--log-level", self._log_level]
        command += ["--watchdog-interval", str(self._watchdog_interval_s or 0.0)]
        try:
            self._process = await asyncio.create_subprocess_exec(
                *command, pass_fds=(theirs.fileno(),), env=env
            )
        finally:
            theirs.close()
        self._reader, self._writer = await asyncio.open_unix_connection(sock=ours)
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                first = await read_message(self._reader)
        except (TimeoutError, ConnectionError) as exc:
            await self.close()
            raise ArmdError(f"the control process did not start: {exc}") from exc
        if isinstance(first, Opened):
            log.info("control process %d: drivers open", self._process.pid)
            return
        code = await self.close()
        if isinstance(first, OpenFailed):
            raise ArmdError(first.message)
        raise ArmdError(f"the control process ended before opening the drivers (exit code {code})")

    async def run(self) -> None:
        """Dispatch the process's reports until it closes; raises `ArmdError` if it dies."""
        assert self._reader is not None
        with contextlib.suppress(ConnectionError):  # a broken link: the process is gone
            while (message := await read_message(self._reader)) is not None:
                if isinstance(message, Closed):
                    self._closed.set()
                    return
                self._dispatch(message)
        code = await self._exit_code()
        raise ArmdError(f"the control process ended unexpectedly (exit code {code})")

    def _dispatch(self, message: object) -> None:
        reports = self._reports
        if isinstance(message, LoopState):
            self._state = message
            held = self._held
            if held is not None and self._sent <= message.taken:
                self._held = None
                self._send_request(held)
        elif isinstance(message, Status):
            reports.status(message.update)
        elif isinstance(message, TelemetrySample):
            reports.telemetry(message.telemetry)
        elif isinstance(message, FaultChanged):
            reports.fault(message.fault)
        elif isinstance(message, ModeChanged):
            reports.mode(message.mode)
        elif isinstance(message, Watchdog):
            reports.watchdog()
        elif isinstance(message, Ready):
            reports.ready(message.drivers)
        elif isinstance(message, Notice):
            reports.notice(message.text)
        else:
            log.error("control link: unexpected message %r", message)

    async def shutdown(self, timeout_s: float) -> None:
        """Ask the process to bring the arm to rest and close the drives; wait for it (`run`
        returns then)."""
        if self._writer is None or self._writer.is_closing():
            return
        held, self._held = self._held, None
        if held is not None and held.goal_id is not None:  # accepted, never sent: answer it
            self._reports.status(StatusUpdate(held.goal_id, GoalStatus.ABORTED, "daemon stopping"))
        write_message(self._writer, Shutdown())
        try:
            async with asyncio.timeout(timeout_s):
                await self._closed.wait()
        except TimeoutError:
            log.error("the control process did not close within %g s", timeout_s)

    async def close(self) -> int | None:
        """Close the link and wait for the process (killed if it does not end); its exit code."""
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError):
                await self._writer.wait_closed()
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
