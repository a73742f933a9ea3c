"""The daemon's side of streaming: stream messages (docs/mqtt.md#stream) in, `StreamTarget`s out
to the control loop, which follows them (`armd.control.streaming`).

A *session* is one stream as the loop sees it: it starts with the first message taken while no
stream of that id is under way (its id then enters the `StatusLedger` like a goal's), and ends
when its final status comes back (``succeeded``, ``aborted``, ``preempted``) or a message of
another id starts a session (the loop pre-empts the old one). Each session is numbered, so that
the loop can drop the targets of a session it ended before the daemon learnt of it.

An ended session's newest ``seq`` is remembered for `seq_memory_s` (`SEQ_MEMORY_S`, or
`SEQ_MEMORY_TIMEOUTS` × the timeout when longer; at most `SEQ_MEMORY_IDS` ids, the oldest
forgotten first): in that window a message of its id whose ``seq`` is not newer is refused
(rate-limited ``rejected``) and starts nothing, so that delayed messages arriving in a burst
after a timeout (a Wi-Fi stall, a broker's backlog) cannot start a stream toward targets older
than the last one followed. A newer ``seq`` starts a new session; after the window, any ``seq``.

Here, per message: the sequence check (a ``seq`` not greater than the newest taken is dropped and
counted: the order of a QoS 0 stream across reconnections or publishers is not guaranteed), and
the Cartesian targets turned into joint targets (`armd.planning.stream_cartesian`), seeded from the
session's previous target or, at its start, the loop's commanded state. Refusals (a malformed
message, streaming not enabled, an id in use, an arm latched or not ready) are answered
``rejected`` on ``goal/status``, rate-limited: a 250 Hz stream of bad messages, or of messages to
an e-stopped arm, must not flood the topic.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from armd.api.statuses import StatusLedger
from armd.link.messages import (
    GoalStatus,
    Mode,
    Rejection,
    StatusUpdate,
    StreamEnd,
    StreamJoints,
    StreamMessage,
    StreamPose,
    StreamTwist,
)
from armd.link.protocol import STREAM_DISABLED, LoopPort, StreamTarget
from armd.planning.stream_cartesian import CartesianStream
from armd.planning.stream_guard import CollisionHold, StreamGuard
from armd.ratelimit import RateLimiter

__all__ = [
    "SEQ_MEMORY_IDS",
    "SEQ_MEMORY_S",
    "SEQ_MEMORY_TIMEOUTS",
    "EndedStreams",
    "StreamInput",
    "StreamSettings",
    "seq_memory_s",
]

log = logging.getLogger(__name__)
Array = NDArray[np.float64]
REJECTIONS_BURST = 3  # rejected statuses at once, then one per REJECTIONS_INTERVAL_S
REJECTIONS_INTERVAL_S = 1.0
SEQ_MEMORY_S = 10.0  # an ended stream's newest seq is remembered this long, s ...
SEQ_MEMORY_TIMEOUTS = 10  # ... or this many of its timeouts, when longer
SEQ_MEMORY_IDS = 1000  # stream ids remembered at most (the oldest ended is forgotten first)
HOLD_LOG_INTERVAL_S = 1.0  # s: a stream holding before a collision is said at most this often


@dataclass(frozen=True, slots=True)
class StreamSettings:
    """The config's ``stream`` section, and what Cartesian messages need."""

    enabled: bool
    timeout_s: float
    tool_link: str


def seq_memory_s(timeout_s: float) -> float:
    """How long an ended stream's newest ``seq`` is remembered (s), for a stream timeout (s)."""
    return max(SEQ_MEMORY_S, SEQ_MEMORY_TIMEOUTS * timeout_s)


@dataclass(frozen=True, slots=True)
class _Ended:
    """An ended session: its newest ``seq`` and when it ended (monotonic s)."""

    seq: int
    at: float


class EndedStreams:
    """The newest ``seq`` of the streams that ended within `memory_s`, by id, at most `capacity`
    of them, the oldest ended first out."""

    def __init__(self, memory_s: float, capacity: int = SEQ_MEMORY_IDS) -> None:
        self.memory_s = memory_s
        self.capacity = capacity
        self._ended: OrderedDict[str, _Ended] = OrderedDict()  # in the order they ended

    def __len__(self) -> int:
        return len(self._ended)

    def end(self, stream_id: str, seq: int, now: float) -> None:
        self._ended.pop(stream_id, None)
        self._ended[stream_id] = _Ended(seq, now)
        self._forget(now)

    def recall(self, stream_id: str, now: float) -> _Ended | None:
        """The ended session of `stream_id` still remembered at `now` (None: none)."""
        self._forget(now)
        return self._ended.get(stream_id)

    def forget(self, stream_id: str) -> None:
        self._ended.pop(stream_id, None)

    def _forget(self, now: float) -> None:
        while self._ended and (
            len(self._ended) > self.capacity
            or now - next(iter(self._ended.values())).at > self.memory_s
        ):
            self._ended.popitem(last=False)


