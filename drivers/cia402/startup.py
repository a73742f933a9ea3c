"""Bringing one drive up, in the order CiA 301 / 402 want it, on canopen's blocking SDO client
(the driver runs `configure` on a worker thread per node):

1. identity 0x1018:1/:2 read and checked against the configured one;
2. NMT Pre-operational;
3. SDO configuration: 0x6060 = 8 (CSP), 0x60C2 interpolation period (the loop period),
   0x6065 following error window, 0x607D software position limits, 0x605A quick stop option,
   0x6072 max torque (per mille of 0x6076), 0x1017 producer heartbeat time; 0x608F and 0x6076
   read for the units;
4. PDO mapping with canopen's `PdoMap` (clear, add, save): RPDO1 controlword + target position
   (+ torque offset 0x60B2 when the EDS has it), RPDO2 velocity offset 0x60B1 (when the EDS has
   it and ``velocity_offset`` is on), TPDO1 statusword + position actual + error code, TPDO2
   velocity actual + torque actual, all synchronous (transmission type 1), the other PDOs
   invalidated. An EDS whose mapping entries are read-only keeps the drive's fixed mapping, read
   back and checked for the objects
   the driver needs.

Step 5, NMT Operational, is the driver's (all nodes together). Every failure is a
`StartupError` whose one-line message names the node, the object and the SDO abort code with its
meaning.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from canopen.objectdictionary import ODArray, ODRecord, ODVariable
from canopen.pdo import PdoMap
from canopen.sdo.exceptions import SdoError

from drivers.cia402.drive import INT32, DriveRecord, ObjectAbortError, ObjectTimeoutError
from drivers.cia402.objects import COB_RPDO, COB_TPDO, MODE_CSP, Obj, describe_abort
from drivers.cia402.params import CiA402Params
from drivers.errors import DriverError

__all__ = ["StartupError", "configure", "interpolation_period", "write_target"]

IDENTITY_PATIENCE_S = 1.0  # s: how long a silent drive is asked for its first answer again
_STATUS_OBJECTS = (Obj.STATUSWORD, Obj.POSITION_ACTUAL, Obj.ERROR_CODE)
_MOTION_OBJECTS = (Obj.VELOCITY_ACTUAL, Obj.TORQUE_ACTUAL)
_REQUIRED_TPDO = (Obj.STATUSWORD, Obj.POSITION_ACTUAL)
_REQUIRED_RPDO = (Obj.CONTROLWORD, Obj.TARGET_POSITION)


class StartupError(DriverError):
    """A drive could not be brought up; the message is one line naming node, object and cause."""


def interpolation_period(period_s: float) -> tuple[int, int]:
    """0x60C2 (value, index) with value × 10^index s = `period_s`, value 1 ... 255, index
    -6 ... 0 (the coarsest exact one). Raises ValueError when none is exact to 1 ns."""
    for index in range(0, -7, -1):
        value = period_s / 10.0**index
        if 1 <= round(value) <= 255 and math.isclose(
            round(value) * 10.0**index, period_s, abs_tol=1e-9
        ):
            return round(value), index
    raise ValueError(f"loop period {period_s} s is not value × 10^index s with value 1 ... 255")


def configure(record: DriveRecord, bus: CiA402Params) -> None:
    """Steps 1 to 4 for one drive. Raises StartupError."""
    step = _Step(record)
    step.run(lambda: _check_identity(record), "0x1018")
    record.node.nmt.send_command(0x80)  # Pre-operational: SDO yes, PDO no
    step.run(lambda: _configure_objects(record, bus), "configuration")
    step.run(lambda: _map_pdos(record), "PDO mapping")


class _Step:
    """Runs a start-up step, turning canopen's errors into one-line `StartupError`s."""

    def __init__(self, record: DriveRecord) -> None:
        self._record = record

    def run(self, action: Callable[[], None], what: str) -> None:
        label = self._record.label
        try:
            action()
        except ObjectAbortError as exc:
            name = _object_name(self._record, exc.index, exc.subindex)
            raise StartupError(
                f"{label}: {exc.index:04X}:{exc.subindex:02X} {name}: SDO abort "
                f"{describe_abort(exc.code)}"
            ) from exc
        except ObjectTimeoutError as exc:
            name = _object_name(self._record, exc.index, exc.subindex)
            raise StartupError(
                f"{label}: {exc.index:04X}:{exc.subindex:02X} {name}: {exc} (powered? node id? "
                "bit rate?)"
            ) from exc
        except (SdoError, KeyError, ValueError, OSError) as exc:
            raise StartupError(f"{label}: {what}: {exc}") from exc


