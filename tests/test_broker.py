"""The test broker's ports: distinct when picked together, picked again when taken before its
first start (another process may bind a free port between the pick and Mosquitto's bind)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests import broker as test_broker
from tests.broker import HOST, MosquittoBroker, PortTakenError, free_ports


def test_ports_picked_together_are_distinct() -> None:
    for _ in range(50):
        ports = free_ports(3)
        assert len(set(ports)) == 3, ports


def _taken() -> socket.socket:
    """A listening socket on a free loopback port: what another process holding it looks like."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((HOST, 0))
    sock.listen()
    return sock


def test_a_port_taken_before_the_first_start_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _taken() as holder:
        taken = holder.getsockname()[1]
        picks = iter([(taken, taken, taken)])  # the first pick: a port someone holds
        real = test_broker.free_ports
        monkeypatch.setattr(test_broker, "free_ports", lambda n: next(picks, None) or real(n))
        broker = MosquittoBroker(tmp_path / "mosquitto")
        assert broker.port == taken
        with broker:
            assert broker.port != taken
            with socket.create_connection((HOST, broker.port), timeout=5.0):
                pass
        assert "Address already in use" in broker.log()


def test_a_port_given_is_kept_and_its_refusal_said(tmp_path: Path) -> None:
    with _taken() as holder:
        taken = holder.getsockname()[1]
        broker = MosquittoBroker(tmp_path / "mosquitto", port=taken)
        with pytest.raises(PortTakenError, match="Address already in use"):
            broker.start()
        assert broker.port == taken
