"""What the simulated CAN devices share (`drivers.odrive.sim`, `drivers.mit.sim`): a python-can bus
(``virtual`` in-process, or ``udp_multicast`` across processes) served by a receiver thread
(`drivers.can_bus.link.CanLink`), and the entry point of ``armd sim-device``.

`SimulatedBus` is used as ``async with sim: ...``: entering starts receiving (and the family's
serving, `_start`), leaving stops it (`_stop`) and shuts the bus down. Every received message goes
to `_receive` on the receiver thread; replies go out with `_send`, which only logs a failure (a
simulated device has nobody to tell). `run_until_signalled` runs a `serve` coroutine until SIGINT
or SIGTERM.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Self

import can

from drivers.can_bus.frame import Frame
from drivers.can_bus.link import BUS_OPEN_ERRORS, CanLink, make_bus
from drivers.errors import DriverIOError, DriverOpenError

__all__ = ["SimulatedBus", "open_sim_bus", "run_until_signalled", "serve_until_stopped"]

log = logging.getLogger(__name__)

_RX_POLL_S = 0.01  # s: how long closing may wait for the receiver thread


def open_sim_bus(
    interface: str, channel: str, *, bitrate: int | None, hop_limit: int = 0, what: str
) -> can.BusABC:
    """The bus simulated devices (`what`, in messages) serve. Raises DriverOpenError."""
    try:
        return make_bus(interface, channel, bitrate=bitrate, hop_limit=hop_limit)
    except BUS_OPEN_ERRORS as exc:
        raise DriverOpenError(
            f"{what}: cannot open {interface} channel {channel!r}: {exc}"
        ) from exc


class SimulatedBus(abc.ABC):
    """Simulated devices serving a python-can bus (see the module docstring)."""

    def __init__(self, bus: can.BusABC, *, label: str, thread_name: str) -> None:
        self.bus = bus
        self._link = CanLink(
            bus, self._receive, label=label, poll_s=_RX_POLL_S, thread_name=thread_name
        )
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __aenter__(self) -> Self:
        self._loop = asyncio.get_running_loop()
        self._link.start()
        self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self._stop()
        finally:
            await self._link.close()  # stops the receiver thread, shuts the bus down

    @abc.abstractmethod
    def _receive(self, message: can.Message) -> None:
        """On the receiver thread: one message from the bus."""

    def _start(self) -> None:  # noqa: B027 (optional hook: serving from the thread alone is fine)
        """Once receiving, on the event loop: start serving (default: nothing more)."""

    async def _stop(self) -> None:  # noqa: B027 (optional hook, as `_start`)
        """Before the bus shuts down: stop serving (default: nothing more)."""

    def _send(self, frames: Iterable[Frame]) -> None:
        try:
            self._link.send(frames)
        except DriverIOError as exc:
            log.debug("%s", exc)


async def serve_until_stopped(
    sim: contextlib.AbstractAsyncContextManager[object],
    announcement: str,
    on_ready: Callable[[], None] | None,
    stop: asyncio.Event | None,
) -> None:
    """Serve `sim` (serving while entered) until `stop` is set (forever when None, i.e. until
    cancelled); once it serves, log `announcement` and call `on_ready`."""
    async with sim:
        log.info("%s", announcement)
        if on_ready is not None:
            on_ready()
        await (stop or asyncio.Event()).wait()


def run_until_signalled(serve: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``serve(stop)`` in a new event loop; SIGINT or SIGTERM sets `stop`."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await serve(stop)

    asyncio.run(main())
