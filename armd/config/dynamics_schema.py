"""The dynamics options of the configuration file: the gravity vector, the payload at the tool
link and each joint's contact detection (docs/dynamics.md#in-the-daemon). Gravity
compensation is a driver's option (`armd.config.schema.DriverConfig.gravity_compensation`).

Units: m/s² (root frame), kg, m and kg·m² (the tool link's frame), N·m (N for prismatic joints)
on the joint's side, s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Self

from pydantic import Field, model_validator

from armd.config.base import Section
from armd.config.base import positive as _positive
from armd.link.messages import MAX_LOAD_COM_M as MAX_PAYLOAD_COM_M
from armd.link.messages import MAX_LOAD_KG as MAX_PAYLOAD_KG
from armd.reasons import Loc
from drivers import load_driver_class
from kinematics import Inertial
from kinematics.errors import InertialError

__all__ = ["STANDARD_GRAVITY", "ContactConfig", "PayloadConfig", "contact_problems"]

STANDARD_GRAVITY = [0.0, 0.0, -9.81]
"""The default gravity acceleration, root frame, m/s² (an arm standing on a floor)."""


class PayloadConfig(Section):
    """A rigid load at the tool link: its mass, its centre of mass and its inertia about the
    centre of mass in the tool link's frame (``ixx, ixy, ixz, iyy, iyz, izz``; default 0: a
    point mass). An inertia no rigid body has is refused (`kinematics.inertial`)."""

    mass: float = Field(ge=0.0, le=MAX_PAYLOAD_KG, description="kg")
    com: list[float] = Field(
        [0.0, 0.0, 0.0],
        min_length=3,
        max_length=3,
        description="centre of mass in the tool link's frame, m",
    )
    inertia: list[float] | None = Field(
        None,
        min_length=6,
        max_length=6,
        description="about the centre of mass, tool link axes, kg·m²; null: a point mass",
    )

    @model_validator(mode="after")
    def _rigid_body(self) -> Self:
        far = [c for c in self.com if abs(c) > MAX_PAYLOAD_COM_M]
        if far:
            raise ValueError(f"com {list(self.com)} must be within ±{MAX_PAYLOAD_COM_M:g} m")
        try:
            self.inertial()
        except InertialError as exc:
            raise ValueError(str(exc)) from None
        return self

    def inertial(self) -> Inertial:
        """The payload as an `Inertial` in the tool link's frame."""
        com = (self.com[0], self.com[1], self.com[2])
        i = self.inertia or [0.0] * 6
        return Inertial(self.mass, com, (i[0], i[1], i[2], i[3], i[4], i[5]))


class ContactConfig(Section):
    """Contact detection of one joint (docs/safety.md#contact): the momentum observer's residual
    (the estimated external torque) beyond `threshold` for `time_s` latches a ``contact``
    fault. Needs a device that reports its torque (the ``mit`` driver)."""

    threshold: float = _positive(None, "N·m at the joint (N for a prismatic joint)")
    time_s: float = Field(0.02, ge=0.0, le=1.0, description="how long it must last, s")


def contact_problems(
    joints: Iterable[tuple[str, ContactConfig | None, str, str]],
) -> list[tuple[Loc, str]]:
    """The joints, given as (name, contact, driver name, driver type), with ``contact`` whose
    driver reports no torque (`Driver.torque_effort`)."""
    problems: list[tuple[Loc, str]] = []
    for name, contact, driver, kind in joints:
        if contact is not None and not load_driver_class(kind).torque_effort:
            problems.append(
                (
                    ("joints", name, "contact"),
                    f"driver {driver!r} (type {kind}) reports no torque: contact detection "
                    "needs a driver whose devices report theirs (mit, cia402)",
                )
            )
    return problems
