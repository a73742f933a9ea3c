"""The daemon: composes the control process, goal pipeline and MQTT bridge, and runs them in one
TaskGroup until SIGTERM.

Two processes: the control loop and the drivers run in the control process
(`armd.control.process`, real-time scheduled where allowed), so that no MQTT traffic, goal
planning or garbage collection here delays a tick; this one runs the MQTT bridge and the goal
pipeline, computes the telemetry's forward kinematics from the loop's samples, and talks to the
loop through `armd.daemon.control_client.ControlClient` in the control protocol
(`armd.link.protocol`); stream
messages become the loop's targets in `armd.planning.stream_input`.

Start-up: take the single-instance lock, start the control process, which opens every driver (a
failure ends the daemon with a clear error before anything moves), then runs the loop, which
enables the drives only after a valid read and holds the measured position. ``READY=1`` goes to
systemd after the first valid read; ``WATCHDOG=1`` comes from the control loop's own ticks (relayed
from the control process); ``STATUS=`` follows the mode.

Shutdown (SIGTERM/SIGINT): ``STOPPING=1``; the current motion is stopped (its goal aborted) and
the arm held; the drives are disabled and closed; the bridge flushes statuses and publishes
``offline``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import signal
import time

import numpy as np

from armd.api.bridge import MqttBridge
from armd.api.contract import Topics, encode
from armd.api.homeassistant import discovery_messages
from armd.api.model_topic import model_json
from armd.api.statuses import StatusLedger
from armd.config.control_setup import control_setup
from armd.config.load import ArmSetup
from armd.control.loop import SHUTDOWN_STOP_TIMEOUT_S
from armd.daemon.collision_watch import CollisionWatch
from armd.daemon.control_client import ControlClient
from armd.daemon.dynamics import ArmDynamics
from armd.daemon.notify import SystemdNotifier
from armd.errors import ArmdError
from armd.link.messages import (
    EstopCommand,
    Goal,
    Mode,
    Rejection,
    StatusUpdate,
    StreamMessage,
    Telemetry,
    ToolLoad,
)
from armd.link.protocol import (
    EngageEstop,
    Event,
    FaultChanged,
    ModeChanged,
    Notice,
    Ready,
    Reset,
    Sample,
    Stop,
)
from armd.lock import InstanceLock
from armd.motion.trajectory import MotionLimits
from armd.planning.collision_guard import CollisionGuard
from armd.planning.goals import GoalPipeline, Gripper, PlanSettings
from armd.planning.stream_cartesian import CartesianStream
from armd.planning.stream_guard import StreamGuard
from armd.planning.stream_input import StreamInput, StreamSettings
from kinematics import Inertial
from kinematics.compiled import release_compiler_pages
from kinematics.ik import IKOptions

__all__ = [
    "Daemon",
    "collision_guard",
    "goal_joint_names",
    "motion_limits",
    "plan_settings",
    "run_daemon",
    "stream_guard",
]

log = logging.getLogger(__name__)
CLOSE_MARGIN_S = 5.0  # beyond the stop itself: disabling and closing the drives


def plan_settings(setup: ArmSetup) -> PlanSettings:
    motion, safety = setup.motion, setup.safety
    return PlanSettings(
        ik=IKOptions(
            position_tolerance=motion.ik_position_tolerance,
            rotation_tolerance=motion.ik_rotation_tolerance,
            max_joint_change=motion.ik_max_joint_change,
            time_budget_s=motion.ik_time_budget_s,
        ),
        linear_step=motion.linear_step,
        angular_step=motion.linear_step * 10.0,  # 5 mm ↔ 0.05 rad by default
        max_linear_speed=motion.max_linear_speed,
        max_angular_speed=motion.max_angular_speed,
        pose_tolerance=(safety.pose_position_tolerance, safety.pose_rotation_tolerance),
        fixed_joints=frozenset(setup.fixed_joints),
        joint_tolerance=safety.joint_tolerance,
        poll_s=1.0 / setup.loop_hz,
        gripper=_gripper(setup),
        poses=setup.config.poses,
    )


def collision_guard(setup: ArmSetup) -> CollisionGuard | None:
    """The collision checks of the arm's motions (None: the config has no ``collision:``)."""
    if setup.collision is None:
        return None
    return CollisionGuard(setup.collision, setup.tree.limits.velocity)


def stream_guard(setup: ArmSetup) -> StreamGuard | None:
    """The collision checks of stream targets (None: the config has no ``collision:``)."""
    if setup.collision is None:
        return None
    limits = setup.tree.limits
    return StreamGuard(
        setup.collision, np.array(limits.lower), np.array(limits.upper), setup.stream.timeout_s
    )


def motion_limits(setup: ArmSetup) -> MotionLimits:
    """The limits goals are planned within: the joints' velocity and acceleration, the jerk."""
    limits = setup.tree.limits
    return MotionLimits(limits.velocity, limits.acceleration, setup.jerk)


