"""Fixtures of the system tests: a real Mosquitto, the real daemon (``python -m armd run``) on
the simulated UR5 of config/sim.yaml, and a test MQTT client, wired together as a `Rig`.

- `arm`: one daemon per test module, shared by the tests whose goals do not disturb each other;
  every test starts with the arm at rest.
- `start_arm`: a fresh broker and daemon for tests that kill, stop or latch it.

When a test fails, the output of every daemon it used and the broker's log are attached to its
report."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from armd.config.load import ArmSetup, load_config
from tests.broker import MosquittoBroker
from tests.system.helpers import DIAGNOSTICS, Rig, attach_diagnostics, start_rig
from tests.system.probe import at_rest

# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    directory = tmp_path_factory.mktemp("shared-arm")
    with MosquittoBroker(directory / "mosquitto") as broker:
        rig = start_rig(directory, broker)
        yield rig
        rig.close()


@pytest.fixture
def arm(shared_rig: Rig, request: pytest.FixtureRequest) -> Rig:
    """The module's daemon, alive and with the arm at rest."""
    attach_diagnostics(request, shared_rig)
    assert shared_rig.daemon.running, f"the shared daemon died:\n{shared_rig.daemon.output()}"
    shared_rig.probe.wait_state(at_rest, what="the arm at rest")
    return shared_rig


@pytest.fixture(scope="module")
def arm_setup(shared_rig: Rig) -> ArmSetup:
    """The shared daemon's configuration as the daemon sees it (model, limits, tool link)."""
    return load_config(shared_rig.config)


@pytest.fixture
def start_arm(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Rig]]:
    """``start_arm(overrides=..., env=..., wrapper=...)``: a fresh broker and daemon (see
    `start_rig`), stopped at teardown."""
    rigs: list[Rig] = []
    brokers: list[MosquittoBroker] = []

    def start(**options: Any) -> Rig:
        directory = tmp_path / f"arm-{len(rigs)}"
        broker = MosquittoBroker(directory / "mosquitto")
        brokers.append(broker)
        broker.start()
        rig = start_rig(directory, broker, **options)
        rigs.append(rig)
        attach_diagnostics(request, rig)
        return rig

    yield start
    for rig in rigs:
        rig.close()
    for broker in brokers:
        broker.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for collect in item.stash.get(DIAGNOSTICS, []):
            with contextlib.suppress(Exception):
                report.sections.extend(collect())
    return report
