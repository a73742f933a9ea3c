"""Fuzz: at least 10,000 random and malformed payloads on each of the ``goal`` and ``estop``
topics of a running daemon (docs/mqtt.md), shuffled together: every one is answered with
``rejected`` (with the ``id`` when one could be read, on ``goal``), nothing crashes the daemon and
nothing moves the arm; every malformed ``estop`` payload engages the e-stop (fail-safe). The
``payload`` topic's 10,000 are test_fuzz_payload.py's, on a daemon of its own (a worker each).

The payloads come from a seeded generator (tests/system/payload_fuzzer.py; set
``ARMD_FUZZ_SEED`` to explore other streams), published with QoS 1 in batches, each batch
answered before the next is sent (tests/system/payload_fuzzing.py).
"""

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


def test_fuzzed_payloads_are_rejected_and_the_arm_stays_still(fuzzed: Rig) -> None:
    fuzz(fuzzed, ("goal", "estop"))
