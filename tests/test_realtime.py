"""The test suite's own references for hold-ups (tests/realtime.py): what they allow is what they
measured, each hold-up once."""

from __future__ import annotations

import pytest

from tests.realtime import PtyStallProbe


def test_a_hold_up_seen_on_the_pty_and_on_a_cpu_allows_its_timeouts_once() -> None:
    probe = PtyStallProbe(late_s=0.005, cpus=True)
    assert probe.cpus is not None
    probe._stalls = [(1.000, 1.012)]  # the pty path: 12 ms
    probe.cpus._held = [
        (1.004, 1.030),  # the same hold-up seen by a CPU's clock, longer: 1.000-1.030 is one
        (2.000, 2.003),  # shorter than late_s: not a hold-up
        (3.000, 3.021),  # on a CPU only: 21 ms
    ]
    # A hold-up of L costs the transaction in flight and one per deadline it lasted.
    assert probe.timeouts_allowed(0.010) == (1 + 3) + (1 + 2)


def test_without_cpus_only_the_pty_path_counts() -> None:
    probe = PtyStallProbe(late_s=0.005)
    probe._stalls = [(1.000, 1.012), (1.010, 1.020)]  # overlapping: one hold-up of 20 ms
    assert probe.timeouts_allowed(0.010) == 1 + 2
    assert PtyStallProbe(late_s=0.005).timeouts_allowed(0.010) == 0


def test_the_time_held_up_adds_the_cpus_hold_ups_once() -> None:
    probe = PtyStallProbe(late_s=0.005, cpus=True)
    assert probe.cpus is not None
    probe._held = [(1.000, 1.012)]  # the pty path: 12 ms
    probe._due = 1e9  # no round trip under way
    probe.cpus._held = [
        (1.004, 1.030),  # the same hold-up seen by a CPU's clock, longer: 1.000-1.030 is one
        (3.000, 3.021),  # on a CPU only: 21 ms
        (0.500, 0.600),  # before `since`
    ]
    assert probe.stalled_s(0.9) == pytest.approx(0.030 + 0.021)
