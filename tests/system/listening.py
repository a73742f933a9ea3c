"""What a process listens on, read from /proc as ``ss -ltnup`` does: the TCP sockets in LISTEN and
the unconnected UDP sockets among its open files, with their local address and port, IPv4 and
IPv6. The tests that start a server (Mosquitto as the project configures or documents it,
``armd dashboard``, Node-RED) check with it that nothing is reachable from another machine.

    listening(pid)              # [Endpoint("tcp", "127.0.0.1", 1883), ...]
    exposed(listening(pid))     # those not on a loopback address ([] is what the tests want)

/proc/<pid>/net/* is the process's own network namespace; sockets are matched by inode with the
links of /proc/<pid>/fd (the test's user owns the processes it started).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Endpoint", "exposed", "listening"]

TCP_LISTEN = "0A"
UDP_UNCONNECTED = "07"  # a bound UDP socket without a peer receives from anyone


@dataclass(frozen=True)
class Endpoint:
    protocol: str  # "tcp" or "udp"
    address: str  # "127.0.0.1", "::1", "::" (every address), "::ffff:127.0.0.1"...
    port: int

    @property
    def loopback(self) -> bool:
        address = ipaddress.ip_address(self.address)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return address.is_loopback

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.protocol} {host}:{self.port}"


def _address(field: str) -> str:
    """/proc/net/tcp's hexadecimal address: 32-bit words, each in the host's (little-endian)
    byte order."""
    words = [bytes.fromhex(field[i : i + 8])[::-1] for i in range(0, len(field), 8)]
    return str(ipaddress.ip_address(b"".join(words)))


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def listening(pid: int) -> list[Endpoint]:
    """Every TCP socket process `pid` listens on and every unconnected UDP socket it has bound
    (Unix sockets are not reachable from the network and are left out)."""
    inodes = _socket_inodes(pid)
    found = []
    for table, protocol, state in (
        ("tcp", "tcp", TCP_LISTEN),
        ("tcp6", "tcp", TCP_LISTEN),
        ("udp", "udp", UDP_UNCONNECTED),
        ("udp6", "udp", UDP_UNCONNECTED),
    ):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():  # no IPv6 in this kernel
            continue
        for line in path.read_text(encoding="ascii").splitlines()[1:]:
            fields = line.split()
            local, socket_state, inode = fields[1], fields[3], fields[9]
            if socket_state == state and inode in inodes:
                address, port = local.split(":")
                found.append(Endpoint(protocol, _address(address), int(port, 16)))
    return sorted(found, key=lambda e: (e.port, e.protocol, e.address))


def exposed(endpoints: list[Endpoint]) -> list[str]:
    """The endpoints that another machine could reach (not on 127.0.0.0/8 or ::1)."""
    return [str(endpoint) for endpoint in endpoints if not endpoint.loopback]
