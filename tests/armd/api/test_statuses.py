"""The status contract kept by `StatusLedger`: one first status (accepted or rejected), then one
final status for an accepted goal, never a status twice, whatever its reporters send."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from armd.api.statuses import StatusLedger
from armd.link.messages import GoalStatus, StatusUpdate

A, R, S, AB, P = (
    GoalStatus.ACCEPTED,
    GoalStatus.REJECTED,
    GoalStatus.SUCCEEDED,
    GoalStatus.ABORTED,
    GoalStatus.PREEMPTED,
)


def ledger() -> tuple[StatusLedger, list[StatusUpdate]]:
    sent: list[StatusUpdate] = []
    return StatusLedger(sent.append), sent


def assert_contract(sent: list[StatusUpdate]) -> None:
    """Every id: a first status, then (after `accepted`) at most one final; nothing after it."""
    seen: dict[str, list[GoalStatus]] = {}
    for update in sent:
        if update.goal_id is not None:
            seen.setdefault(update.goal_id, []).append(update.status)
    for goal_id, statuses in seen.items():
        assert statuses[0] in (A, R), (goal_id, statuses)
        if statuses[0] is R:
            assert statuses == [R], (goal_id, statuses)
        else:
            assert len(statuses) <= 2, (goal_id, statuses)
            assert all(s.is_final for s in statuses[1:]), (goal_id, statuses)


def test_a_goal_accepted_then_finished() -> None:
    statuses, sent = ledger()
    assert statuses.receive("g") is None
    statuses.report(StatusUpdate("g", A))
    assert statuses.in_progress == 1
    statuses.report(StatusUpdate("g", S))
    assert sent == [StatusUpdate("g", A), StatusUpdate("g", S)]
    assert statuses.in_progress == 0


def test_a_final_status_before_acceptance_is_preceded_by_accepted() -> None:
    """A goal replaced before it was planned, a stop goal: taken in, then ended."""
    statuses, sent = ledger()
    statuses.receive("old")
    statuses.report(StatusUpdate("old", P, "superseded by new before it was planned"))
    assert sent == [
        StatusUpdate("old", A),
        StatusUpdate("old", P, "superseded by new before it was planned"),
    ]


def test_rejected_is_first_and_final() -> None:
    statuses, sent = ledger()
    statuses.receive("r")
    statuses.report(StatusUpdate("r", R, "position[0]: nan must be a finite number"))
    statuses.report(StatusUpdate("r", AB, "late"))  # a bug upstream: dropped
    assert sent == [StatusUpdate("r", R, "position[0]: nan must be a finite number")]
    assert statuses.contract_violations == 1


def test_duplicates_and_statuses_after_the_final_one_are_dropped_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    statuses, sent = ledger()
    statuses.receive("g")
    statuses.report(StatusUpdate("g", A))
    statuses.report(StatusUpdate("g", A))
    statuses.report(StatusUpdate("g", S))
    statuses.report(StatusUpdate("g", AB, "again"))
    statuses.report(StatusUpdate("never-received", S))
    assert sent == [StatusUpdate("g", A), StatusUpdate("g", S)]
    assert statuses.contract_violations == 3
    assert sum(r.levelno == logging.ERROR for r in caplog.records) == 3


def test_rejected_after_accepted_becomes_aborted() -> None:
    statuses, sent = ledger()
    statuses.receive("g")
    statuses.report(StatusUpdate("g", A))
    statuses.report(StatusUpdate("g", R, "broker lost"))
    assert sent == [StatusUpdate("g", A), StatusUpdate("g", AB, "broker lost")]


def test_an_id_in_use_is_rejected_and_the_first_goal_is_unaffected() -> None:
    statuses, sent = ledger()
    statuses.receive("g")
    statuses.report(StatusUpdate("g", A))
    reason = statuses.receive("g")
    assert reason is not None
    assert "still in progress" in reason
    statuses.report(StatusUpdate("g", S))
    assert sent[1] == StatusUpdate("g", R, reason)
    assert sent[2] == StatusUpdate("g", S)
    assert statuses.receive("g") is None  # finished: the id is free again


def test_abort_all_ends_every_goal_in_progress() -> None:
    statuses, sent = ledger()
    for goal_id in ("waiting", "planned", "moving"):
        statuses.receive(goal_id)
    statuses.report(StatusUpdate("planned", A))
    statuses.report(StatusUpdate("moving", A))
    statuses.abort_all("daemon stopping")
    assert statuses.in_progress == 0
    assert sent[2:] == [
        StatusUpdate("waiting", A),
        StatusUpdate("waiting", AB, "daemon stopping"),
        StatusUpdate("planned", AB, "daemon stopping"),
        StatusUpdate("moving", AB, "daemon stopping"),
    ]
    assert_contract(sent)


def test_statuses_without_an_id_pass_through() -> None:
    statuses, sent = ledger()
    assert statuses.receive(None) is None
    statuses.report(StatusUpdate(None, R, "not valid JSON"))
    statuses.report(StatusUpdate(None, S))
    assert sent == [StatusUpdate(None, R, "not valid JSON"), StatusUpdate(None, S)]


events = st.lists(
    st.tuples(
        st.sampled_from(["receive", "report", "abort_all"]),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(list(GoalStatus)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(events)
def test_whatever_the_reporters_send_the_contract_holds(
    script: list[tuple[str, str, GoalStatus]],
) -> None:
    statuses, sent = ledger()
    duplicates: set[int] = set()  # positions in `sent` of the rejections of ids in use
    for action, goal_id, status in script:
        if action == "receive":
            if statuses.receive(goal_id) is not None:
                duplicates.add(len(sent) - 1)
        elif action == "report":
            statuses.report(StatusUpdate(goal_id, status, "r"))
        else:
            statuses.abort_all("stop")
    statuses.abort_all("end")
    assert statuses.in_progress == 0
    assert all(sent[i].status is R for i in duplicates)
    # Each goal's statuses: a run that starts with a first status after the previous run ended.
    per_goal: dict[str, list[list[GoalStatus]]] = {}
    for i, update in enumerate(sent):
        if i in duplicates:
            continue
        assert update.goal_id is not None
        runs = per_goal.setdefault(update.goal_id, [])
        if not runs or runs[-1][-1].is_final:
            runs.append([])
        runs[-1].append(update.status)
    for goal_id, runs in per_goal.items():
        for run in runs:
            assert run in ([R], [A, S], [A, AB], [A, P]), (goal_id, runs)
