"""The CiA 402 state machine of the simulated drive as a pure function: which transition a
controlword causes in a state (CiA 402-2 figure "state machine", table "device control
commands"), and the statusword a state shows. Commands a state has no transition for are refused:
the state stays, as on a real drive.

Transitions (number: from → to, command):
 2 switch on disabled → ready to switch on      shutdown (xxxx x110)
 3 ready to switch on → switched on             switch on (xxxx 0111)
 4 switched on → operation enabled              enable operation (xxxx 1111)
 5 operation enabled → switched on              disable operation (xxxx 0111)
 6 switched on → ready to switch on             shutdown
 7 ready to switch on → switch on disabled      disable voltage (xxxx xx0x) or quick stop (x01x)
 8 operation enabled → ready to switch on       shutdown
 9 switched on → switch on disabled             disable voltage
10 switched on → switch on disabled             quick stop
11 operation enabled → quick stop active        quick stop
12 quick stop active → switch on disabled       disable voltage (or by itself after the stop,
                                                0x605A options 0 ... 4)
15 fault → switch on disabled                   fault reset (rising edge of bit 7)
16 quick stop active → operation enabled        enable operation (0x605A options 5 ... 8)
(9 and 10 differ only by the command; the drive's transition 13/14, fault reaction, is the
drive's own, not a command's.)
"""

from __future__ import annotations

from drivers.cia402.objects import QUICK_STOP_TO_DISABLED, State

__all__ = ["STATUS_BITS", "next_state", "statusword"]

STATUS_BITS: dict[State, int] = {
    State.NOT_READY_TO_SWITCH_ON: 0x0000,
    State.SWITCH_ON_DISABLED: 0x0040,
    State.READY_TO_SWITCH_ON: 0x0031,  # bit 4: voltage enabled, bit 5: quick stop not active
    State.SWITCHED_ON: 0x0033,
    State.OPERATION_ENABLED: 0x0037,
    State.QUICK_STOP_ACTIVE: 0x0017,
    State.FAULT_REACTION_ACTIVE: 0x001F,
    State.FAULT: 0x0008,
}
_REMOTE = 0x0200  # bit 9: the drive follows the controlword


def _command(controlword: int) -> str | None:
    """The device control command bits 0-3 encode (bit 7 is handled by the caller)."""
    if controlword & 0x02 == 0:
        return "disable voltage"
    if controlword & 0x06 == 0x02:
        return "quick stop"
    if controlword & 0x07 == 0x06:
        return "shutdown"
    if controlword & 0x0F == 0x07:
        return "switch on"
    if controlword & 0x0F == 0x0F:
        return "enable operation"
    return None


_TRANSITIONS: dict[tuple[State, str], State] = {
    (State.SWITCH_ON_DISABLED, "shutdown"): State.READY_TO_SWITCH_ON,
    (State.READY_TO_SWITCH_ON, "switch on"): State.SWITCHED_ON,
    (State.SWITCHED_ON, "enable operation"): State.OPERATION_ENABLED,
    (State.OPERATION_ENABLED, "switch on"): State.SWITCHED_ON,
    (State.SWITCHED_ON, "shutdown"): State.READY_TO_SWITCH_ON,
    (State.READY_TO_SWITCH_ON, "disable voltage"): State.SWITCH_ON_DISABLED,
    (State.READY_TO_SWITCH_ON, "quick stop"): State.SWITCH_ON_DISABLED,
    (State.OPERATION_ENABLED, "shutdown"): State.READY_TO_SWITCH_ON,
    (State.SWITCHED_ON, "disable voltage"): State.SWITCH_ON_DISABLED,
    (State.SWITCHED_ON, "quick stop"): State.SWITCH_ON_DISABLED,
    (State.OPERATION_ENABLED, "disable voltage"): State.SWITCH_ON_DISABLED,
    (State.OPERATION_ENABLED, "quick stop"): State.QUICK_STOP_ACTIVE,
    (State.QUICK_STOP_ACTIVE, "disable voltage"): State.SWITCH_ON_DISABLED,
}


def next_state(
    state: State, controlword: int, previous_controlword: int, quick_stop_option: int
) -> State:
    """The state after the drive receives `controlword` (the one before was
    `previous_controlword`); `state` itself when the command has no transition from it."""
    if state is State.FAULT:
        rising = controlword & 0x80 and not previous_controlword & 0x80
        return State.SWITCH_ON_DISABLED if rising else state
    if state in (State.FAULT_REACTION_ACTIVE, State.NOT_READY_TO_SWITCH_ON):
        return state  # the drive's own transitions only
    if controlword & 0x80:
        return state  # fault reset outside Fault: no transition
    command = _command(controlword)
    if command is None:
        return state
    if (
        state is State.QUICK_STOP_ACTIVE
        and command == "enable operation"
        and quick_stop_option not in QUICK_STOP_TO_DISABLED
    ):
        return State.OPERATION_ENABLED
    return _TRANSITIONS.get((state, command), state)


def statusword(state: State, *, target_reached: bool, following_error: bool) -> int:
    """The statusword the drive shows in `state` (CSP: bit 10 target reached, bit 12 drive
    follows the target, bit 13 following error)."""
    word = STATUS_BITS[state] | _REMOTE
    if target_reached:
        word |= 0x0400
    if state is State.OPERATION_ENABLED:
        word |= 0x1000
    if following_error:
        word |= 0x2000
    return word
