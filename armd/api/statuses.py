"""The status contract of ``goal/status``, kept in one place.

Every goal that carries an ``id`` gets exactly one *first* status, ``accepted`` or ``rejected``,
and, when accepted, exactly one *final* status, ``succeeded``, ``aborted`` or ``preempted``; never
a status twice. The parts of the daemon that decide a goal's fate (the MQTT bridge for malformed
payloads, the goal pipeline, the control loop in its process) all report through one
`StatusLedger`, which knows the goals in progress and turns their reports into that sequence:

- a final status for a goal that was taken in but not yet answered (replaced by a newer goal
  before it was planned, a stop goal, a goal aborted at shutdown) is sent as ``accepted`` and then
  the final status: the goal was valid and taken in, and then ended;
- a second first status, a status after the final one, or a status for a goal the ledger does not
  know is a bug upstream: it is logged and dropped, never sent;
- a goal whose ``id`` is the id of a goal still in progress is rejected at once (its statuses
  could not be told apart from the other's);
- `abort_all` ends every goal still in progress (``aborted``, with the reason) when the daemon
  stops or its control process dies, before the daemon goes ``offline``.

Statuses without an id (a ``stop`` goal without one, a payload whose id could not be read) pass
through unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from armd.link.messages import GoalStatus, StatusUpdate

__all__ = ["StatusLedger"]

log = logging.getLogger(__name__)


class StatusLedger:
    """The goals in progress and the statuses sent for them; `publish` sends one status."""

    def __init__(self, publish: Callable[[StatusUpdate], None]) -> None:
        self._publish = publish
        self._accepted: dict[str, bool] = {}  # goals in progress -> whether `accepted` was sent
        self.contract_violations = 0  # statuses dropped because they would break the contract

    @property
    def in_progress(self) -> int:
        return len(self._accepted)

    def holds(self, goal_id: str) -> bool:
        """Whether `goal_id` is the id of a goal in progress."""
        return goal_id in self._accepted

    def receive(self, goal_id: str | None) -> str | None:
        """Take a goal in: None, or why it cannot be (its id is in use), after rejecting it."""
        if goal_id is None:
            return None
        if goal_id in self._accepted:
            reason = f"id: {goal_id!r} is the id of a goal still in progress; use a new id per goal"
            self._publish(StatusUpdate(goal_id, GoalStatus.REJECTED, reason))
            return reason
        self._accepted[goal_id] = False
        return None

    def report(self, update: StatusUpdate) -> None:
        """Send `update` as the contract allows (see the module docstring)."""
        goal_id = update.goal_id
        if goal_id is None:
            self._publish(update)
            return
        accepted = self._accepted.get(goal_id)
        if accepted is None:
            self._violation(update, "the goal is not in progress")
            return
        if update.status is GoalStatus.ACCEPTED:
            if accepted:
                self._violation(update, "already accepted")
                return
            self._accepted[goal_id] = True
        elif update.status is GoalStatus.REJECTED:
            if accepted:
                self._violation(update, "rejected after it was accepted")
                update = StatusUpdate(goal_id, GoalStatus.ABORTED, update.reason)
            del self._accepted[goal_id]
        else:
            if not accepted:
                self._publish(StatusUpdate(goal_id, GoalStatus.ACCEPTED))
            del self._accepted[goal_id]
        self._publish(update)

    def abort_all(self, reason: str) -> None:
        """End every goal in progress as ``aborted`` with `reason`."""
        for goal_id in list(self._accepted):
            self.report(StatusUpdate(goal_id, GoalStatus.ABORTED, reason))

    def _violation(self, update: StatusUpdate, why: str) -> None:
        self.contract_violations += 1
        log.error("status %s for goal %r not sent: %s", update.status.value, update.goal_id, why)
