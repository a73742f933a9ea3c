"""The arm's touches: each time one of its links begins to touch something (an object, the table,
another of its links), with the physics step it happened in.

A touch is where a strike, a grasp or a graze begins: the first physics step in which MuJoCo
finds a contact between that pair (a link's collision primitives and the other body's), stamped
on the driver's clock like the states it reads. `TouchLog` keeps the latest `KEPT` touches (a
tuple replaced whole, so a reader in another thread never sees it change under it) and logs each
at INFO, unless the same pair touched again within `REPEAT_S` of simulated time (a jaw chattering
on a part is one touch in the log file, every onset in the tuple).

Checking costs nothing while the arm touches nothing: MuJoCo counts the arm's contacts in a
sensor at each step (`Scene.touch_sensor`), and the contacts are read only while it is non-zero
or a pair was touching at the previous step.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import mujoco
import numpy as np
from numpy.typing import NDArray

__all__ = ["KEPT", "REPEAT_S", "Touch", "TouchLog"]

_log = logging.getLogger(__name__)

KEPT = 256
"""How many touches `TouchLog.touches` keeps (the latest)."""
REPEAT_S = 0.5
"""s of simulated time: a pair touching again sooner is not logged again (it is kept)."""


@dataclass(frozen=True, slots=True)
class Touch:
    """`link` (a link of the arm) began touching `other` (an object's name, ``table``, or another
    link) in the physics step that ended at simulated time `time_s`; `stamp`: the driver clock's
    time of that step, s (the clock of `DeviceState.timestamp`)."""

    stamp: float
    time_s: float
    link: str
    other: str


class TouchLog:
    """The touches of one scene's arm. `owners`: each geom's owner (link, object or ``table``);
    `arm`: (ngeom,) whether a geom is the arm's."""

    def __init__(self, owners: tuple[str, ...], arm: NDArray[np.bool_]) -> None:
        self.owners = owners
        self.arm = arm
        self.touches: tuple[Touch, ...] = ()
        self._touching: frozenset[tuple[str, str]] = frozenset()
        self._last_seen: dict[tuple[str, str], float] = {}

    @property
    def touching(self) -> bool:
        """Some pair touched at the last step checked."""
        return bool(self._touching)

    def check(self, data: mujoco.MjData, stamp: float) -> None:
        """After a step: record the pairs that touch now and did not at the previous step."""
        pairs = self._pairs(data)
        time_s = float(data.time)
        for pair in sorted(pairs - self._touching):
            touch = Touch(stamp, time_s, *pair)
            self.touches = (*self.touches[-(KEPT - 1) :], touch)
            last = self._last_seen.get(pair)
            if last is None or time_s - last > REPEAT_S:
                _log.info(
                    "mujoco: %s touches %s at %.4f s (clock; simulated %.3f s)",
                    touch.link,
                    touch.other,
                    stamp,
                    time_s,
                )
        for pair in pairs:
            self._last_seen[pair] = time_s
        self._touching = frozenset(pairs)

    def _pairs(self, data: mujoco.MjData) -> set[tuple[str, str]]:
        arm, owners = self.arm, self.owners
        pairs = set()
        for g1, g2 in data.contact.geom[: data.ncon].tolist():
            if not (arm[g1] or arm[g2]):
                continue
            link, other = (g1, g2) if arm[g1] else (g2, g1)
            if arm[other] and owners[other] < owners[link]:
                link, other = other, link  # two links: in name order
            pairs.add((owners[link], owners[other]))
        return pairs