def _entry(record: DriveRecord, index: int, subindex: int) -> ODVariable:
    """The EDS's entry. Raises StartupError naming the object when the EDS lacks it."""
    od = record.node.object_dictionary
    try:
        obj = od[index]
        return obj[subindex] if isinstance(obj, ODRecord | ODArray) else obj
    except KeyError:
        raise StartupError(
            f"{record.label}: {index:04X}:{subindex:02X}: not in the drive's EDS"
        ) from None


def _object_name(record: DriveRecord, index: int, subindex: int) -> str:
    try:
        return str(_entry(record, index, subindex).name)
    except StartupError:
        return "(not in the EDS)"


def _read(record: DriveRecord, index: int, subindex: int = 0) -> int:
    entry = _entry(record, index, subindex)
    return int(entry.decode_raw(record.node.sdo.upload(index, subindex)))


def _write(record: DriveRecord, index: int, subindex: int, value: int) -> None:
    entry = _entry(record, index, subindex)
    record.node.sdo.download(index, subindex, entry.encode_raw(value))


def _has(record: DriveRecord, index: int) -> bool:
    return index in record.node.object_dictionary


def _check_identity(record: DriveRecord) -> None:
    vendor = _first_answer(record)
    product = _read(record, Obj.IDENTITY, 2)
    expected = record.params.identity
    if expected is not None and (vendor, product) != (expected.vendor_id, expected.product_code):
        raise StartupError(
            f"{record.label}: 1018:01/02 identity: vendor 0x{vendor:08X} product "
            f"0x{product:08X}, expected vendor 0x{expected.vendor_id:08X} product "
            f"0x{expected.product_code:08X} (another drive at this node id?)"
        )


def _first_answer(record: DriveRecord) -> int:
    """1018:01 (the Vendor-ID), the drive's first answer: asked again while the drive stays
    silent, for `IDENTITY_PATIENCE_S`. A drive still booting, or a loaded host holding its
    answers up past the SDO timeout, is waited for; a drive that is not there fails after it."""
    deadline = time.monotonic() + IDENTITY_PATIENCE_S
    while True:
        try:
            return _read(record, Obj.IDENTITY, 1)
        except ObjectTimeoutError:
            if time.monotonic() >= deadline:
                raise


def _factor_group(record: DriveRecord) -> float:
    """Position units per motor revolution from the drive's factor group: the feed constant
    (0x6092: position units per driving shaft revolution) over the gear ratio (0x6091: motor
    revolutions per driving shaft revolution). Positions, velocities and limits are exchanged in
    these units, not in encoder increments, on a drive that has the two objects."""
    motor_revs, shaft_revs = _read(record, Obj.GEAR_RATIO, 1), _read(record, Obj.GEAR_RATIO, 2)
    feed, feed_revs = _read(record, Obj.FEED_CONSTANT, 1), _read(record, Obj.FEED_CONSTANT, 2)
    if min(motor_revs, shaft_revs, feed, feed_revs) <= 0:
        raise StartupError(
            f"{record.label}: 6091:01/02 gear ratio {motor_revs}:{shaft_revs}, 6092:01/02 feed "
            f"constant {feed}/{feed_revs}: every term must be > 0 (or set counts_per_rev)"
        )
    return feed / feed_revs * shaft_revs / motor_revs


def _configure_objects(record: DriveRecord, bus: CiA402Params) -> None:
    p = record.params
    if p.counts_per_rev is not None:
        record.counts_per_rev = float(p.counts_per_rev)
    else:
        increments = _read(record, Obj.ENCODER_RESOLUTION, 1)
        revolutions = _read(record, Obj.ENCODER_RESOLUTION, 2)
        if increments <= 0 or revolutions <= 0:
            raise StartupError(
                f"{record.label}: 608F:01/02 position encoder resolution {increments} / "
                f"{revolutions}: set counts_per_rev"
            )
        record.counts_per_rev = increments / revolutions
        if _has(record, Obj.GEAR_RATIO) and _has(record, Obj.FEED_CONSTANT):
            record.counts_per_rev = _factor_group(record)
    _write(record, Obj.MODES_OF_OPERATION, 0, MODE_CSP)
    if bus.loop_period_s is None:
        raise StartupError(f"{record.label}: 60C2: no loop period given (loop_period_s)")
    value, index = interpolation_period(bus.loop_period_s)
    _write(record, Obj.INTERPOLATION_PERIOD, 1, value)
    _write(record, Obj.INTERPOLATION_PERIOD, 2, index)
    if p.following_error_window is not None:
        window = abs(record.to_counts(p.following_error_window))
        _write(record, Obj.FOLLOWING_ERROR_WINDOW, 0, window)
    if p.position_limits is not None:
        low, high = (record.to_counts(limit) for limit in p.position_limits)
        _write(record, Obj.SOFTWARE_POSITION_LIMIT, 1, max(low, INT32[0]))
        _write(record, Obj.SOFTWARE_POSITION_LIMIT, 2, min(high, INT32[1]))
    _write(record, Obj.QUICK_STOP_OPTION, 0, p.quick_stop_option)
    if _has(record, Obj.RATED_TORQUE):
        rated_mnm = _read(record, Obj.RATED_TORQUE)
        record.rated_torque_nm = rated_mnm / 1000.0 if rated_mnm > 0 else None
    if p.torque_limit is not None:
        rated = record.rated_torque_nm
        if rated is None:
            raise StartupError(f"{record.label}: 6076:00: no rated torque to scale torque_limit")
        per_mille = round(p.torque_limit / rated * 1000.0)
        if per_mille > 0xFFFF:
            raise StartupError(
                f"{record.label}: 6072:00 max torque: torque_limit {p.torque_limit} N·m is "
                f"{per_mille} per mille of the rated {rated} N·m, beyond 65535"
            )
        _write(record, Obj.MAX_TORQUE, 0, per_mille)
    _write(record, Obj.PRODUCER_HEARTBEAT, 0, bus.heartbeat_ms)


