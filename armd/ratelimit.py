"""Rate-limited logging: repeated warnings (a flood of bad payloads, a driver failing every tick)
must not drown the journal. A token bucket per key lets a burst through, then one per interval,
and says how many were suppressed in between."""

from __future__ import annotations

import collections
import logging
import time

__all__ = ["RateLimitFilter", "RateLimiter"]


class RateLimiter:
    """Token buckets per key: `burst` messages at once, then one per `interval_s`."""

    def __init__(self, burst: int = 5, interval_s: float = 10.0) -> None:
        self._burst = burst
        self._interval_s = interval_s
        self._tokens: dict[str, float] = {}
        self._stamp: dict[str, float] = {}
        self._suppressed: dict[str, int] = collections.defaultdict(int)

    def allow(self, key: str) -> int | None:
        """None when the message should be suppressed, else how many were suppressed before."""
        now = time.monotonic()
        refill = (now - self._stamp.get(key, now)) / self._interval_s
        tokens = min(float(self._burst), self._tokens.get(key, float(self._burst)) + refill)
        self._stamp[key] = now
        if tokens < 1.0:
            self._tokens[key] = tokens
            self._suppressed[key] += 1
            return None
        self._tokens[key] = tokens - 1.0
        return self._suppressed.pop(key, 0)


class RateLimitFilter(logging.Filter):
    """Rate-limits the warnings and errors of paho (the bridge's `armd.api.bridge.client` logger:
    e.g.
    one per failed write while a connection breaks) by their format string."""

    def __init__(self) -> None:
        super().__init__()
        self._limits = RateLimiter()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        return self._limits.allow(str(record.msg)) is not None
