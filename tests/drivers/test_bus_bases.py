"""What the two bus bases give every family alike: the parameter model's check with its message,
the bus keys in the same order, the CAN link's earlier import path, and a udp_multicast bus that
hears its own group only."""

from __future__ import annotations

import can
import pytest

from drivers import DriverParams, can_link
from drivers.can_bus import frame, link
from drivers.can_bus.driver import CanBusParams
from drivers.dynamixel.driver import DynamixelDriver, DynamixelParams
from drivers.errors import DriverConfigError, DriverOpenError
from drivers.feetech.driver import FeetechDriver, FeetechParams
from drivers.mit.driver import MitDriver, MitParams
from drivers.mit.models import lookup
from drivers.mit.sim import SimActuatorConfig, SimulatedMitBus
from drivers.odrive.driver import ODriveDriver, ODriveParams
from drivers.serial_bus.driver import ServoBusParams


class OtherParams(DriverParams):
    pass


@pytest.mark.parametrize(
    ("driver", "expected"),
    [
        (DynamixelDriver, r"DynamixelDriver needs DynamixelParams, not <class '.*OtherParams'>"),
        (FeetechDriver, r"FeetechDriver needs FeetechParams, not <class '.*OtherParams'>"),
        (ODriveDriver, r"ODriveDriver needs ODriveParams, got OtherParams"),
        (MitDriver, r"MitDriver needs MitParams, got OtherParams"),
    ],
)
def test_a_driver_refuses_another_family_s_params(driver: type, expected: str) -> None:
    with pytest.raises(DriverConfigError, match=expected):
        driver(OtherParams())


@pytest.mark.parametrize(
    ("params", "base", "first"),
    [
        (DynamixelParams, ServoBusParams, ["port", "baudrate", "devices"]),
        (FeetechParams, ServoBusParams, ["port", "baudrate", "devices"]),
        (ODriveParams, CanBusParams, ["interface", "channel", "bitrate", "devices"]),
        (MitParams, CanBusParams, ["interface", "channel", "bitrate", "hop_limit", "devices"]),
    ],
)
def test_the_bus_keys_come_first(params: type, base: type, first: list[str]) -> None:
    assert issubclass(params, base)
    assert list(params.model_fields)[: len(first)] == first


def test_the_can_link_keeps_its_earlier_import_path() -> None:
    assert (can_link.CanLink, can_link.make_bus, can_link.Frame) == (
        link.CanLink,
        link.make_bus,
        frame.Frame,
    )


def test_a_simulated_bus_that_cannot_open_names_what_and_where() -> None:
    config = SimActuatorConfig(slave_id=1, master_id=0x11, model=lookup("DM4310"))
    with pytest.raises(DriverOpenError, match=r"simulated MIT actuators: cannot open nope"):
        SimulatedMitBus.create("nope", "x", [config])


@pytest.mark.parametrize(
    ("group", "other"),
    [("239.74.163.90", "239.74.163.91"), ("ff15::7a:1", "ff15::7a:2")],
)
def test_a_udp_multicast_bus_hears_its_own_group_only(group: str, other: str) -> None:
    """Linux hands a socket bound to a port the datagrams of every group joined on it: two arms
    on two groups of one host would hear each other. `make_bus` turns that off."""
    receive_s = 1.0  # loopback delivers within microseconds; a busy machine may take far longer
    with (
        link.make_bus("udp_multicast", group) as sender,
        link.make_bus("udp_multicast", group) as same,
        link.make_bus("udp_multicast", other) as elsewhere,
    ):
        sender.send(can.Message(arbitration_id=0x123, data=b"\x01", is_extended_id=False))
        heard = same.recv(receive_s)
        assert heard is not None
        assert heard.arbitration_id == 0x123
        # the same datagram reached `elsewhere`'s socket by now if it was to (same host, same
        # port, delivered to every receiver in one pass): nothing may be waiting there
        assert elsewhere.recv(0.0) is None
