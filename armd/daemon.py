"""The daemon: composes the control process, goal pipeline and MQTT bridge, and runs them in one
TaskGroup until SIGTERM.

Two processes: the control loop and the drivers run in the control process
(`armd.control_process`, real-time scheduled where allowed), so that no MQTT traffic, goal
planning or garbage collection here delays a tick; this one runs the MQTT bridge and the goal
pipeline, and talks to the loop through `armd.remote_loop.RemoteLoop`.

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
import logging
import signal
from dataclasses import dataclass

from armd.config import ArmSetup
from armd.control_process import SHUTDOWN_STOP_TIMEOUT_S, loop_settings, motion_limits
from armd.errors import ArmdError
from armd.goals import GoalPipeline, PlanSettings
from armd.lock import InstanceLock
from armd.loop import StopRequest
from armd.messages import EstopCommand, Mode, Telemetry
from armd.mqtt import MqttBridge, MqttSettings
from armd.notify import SystemdNotifier
from armd.remote_loop import ControlReports, RemoteLoop
from armd.statuses import StatusLedger
from kinematics.ik import IKOptions

__all__ = ["Daemon", "run_daemon"]

log = logging.getLogger(__name__)
CLOSE_MARGIN_S = 5.0  # beyond the stop itself: disabling and closing the drives


def mqtt_settings(setup: ArmSetup) -> MqttSettings:
    m = setup.mqtt
    return MqttSettings(
        arm_name=setup.name,
        host=m.host,
        port=m.port,
        client_id=m.client_id,
        keepalive_s=m.keepalive_s,
        username=m.username,
        password=m.password,
        tls=m.tls is not None,
        tls_ca_file=m.tls.ca_file if m.tls else None,
        tls_cert_file=m.tls.cert_file if m.tls else None,
        tls_key_file=m.tls.key_file if m.tls else None,
        reconnect_min_s=m.reconnect_min_s,
        reconnect_max_s=m.reconnect_max_s,
    )


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
    )


@dataclass
class Daemon:
    """The composed daemon; `run_daemon` builds and runs one."""

    setup: ArmSetup
    loop: RemoteLoop
    pipeline: GoalPipeline
    bridge: MqttBridge
    notifier: SystemdNotifier
    statuses: StatusLedger
    _mode: Mode = Mode.INACTIVE
    _missed_ticks: int = 0

    @classmethod
    def build(cls, setup: ArmSetup, notifier: SystemdNotifier, log_level: str = "INFO") -> Daemon:
        """Compose the daemon; `log_level` (an `armd.logs` spec) goes to the control process."""
        # The bridge's callbacks reach the daemon, which is assembled last: late-bound lambdas.
        bridge = MqttBridge(
            mqtt_settings(setup),
            joint_names=[j for j in setup.tree.joint_names if j not in setup.fixed_joints],
            link_names=setup.tree.link_names,
            default_link=setup.tool_link,
            on_goal=lambda goal: daemon.pipeline.submit(goal),  # noqa: PLW0108
            on_estop=lambda command: daemon.estop(command),  # noqa: PLW0108
            on_connection_change=lambda up: daemon.broker_connection(up),  # noqa: PLW0108
        )
        statuses = StatusLedger(bridge.publish_status)
        reports = ControlReports(
            status=statuses.report,
            fault=bridge.set_fault,
            telemetry=lambda telemetry: daemon.telemetry(telemetry),  # noqa: PLW0108
            mode=lambda mode: daemon.show_status(mode=mode),
            ready=lambda drivers: daemon.ready(drivers),  # noqa: PLW0108
            watchdog=notifier.watchdog,
            notice=notifier.status,
        )
        watchdog_s = notifier.watchdog_interval_s()
        loop = RemoteLoop(setup.path, loop_settings(setup), reports, watchdog_s, log_level)
        pipeline = GoalPipeline(
            setup.tree,
            setup.tool_link,
            loop,
            motion_limits(setup),
            plan_settings(setup),
            statuses,
        )
        daemon = cls(setup, loop, pipeline, bridge, notifier, statuses)
        return daemon

    def ready(self, drivers: int) -> None:
        self.notifier.ready(self._status_line())
        log.info("ready: arm %r, %d driver(s)", self.setup.name, drivers)

    def telemetry(self, telemetry: Telemetry) -> None:
        self.bridge.publish_telemetry(telemetry)
        if telemetry.missed_ticks != self._missed_ticks:
            self.show_status(missed_ticks=telemetry.missed_ticks)

    def show_status(self, *, mode: Mode | None = None, missed_ticks: int | None = None) -> None:
        """systemd's STATUS=: ``mode: <mode>``, and the missed ticks once there are some."""
        self._mode = mode if mode is not None else self._mode
        self._missed_ticks = missed_ticks if missed_ticks is not None else self._missed_ticks
        self.notifier.status(self._status_line())

    def _status_line(self) -> str:
        line = f"mode: {self._mode.value}"
        return f"{line}, missed ticks: {self._missed_ticks}" if self._missed_ticks else line

    def estop(self, command: EstopCommand) -> None:
        if command.engage:
            self.loop.engage_estop()
        else:
            self.loop.reset()

    def broker_connection(self, connected: bool) -> None:
        if connected:
            self.pipeline.accepting = True
            return
        if self.setup.broker_loss == "stop":
            self.pipeline.accepting = False
            if self.loop.busy and self.loop.running:  # moving, or an accepted motion about to start
                log.warning("broker connection lost: stopping the current motion")
                self.loop.submit(StopRequest(None, "broker connection lost"))
        else:
            log.warning("broker connection lost: finishing the current motion")

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set, then shut down cleanly. The control process must be started
        (`self.loop.start()`)."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._run_link(), name="control link")
            tasks.create_task(self.bridge.run(), name="mqtt bridge")
            pipeline = tasks.create_task(self.pipeline.run(), name="goal pipeline")
            await stop.wait()
            self.notifier.stopping("stopping: bringing the arm to rest")
            log.info("stopping: bringing the arm to rest")
            pipeline.cancel()
            self.pipeline.close("daemon stopping")
            await self.loop.shutdown(SHUTDOWN_STOP_TIMEOUT_S + CLOSE_MARGIN_S)
            self.statuses.abort_all("daemon stopping")
            self.bridge.request_stop()

    async def _run_link(self) -> None:
        """The control process's reports; when it dies, every goal in progress is aborted (the
        bridge sends those statuses before ``offline``) and the daemon ends with the error."""
        try:
            await self.loop.run()
        except ArmdError as exc:
            log.error("%s: aborting the goals in progress", exc)
            self.pipeline.close(str(exc))
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
        daemon = Daemon.build(setup, notifier, log_level)
        await daemon.loop.start()
        try:
            await daemon.run(stop)
        finally:
            await daemon.loop.close()
            log.info("stopped")
