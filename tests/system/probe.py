"""A synchronous MQTT test client for the arm's topics (a dashboard, in effect), and helpers to
read the telemetry it records."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, TypeVar

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from tests.realtime import PtyStallProbe, held_long_enough

__all__ = [
    "ARM",
    "FINAL",
    "WAIT_S",
    "Message",
    "MqttProbe",
    "at_rest",
    "contract_violations",
    "joint_positions",
    "max_joint_difference",
]

ARM = "ur5-sim"  # the name in config/sim.yaml
WAIT_S = 30.0  # generous: the suite must pass on a loaded 2-core machine
TELEMETRY_HZ = 25  # config/sim.yaml: a state every 40 ms
LOOP_PERIOD_S = 1 / 250  # config/sim.yaml's loop_hz
FINAL = frozenset({"rejected", "succeeded", "aborted", "preempted"})

_T = TypeVar("_T")


@dataclass(frozen=True)
class Message:
    topic: str  # relative to armd/<name>/, e.g. "state", "goal/status"
    payload: bytes
    retain: bool
    received: float  # time.monotonic() at arrival

    @property
    def text(self) -> str:
        return self.payload.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.payload)


class MqttProbe:
    """A synchronous MQTT client (paho, its own network thread) subscribed to ``armd/<arm>/#``
    that records every message with its arrival time. Indexes into `messages` (`mark`) let a
    test look only at what arrived after it acted."""

    def __init__(
        self,
        host: str,
        port: int,
        arm: str = ARM,
        *,
        username: str | None = None,
        password: str | None = None,
        session: str | None = None,
    ) -> None:
        """`username`/`password`: log in (a broker with a password file). `session`: a client
        id whose session the broker keeps while the probe is away (clean_session off), so that
        QoS 1 messages published meanwhile are delivered once it is back; the probe then also
        reconnects within a second or two."""
        self.prefix = f"armd/{arm}/"
        self.messages: list[Message] = []
        self._changed = threading.Condition()
        self._subscribed = threading.Event()
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=session or f"system-test-{uuid.uuid4().hex[:8]}",
            clean_session=session is None,
        )
        if username is not None:
            self.client.username_pw_set(username, password)
        if session is not None:
            self.client.reconnect_delay_set(min_delay=1, max_delay=2)
        self.client.on_message = self._on_message
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = lambda *args: self._subscribed.set()
        self.client.connect(host, port)
        self.client.loop_start()
        if not self._subscribed.wait(WAIT_S):
            self.close()
            raise AssertionError(f"the test client could not subscribe at {host}:{port}")

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def _on_connect(self, client: mqtt.Client, *args: Any) -> None:
        client.subscribe(self.prefix + "#", qos=1)

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        received = Message(
            message.topic.removeprefix(self.prefix),
            bytes(message.payload),
            bool(message.retain),
            time.monotonic(),
        )
        with self._changed:
            self.messages.append(received)
            self._changed.notify_all()

    # -- reading -----------------------------------------------------------------------------

    def mark(self) -> int:
        """The index of the next message to arrive."""
        with self._changed:
            return len(self.messages)

    def on(self, topic: str, since: int = 0) -> list[Message]:
        with self._changed:
            return [m for m in self.messages[since:] if m.topic == topic]

    def wait_for(
        self, predicate: Callable[[], _T | None], timeout_s: float = WAIT_S, what: str = ""
    ) -> _T:
        """Wait until `predicate()` returns something truthy (re-checked on every message and
        every 0.1 s) and return it; fail the test with `what` and a summary on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"timed out after {timeout_s:g} s waiting for {what or predicate}; "
                        f"recent messages:\n{self.summary()}"
                    )
                self._changed.wait(min(remaining, 0.1))

    def statuses(self, goal_id: str | None, since: int = 0) -> list[dict[str, Any]]:
        """The ``goal/status`` payloads of `goal_id` (None: those without an id)."""
        found = [m.json() for m in self.on("goal/status", since)]
        return [s for s in found if s.get("id") == goal_id]

    def wait_status(
        self,
        goal_id: str | None,
        *,
        final: bool = True,
        status: str | None = None,
        since: int = 0,
        timeout_s: float = WAIT_S,
    ) -> dict[str, Any]:
        """The first status of `goal_id` after `since` that is final (or any, with
        ``final=False``), or equal to `status` when given."""

        def found() -> dict[str, Any] | None:
            for s in self.statuses(goal_id, since):
                if status is not None:
                    if s["status"] == status:
                        return s
                elif not final or s["status"] in FINAL:
                    return s
            return None

        what = f"status {status or ('final' if final else 'any')} of goal {goal_id!r}"
        return self.wait_for(found, timeout_s, what)

    def states(self, since: int = 0) -> list[dict[str, Any]]:
        return [m.json() for m in self.on("state", since)]

    def latest_state(self) -> dict[str, Any]:
        states = self.on("state")
        if not states:
            raise AssertionError("no state message received")
        return dict(states[-1].json())

    def wait_state(
        self,
        predicate: Callable[[dict[str, Any]], bool] = lambda state: True,
        *,
        since: int | None = None,
        timeout_s: float = WAIT_S,
        what: str = "a state",
    ) -> dict[str, Any]:
        """The first ``state`` after `since` (default: from now on) for which `predicate` holds."""
        start = self.mark() if since is None else since

        def found() -> dict[str, Any] | None:
            return next((s for s in self.states(start) if predicate(s)), None)

        return self.wait_for(found, timeout_s, what)

    def wait_mode(self, mode: str, *, since: int | None = None) -> dict[str, Any]:
        return self.wait_state(lambda s: s["mode"] == mode, since=since, what=f"mode {mode!r}")

    def availability(self) -> str | None:
        found = self.on("availability")
        return found[-1].text if found else None

    def wait_availability(self, value: str, since: int = 0, timeout_s: float = WAIT_S) -> None:
        self.wait_for(
            lambda: any(m.text == value for m in self.on("availability", since)),
            timeout_s,
            f"availability {value!r}",
        )

    def summary(self, last: int = 15) -> str:
        """The last messages other than telemetry, and the latest state's mode."""
        others = [m for m in self.messages if m.topic != "state"][-last:]
        lines = [f"  {m.topic}: {m.text[:300]}" for m in others]
        states = [m for m in self.messages if m.topic == "state"]
        if states:
            lines.append(f"  ({len(states)} states, the latest mode {states[-1].json()['mode']})")
        return "\n".join(lines) or "  (none)"

    # -- writing -----------------------------------------------------------------------------

    def publish(self, topic: str, payload: bytes | str, qos: int = 1) -> int:
        """Publish on ``armd/<arm>/<topic>`` and wait for the broker's acknowledgement; returns
        the `mark` taken before publishing."""
        since = self.mark()
        info = self.client.publish(self.prefix + topic, payload, qos=qos)
        info.wait_for_publish(WAIT_S)
        assert info.is_published(), f"publishing on {topic} failed"
        return since

    def publish_goal(self, goal: Mapping[str, Any] | str | bytes) -> int:
        """Publish a goal (a mapping is sent as JSON, text and bytes as they are)."""
        payload = json.dumps(goal) if isinstance(goal, Mapping) else goal
        return self.publish("goal", payload)

    def run_goal(self, goal: Mapping[str, Any], timeout_s: float = WAIT_S) -> dict[str, Any]:
        """Publish a goal and return its final status."""
        since = self.publish_goal(goal)
        return self.wait_status(goal["id"], since=since, timeout_s=timeout_s)


