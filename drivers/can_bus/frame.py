"""A classic CAN frame as the codecs build and parse it (`drivers.odrive.protocol`,
`drivers.mit.protocol`): no I/O, no python-can; `drivers.can_bus.link` converts it to and from
python-can messages."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Frame"]


@dataclass(frozen=True, slots=True)
class Frame:
    """One classic CAN frame with an 11-bit id. An RTR request has no data and a `remote_dlc`."""

    arbitration_id: int
    data: bytes = b""
    remote_dlc: int | None = None

    @property
    def is_remote(self) -> bool:
        return self.remote_dlc is not None
