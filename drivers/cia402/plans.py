"""The walks through the CiA 402 state machine the driver makes, as data: for each drive a list of
steps, each a controlword to send (in the RPDO of every cycle) until the drive's statusword shows
what the step waits for. Pure: `drivers.cia402.driver` runs them.

- enable: shutdown → Ready to Switch On, switch on → Switched On; then (after 0x607A is set to
  the measured position) enable operation → Operation Enabled.
- disable, ``quick_stop``: quick stop → Quick Stop Active at rest (or Switch On Disabled, which
  0x605A options 0 ... 4 reach by themselves once stopped); only then disable voltage → Switch On
  Disabled; shutdown → Ready to Switch On. ``disable_operation``: disable operation → Switched
  On (the drive stops by 0x605C), shutdown → Ready to Switch On. Never a bare disable voltage
  while the drive moves. A drive in Fault is already without torque: its walk ends there.
- fault reset: controlword bit 7 low for a cycle, then high (the rising edge) → Switch On
  Disabled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from drivers.cia402.drive import DriveRecord
from drivers.cia402.objects import Command, State

__all__ = [
    "AT_REST_RAD_S",
    "Step",
    "disable_steps",
    "enable_steps",
    "operation_step",
    "reset_steps",
]

AT_REST_RAD_S = 0.01
"""Below this speed (rad/s at the motor) a drive in Quick Stop Active has stopped."""


@dataclass(frozen=True, slots=True)
class Step:
    """Send `command` until `reached(record)`; `wanted` names the goal in messages. A drive in
    Fault fails the step unless `from_fault` (a fault reset starts there)."""

    command: int
    wanted: str
    reached: Callable[[DriveRecord], bool]
    from_fault: bool = False


def _in(*states: State) -> Callable[[DriveRecord], bool]:
    return lambda record: record.state in states


def _stopped(record: DriveRecord) -> bool:
    if record.state is State.SWITCH_ON_DISABLED:
        return True
    at_rest = abs(record.to_rad(record.velocity)) < AT_REST_RAD_S
    return record.state is State.QUICK_STOP_ACTIVE and at_rest


def enable_steps() -> list[Step]:
    return [
        Step(Command.SHUTDOWN, State.READY_TO_SWITCH_ON.value, _in(State.READY_TO_SWITCH_ON)),
        Step(Command.SWITCH_ON, State.SWITCHED_ON.value, _in(State.SWITCHED_ON)),
    ]


def operation_step() -> list[Step]:
    wanted = State.OPERATION_ENABLED
    return [Step(Command.ENABLE_OPERATION, wanted.value, _in(wanted))]


def disable_steps(how: str) -> list[Step]:
    shutdown = Step(Command.SHUTDOWN, State.READY_TO_SWITCH_ON.value, _in(State.READY_TO_SWITCH_ON))
    if how == "disable_operation":
        return [Step(Command.SWITCH_ON, State.SWITCHED_ON.value, _in(State.SWITCHED_ON)), shutdown]
    return [
        Step(Command.QUICK_STOP, "quick stop active at rest", _stopped),
        Step(
            Command.DISABLE_VOLTAGE, State.SWITCH_ON_DISABLED.value, _in(State.SWITCH_ON_DISABLED)
        ),
        shutdown,
    ]


def reset_steps() -> list[Step]:
    return [
        Step(Command.DISABLE_VOLTAGE, "controlword bit 7 low", lambda record: True, True),
        Step(
            Command.FAULT_RESET,
            State.SWITCH_ON_DISABLED.value,
            _in(State.SWITCH_ON_DISABLED),
            from_fault=True,
        ),
    ]
