"""The guided calibration in a terminal: the drivers open (never enabled: torque off, no goal ever
written), each joint moved by hand through its range while a refreshing line shows its reading
and the recorded min and max, then the arm in its reference pose (the model's zero).

`record` returns each joint's motor readings (min, max, reference; motor units) or raises
`Aborted` (end of input); Ctrl-C interrupts it as KeyboardInterrupt. The drivers are closed on
every way out. Reads are batched per driver, at `REFRESH_S`, each with a timeout.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TextIO

from armd.config.calibration import position_units
from armd.config.load import ArmSetup, build_drivers
from armd.control.transmission import Transmission
from drivers import Driver

__all__ = ["MIN_SPAN", "Aborted", "Keyboard", "Readings", "record"]

REFRESH_S = 0.05
READ_TIMEOUT_S = 1.0
FIRST_READ_S = 2.0  # how long every device has to answer once after the drivers open
MIN_SPAN = {"rad": 0.1, "m": 0.005}
"""The smallest range a joint may be calibrated with, per unit (about 6°, 5 mm): less means it
was not moved, or its device does not report the motion."""


class Aborted(Exception):  # noqa: N818 (an outcome the user chose, not an error)
    """The user ended the input (Ctrl-D): nothing is written."""


class Keyboard:
    """Lines typed on a terminal's stdin, read from the event loop without blocking it."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        asyncio.get_running_loop().add_reader(fd, self._readable)

    def _readable(self) -> None:
        data = os.read(self._fd, 4096)
        if not data:
            asyncio.get_running_loop().remove_reader(self._fd)
            self._lines.put_nowait(None)
            return
        self._buffer += data
        while b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            self._lines.put_nowait(line.decode(errors="replace").strip())

    async def line(self, timeout_s: float | None = None) -> str | None:
        """The next line typed, or None when `timeout_s` passed first. Raises `Aborted` at EOF."""
        try:
            line = await asyncio.wait_for(self._lines.get(), timeout_s)
        except TimeoutError:
            return None
        if line is None:
            self._lines.put_nowait(None)  # stays at end of input
            raise Aborted("end of input")
        return line

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self._fd)


@dataclass(frozen=True, slots=True)
class Readings:
    """One joint's motor readings (motor units): the extremes moved through, and the reference;
    `reference` is what the reference reads after calibration (joint units: 0, the model's zero,
    for a reference pose held by hand)."""

    motor_min: float
    motor_max: float
    motor_reference: float
    reference: float = 0.0