def write_target(record: DriveRecord) -> int:
    """0x607A := 0x6064 (the measured position), before enabling operation; returns it."""
    held: list[int] = []

    def hold() -> None:
        position = _read(record, Obj.POSITION_ACTUAL)
        _write(record, Obj.TARGET_POSITION, 0, position)
        held.append(position)

    _Step(record).run(hold, "0x607A")
    return held[0]


def _map_pdos(record: DriveRecord) -> None:
    node = record.node
    tpdos, rpdos = node.tpdo, node.rpdo
    fixed = not tpdos[1].map_array[1].od.writable
    if fixed:
        tpdos.read()
        rpdos.read()
        _check_fixed(record, [m for m in tpdos.values() if m.enabled], _REQUIRED_TPDO, "TPDO")
        _check_fixed(record, [m for m in rpdos.values() if m.enabled], _REQUIRED_RPDO, "RPDO")
    else:
        command = [Obj.CONTROLWORD, Obj.TARGET_POSITION]
        if _has(record, Obj.TORQUE_OFFSET):
            command.append(Obj.TORQUE_OFFSET)
        offset = record.params.velocity_offset and _has(record, Obj.VELOCITY_OFFSET)
        plan_r = [command] + ([[Obj.VELOCITY_OFFSET]] if offset else [])
        _save(record, rpdos, plan_r, COB_RPDO)
        _save(record, tpdos, [list(_STATUS_OBJECTS), list(_MOTION_OBJECTS)], COB_TPDO)
    record.command_pdos = [m for m in rpdos.values() if m.enabled]
    for pdo in (m for m in tpdos.values() if m.enabled):
        for variable in pdo:
            record.variables.setdefault(variable.index, variable)
    for pdo in record.command_pdos:
        for variable in pdo:
            record.variables.setdefault(variable.index, variable)
    record.status_pdo = record.variables[Obj.STATUSWORD].pdo_parent
    motion = record.variables.get(Obj.VELOCITY_ACTUAL)
    record.motion_pdo = None if motion is None else motion.pdo_parent


def _save(record: DriveRecord, maps: object, plan: list[list[Obj]], bases: tuple[int, ...]) -> None:
    """Map `plan` (object indices per PDO) into PDO 1, 2, ...; invalidate the others up to 4."""
    assert hasattr(maps, "values")
    for number, pdo in enumerate(maps.values()):
        if number >= len(bases):
            break  # PDOs beyond the predefined connection set are left as the drive has them
        pdo.clear()
        pdo.cob_id = bases[number] + record.node_id
        pdo.trans_type = 1
        pdo.enabled = number < len(plan)
        if pdo.enabled:
            for index in plan[number]:
                if pdo.add_variable(index) is None:
                    raise StartupError(f"{record.label}: {index:04X}:00: not in the drive's EDS")
        pdo.save()


def _check_fixed(
    record: DriveRecord, pdos: list[PdoMap], required: tuple[int, ...], kind: str
) -> None:
    mapped = {variable.index for pdo in pdos for variable in pdo}
    missing = [f"{index:04X}:00" for index in required if index not in mapped]
    if missing:
        raise StartupError(
            f"{record.label}: the drive's fixed {kind} mapping lacks {', '.join(missing)}"
        )
    for pdo in pdos:
        if pdo.trans_type is None or not 1 <= pdo.trans_type <= 240:
            raise StartupError(
                f"{record.label}: fixed {kind} {pdo.name} has transmission type "
                f"{pdo.trans_type}, not synchronous (1 ... 240)"
            )
