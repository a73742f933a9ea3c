"""The control process and the daemon's handle on it (`ControlClient`), with the real child process
on the simulated UR5: start-up (and its failures), requests and reports over the link, shutdown,
the daemon dying, the process dying. And the link's framing."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from armd.config.control_setup import control_setup
from armd.config.load import load_config
from armd.control.process import ControlServer
from armd.control.wiring import ControlSetup
from armd.daemon.control_client import ControlClient
from armd.errors import ArmdError
from armd.link.channel import Closed, Link, Watchdog, _frame
from armd.link.messages import Fault, GoalStatus, Mode, StatusUpdate
from armd.link.protocol import (
    EngageEstop,
    Event,
    FaultChanged,
    FollowPath,
    LatchFault,
    ModeChanged,
    MoveTo,
    Ready,
    Reset,
    Sample,
    Stop,
    TorqueMap,
)
from armd.motion.trajectory import TimedPath
from tests.system.helpers import write_config

WAIT_S = 30.0


@dataclass
class Events:
    statuses: list[StatusUpdate] = field(default_factory=list)
    faults: list[Fault | None] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    modes: list[Mode] = field(default_factory=list)
    ready: list[int] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        if isinstance(event, StatusUpdate):
            self.statuses.append(event)
        elif isinstance(event, FaultChanged):
            self.faults.append(event.fault)
        elif isinstance(event, Sample):
            self.samples.append(event)
        elif isinstance(event, ModeChanged):
            self.modes.append(event.mode)
        elif isinstance(event, Ready):
            self.ready.append(event.drivers)

    def final(self, goal_id: str) -> StatusUpdate | None:
        return next((s for s in self.statuses if s.goal_id == goal_id and s.status.is_final), None)


async def until(condition: Any, what: str, timeout_s: float = WAIT_S) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)


@dataclass
class Control:
    client: ControlClient
    reports: Events
    runner: asyncio.Task[None]
    setup: ControlSetup


def setup_of(config: Path) -> ControlSetup:
    return control_setup(load_config(config))


async def start_control(config: Path) -> Control:
    events = Events()
    setup = setup_of(config)
    client = ControlClient(setup, events)
    await client.start()
    runner = asyncio.create_task(client.run())
    await until(lambda: events.ready and client.port.latest.mode == Mode.HOLDING, "holding")
    return Control(client, events, runner, setup)


@pytest.fixture
async def control(tmp_path: Path) -> AsyncIterator[Control]:
    started = await start_control(write_config(tmp_path, 1))
    try:
        yield started
    finally:
        started.runner.cancel()
        await started.client.close()


def move(control: Control, goal_id: str, offset: float, speed: float = 1.0) -> MoveTo:
    measured = control.client.port.latest.measured_position
    assert measured is not None
    target = measured + np.array([offset, 0.0, 0.0, 0.0, 0.0, offset])
    return MoveTo(goal_id, target, control.setup.limits.scaled(speed))


async def test_a_move_runs_in_the_control_process_and_its_statuses_come_back(
    control: Control,
) -> None:
    port, reports = control.client.port, control.reports
    start = port.latest.commanded_position
    assert start is not None
    port.send(move(control, "g1", 0.2))
    assert port.busy  # at once, before the process has taken it in
    await until(lambda: reports.final("g1") is not None, "g1 final")
    assert reports.final("g1") == StatusUpdate("g1", GoalStatus.SUCCEEDED, None)
    await until(lambda: not port.busy, "not busy")
    commanded = port.latest.commanded_position
    assert commanded is not None
    assert commanded[0] == pytest.approx(start[0] + 0.2, abs=1e-9)
    assert Mode.MOVING in reports.modes
    assert reports.samples  # the loop's state reaches the daemon side after every tick
    assert port.latest.tick > 0


async def test_newest_request_wins_and_a_stop_ends_the_motion(control: Control) -> None:
    port, reports = control.client.port, control.reports
    port.send(move(control, "slow", 1.0, speed=0.2))
    await until(lambda: port.latest.moving, "moving")
    port.send(Stop("halt"))
    await until(lambda: reports.final("halt") is not None, "the stop answered")
    assert reports.final("slow") is not None
    assert reports.final("slow").status is GoalStatus.ABORTED  # type: ignore[union-attr]
    assert reports.final("halt") == StatusUpdate("halt", GoalStatus.SUCCEEDED, None)
    await until(lambda: port.latest.mode == Mode.HOLDING and not port.busy, "holding")


async def test_a_burst_of_requests_newest_wins_and_each_gets_one_final_status(
    control: Control,
) -> None:
    port, reports = control.client.port, control.reports
    ids = [f"burst{i}" for i in range(200)]
    for i, goal_id in enumerate(ids):  # far faster than one per tick: most wait here
        port.send(move(control, goal_id, 0.1 if i % 2 else -0.1))
    await until(lambda: all(reports.final(goal_id) for goal_id in ids), "every final status")
    finals = [s for s in reports.statuses if s.status.is_final]
    assert sorted(s.goal_id for s in finals) == sorted(ids)  # exactly one each
    assert reports.final(ids[-1]) == StatusUpdate(ids[-1], GoalStatus.SUCCEEDED, None)
    preempted = [s for s in finals if s.status is GoalStatus.PREEMPTED]
    assert len(preempted) >= len(ids) - 10, reports.statuses[-5:]
    await until(lambda: not port.busy, "not busy")


async def test_estop_latches_in_the_control_process_until_reset(control: Control) -> None:
    port, reports = control.client.port, control.reports
    port.send(EngageEstop())
    await until(lambda: port.latest.mode == Mode.ESTOP, "e-stop")
    port.send(move(control, "refused", 0.1))
    await until(lambda: reports.final("refused") is not None, "refused")
    assert reports.final("refused").status is GoalStatus.ABORTED  # type: ignore[union-attr]
    port.send(Reset())
    await until(lambda: port.latest.mode == Mode.HOLDING, "holding after reset")


async def test_a_fault_the_daemon_found_latches_in_the_control_process_until_reset(
    control: Control,
) -> None:
    """`LatchFault` (the daemon's contact detection) and `TorqueMap` (its gravity compensation)
    cross the real link: a map is taken (the sim driver has no torque input: nothing moves),
    a fault latches like the loop's own and a reset clears it."""
    port, reports = control.client.port, control.reports
    q = port.latest.commanded_position
    assert q is not None
    n = len(q)
    port.send(TorqueMap(q.copy(), np.full(n, 0.5), np.eye(n), np.eye(n)))
    port.send(move(control, "moving", 0.5, speed=0.3))
    await until(lambda: port.latest.moving, "moving")
    port.send(
        LatchFault(Fault("contact", "joint 'shoulder_pan_joint': external torque 9 N·m", "j"))
    )
    await until(lambda: port.latest.mode == Mode.FAULT and not port.busy, "the fault's stop")
    fault = reports.faults[-1]
    assert fault == Fault("contact", "joint 'shoulder_pan_joint': external torque 9 N·m", "j")
    assert reports.final("moving").status is GoalStatus.ABORTED  # type: ignore[union-attr]
    port.send(Reset())
    await until(lambda: port.latest.mode == Mode.HOLDING, "holding after reset")
    assert reports.faults[-1] is None


async def test_shutdown_brings_the_arm_to_rest_and_the_process_exits_0(control: Control) -> None:
    remote, port, reports = control.client, control.client.port, control.reports
    port.send(move(control, "interrupted", 1.0, speed=0.2))
    await until(lambda: port.latest.moving, "moving")
    await remote.shutdown(timeout_s=WAIT_S)
    await asyncio.wait_for(control.runner, WAIT_S)  # `run` returns after `Closed`
    assert reports.final("interrupted") is not None
    assert reports.final("interrupted").status is GoalStatus.ABORTED  # type: ignore[union-attr]
    assert await remote.close() == 0


async def test_shutdown_during_a_burst_still_answers_every_request(control: Control) -> None:
    remote, port, reports = control.client, control.client.port, control.reports
    ids = [f"late{i}" for i in range(50)]
    for i, goal_id in enumerate(ids):
        port.send(move(control, goal_id, 0.3 if i % 2 else -0.3, speed=0.5))
    await remote.shutdown(timeout_s=WAIT_S)
    await asyncio.wait_for(control.runner, WAIT_S)
    finals = [s for s in reports.statuses if s.status.is_final]
    assert sorted(s.goal_id for s in finals) == sorted(ids)  # one each, none lost
    assert await remote.close() == 0


async def test_the_control_process_ignores_sigterm_and_stops_when_the_daemon_goes(
    control: Control,
) -> None:
    remote, port = control.client, control.client.port
    assert remote.pid is not None
    os.kill(remote.pid, signal.SIGTERM)  # systemd signals the whole cgroup: the daemon decides
    await asyncio.sleep(0.3)
    assert remote.running
    port.send(move(control, "orphaned", 1.0, speed=0.2))
    await until(lambda: port.latest.moving, "moving")
    control.runner.cancel()
    assert await remote.close() == 0  # the link closed: the arm comes to rest, the drives close


async def test_a_dead_control_process_is_an_error_of_the_daemon(control: Control) -> None:
    assert control.client.pid is not None
    os.kill(control.client.pid, signal.SIGKILL)
    with pytest.raises(ArmdError, match=r"control process ended unexpectedly \(exit code -9\)"):
        await asyncio.wait_for(control.runner, WAIT_S)


async def test_an_event_the_daemon_fails_to_handle_ends_the_link_and_the_arm_comes_to_rest(
    control: Control,
) -> None:
    """A bug in the daemon's handling of an event is not swallowed: the link closes, the control
    process brings the arm to rest and exits 0, and the daemon's error names the cause."""

    def broken(event: Event) -> None:
        if isinstance(event, Sample):
            raise RuntimeError("telemetry bug")

    control.client._on_event = broken  # the next sample meets the bug
    with pytest.raises(ArmdError, match=r"exit code 0\).*RuntimeError: telemetry bug"):
        await asyncio.wait_for(control.runner, WAIT_S)


async def test_drivers_that_cannot_open_are_a_clear_start_up_error(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        1,
        {
            "drivers": {
                "sim": None,
                "servos": {
                    "type": "dynamixel",
                    "params": {
                        "port": str(tmp_path / "no-such-port"),
                        "devices": {f"d{i}": {"id": i + 1} for i in range(6)},
                    },
                },
            },
            "joints": {
                name: {"driver": "servos", "device": f"d{i}"}
                for i, name in enumerate(
                    [
                        "shoulder_pan_joint",
                        "shoulder_lift_joint",
                        "elbow_joint",
                        "wrist_1_joint",
                        "wrist_2_joint",
                        "wrist_3_joint",
                    ]
                )
            },
        },
    )
    client = ControlClient(setup_of(config), Events())
    with pytest.raises(ArmdError, match=r"cannot open the drivers: .*no-such-port"):
        await client.start()


def test_the_control_process_imports_neither_the_kinematics_nor_numba() -> None:
    """A lean real-time process: the daemon computes the forward kinematics."""
    script = (
        "import sys, armd.control.process, armd.control.wiring, drivers.sim.driver; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('kinematics', 'numba', 'llvmlite', 'armd.config.load')); print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stdout


# -- framing ---------------------------------------------------------------------------------------


async def link_pair() -> tuple[Link, Link]:
    a, b = socket.socketpair()
    return await Link.connect(a), await Link.connect(b)


async def test_frames_arrive_whole_and_in_order_and_the_end_reads_as_none() -> None:
    sender, receiver = await link_pair()
    request = Stop("s1", "why", GoalStatus.PREEMPTED)
    messages = [request, StatusUpdate("g", GoalStatus.ACCEPTED, None)] * 50
    for message in messages[:30]:
        sender.send(message)
    sender.send_all(messages[30:])
    sender.close()
    received = []
    while (message := await receiver.next()) is not None:
        received.append(message)
    assert received == messages
    await receiver.closed()  # a clean end: no error


async def test_the_last_frame_reaches_a_peer_that_is_still_writing() -> None:
    """The control process's last word (`Closed`) while the daemon still answers every sample
    (a torque map each, under gravity compensation): however the writes cross, the daemon reads
    every frame, the last one last, and a clean end (a close at once made its next write a
    broken pipe that dropped the frames it had not read)."""
    for _ in range(20):
        control, daemon = await link_pair()
        received: list[object] = []

        def answer(message: object, peer: Link = daemon, got: list[object] = received) -> None:
            got.append(message)
            peer.send(Watchdog())

        daemon.handle_with(answer)
        control.handle_with(lambda message: None)
        for _ in range(20):
            control.send(Watchdog())
            await asyncio.sleep(0)
        control.send(Closed())
        await control.finish(timeout_s=WAIT_S)
        await asyncio.wait_for(daemon.closed(), WAIT_S)  # a clean end: no error
        assert received == [Watchdog()] * 20 + [Closed()]


async def test_frames_torn_across_reads_arrive_whole_and_a_handler_takes_them_in_order() -> None:
    """Byte by byte, with the handler named half-way: the messages read before it are handed to
    it first, in order; those after go to it from the read callback."""
    raw, theirs = socket.socketpair()
    receiver = await Link.connect(theirs)
    messages = [StatusUpdate(f"g{i}", GoalStatus.ACCEPTED, None) for i in range(6)]
    data = b"".join(_frame(m) for m in messages)
    half = len(b"".join(_frame(m) for m in messages[:3]))
    raw.setblocking(False)
    for i in range(half):
        raw.send(data[i : i + 1])
        await asyncio.sleep(0)
    await until(lambda: len(receiver._held) == 3, "the first three frames")
    handled: list[object] = []
    receiver.handle_with(handled.append)
    assert handled == messages[:3]
    for i in range(half, len(data)):
        raw.send(data[i : i + 1])
        await asyncio.sleep(0)
    raw.close()
    await asyncio.wait_for(receiver.closed(), WAIT_S)
    assert handled == messages


@pytest.mark.parametrize(
    "array",
    [
        np.array([0.1, -2.5, np.nan, np.inf, -np.inf, 5e-324, 1e308, -0.0]),  # edges, a subnormal
        np.arange(24, dtype=np.float64).reshape(4, 6),
        np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2],  # not contiguous
        np.arange(24, dtype=np.float64).reshape(6, 4).T,  # Fortran order
        np.zeros((0, 6)),
        np.array(3.5),  # 0-d
        np.array([1, -2, 3], dtype=np.int32),
        np.array([True, False]),
        np.array([1.5, 2.5], dtype=">f8"),  # big-endian
        np.array(["a", 1], dtype=object),  # numpy's own reduction
        np.zeros(2, dtype=[("x", "f8"), ("n", "i4")]),  # structured: numpy's own too
    ],
    ids=lambda a: f"{a.dtype}{a.shape}",
)
async def test_arrays_cross_the_link_equal_and_writable(array: np.ndarray) -> None:
    sender, receiver = await link_pair()
    sample = Sample(7, 1.5, Mode.MOVING, 2, True, True, 0, None, array)
    sender.send(sample)
    sender.close()
    received = await receiver.next()
    assert isinstance(received, Sample)
    got = received.values
    assert got.dtype == array.dtype
    assert got.shape == array.shape
    if array.dtype == object or array.dtype.fields:
        assert got.tolist() == array.tolist()
    else:
        np.testing.assert_array_equal(got, array)
        assert np.signbit(got).tolist() == np.signbit(array).tolist()  # -0.0 stays negative
    if got.size:
        got.flat[0] = got.flat[-1]  # the loop and the daemon may work in place


async def test_a_stream_that_ends_inside_a_frame_is_an_error() -> None:
    raw, theirs = socket.socketpair()
    receiver = await Link.connect(theirs)
    raw.sendall(b"\x00\x00\x01\x00" + b"x" * 10)  # 256 bytes announced, 10 sent
    raw.close()
    with pytest.raises(ConnectionError, match="inside a frame"):
        await receiver.next()
    with pytest.raises(ConnectionError, match="inside a frame"):
        await receiver.closed()


async def test_an_absurd_frame_length_is_an_error() -> None:
    raw, theirs = socket.socketpair()
    receiver = await Link.connect(theirs)
    raw.sendall(b"\xff\xff\xff\xff")
    with pytest.raises(ConnectionError, match="frame of 4294967295 bytes"):
        await receiver.next()
    raw.close()


async def test_a_handler_that_raises_ends_the_link_with_an_error_that_names_it() -> None:
    sender, receiver = await link_pair()

    def broken(message: object) -> None:
        raise ValueError(f"cannot take {message!r}")

    receiver.handle_with(broken)
    sender.send("hello")
    with pytest.raises(ConnectionError, match="ValueError: cannot take 'hello'"):
        await asyncio.wait_for(receiver.closed(), WAIT_S)
    sender.close()


async def test_requests_it_cannot_follow_end_their_goal_and_the_process_carries_on(
    control: Control,
) -> None:
    """Issue 10: the control process checks every request; a speed that became a subnormal
    jerk limit took it down ("RuckigError: maximum jerk limit -nan")."""
    remote, port, reports = control.client, control.client.port, control.reports
    good = move(control, "good", 0.1)
    bad: list[MoveTo | FollowPath] = [
        replace(good, goal_id="subnormal", limits=good.limits.scaled(1.0).scaled(1e-300)),
        replace(good, goal_id="nan", target=np.full(6, np.nan)),
        replace(good, goal_id="far", target=np.full(6, 1e308)),
        FollowPath("no-path", TimedPath(np.zeros((0, 6)), 1.0, 1.0, 1.0)),
    ]
    for request in bad:
        port.send(request)
        goal_id = request.goal_id
        await until(lambda g=goal_id: reports.final(g) is not None, goal_id)  # type: ignore[misc]
        final = reports.final(request.goal_id)
        assert final is not None
        assert final.status is GoalStatus.ABORTED, final
        assert final.reason, final
    assert remote.running
    assert port.latest.mode == Mode.HOLDING
    port.send(move(control, "after", 0.1))
    await until(lambda: reports.final("after") is not None, "after")
    assert reports.final("after") == StatusUpdate("after", GoalStatus.SUCCEEDED, None)


async def test_the_watchdog_is_fed_while_a_drive_homes_and_only_then(tmp_path: Path) -> None:
    """A homing runs inside the loop's first enable (seconds): the control process feeds the
    systemd watchdog meanwhile, bounded by the homing's deadline, and not otherwise."""
    setup = control_setup(load_config(write_config(tmp_path, 1883), kernels=False))
    ours, theirs = await link_pair()
    server = ControlServer(setup, ours, watchdog_interval_s=0.05)
    feeding = asyncio.create_task(server._feed_while_homing())
    try:
        await asyncio.sleep(0.3)  # not homing: nothing is fed
        server.hardware.homing_until = asyncio.get_running_loop().time() + 0.3
        await asyncio.sleep(0.6)  # 0.3 s of homing, then its deadline passes
    finally:
        feeding.cancel()
        ours.close()
    messages = []
    while (message := await asyncio.wait_for(theirs.next(), WAIT_S)) is not None:
        messages.append(message)
    theirs.close()
    fed = [m for m in messages if isinstance(m, Watchdog)]
    assert 6 <= len(fed) <= 13, messages  # every 25 ms for 0.3 s (12), none before or after
