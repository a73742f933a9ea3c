"""What the drivers of a CAN bus of actuators share (ODrive CAN Simple, MIT mode): one python-can
bus, a receiver thread that routes every frame by its id to the record of the device that sent it,
and coroutines that wait for those records to change.

`CanBusDriver` is a template over `Driver`'s hooks. open() forgets what the records held
(`_forget`), opens the bus on a worker thread with a deadline (`drivers.can_bus.link.open_bus`;
`bus_factory` replaces opening it from the params, `_can_filters` narrows what the kernel passes
on), starts receiving, then greets the devices (`_bring_up`); a failure closes the bus again.
Received frames (data frames with 11-bit ids, stamped with the injected clock) go to `_route`, on
the receiver thread, which stores what they say under the driver's `_lock`; `_wait_for` wakes a
coroutine when a condition on the records holds. Sends never block the event loop: a frame that
cannot be queued is a `DriverIOError`, counted in `stats.io_errors`.
"""

from __future__ import annotations

import abc
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import can
from pydantic import Field

from drivers.base import Clock, Driver, DriverParams
from drivers.can_bus.frame import Frame
from drivers.can_bus.link import BusFactory, CanLink, make_bus, open_bus
from drivers.errors import DriverConfigError, DriverError, DriverIOError

__all__ = ["BusRecord", "CanBusDriver", "CanBusParams"]

log = logging.getLogger(__name__)

_RX_POLL_S = 0.02  # s: how long closing may wait for the receiver thread
_LOG_EVERY_S = 5.0
P = TypeVar("P", bound=DriverParams)


class CanBusParams(DriverParams):
    """The bus every CAN driver is configured with: a python-can interface and channel."""

    interface: str = "socketcan"  # any python-can interface: socketcan, virtual, udp_multicast...
    channel: str
    bitrate: int | None = Field(default=None, gt=0)  # None: the interface's (SocketCAN: ip link)


class BusRecord(Protocol):
    """What the receiver last heard from one device (guarded by the driver's lock)."""

    @property
    def name(self) -> str: ...
    @property
    def label(self) -> str: ...
    def forget(self) -> None: ...


RecordT = TypeVar("RecordT", bound=BusRecord)


class CanBusDriver(Driver, Generic[RecordT]):
    """Devices on one CAN bus (see the module docstring). `bus_factory` replaces opening the bus
    from the params."""

    family: ClassVar[str]  # names the bus in messages: "<family> bus <interface>:<channel>"
    rx_thread_name: ClassVar[str] = "can-rx"

    def __init__(
        self,
        params: CanBusParams,
        devices: Mapping[str, RecordT],
        *,
        clock: Clock = time.monotonic,
        bus_factory: BusFactory | None = None,
    ) -> None:
        super().__init__(params, clock=clock)
        self._bus_params = params
        self._bus_factory = bus_factory or self._make_bus
        self._devices = dict(devices)
        self._link: CanLink | None = None
        self._lock = threading.Lock()
        self._last_logged: dict[str, float] = {}

    @classmethod
    def _checked(cls, params: DriverParams, wanted: type[P]) -> P:
        """`params` as the family's parameter model. Raises DriverConfigError."""
        if not isinstance(params, wanted):
            message = f"{cls.__name__} needs {wanted.__name__}, got {type(params).__name__}"
            raise DriverConfigError(message)
        return params

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(self._devices)

    @property
    def bus_label(self) -> str:
        return f"{self.family} bus {self._bus_params.interface}:{self._bus_params.channel}"

    # -- lifecycle hooks ------------------------------------------------------------------------

    async def _open(self) -> None:
        self._forget()
        label = self.bus_label
        bus = await open_bus(self._bus_factory, timeout_s=self._open_timeout_s, label=label)
        self._link = CanLink(
            bus, self._on_message, label=label, poll_s=_RX_POLL_S, thread_name=self.rx_thread_name
        )
        self._link.start()
        try:
            await self._bring_up()
        except BaseException:
            await self._close()
            raise

    async def _close(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            await link.close()  # never raises

    # -- what a family implements ---------------------------------------------------------------

    @property
    @abc.abstractmethod
    def _open_timeout_s(self) -> float:
        """How long opening the bus may take, s."""

    @abc.abstractmethod
    def _can_filters(self) -> Sequence[dict[str, Any]]:
        """The frames the kernel passes on: python-can's ``can_filters``."""

    @abc.abstractmethod
    async def _bring_up(self) -> None:
        """Once receiving: check that every device answers and is configured as expected."""

    @abc.abstractmethod
    def _route(self, arbitration_id: int, data: bytes, received_at: float) -> None:
        """On the receiver thread: store what a frame says in its device's record."""

    def _forget(self) -> None:
        """Before opening: forget what was heard on an earlier connection."""
        for device in self._devices.values():
            device.forget()

    @property
    def _hop_limit(self) -> int:
        """udp_multicast's IP TTL (`drivers.can_bus.link.make_bus`)."""
        return 0

    # -- the bus --------------------------------------------------------------------------------

    def _make_bus(self) -> can.BusABC:
        p = self._bus_params
        return make_bus(
            p.interface, p.channel, bitrate=p.bitrate, can_filters=self._can_filters(),
            hop_limit=self._hop_limit,
        )  # fmt: skip

    def _on_message(self, message: can.Message) -> None:
        received_at = self.clock()
        if message.is_error_frame or message.is_remote_frame or message.is_extended_id:
            return
        self._route(message.arbitration_id, bytes(message.data or b""), received_at)

    async def _wait_for(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `done()` (evaluated under the lock) holds; False after `timeout_s`.

        Raises DriverIOError when the receiver fails meanwhile.
        """

        def locked() -> bool:
            with self._lock:
                return done()

        return await self._open_link().wait_for(locked, timeout_s)

    def _send(self, frames: Iterable[Frame]) -> None:
        """Send a batch now. CAN sends are non-blocking socket writes (timeout 0): they fail
        rather than stall the event loop. Raises DriverIOError."""
        link = self._open_link()
        try:
            link.send(frames)
        except DriverIOError as exc:
            self._count(None, "io_errors", str(exc))
            raise

    def _send_best_effort(self, frames: Iterable[Frame], what: str) -> None:
        """Send `frames` when a failure is already being raised: a failure is only logged."""
        try:
            self._send(frames)
        except DriverError as exc:
            log.error("%s: could not %s: %s", self.bus_label, what, exc)

    def _open_link(self) -> CanLink:
        """The link, when it is open and receiving. Raises DriverIOError."""
        link = self._link
        if link is None:
            raise DriverIOError(f"{self.bus_label}: not open")
        link.raise_if_failed()
        return link

    def _count(self, device: str | None, kind: str, message: str) -> None:
        """Count a problem; log it at most once per `_LOG_EVERY_S` per device and kind."""
        with self._lock:
            self.stats.count_error(device, kind, message)
        key = f"{device}:{kind}"
        now = time.monotonic()
        if now - self._last_logged.get(key, -math.inf) >= _LOG_EVERY_S:
            self._last_logged[key] = now
            log.warning("%s (%s, logged every %.0f s at most)", message, kind, _LOG_EVERY_S)
