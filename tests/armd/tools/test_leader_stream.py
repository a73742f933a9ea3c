"""The leader at run time (`armd.tools.teleop.run_leader`) against a real Mosquitto: what it
publishes
on the follower's ``stream`` topic, read by a test client standing in for the follower, while
the leader's simulated devices are moved by hand — and that it never writes to the leader: no
write on the `sim` driver, no instruction to a Feetech servo's Goal_Position or Torque_Enable on
the byte-level simulated chain."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from armd.api.client import ArmOfflineError
from armd.config.load import build_drivers, load_config
from armd.control.hardware import ArmHardware
from armd.tools.leader import LeaderSetup, StreamMapper, leader_setup
from armd.tools.teleop import LeaderStats, follower_settings, run_leader
from drivers import Lifecycle
from drivers.feetech import protocol as ft
from drivers.feetech.sim import SimulatedFeetechChain
from drivers.feetech.table import Addr
from drivers.sim.driver import SimDriver
from tests.broker import MosquittoBroker
from tests.system.helpers import ROOT, Hand, write_leader_config
from tests.system.probe import MqttProbe

FOLLOWER = "ur5-sim"
RESOLUTION = 2 * math.pi / 16384  # the sim devices' encoder count, rad


class Leader:
    """`run_leader` as a task, with the drivers it reads kept for inspection."""

    def __init__(self, setup: LeaderSetup, broker: MosquittoBroker) -> None:
        self.setup = setup
        self.drivers = build_drivers(setup.arm)
        self.hardware = ArmHardware(self.drivers, setup.arm.transmission)
        self.stop = asyncio.Event()
        settings = follower_settings(setup, broker.host, broker.port)
        self.task = asyncio.create_task(
            run_leader(setup, settings, self.stop, "teleop", self.hardware)
        )

    async def end(self) -> LeaderStats:
        self.stop.set()
        return await asyncio.wait_for(self.task, 10.0)


def stream(probe: MqttProbe, since: int = 0) -> list[dict[str, Any]]:
    messages = probe.on("stream", since)
    assert not any(m.retain for m in messages)
    return [m.json() for m in messages]


def ended(probe: MqttProbe) -> list[dict[str, Any]] | None:
    """The stream, once its ``end`` arrived."""
    messages = stream(probe)
    return messages if messages and messages[-1]["type"] == "end" else None


async def until(probe: MqttProbe, predicate: Any, what: str, timeout_s: float = 20.0) -> Any:
    """Poll `predicate()` while the event loop runs the leader."""
    async with asyncio.timeout(timeout_s):
        while not (value := predicate()):
            await asyncio.sleep(0.02)
    assert value, what
    return value


@pytest.fixture
def follower(mosquitto: MosquittoBroker) -> Iterator[MqttProbe]:
    """A test client in the follower's place: its retained availability says online."""
    probe = MqttProbe(mosquitto.host, mosquitto.port, FOLLOWER)
    probe.client.publish(f"armd/{FOLLOWER}/availability", "online", qos=1, retain=True)
    yield probe
    probe.close()


@pytest.fixture
def sim_leader(tmp_path: Path, mosquitto: MosquittoBroker) -> tuple[LeaderSetup, Hand]:
    config, hand = write_leader_config(tmp_path, mosquitto.port, {"loop_hz": 200})
    return leader_setup(load_config(config), FOLLOWER), hand


@contextlib.asynccontextmanager
async def leading(setup: LeaderSetup, broker: MosquittoBroker) -> AsyncIterator[Leader]:
    leader = Leader(setup, broker)
    try:
        yield leader
    finally:
        if not leader.task.done():
            await leader.end()