def goal_joint_names(setup: ArmSetup) -> list[str]:
    """The joints a goal may name: every joint of the model but the fixed ones."""
    return [j for j in setup.tree.joint_names if j not in setup.fixed_joints]


def _gripper(setup: ArmSetup) -> Gripper | None:
    gripper = setup.config.gripper
    if gripper is None:
        return None
    return Gripper(gripper.joint, gripper.open, gripper.closed, gripper.max_effort, gripper.effort)


def announcements(setup: ArmSetup) -> list[tuple[str, bytes]]:
    """The retained documents published on every connection: the arm's ``model`` and, when the
    config asks for it, Home Assistant's discovery configs."""
    messages = [(Topics.for_arm(setup.name).model, encode(model_json(setup)))]
    home_assistant = setup.config.home_assistant
    if home_assistant is not None and home_assistant.discovery:
        messages += discovery_messages(setup, home_assistant.prefix)
    return messages


class Daemon:
    """The composed daemon; `run_daemon` builds and runs one."""

    def __init__(self, setup: ArmSetup, notifier: SystemdNotifier, log_level: str = "INFO") -> None:
        """Compose the daemon; `log_level` (an `armd.logs` spec) goes to the control process."""
        self.setup = setup
        self.notifier = notifier
        self.started = time.monotonic()  # the clock of the loop's samples (CLOCK_MONOTONIC)
        self.bridge = MqttBridge(
            setup.mqtt,
            joint_names=goal_joint_names(setup),
            link_names=setup.tree.link_names,
            default_link=setup.tool_link,
            on_goal=self._on_goal,
            on_estop=self.estop,
            on_connection_change=self.broker_connection,
            on_stream=self._on_stream,
            on_load=self._on_load,
            announcements=announcements(setup),
        )
        self.statuses = StatusLedger(self.bridge.publish_status)
        self.control = ControlClient(
            control_setup(setup),
            self.on_event,
            notifier.watchdog,
            notifier.watchdog_interval_s(),
            log_level,
        )
        settings = plan_settings(setup)
        self.pipeline = GoalPipeline(
            setup.tree,
            setup.tool_link,
            self.control.port,
            motion_limits(setup),
            settings,
            self.statuses,
            collision_guard(setup),
        )
        held = setup.fixed_joints.keys() | self.pipeline.planner.hold  # never moved by streams
        self.streams = StreamInput(
            StreamSettings(setup.stream.enabled, setup.stream.timeout_s, setup.tool_link),
            CartesianStream(
                setup.tree,
                dataclasses.replace(settings.ik, restarts=False),  # never a jump to a new branch
                np.array([name not in held for name in setup.tree.joint_names]),
                np.array(setup.tree.limits.lower),
                np.array(setup.tree.limits.upper),
            ),
            self.control.port,
            self.statuses,
            self.bridge.publish_status,
            guard=stream_guard(setup),
        )
        self.collision_watch = (
            None
            if setup.collision is None
            else CollisionWatch(setup.collision, self.control.port.send)
        )
        self.dynamics = ArmDynamics.of(
            setup, self.control.setup.loop.sample_every * self.control.setup.loop.period_s
        )
        self._telemetry_every = max(1, round(setup.loop_hz / setup.telemetry_hz))
        self._mode = Mode.INACTIVE
        self._missed_ticks = 0

    # -- from the control process -----------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        """An event of the control loop (`armd.link.protocol`)."""
        if isinstance(event, Sample):
            for command in self.dynamics.on_sample(event):
                self.control.port.send(command)
            if self.collision_watch is not None:
                self.collision_watch.check(event)
            if event.tick % self._telemetry_every == 0:
                self.publish_telemetry(event)
        elif isinstance(event, StatusUpdate):
            self.statuses.report(event)
            self.streams.on_status(event)
        elif isinstance(event, FaultChanged):
            self.bridge.set_fault(event.fault)
        elif isinstance(event, ModeChanged):
            self.show_status(mode=event.mode)
        elif isinstance(event, Ready):
            self.notifier.ready(self._status_line())
            log.info("ready: arm %r, %d driver(s)", self.setup.name, event.drivers)
        elif isinstance(event, Notice):
            self.notifier.status(event.text)

    def publish_telemetry(self, sample: Sample) -> None:
        """``state``: the measured joints and the forward kinematics of the tool link."""
        setup = self.setup
        q, velocity, effort = sample.values[0], sample.values[1], sample.measured_effort
        pose = setup.tree.fk(q if np.isfinite(q).all() else np.nan_to_num(q), setup.tool_link)
        position, orientation = pose.translation.tolist(), pose.quaternion.tolist()
        self.bridge.publish_telemetry(
            Telemetry(
                t=sample.t,
                mode=sample.mode,
                joints=dict(
                    zip(
                        setup.tree.joint_names,
                        zip(q.tolist(), velocity.tolist(), effort.tolist(), strict=True),
                        strict=True,
                    )
                ),
                tcp_link=setup.tool_link,
                tcp_position=(position[0], position[1], position[2]),
                tcp_orientation=(orientation[0], orientation[1], orientation[2], orientation[3]),
                missed_ticks=sample.missed_ticks,
                uptime=max(0.0, sample.t - self.started),
                commands=dict(zip(setup.tree.joint_names, sample.values[2].tolist(), strict=True)),
                collision_hold=self._collision_hold(),
            )
        )
        if sample.missed_ticks != self._missed_ticks:
            self.show_status(missed_ticks=sample.missed_ticks)

    def _collision_hold(self) -> tuple[str, str, float] | None:
        hold = self.streams.collision_hold
        return None if hold is None else (*hold.pair, hold.distance)

    def show_status(self, *, mode: Mode | None = None, missed_ticks: int | None = None) -> None:
        """systemd's STATUS=: ``mode: <mode>``, and the missed ticks once there are some."""
        self._mode = mode if mode is not None else self._mode
        self._missed_ticks = missed_ticks if missed_ticks is not None else self._missed_ticks
        self.notifier.status(self._status_line())

    def _status_line(self) -> str:
        line = f"mode: {self._mode.value}"
        return f"{line}, missed ticks: {self._missed_ticks}" if self._missed_ticks else line

    # -- from the MQTT bridge ---------------------------------------------------------------------

    def _on_goal(self, goal: Goal) -> None:
        self.pipeline.submit(goal)

    def _on_stream(self, message: StreamMessage | Rejection) -> None:
        self.streams.submit(message)

    def _on_load(self, load: ToolLoad) -> None:
        self.dynamics.set_payload(Inertial(load.mass, load.com, load.inertia))
        log.info(
            "payload: %g kg at %s, centre of mass %s m", load.mass, self.setup.tool_link, load.com
        )

    def estop(self, command: EstopCommand) -> None:
        self.control.port.send(EngageEstop() if command.engage else Reset())

    def broker_connection(self, connected: bool) -> None:
        if connected:
            self.pipeline.accepting = True
            return
        if self.setup.broker_loss == "stop":
            self.pipeline.accepting = False
            if self.control.port.busy and self.control.running:
                log.warning("broker connection lost: stopping the current motion")
                self.control.port.send(Stop(None, "broker connection lost"))
        else:
            log.warning("broker connection lost: finishing the current motion")

    # -- running ----------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set, then shut down cleanly. The control process must be started
        (`self.control.start()`)."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._run_link(), name="control link")
            tasks.create_task(self.bridge.run(), name="mqtt bridge")
            pipeline = tasks.create_task(self.pipeline.run(), name="goal pipeline")
            await stop.wait()
            self.notifier.stopping("stopping: bringing the arm to rest")
            log.info("stopping: bringing the arm to rest")
            pipeline.cancel()
            self.pipeline.close("daemon stopping")
            self.streams.close("daemon stopping")
            await self.control.shutdown(SHUTDOWN_STOP_TIMEOUT_S + CLOSE_MARGIN_S)
            self.statuses.abort_all("daemon stopping")
            self.bridge.request_stop()

    async def _run_link(self) -> None:
        """The control process's events; when it dies, every goal in progress is aborted (the
        bridge sends those statuses before ``offline``) and the daemon ends with the error."""
        try:
            await self.control.run()
        except ArmdError as exc:
            log.error("%s: aborting the goals in progress", exc)
            self.pipeline.close(str(exc))
            self.streams.close(str(exc))
            self.statuses.abort_all(str(exc))
            raise


