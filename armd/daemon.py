"""The daemon: composes hardware, control loop, goal pipeline and MQTT bridge, and runs them in
one TaskGroup until SIGTERM.

Two event loops: the control loop, the drivers and their reconnection run on the control thread
(`armd.control_thread`), so that no MQTT traffic or goal planning delays a tick; the MQTT bridge
and the goal pipeline run on the main one. The loop's statuses, telemetry and faults are posted to
the main loop; goals, stops, e-stops and resets reach the loop through its thread-safe requests.

Start-up: take the single-instance lock, open every driver (a failure ends the daemon with a
clear error before anything moves), then run the loop, which enables the drives only after a
valid read and holds the measured position. ``READY=1`` goes to systemd after the first valid
read; ``WATCHDOG=1`` comes from the control loop's own ticks; ``STATUS=`` follows the mode.

Shutdown (SIGTERM/SIGINT): ``STOPPING=1``; the current motion is stopped (its goal aborted) and
the arm held; the bridge flushes statuses and publishes ``offline``; the drives are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from armd.config import ArmSetup, build_drivers
from armd.control_thread import ControlThread, on_loop
from armd.errors import ArmdError
from armd.goals import GoalPipeline, PlanSettings
from armd.hardware import ArmHardware
from armd.lock import InstanceLock
from armd.loop import ControlLoop, LoopSettings, StopRequest
from armd.messages import EstopCommand, Mode
from armd.mqtt import MqttBridge, MqttSettings
from armd.notify import SystemdNotifier
from armd.safety import SafetyMonitor, SafetyThresholds
from armd.timing import PreciseTimer, Schedule
from armd.trajectory import MotionLimits
from drivers import DriverError
from kinematics.ik import IKOptions

__all__ = ["Daemon", "run_daemon"]

log = logging.getLogger(__name__)
SHUTDOWN_STOP_TIMEOUT_S = 5.0
STATS_INTERVAL_S = 60.0
RECONNECT_INTERVAL_S = 1.0


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


def motion_limits(setup: ArmSetup) -> MotionLimits:
    limits = setup.tree.limits
    return MotionLimits(
        np.array(limits.velocity), np.array(limits.acceleration), np.array(setup.jerk)
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


def safety_monitor(setup: ArmSetup) -> SafetyMonitor:
    safety = setup.safety
    period = 1.0 / setup.loop_hz
    thresholds = SafetyThresholds(
        stale_hold_s=max(safety.stale_hold_ticks * period, safety.stale_hold_s),
        stale_fault_s=safety.stale_fault_s,
        following_error=safety.following_error,
        following_error_per_velocity=safety.following_error_per_velocity,
        limit_tolerance=safety.limit_tolerance,
    )
    limits = setup.tree.limits
    return SafetyMonitor(setup.tree.joint_names, limits.lower, limits.upper, thresholds)


@dataclass
class Daemon:
    """The composed daemon; `run_daemon` builds and runs one."""

    setup: ArmSetup
    hardware: ArmHardware
    loop: ControlLoop
    pipeline: GoalPipeline
    bridge: MqttBridge
    notifier: SystemdNotifier
    timer: PreciseTimer
    thread: ControlThread

    @classmethod
    def build(
        cls, setup: ArmSetup, notifier: SystemdNotifier, clock: Callable[[], float]
    ) -> Daemon:
        """Compose the daemon; call from the event loop that will run the bridge."""
        main = asyncio.get_running_loop()
        hardware = ArmHardware(build_drivers(setup, clock), setup.transmission)
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
        period = 1.0 / setup.loop_hz
        timer = PreciseTimer()
        loop = ControlLoop(
            setup.tree,
            setup.tool_link,
            hardware,
            safety_monitor(setup),
            motion_limits(setup),
            LoopSettings(
                period_s=period,
                telemetry_every=max(1, round(setup.loop_hz / setup.telemetry_hz)),
                joint_tolerance=setup.safety.joint_tolerance,
                settle_timeout_s=setup.safety.settle_timeout_s,
                disable_on_fault=setup.safety.on_fault == "disable",
            ),
            Schedule(period, clock, timer.sleep_until if clock is time.monotonic else None),
            on_loop(main, bridge.publish_status),
            on_loop(main, bridge.set_fault),
            on_loop(main, bridge.publish_telemetry),
            on_mode_change=lambda mode: notifier.status(f"mode: {mode.value}"),
        )
        pipeline = GoalPipeline(
            setup.tree,
            setup.tool_link,
            loop,
            motion_limits(setup),
            plan_settings(setup),
            bridge.publish_status,
        )
        thread = ControlThread(priority=setup.realtime_priority)
        daemon = cls(setup, hardware, loop, pipeline, bridge, notifier, timer, thread)
        return daemon

    async def open(self) -> None:
        """Start the control thread and open every driver on it; raises `ArmdError` when a bus
        cannot be opened (nothing is left running then)."""
        self.thread.start()
        try:
            await self.thread.run(self.hardware.open())
        except BaseException as exc:
            await self.thread.stop()
            if isinstance(exc, DriverError):
                raise ArmdError(f"cannot open the drivers: {exc}") from exc
            raise

    async def close(self) -> None:
        """Disable and close the drivers (best effort), then stop the control thread."""
        try:
            with contextlib.suppress(DriverError):
                await self.thread.run(self.hardware.disable())
            await self.thread.run(self.hardware.close())
        finally:
            await self.thread.stop()

    def estop(self, command: EstopCommand) -> None:
        if command.engage:
            log.warning("e-stop engaged over MQTT")
            self.loop.engage_estop()
        else:
            log.info("reset requested over MQTT")
            self.loop.reset()

    def broker_connection(self, connected: bool) -> None:
        if connected:
            self.pipeline.accepting = True
            return
        if self.setup.broker_loss == "stop":
            self.pipeline.accepting = False
            if self.loop.busy:  # moving, or an accepted motion about to start
                log.warning("broker connection lost: stopping the current motion")
                self.loop.submit(StopRequest(None, "broker connection lost"))
        else:
            log.warning("broker connection lost: finishing the current motion")

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set, then shut down cleanly."""
        shutting_down = threading.Event()
        control = self.thread.run
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(control(self._control(shutting_down)), name="control loop")
            tasks.create_task(self.bridge.run(), name="mqtt bridge")
            pipeline = tasks.create_task(self.pipeline.run(), name="goal pipeline")
            reconnect = tasks.create_task(control(self._reconnect_lost_drivers()), name="reconnect")
            await stop.wait()
            self.notifier.stopping("stopping: bringing the arm to rest")
            log.info("stopping: bringing the arm to rest")
            pipeline.cancel()
            reconnect.cancel()
            await self._come_to_rest()
            shutting_down.set()
            self.bridge.request_stop()

    async def _control(self, shutting_down: threading.Event) -> None:
        """The control loop task (on the control thread), with the systemd hand-shakes it owns."""
        interval = self.notifier.watchdog_interval_s()
        every = max(1, int((interval or 1.0) / 2 * self.setup.loop_hz))
        ready = False

        def after_tick() -> None:
            nonlocal ready
            measured = self.loop.measured
            if not ready and measured is not None and measured.complete():
                ready = True
                self.notifier.ready(f"mode: {self.loop.mode.value}")
                log.info("ready: arm %r, %d driver(s)", self.setup.name, len(self.hardware.drivers))
            if interval is not None and self.loop.tick_count % every == 0:
                self.notifier.watchdog()
            if self.loop.tick_count % stats_every == 0:
                self.log_timing()

        stats_every = max(1, int(STATS_INTERVAL_S * self.setup.loop_hz))
        try:
            await self.loop.run(shutting_down.is_set, after_tick)
        finally:
            self.timer.close()
            self.log_timing()

    def log_timing(self) -> None:
        """One INFO line on the loop's timing (every minute and at shutdown)."""
        stats = self.loop.schedule.stats()
        log.info(
            "loop timing: %d ticks, %d missed, period error p50 %.3f ms, p99 %.3f ms, "
            "max %.3f ms; limiter interventions %d",
            stats.ticks,
            stats.missed,
            stats.p50_s * 1e3,
            stats.p99_s * 1e3,
            stats.max_s * 1e3,
            self.loop.limiter.interventions,
        )

    async def _reconnect_lost_drivers(self) -> None:
        """Once a lost bus has faulted the loop, reopen it every `RECONNECT_INTERVAL_S` until it
        is back (on the control thread). The fault stays latched: moving again needs a reset."""
        while True:
            await asyncio.sleep(RECONNECT_INTERVAL_S)
            if self.hardware.failed and self.loop.fault is not None:
                back = await self.hardware.reconnect()
                if back:
                    self.notifier.status(f"drivers {back} reconnected: reset to resume")

    async def _come_to_rest(self) -> None:
        if self.loop.moving or self.loop.mode == Mode.MOVING:
            self.loop.submit(StopRequest(None, "daemon stopping"))
        deadline = time.monotonic() + SHUTDOWN_STOP_TIMEOUT_S
        while self.loop.busy and time.monotonic() < deadline:
            await asyncio.sleep(self.loop.settings.period_s)


async def run_daemon(
    setup: ArmSetup,
    *,
    clock: Callable[[], float] = time.monotonic,
    notifier: SystemdNotifier | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run the daemon for `setup` until SIGTERM/SIGINT (or `stop`). Raises `ArmdError` when it
    cannot start (lock held, a bus that cannot be opened)."""
    notifier = notifier or SystemdNotifier()
    stop = stop or asyncio.Event()
    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(sig, stop.set)
    with InstanceLock(setup.lock_file, setup.name):
        daemon = Daemon.build(setup, notifier, clock)
        await daemon.open()
        # The start-up objects (modules, model, drivers) live as long as the process: out of the
        # collector's sight, a full collection takes ~1 ms instead of 40-70 ms, a pause that
        # would otherwise land in a control tick (measured under a flood of MQTT input).
        gc.collect()
        gc.freeze()
        try:
            await daemon.run(stop)
        finally:
            await daemon.close()
            log.info("stopped")
