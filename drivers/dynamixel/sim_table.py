"""The control table of a simulated X-series Dynamixel (XM430 layout, addresses 0-661): the items
it knows with their power-on values, and the access rules of the real device.

Writing a read-only or undefined item, reading from an undefined address, or writing an EEPROM
item while torque is on, answers Access Error; a partial multi-byte write answers Data Length
Error; out-of-range values answer Data Range Error; a Goal Position outside the mode's limits
answers Data Limit Error, and any Goal Position while the Bus Watchdog has expired (-1) answers
Data Range Error; Torque Enable = 1 with a hardware error answers Result Fail. Indirect
Address/Data 1-28 (168-251) and 29-56 (578-661) work. Factory Reset restores the e-manual's
initial values (ID 1, 57 600 bps, Return Delay 250).

The table is values only: the simulated device (`drivers.dynamixel.sim`) keeps the present
position and velocity up to date and acts on what is written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from drivers.dynamixel import protocol as dxl
from drivers.dynamixel.protocol import Addr, StatusError
from drivers.dynamixel.table import EXTENDED_POSITION_LIMIT

__all__ = ["TABLE_SIZE", "ControlTable"]

TABLE_SIZE = 662  # the XM430 table ends with Indirect Data 56 (661)


# (address, size, factory value) of the XM430 items the simulation knows, by access class.
_INFO = ((0, 2, 1020), (2, 4, 0), (6, 1, 46))  # read-only, kept in EEPROM
_STATUS = (
    (69, 1, 0), (70, 1, 0), (120, 2, 0), (122, 1, 0), (123, 1, 0), (124, 2, 0), (126, 2, 0),
    (128, 4, 0), (132, 4, 0), (136, 4, 0), (140, 4, 0), (144, 2, 120), (146, 1, 30),
)  # fmt: skip
_EEPROM = (
    (7, 1, 1), (8, 1, 1), (9, 1, 250), (10, 1, 0), (11, 1, 3), (12, 1, 255), (13, 1, 2),
    (20, 4, 0), (24, 4, 10), (31, 1, 80), (32, 2, 160), (34, 2, 95), (36, 2, 885), (38, 2, 1193),
    (40, 4, 32767), (44, 4, 350), (48, 4, 4095), (52, 4, 0), (63, 1, 52),
)  # fmt: skip
_RAM = (
    (64, 1, 0), (65, 1, 0), (68, 1, 2), (76, 2, 1920), (78, 2, 100), (80, 2, 0), (82, 2, 0),
    (84, 2, 800), (88, 2, 0), (90, 2, 0), (98, 1, 0), (100, 2, 0), (102, 2, 0), (104, 4, 0),
    (108, 4, 0), (112, 4, 0), (116, 4, 0),
    *((Addr.INDIRECT_ADDRESS_1 + 2 * k, 2, Addr.INDIRECT_DATA_1 + k) for k in range(28)),
    *((Addr.INDIRECT_DATA_1 + k, 1, 0) for k in range(28)),
    *((Addr.INDIRECT_ADDRESS_29 + 2 * k, 2, Addr.INDIRECT_DATA_29 + k) for k in range(28)),
    *((Addr.INDIRECT_DATA_29 + k, 1, 0) for k in range(28)),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Item:
    address: int
    size: int
    writable: bool
    eeprom: bool
    default: int  # power-on value of this simulated device
    factory: int  # value after a Factory Reset

    @property
    def signed(self) -> bool:
        return self.size == 4 or self.address == Addr.BUS_WATCHDOG


def _items(model_number: int, return_delay: int, baud_rate: int) -> tuple[_Item, ...]:
    defaults: dict[int, int] = {
        Addr.MODEL_NUMBER: model_number,
        Addr.RETURN_DELAY_TIME: return_delay,
        Addr.BAUD_RATE: baud_rate,
    }
    classes = (
        (_INFO, False, True),
        (_EEPROM, True, True),
        (_RAM, True, False),
        (_STATUS, False, False),
    )
    return tuple(
        _Item(address, size, writable, eeprom, defaults.get(address, default), default)
        for table, writable, eeprom in classes
        for address, size, default in table
    )


class ControlTable:
    """A byte-addressed control table; ``table[address]`` is one raw byte."""

    def __init__(
        self, device_id: int, *, model_number: int, return_delay: int, baud_rate: int = 3
    ) -> None:
        self._items = _items(model_number, return_delay, baud_rate)
        self._item_at = {a: i for i in self._items for a in range(i.address, i.address + i.size)}
        self._table = bytearray(TABLE_SIZE)
        for item in self._items:
            self.set(item.address, item.size, item.default)
        self.set(Addr.ID, 1, device_id)

    def __getitem__(self, address: int) -> int:
        return self._table[address]

    def __setitem__(self, address: int, value: int) -> None:
        self._table[address] = value

    def raw(self, address: int, length: int) -> bytes:
        """`length` bytes from `address`, as stored (no indirection)."""
        return bytes(self._table[address : address + length])

    def get(self, address: int) -> int:
        """The value of the item at `address`, signed where the item is."""
        item = self._item_at[address]
        return int.from_bytes(
            self._table[address : address + item.size], "little", signed=item.signed
        )

    def set(self, address: int, size: int, value: int) -> None:
        """Store `value` in `size` bytes at `address`, without any access rule."""
        self._table[address : address + size] = value.to_bytes(size, "little", signed=value < 0)

    def reset_ram(self) -> None:
        """Power-on values of the RAM area (what a reboot does); the EEPROM area is kept."""
        for item in self._items:
            if not item.eeprom:
                self.set(item.address, item.size, item.default)

    def factory_reset(self, *, keep: tuple[int, ...] = ()) -> None:
        """The e-manual's initial value in every writable item but those at `keep`, power-on
        values in the status items (Factory Reset, then the reboot that follows it)."""
        for item in self._items:
            if item.address in keep:
                continue
            value = item.factory if item.writable else item.default
            if item.writable or not item.eeprom:
                self.set(item.address, item.size, value)

    @staticmethod
    def in_bounds(address: int, length: int) -> bool:
        return length > 0 and address + length <= TABLE_SIZE

    def read(self, address: int, length: int) -> tuple[int, bytes]:
        """(error number, data) for reading `length` bytes; indirect data resolves its mapping.
        A read that starts at an undefined address is an Access Error (the e-manual); one that
        starts at an item may run on through reserved bytes (they read 0)."""
        if not self.in_bounds(address, length) or address not in self._item_at:
            return StatusError.ACCESS, b""
        out = bytearray()
        for a in range(address, address + length):
            out.append(self._table[self._resolve(a)])
        return StatusError.NONE, bytes(out)

    def _resolve(self, address: int) -> int:
        for data_1, address_1 in _INDIRECT_BANKS:
            if data_1 <= address < data_1 + 28:
                target = self.get(address_1 + 2 * (address - data_1))
                return target if target < TABLE_SIZE else address
        return address

    def write(self, address: int, data: bytes, on_written: Callable[[int], None]) -> int:
        """Validate then apply a write; returns the status error number (0 when done).
        `on_written(item_address)` runs after each item is stored, in address order."""
        if not self.in_bounds(address, len(data)):
            return StatusError.ACCESS
        writes = {self._resolve(address + k): b for k, b in enumerate(data)}
        items = sorted({self._item_at.get(a) for a in writes}, key=lambda i: i.address if i else -1)
        if None in items:
            return StatusError.ACCESS
        staged = bytearray(self._table)
        for a, b in writes.items():
            staged[a] = b
        for item in items:
            assert item is not None
            error = self._check(item, staged, writes)
            if error:
                return error
        for item in items:
            assert item is not None
            span = slice(item.address, item.address + item.size)
            self._table[span] = staged[span]
            on_written(item.address)
        return StatusError.NONE

    def _check(self, item: _Item, staged: bytearray, writes: Mapping[int, int]) -> int:
        if any(a not in writes for a in range(item.address, item.address + item.size)):
            return StatusError.DATA_LENGTH
        if not item.writable or (item.eeprom and self._table[Addr.TORQUE_ENABLE]):
            return StatusError.ACCESS
        span = staged[item.address : item.address + item.size]
        value = int.from_bytes(span, "little", signed=item.signed)
        if item.address == Addr.TORQUE_ENABLE and value == 1 and self[Addr.HARDWARE_ERROR_STATUS]:
            return StatusError.RESULT_FAIL  # only a reboot clears a hardware error
        if item.address == Addr.GOAL_POSITION:
            return self._check_goal(value)
        return StatusError.NONE if _in_range(item.address, value) else StatusError.DATA_RANGE

    def _check_goal(self, value: int) -> int:
        if self.get(Addr.BUS_WATCHDOG) == dxl.WATCHDOG_ERROR:
            return StatusError.DATA_RANGE
        if self._table[Addr.OPERATING_MODE] == dxl.OperatingMode.POSITION:
            low, high = self.get(Addr.MIN_POSITION_LIMIT), self.get(Addr.MAX_POSITION_LIMIT)
        else:
            low, high = -EXTENDED_POSITION_LIMIT, EXTENDED_POSITION_LIMIT
        return StatusError.NONE if low <= value <= high else StatusError.DATA_LIMIT


_INDIRECT_BANKS = (
    (Addr.INDIRECT_DATA_1, Addr.INDIRECT_ADDRESS_1),
    (Addr.INDIRECT_DATA_29, Addr.INDIRECT_ADDRESS_29),
)

_RANGES: Mapping[int, tuple[int, int]] = MappingProxyType(
    {
        Addr.TORQUE_ENABLE: (0, 1),
        Addr.BUS_WATCHDOG: (0, 127),
        Addr.STATUS_RETURN_LEVEL: (0, 2),
        Addr.ID: (0, dxl.MAX_ID),
        Addr.RETURN_DELAY_TIME: (0, 254),
        Addr.BAUD_RATE: (0, 7),
    }
)


def _in_range(address: int, value: int) -> bool:
    if address == Addr.OPERATING_MODE:
        return value in set(dxl.OperatingMode)
    if any(address_1 <= address < address_1 + 56 for _, address_1 in _INDIRECT_BANKS):
        return 64 <= value <= 661
    low, high = _RANGES.get(address, (-(2**31), 2**31 - 1))
    return low <= value <= high