async def run_daemon(
    setup: ArmSetup,
    *,
    notifier: SystemdNotifier | None = None,
    stop: asyncio.Event | None = None,
    log_level: str = "INFO",
) -> None:
    """Run the daemon for `setup` until SIGTERM/SIGINT (or `stop`). Raises `ArmdError` when it
    cannot start (lock held, a bus that cannot be opened)."""
    notifier = notifier or SystemdNotifier()
    stop = stop or asyncio.Event()
    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(sig, stop.set)
    with InstanceLock(setup.lock_file, setup.name):
        daemon = Daemon(setup, notifier, log_level)
        await daemon.control.start()
        _freeze_heap(setup)
        try:
            await daemon.run(stop)
        finally:
            await daemon.control.close()
            log.info("stopped")


def _freeze_heap(setup: ArmSetup) -> None:
    """Load the kinematics kernels now (the first telemetry would), then move everything built so
    far out of the garbage collector's sight: a full collection of this heap (numba, LLVM,
    pydantic) takes ~60 ms, a pause that every goal and telemetry message would wait behind.
    LLVM's code, needed to load the kernels but never to run them, is handed back to the kernel
    (70-110 MiB of resident memory)."""
    setup.tree.fk(np.zeros(setup.tree.dof), setup.tool_link)
    gc.collect()
    gc.freeze()
    released = release_compiler_pages()
    log.debug("released %.0f MiB of LLVM's pages", released / 2**20)