def run_goal_through_stalls(
    probe: MqttProbe,
    goal: Mapping[str, Any],
    stalls: PtyStallProbe | None,
    *,
    hold_s: float,
    period_s: float,
    fault_s: float = 0.25,
    watchdog_s: float | None = None,
    timeout_s: float = WAIT_S,
    resends: int = 3,
) -> dict[str, Any]:
    """The goal's final status, on an arm whose devices answer through a pty. A goal aborted for
    stale feedback is the daemon's documented answer to a bus quiet for `hold_s` (it holds) or
    `fault_s` (it faults until a reset): the config's `safety.stale_hold_s` and `stale_fault_s`
    (docs/safety.md). The same goal is sent again, as a user would (after the e-stop's reset
    where it faulted), when `stalls` saw the pty path (or the test's process, or with its
    `cpus` a CPU at the devices' priority) held up that long, less two loop periods
    (`period_s`), while it ran, at most `resends` times; hold-ups less than a loop period apart
    count as one (the loop may not have asked in between). With
    `watchdog_s`, a device's watchdog that expired is answered alike when a stall that long held
    the loop (a serial transaction waits out its reply deadline while the pty path stalls, and a
    device the loop then commands no more trips its watchdog, as hardware would). Any other
    status is returned as it is; one aborted for a quiet bus carries what each run measured
    (``measured``: the longest hold-up of each, s), for the test's assertion message."""
    measured: list[float] = []
    for _ in range(resends):
        since = time.monotonic()
        final = probe.run_goal(goal, timeout_s)
        reason = final.get("reason", "") if final["status"] == "aborted" else ""
        stalled_s = stalls.longest_s(since, bridge_s=period_s) if stalls else 0.0
        measured.append(round(stalled_s, 3))
        tripped = watchdog_s is not None and "watchdog expired" in reason
        if reason.startswith("fault:") and ("no valid feedback" in reason or tripped):
            bound_s = watchdog_s if tripped and watchdog_s is not None else fault_s
            if not held_long_enough(stalled_s, bound_s, period_s):
                return {**final, "measured": measured}
            mark = probe.publish("estop", json.dumps({"reset": True}))
            probe.wait_mode("holding", since=mark)
        elif not (reason.startswith("stale") and held_long_enough(stalled_s, hold_s, period_s)):
            return {**final, "measured": measured} if reason else final
    since = time.monotonic()
    final = probe.run_goal(goal, timeout_s)
    if final["status"] != "aborted":
        return final
    measured.append(round(stalls.longest_s(since, bridge_s=period_s) if stalls else 0.0, 3))
    return {**final, "measured": measured}


