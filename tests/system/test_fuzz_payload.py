"""Fuzz of the ``payload`` topic: at least 10,000 random and malformed payloads (docs/mqtt.md) on
a running daemon of its own, beside test_fuzz.py's ``goal`` and ``estop`` (a worker each): every
one is answered with ``rejected``, nothing crashes the daemon and nothing moves the arm, which
then still serves a goal (tests/system/payload_fuzzing.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.system.helpers import Rig
from tests.system.payload_fuzzing import fuzz, fuzzed_rig


@pytest.fixture
def fuzzed(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    with fuzzed_rig(tmp_path, request) as rig:
        yield rig


def test_fuzzed_load_payloads_are_rejected_and_the_arm_stays_still(fuzzed: Rig) -> None:
    fuzz(fuzzed, ("payload",))
