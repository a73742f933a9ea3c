"""A spy on a python-can `virtual` bus that decodes CANopen frames straight from CiA 301 / CiA 402,
independently of `drivers.cia402` (no import from it), for the cia402 driver's tests.

CiA 301: NMT is COB-ID 0x000 with [command specifier, node id] (0x01 start, 0x80 enter
pre-operational); SYNC is 0x080; RPDO1..4 are 0x200/0x300/0x400/0x500 + node id, TPDO1..4
0x180/0x280/0x380/0x480 + node id, EMCY 0x080 + node id, SDO requests 0x600 + node id and answers
0x580 + node id, heartbeat 0x700 + node id. An SDO request's first byte carries the client command
specifier in bits 7-5 (1: initiate download, 2: initiate upload); an initiate download is
expedited when bit 1 is set, with 4 - n unused bytes in bits 3-2 when bit 0 (size indicated) is
set; bytes 1-2 are the index (little-endian), byte 3 the subindex, bytes 4-7 the data.
The cia402 driver's RPDO1 carries the controlword (bytes 0-1) and the target position (int32,
bytes 2-5); its TPDO2 the velocity actual value (int32, bytes 0-3).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import can

__all__ = ["Spy", "command_of", "service_of"]

Entry = tuple[Any, ...]

# CiA 402-2, device control commands: (name, mask, value) over controlword bits 7, 3, 2, 1, 0.
# "switch on" from Ready to Switch On and "disable operation" from Operation Enabled share 0111.
_COMMANDS = (
    ("fault reset", 0x80, 0x80),
    ("disable voltage", 0x82, 0x00),
    ("quick stop", 0x86, 0x02),
    ("shutdown", 0x87, 0x06),
    ("switch on / disable operation", 0x8F, 0x07),
    ("enable operation", 0x8F, 0x0F),
)
_NMT = {
    0x01: "start",
    0x02: "stop",
    0x80: "enter pre-operational",
    0x81: "reset node",
    0x82: "reset communication",
}


def command_of(controlword: int) -> str:
    """The device control command a controlword encodes. Raises AssertionError for none."""
    for name, mask, value in _COMMANDS:
        if controlword & mask == value:
            return name
    raise AssertionError(f"controlword 0x{controlword:04X} is no CiA 402 command")


def service_of(frame: can.Message, nodes: set[int]) -> str:
    """What a frame from a CANopen master is, per CiA 301 (and the driver's RPDO layout): raises
    AssertionError for a frame that is none of them or is malformed."""
    cob, data = frame.arbitration_id, bytes(frame.data)
    assert not frame.is_extended_id, frame
    assert not frame.is_remote_frame, frame
    if cob == 0x000:
        assert len(data) == 2, frame
        assert data[1] in nodes | {0}, frame
        return f"NMT {_NMT[data[0]]}"
    if cob == 0x080:
        assert len(data) == 0, frame  # a SYNC without counter
        return "SYNC"
    node = cob & 0x7F
    assert node in nodes, frame
    if cob - node == 0x200:
        assert len(data) == 8, frame  # controlword, target position, torque offset
        return f"RPDO1 {command_of(int.from_bytes(data[0:2], 'little'))}"
    if cob - node == 0x300:
        assert len(data) == 4, frame  # velocity offset
        return "RPDO2"
    if cob - node == 0x600:
        assert len(data) == 8, frame
        ccs = data[0] >> 5
        if ccs == 2:
            return "SDO initiate upload"
        assert ccs == 1, frame  # initiate download, expedited with the size indicated
        assert data[0] & 0x03 == 0x03, frame
        return f"SDO expedited download of {4 - ((data[0] >> 2) & 0x3)} bytes"
    raise AssertionError(f"a master does not send COB-ID 0x{cob:03X}: {frame}")


class Spy:
    """Every frame on a virtual channel, from the moment it is created."""

    def __init__(self, channel: str) -> None:
        self.bus = can.Bus(interface="virtual", channel=channel)

    def __enter__(self) -> Spy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.bus.shutdown()

    def drain(self) -> list[can.Message]:
        """The frames received so far (the virtual bus queues them as they are sent)."""
        frames = []
        while (message := self.bus.recv(0)) is not None:
            frames.append(message)
        return frames

    @staticmethod
    def from_host(frame: can.Message) -> bool:
        """Whether a CANopen master sends this COB-ID (NMT, SYNC, RPDO, SDO request)."""
        cob = frame.arbitration_id
        if cob == 0x000 or (cob == 0x080 and frame.dlc == 0):
            return True
        return (cob & 0x780) in (0x200, 0x300, 0x400, 0x500) or 0x600 < cob <= 0x67F

    def node_log(self, frames: list[can.Message], node: int) -> list[Entry]:
        """What the host sent to `node`, decoded: ("nmt", cs), ("upload", index, sub),
        ("download", index, sub, value), ("segmented download", index, sub), ("rpdo", cw,
        target)."""
        log: list[Entry] = []
        for frame in frames:
            cob, data = frame.arbitration_id, bytes(frame.data)
            if cob == 0x000 and data[1] in (0, node):
                log.append(("nmt", data[0]))
            elif cob == 0x600 + node:
                log.append(_sdo_request(data))
            elif cob == 0x200 + node:
                cw = int.from_bytes(data[0:2], "little")
                log.append(("rpdo", cw, int.from_bytes(data[2:6], "little", signed=True)))
        return log

    def downloads(self, frames: list[can.Message], node: int) -> dict[tuple[int, int], int]:
        """The last value of each expedited SDO download to `node`, by (index, subindex)."""
        return {(e[1], e[2]): e[3] for e in self.node_log(frames, node) if e[0] == "download"}

    def rpdos(self, frames: list[can.Message], node: int) -> list[tuple[int, int]]:
        return [(e[1], e[2]) for e in self.node_log(frames, node) if e[0] == "rpdo"]

    def controlword_changes(self, frames: list[can.Message], node: int) -> list[int]:
        """The controlwords of `node`'s RPDO1s, each repeat left out."""
        changes: list[int] = []
        for cw, _ in self.rpdos(frames, node):
            if not changes or changes[-1] != cw:
                changes.append(cw)
        return changes

    def cycles(self, frames: list[can.Message]) -> list[list[int]]:
        """The COB-IDs of the PDOs the host sent before each SYNC (since the previous one)."""
        cycles, current = [], []
        for frame in frames:
            if not self.from_host(frame):
                continue
            if frame.arbitration_id == 0x080:
                cycles.append(current)
                current = []
            elif (frame.arbitration_id & 0x780) in (0x200, 0x300, 0x400, 0x500):
                current.append(frame.arbitration_id)
        return cycles

    def velocity_before_controlword(
        self, frames: list[can.Message], node: int, controlword: int
    ) -> int:
        """The velocity actual value (increments/s) of `node`'s last TPDO2 before the first RPDO1
        carrying `controlword`."""
        velocity = None
        for frame in frames:
            cob, data = frame.arbitration_id, bytes(frame.data)
            if cob == 0x280 + node:
                velocity = int.from_bytes(data[0:4], "little", signed=True)
            elif cob == 0x200 + node and int.from_bytes(data[0:2], "little") == controlword:
                assert velocity is not None, "no TPDO2 before the controlword"
                return velocity
        raise AssertionError(f"no RPDO1 with controlword 0x{controlword:04X}")


def _sdo_request(data: bytes) -> Entry:
    ccs = data[0] >> 5
    index, sub = int.from_bytes(data[1:3], "little"), data[3]
    if ccs == 2:
        return ("upload", index, sub)
    if ccs == 1 and data[0] & 0x02:
        size = 4 - ((data[0] >> 2) & 0x3) if data[0] & 0x01 else 4
        return ("download", index, sub, int.from_bytes(data[4 : 4 + size], "little"))
    if ccs == 1:
        return ("segmented download", index, sub)
    return ("sdo", data[0])