class _Arm:
    """The opened drivers, read together: the motor position of each joint's device."""

    def __init__(self, drivers: Mapping[str, Driver], joints: Sequence[Transmission]) -> None:
        self.drivers = drivers
        self.joints = joints

    async def read(self) -> dict[str, float]:
        """Motor positions by joint, for the joints whose device has answered."""
        states = {}
        for name, driver in self.drivers.items():
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow the cancellation
            # of a Ctrl-C that arrives as the read completes
            async with asyncio.timeout(READ_TIMEOUT_S):
                states[name] = await driver.read()
        return {
            t.joint: states[t.driver][t.device].position
            for t in self.joints
            if t.device in states[t.driver]
        }

    async def first_read(self) -> dict[str, float]:
        """A reading of every joint; raises `Aborted` naming the devices that never answer."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FIRST_READ_S
        while True:
            motors = await self.read()
            silent = [t for t in self.joints if t.joint not in motors]
            if not silent:
                return motors
            if loop.time() > deadline:
                names = ", ".join(f"{t.joint} ({t.driver}/{t.device})" for t in silent)
                raise Aborted(f"no reading from the devices of {names} in {FIRST_READ_S:g} s")
            await asyncio.sleep(REFRESH_S)


async def record(
    setup: ArmSetup, joints: Sequence[str], keyboard: Keyboard, out: TextIO
) -> dict[str, Readings]:
    """Guide the user through the ranges of `joints`, then the reference pose (see the module
    docstring). Raises `Aborted`."""
    transmissions = [setup.joints[name] for name in joints]
    drivers = build_drivers(setup)
    used = {t.driver for t in transmissions}
    async with AsyncExitStack() as stack:
        for name in used:
            await stack.enter_async_context(drivers[name])  # open; closed on the way out
        arm = _Arm({name: drivers[name] for name in used}, transmissions)
        await arm.first_read()
        _say(out, "The drivers are open with torque off: the joints move freely by hand.")
        ranges = {}
        for i, t in enumerate(transmissions, 1):
            _say(out, f"\njoint {i}/{len(transmissions)}: {t.joint} ({t.driver}/{t.device})")
            ranges[t.joint] = await _joint_range(arm, t, setup, keyboard, out)
        _say(
            out,
            "\nPut the arm in its reference pose (the model's zero: every joint at 0), "
            "then press Enter.",
        )
        reference = await _live(arm, keyboard, out, lambda m: _pose_line(m, transmissions))
    return {joint: Readings(low, high, reference[joint]) for joint, (low, high) in ranges.items()}


@dataclass
class _Extremes:
    """The motor extremes of one joint seen so far, and its live line."""

    t: Transmission
    unit: str
    low: float | None = None
    high: float | None = None

    def line(self, motors: Mapping[str, float]) -> str:
        motor = motors.get(self.t.joint)
        if motor is None:
            return f"  {self.t.joint}: no reading yet"
        self.low = motor if self.low is None else min(self.low, motor)
        self.high = motor if self.high is None else max(self.high, motor)
        low, high = self.joint_range()
        return (
            f"  {self.t.joint}  now {self.t.joint_position(motor):+8.4f}  min {low:+8.4f}  "
            f"max {high:+8.4f}  span {high - low:7.4f} {self.unit} (uncalibrated)"
        )

    def joint_range(self) -> tuple[float, float]:
        """[min, max] in joint units (through the configured transmission)."""
        if self.low is None or self.high is None:
            return 0.0, 0.0
        a, b = self.t.joint_position(self.low), self.t.joint_position(self.high)
        return min(a, b), max(a, b)


async def _joint_range(
    arm: _Arm, t: Transmission, setup: ArmSetup, keyboard: Keyboard, out: TextIO
) -> tuple[float, float]:
    """The motor extremes of one joint moved by hand, once they span at least `MIN_SPAN`."""
    unit = _unit(setup, t.joint)
    minimum = MIN_SPAN[unit]
    while True:
        _say(out, "  Move it by hand through its whole range, to both ends, then press Enter.")
        extremes = _Extremes(t, unit)
        await _live(arm, keyboard, out, extremes.line)
        low, high = extremes.joint_range()
        if extremes.low is not None and extremes.high is not None and high - low >= minimum:
            return extremes.low, extremes.high
        _say(
            out,
            f"  refused: {t.joint} moved through {high - low:.4f} {unit}, less than the "
            f"{minimum:g} {unit} a calibrated range needs (was it moved? does its device report "
            "it?); once more:",
        )


async def _live(
    arm: _Arm, keyboard: Keyboard, out: TextIO, render: Callable[[Mapping[str, float]], str]
) -> dict[str, float]:
    """Refresh the line `render` makes of each reading until Enter; the last reading."""
    motors: dict[str, float] = {}
    while True:
        motors.update(await arm.read())
        out.write(f"\r\x1b[K{render(motors)}")
        out.flush()
        if await keyboard.line(REFRESH_S) is not None:  # the terminal echoed the Enter
            return motors


def _pose_line(motors: Mapping[str, float], joints: Sequence[Transmission]) -> str:
    values = " ".join(
        f"{t.joint_position(motors[t.joint]):+.3f}" if t.joint in motors else "?" for t in joints
    )
    return f"  now [{values}] (uncalibrated)"


def _unit(setup: ArmSetup, joint: str) -> str:
    return position_units(setup.tree).get(joint, "rad")


def _say(out: TextIO, text: str) -> None:
    out.write(text + "\n")
    out.flush()
