"""``armd calibrate --auto`` in a terminal: each joint driven into its two end stops at a low
torque limit (`armd.tools.autocal`), the other joints holding where they are.

`record_auto` refuses joints without a settable torque limit before anything opens, says what
will move and waits for Enter, then opens and enables every driver of the config (the searched
joints' torque limits lowered), searches each joint's end stops in turn while a refreshing line
shows it (with a warning for an end of travel that is the end of its servo's range instead), and
disables the drives. It returns each joint's `Readings` with the **middle of its
range as the reference**, reading the middle of the joint's limits in the model (its zero
where the model centres the range on it, as LeRobot's calibration and the SO-101 model do for
every joint but the gripper). Ctrl-C (KeyboardInterrupt, which cancels the task) or a failure
closes every driver, which disables it, on the way out; nothing is written by this module.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence, Set
from contextlib import AsyncExitStack
from typing import TextIO

from armd.cli.calibrate.calibrate_session import FIRST_READ_S, MIN_SPAN, Keyboard, Readings
from armd.config.calibration import position_units
from armd.config.load import ArmSetup
from armd.control.timing import raise_priority
from armd.control.transmission import Transmission
from armd.errors import ArmdError
from armd.tools.autocal import (
    TORQUE_IN_NM,
    AutoRefusedError,
    AutoSettings,
    EndStopError,
    EndStops,
    Travel,
    limited_drivers,
    sweep_collision,
)
from drivers import Driver

__all__ = ["record_auto"]

REFRESH_S = 0.1  # the live line's refresh


async def record_auto(
    setup: ArmSetup,
    joints: Sequence[str],
    settings: AutoSettings,
    keyboard: Keyboard,
    out: TextIO,
) -> dict[str, Readings]:
    """Find the end stops of `joints` (see the module docstring). Raises `AutoRefusedError`
    before anything moves, `EndStopError` when a search fails, `Aborted` at end of input."""
    transmissions = [setup.joints[name] for name in joints]
    setups = limited_drivers(setup.drivers, transmissions, settings.torque)
    torque = {t.joint: _torque_limit(setups[t.driver].params, t.device) for t in transmissions}
    in_nm = {t.joint for t in transmissions if setups[t.driver].type_name in TORQUE_IN_NM}
    units = position_units(setup.tree)
    _plan(out, transmissions, torque, in_nm, settings, units)
    await keyboard.line()
    # The search reads and commands its devices every tick and gives up on a stale reading: at
    # the config's real-time priority, as the daemon's control process, a busy machine cannot
    # delay it into an abort.
    raise_priority(setup.realtime_priority, "calibrate")
    drivers = {name: s.build() for name, s in setups.items()}
    stops: dict[str, tuple[float, float]] = {}
    async with AsyncExitStack() as stack:
        stack.push_async_callback(_disabled, drivers, out)
        for driver in drivers.values():
            await stack.enter_async_context(driver)  # open; closed (disabled) on the way out
        search = EndStops(drivers, settings, torque, clock=asyncio.get_running_loop().time)
        await _first_read(search, transmissions)
        if setup.collision is not None:
            await _refuse_collisions(setup, search, transmissions, settings)
        for driver in drivers.values():
            await driver.enable()
        for i, t in enumerate(transmissions, 1):
            _say(out, f"\njoint {i}/{len(transmissions)}: {t.joint} ({t.driver}/{t.device})")
            line = _Line(out)
            travel = await search.find(t, line.show, setup.limits[t.joint])
            stops[t.joint] = (travel.low, travel.high)
            _say(out, f"\r\x1b[K{_stops_line(t, travel, units.get(t.joint, 'rad'))}")
            for range_end in travel.range_ends:
                _say(out, f"  warning: {range_end}")
    return {
        joint: Readings(
            motor_min=low,
            motor_max=high,
            motor_reference=(low + high) / 2.0,
            reference=_model_middle(setup, joint),
        )
        for joint, (low, high) in stops.items()
    }


def _model_middle(setup: ArmSetup, joint: str) -> float:
    """Where the middle of a joint's travel lies in the model: the middle of its limits (0 for a
    joint whose limits are centred on its zero, or that has none)."""
    limit = setup.tree.limits[joint]
    middle = (limit.lower + limit.upper) / 2.0
    return middle if math.isfinite(middle) else 0.0


def _plan(
    out: TextIO,
    joints: Sequence[Transmission],
    torque: Mapping[str, float],
    in_nm: Set[str],
    settings: AutoSettings,
    units: Mapping[str, str],
) -> None:
    _say(out, "armd calibrate --auto drives each joint into its two end stops:")
    for t in joints:
        unit = units.get(t.joint, "rad")
        limit = f"{torque[t.joint]:.2f} {'N·m' if t.joint in in_nm else 'of stall'}"
        _say(
            out,
            f"  {t.joint} ({t.driver}/{t.device}): torque limit {limit}, "
            f"{settings.speed:g} {unit}/s, at most {settings.max_travel:g} {unit} either way",
        )
    _say(
        out,
        "The other joints hold where they are. Keep clear of the arm; Ctrl-C stops it at any "
        "time (the drives are disabled). Press Enter to start.",
    )


def _torque_limit(params: object, device: str) -> float:
    devices = getattr(params, "devices", {})
    return float(getattr(devices[device], "torque_limit", 1.0))


async def _first_read(search: EndStops, joints: Sequence[Transmission]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FIRST_READ_S
    while True:
        states = await search.read()
        silent = [t for t in joints if (t.driver, t.device) not in states]
        if not silent:
            return
        if loop.time() > deadline:
            names = ", ".join(f"{t.joint} ({t.driver}/{t.device})" for t in silent)
            raise EndStopError(f"no reading from the devices of {names} in {FIRST_READ_S:g} s")
        await asyncio.sleep(0.05)


async def _refuse_collisions(
    setup: ArmSetup, search: EndStops, joints: Sequence[Transmission], settings: AutoSettings
) -> None:
    """`AutoRefusedError` (nothing enabled yet) when a joint's search would collide."""
    assert setup.collision is not None
    motors: dict[str, dict[str, float]] = {}
    for (driver, device), state in (await search.read()).items():
        motors.setdefault(driver, {})[device] = state.position
    try:
        q = setup.transmission.joint_positions(setup.transmission.from_devices(motors))
    except ArmdError as exc:
        raise AutoRefusedError(f"cannot check the searches for collisions: {exc}") from None
    for t in joints:
        joint = setup.tree.joint_names.index(t.joint)
        found = sweep_collision(setup.collision, q, joint, settings.max_travel)
        if found is not None:
            position, a, b = found
            raise AutoRefusedError(
                f"collision: searching {t.joint}'s end stops would bring {a} and {b} within "
                f"the margin at {t.joint} = {position:.3f} (with the configured offsets); move "
                "the arm clear of it, lower --auto-max-travel, or calibrate this joint by hand"
            )


