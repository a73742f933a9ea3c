"""The driver registry: config names resolve lazily to driver classes; unknown names and broken
targets fail with `UnknownDriverError`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from drivers.base import Driver
from drivers.errors import UnknownDriverError
from drivers.registry import DRIVERS, load_driver_class
from drivers.sim.driver import SimDriver


def test_sim_resolves_to_the_sim_driver() -> None:
    assert load_driver_class("sim") is SimDriver


def test_every_registered_target_is_module_colon_class() -> None:
    assert {"sim", "odrive", "dynamixel"} <= set(DRIVERS)
    for target in DRIVERS.values():
        module, _, cls = target.partition(":")
        assert module.startswith("drivers.")
        assert cls.isidentifier()


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownDriverError) as raised:
        load_driver_class("canopen")
    message = str(raised.value)
    assert "unknown driver 'canopen'" in message
    for name in DRIVERS:
        assert repr(name) in message


def test_unimportable_module_is_reported_with_its_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DRIVERS, "ghost", "drivers.does_not_exist:GhostDriver")
    with pytest.raises(UnknownDriverError, match="driver 'ghost': cannot import") as raised:
        load_driver_class("ghost")
    assert isinstance(raised.value.__cause__, ImportError)


def test_target_that_is_not_a_driver_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DRIVERS, "clock", "drivers.sim.driver:ManualClock")
    with pytest.raises(UnknownDriverError, match="is not a Driver subclass"):
        load_driver_class("clock")


def test_drivers_are_imported_only_when_asked_for() -> None:
    # A fresh interpreter: importing the package must not import any backend.
    code = (
        "import sys, drivers\n"
        "backends = {t.partition(':')[0] for t in drivers.DRIVERS.values()}\n"
        "print(sorted(backends & set(sys.modules)))\n"
        "drivers.load_driver_class('sim')\n"
        "print('drivers.sim.driver' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.split("\n")[:2] == ["[]", "True"]


def test_loaded_class_is_a_driver_with_params() -> None:
    cls = load_driver_class("sim")
    assert issubclass(cls, Driver)
    assert cls.Params is SimDriver.Params