def contract_violations(statuses: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where `statuses` (``goal/status`` payloads in arrival order) break the contract: every id
    gets a first status (``accepted`` or ``rejected``), an accepted goal exactly one final status,
    and nothing after its final status (an id may be used again once its goal has ended). Goals
    still waiting for their final status are listed too: call this when everything has ended."""
    problems: list[str] = []
    open_goals: dict[str, str] = {}  # id -> its first status, while waiting for its final one
    for status in statuses:
        goal_id, value = status.get("id"), status.get("status")
        if goal_id is None:
            continue
        if goal_id not in open_goals:
            if value == "accepted":
                open_goals[goal_id] = value
            elif value != "rejected":
                problems.append(f"{goal_id}: {value} without accepted or rejected before it")
        elif value in ("accepted", "rejected"):
            problems.append(f"{goal_id}: a second first status ({value})")
        else:
            del open_goals[goal_id]
    problems += [f"{goal_id}: accepted, never ended" for goal_id in open_goals]
    return problems


def joint_positions(state: Mapping[str, Any]) -> dict[str, float]:
    return {name: j["position"] for name, j in state["joints"].items()}


def max_joint_difference(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    assert a.keys() == b.keys()
    return max(abs(a[name] - b[name]) for name in a)


def at_rest(state: Mapping[str, Any], tolerance: float = 1e-3, mode: str = "holding") -> bool:
    """In `mode`, with every joint velocity below `tolerance` (rad/s)."""
    velocities = [abs(j["velocity"]) for j in state["joints"].values()]
    return bool(state["mode"] == mode and max(velocities) < tolerance)


def stream_held_s(probe: MqttProbe, since: int, sent: Sequence[float], rate_hz: float) -> float:
    """The longest a stream's path was held up since `since` (s), at least: the gaps between the
    test's messages (`sent`, `time.monotonic` each) beyond the stream's period (`rate_hz`), and
    those between the daemon's states arriving at the test beyond the telemetry period (the
    daemon's network side and the broker, at normal priority like the test)."""
    arrived = [m.received for m in probe.on("state", since)]
    return max(
        [b - a - 1 / rate_hz for a, b in pairwise(sent)]
        + [b - a - 1 / TELEMETRY_HZ for a, b in pairwise(arrived)],
        default=0.0,
    )
