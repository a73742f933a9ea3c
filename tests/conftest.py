"""Fixtures shared by every test package: a real Mosquitto broker (see tests/broker.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker import MosquittoBroker


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
