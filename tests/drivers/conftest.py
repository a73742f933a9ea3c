"""Fixtures shared by the driver tests."""

from __future__ import annotations

import pytest

from drivers.sim.driver import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock at t = 0 s that moves only when the test advances it."""
    return ManualClock()
