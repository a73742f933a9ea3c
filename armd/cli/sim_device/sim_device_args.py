"""``armd sim-device``'s argument checks: each raises a one-line `UsageError` naming the option,
the value and the bound."""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
from collections.abc import Sequence

from armd.cli.common import UsageError

__all__ = [
    "check_ids",
    "check_multicast_group",
    "check_positive",
    "check_return_delay",
    "check_seconds",
    "check_serial_args",
]

RETURN_DELAY_UNIT_S = 2e-6  # Dynamixel and Feetech Return Delay Time: 2 µs units, 0..254
MAX_RETURN_DELAY_UNITS = 254


def check_ids(option: str, ids: Sequence[int], maximum: int) -> None:
    outside = [i for i in ids if not 0 <= i <= maximum]
    if outside:
        raise UsageError(f"{option}: {outside} outside [0, {maximum}]")
    if len(set(ids)) != len(ids):
        raise UsageError(f"{option}: {list(ids)} has duplicates")


def check_seconds(option: str, value: float | None, *, zero_ok: bool) -> None:
    if value is None:
        return
    bound = ">= 0" if zero_ok else "> 0"
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise UsageError(f"{option}: {value} s must be finite and {bound}")


def check_multicast_group(interface: str, channel: str) -> None:
    """udp_multicast's channel is an IP multicast group (python-can would fail on anything else
    with a less helpful message)."""
    if interface != "udp_multicast":
        return
    try:
        multicast = ipaddress.ip_address(channel).is_multicast
    except ValueError:
        multicast = False
    if not multicast:
        raise UsageError(
            f"--channel: {channel!r} is not an IP multicast group, which udp_multicast needs "
            "(e.g. 239.74.163.2)"
        )


def check_positive(option: str, value: int | None) -> None:
    if value is not None and value <= 0:
        raise UsageError(f"{option}: {value} must be > 0")


def check_serial_args(args: argparse.Namespace) -> None:
    check_positive("--baudrate", args.baudrate)
    link = args.link
    if link is not None and os.path.lexists(link) and not os.path.islink(link):
        raise UsageError(f"--link: {link} exists and is not a symlink; it is never replaced")


def check_return_delay(return_delay_s: float) -> None:
    """A Return Delay Time (Dynamixel X series, Feetech SCS/STS: one byte of 2 µs units)."""
    check_seconds("--return-delay-s", return_delay_s, zero_ok=True)
    if round(return_delay_s / RETURN_DELAY_UNIT_S) > MAX_RETURN_DELAY_UNITS:
        bound = MAX_RETURN_DELAY_UNITS * RETURN_DELAY_UNIT_S
        raise UsageError(f"--return-delay-s: {return_delay_s} s outside [0, {bound:.6f}]")
