"""Fixtures shared by every test package: a real Mosquitto broker (see tests/broker.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.broker import MosquittoBroker

# Speed is measured in bench/, never asserted in tests: no Hypothesis example has a deadline
# (its default, 200 ms, failed a limiter property at 321 ms beside `stress-ng --cpu 2`).
settings.register_profile("armd", deadline=None)
settings.load_profile("armd")


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[MosquittoBroker]:
    """A started anonymous Mosquitto on a free loopback port (``.host``, ``.port``); stopped at
    teardown. `kill()` / `start()` restart it on the same port."""
    with MosquittoBroker(tmp_path / "mosquitto") as broker:
        yield broker


@pytest.fixture
def mosquitto_factory(tmp_path: Path) -> Iterator[Callable[..., MosquittoBroker]]:
    """``mosquitto_factory(password_file=..., tls=..., require_client_certificate=...)`` starts
    another broker with those options (keyword arguments of `MosquittoBroker`); all are stopped at
    teardown."""
    brokers: list[MosquittoBroker] = []

    def start(**options: Any) -> MosquittoBroker:
        broker = MosquittoBroker(tmp_path / f"mosquitto-{len(brokers)}", **options)
        brokers.append(broker)
        broker.start()
        return broker

    yield start
    for broker in brokers:
        broker.stop()


# Modules that wait longest on real time (arms moving at their speed, daemons, browsers) run
# first: pytest-xdist's `--dist loadscope` hands modules to the workers in collection order, so
# the short unit-test modules then fill the end of the run on both workers instead of one worker
# finishing a minute-long module alone. Within each group the order is pytest's.
SLOW_FIRST = (
    "tests/system/test_collision_fuzz",  # its two halves, ~55 s each
    "tests/armd/cli/test_calibration_auto",  # the README's SO-101 ~65 s
    "tests/system/test_cli_client.py",
    "tests/system/",
    "tests/armd/cli/test_main.py",
    "tests/armd/cli/test_leader_cmd.py",
)


def _start_rank(item: pytest.Item) -> int:
    path = item.path.relative_to(Path(__file__).parent.parent).as_posix()
    return next((i for i, prefix in enumerate(SLOW_FIRST) if path.startswith(prefix)), 99)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_start_rank)  # stable: each group keeps its order
