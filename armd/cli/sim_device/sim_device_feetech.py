"""``armd sim-device feetech``'s end stops, and the chain that serves with them.

A real SO-101's joints stop against the arm's mechanics before their STS3215 servos reach the
ends of their own range (one turn, counts 0..4095), except its wrist roll, which turns freely to
the ends of its servo's range. The simulated chain has those stops too: ``--end-stops so101``
(the default) puts them on servos 1-4 and 6 at the joint limits of ``config/robots/so101.urdf``
(the joints of ``config/so101.yaml``, whose uncalibrated transmission puts each joint at its
servo's shaft angle, 0 rad at count 2048) and none on servo 5, the wrist roll. ``--end-stops
none`` leaves every shaft free within the servo's range; ``ID=LOW:HIGH`` items put stops (rad at
the shaft) on the servos they name and none on the others. A shaft never leaves its stops and a
servo pushing into one reports the push as its load (`drivers.sim.motor.MotorFaults.end_stops`).
"""

from __future__ import annotations

import argparse
import math
import threading
from collections.abc import Callable, Mapping, Sequence

from armd.cli.common import UsageError
from drivers.sim.motor import MotorParams

__all__ = [
    "SO101_END_STOPS",
    "add_end_stops_argument",
    "end_stops",
    "end_stops_line",
    "serve",
]

EndStops = Mapping[int, tuple[float, float]]

SO101_END_STOPS: EndStops = {
    1: (-1.91986, 1.91986),  # shoulder_pan
    2: (-1.74533, 1.74533),  # shoulder_lift
    3: (-1.69, 1.69),  # elbow_flex
    4: (-1.65806, 1.65806),  # wrist_flex
    6: (-0.174533, 1.74533),  # gripper
}
"""Servo id: its end stops (rad at the shaft), the SO-101's joint limits (config/robots/so101.urdf,
TheRobotStudio's so101_new_calib.urdf), all within the STS3215's range of [-π, π). Servo 5, the
wrist roll, has none (the model's limits, [-2.74385, 2.84121], are not stops on the arm)."""

PRESETS = {"so101": SO101_END_STOPS, "none": {}}


def add_end_stops_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--end-stops",
        nargs="+",
        default=["so101"],
        metavar="STOPS",
        help="the motors' mechanical end stops: so101 (the SO-101's: ids 1-4 and 6 at its joint "
        "limits, the wrist roll 5 free), "
        "none, or ID=LOW:HIGH (rad at the shaft) for each servo that has them (so101)",
    )


def end_stops(values: Sequence[str], ids: Sequence[int], initial: Mapping[int, float]) -> EndStops:
    """The end stops of `--end-stops` `values` for the chain's `ids`, by id; each servo's
    `initial` position must lie within its stops. Raises `UsageError` naming the value and the
    bound."""
    if len(values) == 1 and values[0] in PRESETS:
        stops = {i: s for i, s in PRESETS[values[0]].items() if i in ids}
    else:
        stops = {}
        for value in values:
            servo_id, stop = _item(value, ids)
            if servo_id in stops:
                raise UsageError(f"--end-stops: servo {servo_id} is given twice")
            stops[servo_id] = stop
    for servo_id, (low, high) in stops.items():
        position = initial[servo_id]
        if not low <= position <= high:
            raise UsageError(
                f"--initial-positions: servo {servo_id} at {position:g} rad is outside its end "
                f"stops [{low:g}, {high:g}] rad (--end-stops)"
            )
    return stops


def _item(value: str, ids: Sequence[int]) -> tuple[int, tuple[float, float]]:
    """One ``ID=LOW:HIGH`` item."""
    expected = f"--end-stops: {value!r} is not so101, none, or ID=LOW:HIGH (rad at the shaft)"
    name, _, stop = value.partition("=")
    low_text, _, high_text = stop.partition(":")
    try:
        servo_id, low, high = int(name), float(low_text), float(high_text)
    except ValueError:
        raise UsageError(expected) from None
    if servo_id not in ids:
        raise UsageError(f"--end-stops: servo {servo_id} is not one of --ids {list(ids)}")
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise UsageError(
            f"--end-stops: servo {servo_id}: [{low:g}, {high:g}] must be finite, low < high"
        )
    return servo_id, (low, high)


def end_stops_line(values: Sequence[str], stops: EndStops) -> str:
    """The printed config's comment line that says where the simulated stops are."""
    if not stops:
        return (
            f"# end stops: none (--end-stops {' '.join(values)}): the servos' range is the travel"
        )
    where = ", ".join(f"{i}: [{low:g}, {high:g}]" for i, (low, high) in stops.items())
    return f"# end stops (--end-stops {' '.join(values)}), rad at the shaft: {{{where}}}"


def serve(
    ids: Sequence[int],
    baudrate: int,
    *,
    link: str | None,
    stop: threading.Event | None,
    motor_params: MotorParams,
    initial_positions: Mapping[int, float],
    end_stops: EndStops,
    return_delay_s: float,
    on_ready: Callable[[str], None],
) -> None:
    """Serve a simulated STS3215 chain with these motors and end stops until `stop` is set (as
    `drivers.feetech.sim.run`, the replies delayed by their wire time)."""
    from drivers.feetech.sim import SimulatedFeetechChain  # pyserial only when asked for
    from drivers.serial_bus.pty_chain import serve_until_stopped

    with SimulatedFeetechChain(
        ids, baudrate=baudrate, return_delay_s=return_delay_s, model_wire_time=True,
        motor_params=motor_params, initial_positions=initial_positions,
    ) as chain:  # fmt: skip
        for servo_id, stops in end_stops.items():
            with chain.device(servo_id) as servo:
                servo.motor.faults.end_stops = stops
        serve_until_stopped(chain, link=link, on_ready=on_ready, stop=stop)
