"""``armd sim-device``'s simulated motors as options, and the config lines that match them.

Each simulated device kind takes the motors' limits (rad/s and rad/s² at the motor shaft) and
initial positions (rad at the shaft, one per id) as options, and prints, once it serves, the
``drivers.<name>`` lines of a config that drives it: the bus (interface and channel, or port and
baud rate), the devices by id, and the motor limits with what they allow for a joint's limits
(``gear_ratio`` × a joint's velocity and acceleration limits must stay below them). The defaults
fit ``config/armd.example.yaml``: ODrive axes fast enough for its ``gear_ratio: 50`` joints,
Dynamixel servos as fast as an XM430, and Feetech servos as fast as an STS3215.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from armd.cli.common import UsageError

__all__ = [
    "DYNAMIXEL_MOTOR",
    "FEETECH_MOTOR",
    "ODRIVE_MOTOR",
    "MotorOptions",
    "add_motor_arguments",
    "dynamixel_config_lines",
    "feetech_config_lines",
    "motor_options",
    "odrive_config_lines",
]


@dataclass(frozen=True, slots=True)
class MotorOptions:
    """The simulated motors: limits at the shaft (rad/s, rad/s²) and initial positions by id."""

    max_velocity: float
    max_acceleration: float
    initial_positions: Mapping[int, float]


# ODrive: a hobby BLDC turns ~40 turns/s; 250 rad/s carries the example's 3.15 rad/s joints
# through gear_ratio 50 (157.5 rad/s) with room for the position loop's overshoot.
ODRIVE_MOTOR = (250.0, 2500.0)
# Dynamixel: the simulated servo's output shaft (the XM430-W350 turns 4.8 rad/s at 12 V).
DYNAMIXEL_MOTOR = (6.0, 60.0)
# Feetech: the simulated STS3215's output shaft (12 V, 1:345: about 0.22 s/60°, 4.7 rad/s).
FEETECH_MOTOR = (4.7, 60.0)


def add_motor_arguments(parser: argparse.ArgumentParser, defaults: tuple[float, float]) -> None:
    velocity, acceleration = defaults
    parser.add_argument(
        "--max-velocity",
        type=float,
        default=velocity,
        metavar="RAD_S",
        help=f"motor velocity limit, rad/s at the shaft ({velocity:g})",
    )
    parser.add_argument(
        "--max-acceleration",
        type=float,
        default=acceleration,
        metavar="RAD_S2",
        help=f"motor acceleration limit, rad/s² at the shaft ({acceleration:g})",
    )
    parser.add_argument(
        "--initial-positions",
        nargs="+",
        type=float,
        metavar="RAD",
        help="each motor's position at start, rad at the shaft, one per id (all 0)",
    )


def motor_options(args: argparse.Namespace, ids: Sequence[int]) -> MotorOptions:
    """The validated motor options. Raises UsageError naming the option, value and bound."""
    for option, value in (
        ("--max-velocity", args.max_velocity),
        ("--max-acceleration", args.max_acceleration),
    ):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{option}: {value} must be finite and > 0")
    positions = args.initial_positions or [0.0] * len(ids)
    if len(positions) != len(ids):
        raise UsageError(
            f"--initial-positions: {len(positions)} values for {len(ids)} ids {list(ids)}"
        )
    bad = [p for p in positions if not math.isfinite(p)]
    if bad:
        raise UsageError(f"--initial-positions: {bad} must be finite")
    return MotorOptions(
        args.max_velocity, args.max_acceleration, dict(zip(ids, positions, strict=True))
    )


def _motor_lines(motors: MotorOptions) -> list[str]:
    start = ", ".join(f"{i}: {p:g}" for i, p in motors.initial_positions.items())
    return [
        f"# motors: {motors.max_velocity:g} rad/s, {motors.max_acceleration:g} rad/s² at the "
        f"shaft, starting at {{{start}}} rad; keep gear_ratio × each joint's velocity and",
        "# acceleration limits below these (the joints' `limits` in the config).",
    ]


def odrive_config_lines(
    interface: str, channel: str, node_ids: Sequence[int], motors: MotorOptions
) -> str:
    """The ``drivers.<name>`` lines of a config whose ``odrive`` driver drives these axes."""
    lines = [
        f"# armd sim-device odrive: the `odrive` driver's lines for node ids {list(node_ids)}",
        "type: odrive",
        "params:",
        f"  interface: {interface}",
        f"  channel: {channel!r}",
        "  devices:",
        *(f"    axis{i}: {{node_id: {i}}}" for i in node_ids),
        *_motor_lines(motors),
    ]
    return "\n".join(lines)


def dynamixel_config_lines(
    port: str, baudrate: int, ids: Sequence[int], motors: MotorOptions
) -> str:
    """The ``drivers.<name>`` lines of a config whose ``dynamixel`` driver drives this chain."""
    lines = [
        f"# armd sim-device dynamixel: the `dynamixel` driver's lines for ids {list(ids)}",
        "type: dynamixel",
        "params:",
        f"  port: {port}",
        f"  baudrate: {baudrate}",
        "  devices:",
        *(f"    servo{i}: {{id: {i}}}" for i in ids),
        *_motor_lines(motors),
    ]
    return "\n".join(lines)


def feetech_config_lines(
    port: str, baudrate: int, ids: Sequence[int], motors: MotorOptions, end_stops: str
) -> str:
    """The ``drivers.<name>`` lines of a config whose ``feetech`` driver drives this chain;
    `end_stops`: the comment line that says where its motors' end stops are."""
    lines = [
        f"# armd sim-device feetech: the `feetech` driver's lines for ids {list(ids)}",
        "type: feetech",
        "params:",
        f"  port: {port}",
        f"  baudrate: {baudrate}",
        "  devices:",
        *(f"    servo{i}: {{id: {i}}}" for i in ids),
        end_stops,
        *_motor_lines(motors),
    ]
    return "\n".join(lines)