async def _disabled(drivers: Mapping[str, Driver], out: TextIO) -> None:
    """Close every driver (which disables it first); say so."""
    for driver in drivers.values():
        await driver.close()
    _say(out, "\nthe drives are disabled")


class _Line:
    """A refreshing status line, redrawn at most every `REFRESH_S`."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.last = 0.0

    def show(self, text: str) -> None:
        now = asyncio.get_running_loop().time()
        if now - self.last >= REFRESH_S:
            self.last = now
            self.out.write(f"\r\x1b[K{text} (uncalibrated)")
            self.out.flush()


def _stops_line(t: Transmission, travel: Travel, unit: str) -> str:
    a, b = sorted((t.joint_position(travel.low), t.joint_position(travel.high)))
    span = b - a
    ends = "ends of travel" if travel.range_ends else "end stops"
    if span < MIN_SPAN[unit]:
        raise EndStopError(
            f"joint {t.joint!r}: its {ends} [{a:+.4f}, {b:+.4f}] {unit} are only "
            f"{span:.4f} {unit} apart, less than the {MIN_SPAN[unit]:g} {unit} a calibrated range "
            "needs (is it blocked, or too weak at this torque limit to move? see --auto-torque)"
        )
    return f"  {t.joint}: {ends} at {a:+.4f} and {b:+.4f} {unit} (uncalibrated), span {span:.4f}"


def _say(out: TextIO, text: str) -> None:
    out.write(text + "\n")
    out.flush()