@dataclass
class _Session:
    stream_id: str
    number: int
    seq: int
    target: Array  # the joint target sent last (NaN: not named yet)
    velocity: Array | None = None  # its velocity (twists; None: at rest)
    stamp: float = 0.0  # when it was taken (monotonic s)


class _NotReadyError(Exception):
    """The arm cannot take a Cartesian target yet (the message's reason)."""


class StreamInput:
    """See the module docstring. `publish` sends a status that is not a session's (a refusal);
    `clock` is `time.monotonic` but in tests."""

    def __init__(
        self,
        settings: StreamSettings,
        cartesian: CartesianStream,
        port: LoopPort,
        statuses: StatusLedger,
        publish: Callable[[StatusUpdate], None],
        clock: Callable[[], float] = time.monotonic,
        guard: StreamGuard | None = None,
    ) -> None:
        """`guard`: the collision checks of each target (None: none)."""
        self.settings = settings
        self.guard = guard
        self._holds = RateLimiter(burst=1, interval_s=HOLD_LOG_INTERVAL_S)
        self.cartesian = cartesian
        self.port = port
        self.statuses = statuses
        self._publish = publish
        self._clock = clock
        self._numbers = itertools.count(1)
        self._session: _Session | None = None
        self._closed: str | None = None
        self._rejections = RateLimiter(burst=REJECTIONS_BURST, interval_s=REJECTIONS_INTERVAL_S)
        self._ended = EndedStreams(seq_memory_s(settings.timeout_s))
        self.names = {name: i for i, name in enumerate(cartesian.tree.joint_names)}  # q order
        self.dropped = 0  # out of order: not newer than the newest of their stream
        self.suppressed = 0  # rejections not sent (rate limit)

    def close(self, reason: str) -> None:
        """Refuse every message from now on (the daemon stops)."""
        self._closed = reason

    def on_status(self, update: StatusUpdate) -> None:
        """A status of the loop's: the session whose final status it is has ended."""
        session = self._session
        if session is not None and update.goal_id == session.stream_id and update.status.is_final:
            self._ended.end(session.stream_id, session.seq, self._clock())
            self._session = None

    def submit(self, message: StreamMessage | Rejection) -> None:
        """Take a stream message as the bridge parsed it (or its refusal)."""
        if isinstance(message, Rejection):
            self._refuse(message.goal_id, message.reason)
            return
        refusal = self._closed or (None if self.settings.enabled else STREAM_DISABLED)
        if refusal is not None:
            self._refuse(message.stream_id, refusal)
            return
        session = self._session
        starting = session is None or session.stream_id != message.stream_id
        if session is not None and not starting:
            if message.seq <= session.seq:
                self.dropped += 1
                return
        elif (refusal := self._stale(message) or self._cannot_start(message.stream_id)) is not None:
            self._refuse(message.stream_id, refusal)
            return
        else:
            n = len(self.names)
            session = _Session(message.stream_id, next(self._numbers), -1, np.full(n, np.nan))
        try:
            target = self._target(message, session)
        except _NotReadyError as exc:
            self._refuse(message.stream_id, str(exc))
            return
        except Exception as exc:  # a bug costs this message, never the bridge
            log.exception("stream %s: message %d failed", message.stream_id, message.seq)
            self._refuse(message.stream_id, f"internal error: {type(exc).__name__}: {exc}")
            return
        if starting:
            self._begin(session)
            if self.guard is not None:
                commanded = self.port.latest.commanded_position
                assert commanded is not None  # `_cannot_start` checked it
                self.guard.start(commanded)
        session.seq = message.seq
        if self.guard is not None and not target.end:
            target = self._guarded(target)
        self.port.send(target)

    def _begin(self, session: _Session) -> None:
        """`session` becomes the stream under way (the one it replaces gets its final status from
        the loop, pre-empted)."""
        self.statuses.receive(session.stream_id)
        if self._session is not None:
            self._ended.end(self._session.stream_id, self._session.seq, self._clock())
        self._ended.forget(session.stream_id)
        self._session = session

    def _stale(self, message: StreamMessage) -> str | None:
        """Why `message` may not start a session of its id: its ``seq`` is not newer than that
        of the id's session that ended within the memory (None: it may)."""
        ended = self._ended.recall(message.stream_id, self._clock())
        if ended is None or message.seq > ended.seq:
            return None
        self.dropped += 1  # as within a session, but answered: it would start one
        age = self._clock() - ended.at
        return (
            f"seq: {message.seq} is not newer than {ended.seq}, the last of stream "
            f"{message.stream_id!r}, which ended {age:.1f} s ago; a stale message starts "
            f"nothing: send a greater seq, or a new id"
        )

    @property
    def collision_hold(self) -> CollisionHold | None:
        """Why the stream under way holds before a collision (None: it does not)."""
        if self.guard is None or self._session is None:
            return None
        return self.guard.hold

    def _guarded(self, target: StreamTarget) -> StreamTarget:
        """`target` as the collision checks let it through (`armd.planning.stream_guard`)."""
        assert self.guard is not None
        position, velocity = self.guard.filter(target.position, target.velocity)
        hold = self.guard.hold
        if hold is not None:
            suppressed = self._holds.allow(target.stream_id)
            if suppressed is not None:
                a, b = hold.pair
                log.info(
                    "stream %s: holding at its last clear target: %s with %s at %.4f m "
                    "(margin %g m)%s",
                    target.stream_id,
                    a,
                    b,
                    hold.distance,
                    self.guard.margin,
                    f" ({suppressed} similar lines not logged)" if suppressed else "",
                )
        return dataclasses.replace(target, position=position, velocity=velocity)

    def _cannot_start(self, stream_id: str) -> str | None:
        """Why a new stream is refused here, rate-limited (None: it may start). A latched or
        inactive arm would abort each new stream in the loop: at 250 Hz, a flood of statuses."""
        if self.statuses.holds(stream_id):
            return f"id: {stream_id!r} is the id of a goal still in progress; use a new id"
        latest = self.port.latest
        if latest.mode in (Mode.FAULT, Mode.ESTOP):
            return f"arm is {latest.mode.value}: reset first"
        if latest.commanded_position is None:
            return f"arm is {latest.mode.value}: not ready for streams"
        return None

    def _target(self, message: StreamMessage, session: _Session) -> StreamTarget:
        """The loop's target for `message`; `session` keeps it as the next seed."""
        n = len(session.target)
        velocity = np.full(n, np.nan)
        now = self._clock()
        if isinstance(message, StreamJoints | StreamEnd):
            position = np.full(n, np.nan)
            if isinstance(message, StreamJoints):
                for name, value in message.positions.items():
                    position[self.names[name]] = value
                for name, value in message.velocities.items():
                    velocity[self.names[name]] = value
            session.target = np.where(np.isfinite(position), position, session.target)
            session.velocity = None
        else:
            seed = self._seed(session, now)
            if isinstance(message, StreamPose):
                position = self.cartesian.pose(message, seed)
                session.velocity = None
            else:
                position = seed
                session.velocity = velocity = self._twist(message, seed)
            session.target = position
        session.stamp = now
        end = isinstance(message, StreamEnd)
        return StreamTarget(message.stream_id, session.number, message.seq, position, velocity, end)

    def _twist(self, message: StreamTwist, q: Array) -> Array:
        return self.cartesian.twist(message, q, self.settings.tool_link)

    def _seed(self, session: _Session, now: float) -> Array:
        """Where the stream's target is now: the last one moved on at its velocity (at most for
        the timeout, as the loop does), the commanded position for the joints never named."""
        commanded = self.port.latest.commanded_position
        if commanded is None:  # the drives were disabled since the stream started
            raise _NotReadyError(f"arm is {self.port.latest.mode.value}: not ready for streams")
        moved = session.target
        if session.velocity is not None:
            elapsed = min(max(now - session.stamp, 0.0), self.settings.timeout_s)
            moved = moved + session.velocity * elapsed
        seed = np.where(np.isfinite(moved), moved, commanded)
        return np.clip(seed, self.cartesian.lower, self.cartesian.upper)

    def _refuse(self, stream_id: str | None, reason: str) -> None:
        suppressed = self._rejections.allow("stream")
        if suppressed is None:
            self.suppressed += 1
            return
        note = f" ({suppressed} similar rejections not sent)" if suppressed else ""
        log.info("stream %s rejected: %s%s", stream_id, reason, note)
        self._publish(StatusUpdate(stream_id, GoalStatus.REJECTED, reason))