async def test_the_leader_streams_its_hand_moved_joints_and_never_writes(
    sim_leader: tuple[LeaderSetup, Hand], follower: MqttProbe, mosquitto: MosquittoBroker
) -> None:
    setup, hand = sim_leader
    before_us = time.time_ns() // 1000
    async with leading(setup, mosquitto) as leader:
        await until(follower, lambda: stream(follower), "the first stream message")
        hand.put(base=0.4, elbow=1.2)
        moved = await until(
            follower,
            lambda: [m for m in stream(follower) if m["positions"]["elbow_joint"] != math.pi / 2],
            "a message with the moved elbow",
        )
        stats = await leader.end()
    messages = await until(follower, lambda: ended(follower), "the end of the stream")
    assert messages[-1] == {"seq": messages[-1]["seq"], "id": "teleop", "type": "end"}
    seqs = [m["seq"] for m in messages]
    # increasing, one per message, from the wall clock in µs: newer than a previous run's
    assert seqs == list(range(seqs[0], seqs[0] + len(messages)))
    assert before_us < seqs[0] < time.time_ns() // 1000
    assert stats.published == len(messages)
    assert moved[0]["positions"]["shoulder_pan_joint"] == pytest.approx(0.4, abs=RESOLUTION)
    assert moved[0]["positions"]["elbow_joint"] == pytest.approx(1.2, abs=RESOLUTION)
    for m in messages[:-1]:
        assert (m["id"], m["type"]) == ("teleop", "joints")
        assert set(m["positions"]) == {link.follower for link in setup.joints}
    # read-only: the driver never left OPEN, no write reached it, no device was ever enabled
    (driver,) = leader.drivers.values()
    assert isinstance(driver, SimDriver)
    assert driver.stats.writes == 0
    assert driver.stats.reads > 0
    assert driver.lifecycle is Lifecycle.CLOSED
    assert not any(driver.motor(name).enabled for name in driver.device_names)


async def test_stale_readings_are_not_streamed_so_the_follower_times_out(
    sim_leader: tuple[LeaderSetup, Hand],
    follower: MqttProbe,
    mosquitto: MosquittoBroker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    setup, _ = sim_leader
    async with leading(setup, mosquitto) as leader:
        await until(follower, lambda: stream(follower), "the first stream message")
        (driver,) = leader.drivers.values()
        assert isinstance(driver, SimDriver)
        with caplog.at_level(logging.WARNING, "armd.tools.teleop"):
            driver.link("elbow").drop_probability = 1.0  # the elbow's replies are lost
            await until(follower, lambda: "no reading of elbow_joint" in caplog.text, "a warning")
            await asyncio.sleep(0.1)
            quiet_from = follower.mark()
            await asyncio.sleep(0.5)  # 100 periods at 200 Hz
            assert stream(follower, quiet_from) == []
        driver.link("elbow").drop_probability = 0.0
        await until(follower, lambda: stream(follower, quiet_from), "the stream again")
        # a bus that vanishes (a serial adapter unplugged): stale, then reopened when it is back
        with caplog.at_level(logging.INFO, "armd.tools.teleop"):
            driver.link("elbow").disconnected = True
            await asyncio.sleep(0.5)
            gone_from = follower.mark()
            await asyncio.sleep(0.3)
            assert stream(follower, gone_from) == []
            driver.link("elbow").disconnected = False
            await until(follower, lambda: stream(follower, gone_from), "the stream once reopened")
        stats = await leader.end()
    assert stats.stale >= 100
    assert "(the follower stops after its stream timeout)" in caplog.text
    assert "leader: driver 'sim' reopened" in caplog.text
    assert driver.stats.writes == 0


async def test_an_offline_follower_is_refused_before_anything_is_sent(
    sim_leader: tuple[LeaderSetup, Hand], mosquitto: MosquittoBroker
) -> None:
    setup, _ = sim_leader
    probe = MqttProbe(mosquitto.host, mosquitto.port, FOLLOWER)
    try:
        probe.client.publish(f"armd/{FOLLOWER}/availability", "offline", qos=1, retain=True)
        leader = Leader(setup, mosquitto)
        with pytest.raises(ArmOfflineError, match="arm 'ur5-sim' is offline"):
            await asyncio.wait_for(leader.task, 10.0)
        assert stream(probe) == []
        assert all(d.lifecycle is Lifecycle.CLOSED for d in leader.drivers.values())
    finally:
        probe.close()


# -- an SO-101 leader on its Feetech servos, simulated byte for byte --------------------------


class RecordingChain(SimulatedFeetechChain):
    """The simulated servo chain, recording every instruction it receives (id, code, first
    parameter: the start address of a read or write)."""

    received: list[tuple[int, int, int | None]]

    def _dispatch(self, packet: ft.Packet, now: float) -> None:
        self.received.append((packet.id, packet.code, packet.params[0] if packet.params else None))
        super()._dispatch(packet, now)


WRITES = (ft.Instruction.WRITE, ft.Instruction.REG_WRITE, ft.Instruction.SYNC_WRITE)


@pytest.fixture
def chain() -> Iterator[RecordingChain]:
    with RecordingChain([1, 2, 3, 4, 5, 6]) as chain:
        chain.received = []
        yield chain


async def test_an_so101_leader_on_feetech_servos_is_only_read(
    tmp_path: Path, chain: RecordingChain, mosquitto: MosquittoBroker
) -> None:
    source = ROOT / "config" / "so101_leader.yaml"
    doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    for section, key in ((doc, "model"), (doc["leader"], "follower_model")):
        section[key] = str((source.parent / section[key]).resolve())
    doc["drivers"]["bus"]["params"]["port"] = chain.port
    doc["mqtt"]["port"] = mosquitto.port
    doc["lock_file"] = str(tmp_path / "leader.lock")
    config = tmp_path / "so101_leader.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    setup = leader_setup(load_config(config), "so101")
    goals_before = {i: chain.read_table(i, Addr.GOAL_POSITION, 2) for i in range(1, 7)}

    follower = MqttProbe(mosquitto.host, mosquitto.port, "so101")
    try:
        follower.client.publish("armd/so101/availability", "online", qos=1, retain=True)
        async with leading(setup, mosquitto) as leader:
            await until(follower, lambda: stream(follower), "the first stream message")
            with chain.device(3) as servo:  # the elbow, by hand
                servo.motor.move_by_hand(0.7)
            await until(
                follower,
                lambda: any(
                    abs(m["positions"]["elbow_flex"] - 0.7) < 0.01 for m in stream(follower)
                ),
                "the elbow's new position on the stream",
            )
            await leader.end()
        await until(follower, lambda: ended(follower), "the end of the stream")
    finally:
        follower.close()

    writes = [(i, code, address) for i, code, address in chain.received if code in WRITES]
    # opening may fix the Return Delay Time (EEPROM, unlocked through Lock); nothing else
    assert {address for _, _, address in writes} <= {Addr.RETURN_DELAY_TIME, Addr.LOCK}, writes
    assert any(code == ft.Instruction.SYNC_READ for _, code, _ in chain.received)
    for i in range(1, 7):
        assert chain.read_table(i, Addr.GOAL_POSITION, 2) == goals_before[i]
        assert chain.read_table(i, Addr.TORQUE_ENABLE, 1) == b"\x00"
    assert "gripper" in stream(follower)[0]["positions"]  # the gripper follows


async def test_the_shape_mapping_starts_from_the_followers_state(
    tmp_path: Path, follower: MqttProbe, mosquitto: MosquittoBroker
) -> None:
    links = {"upper_arm_link": "upper_arm_link", "forearm_link": "forearm_link", "tool0": "tool0"}
    config, _ = write_leader_config(
        tmp_path, mosquitto.port, {"loop_hz": 50, "leader": {"mapping": "shape", "joints": None}}
    )
    document = yaml.safe_load(config.read_text(encoding="utf-8"))
    document["leader"]["shape"] = {"links": links}
    config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    setup = leader_setup(load_config(config), FOLLOWER)
    names = setup.arm.tree.joint_names
    # the follower stands elsewhere than the leader: its elbow bent the other way
    there = {"shoulder_pan_joint": 0.3, "shoulder_lift_joint": -2.0, "elbow_joint": -1.2}
    state = {"joints": {n: {"position": there.get(n, 0.0), "velocity": 0.0} for n in names}}
    async with leading(setup, mosquitto) as leader:
        await asyncio.sleep(0.5)
        assert stream(follower) == []  # nothing before the follower's state seeds the mapping
        while not stream(follower):
            follower.client.publish(f"armd/{FOLLOWER}/state", json.dumps(state), qos=0)
            await asyncio.sleep(0.05)
        await leader.end()
    first = stream(follower)[0]
    assert first["type"] == "joints"
    assert "wrist_3_joint" not in first["positions"]  # no direction decides it: not sent
    assert set(first["positions"]) <= set(names)
    # the leader's shape (it stands at home) mapped from where the follower stands
    home = leader.hardware.transmission.joint_positions(
        np.array([d.initial_position for d in setup.arm.drivers["sim"].params.devices.values()])
    )
    seeded = StreamMapper(setup)
    seeded.seed({n: j["position"] for n, j in state["joints"].items()})
    (expected,) = seeded.bodies(home, 0.0)
    assert first["positions"] == pytest.approx(expected["positions"], abs=1e-3)
    from_home = StreamMapper(setup)  # seeded elsewhere, the mapping takes another branch
    from_home.seed(dict(zip(names, home.tolist(), strict=True)))
    (other,) = from_home.bodies(home, 0.0)
    assert other["positions"] != pytest.approx(expected["positions"], abs=1e-3)
