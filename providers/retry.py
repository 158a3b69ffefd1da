"""One retry policy for every provider call: the backoff schedule (which errors are retried: `providers.errors.is_retryable`).

OpenClaw's embedding schedule (docs/openclaw-behaviour.md §4.5), used for chat as well: 3 retries
from 500 ms doubling, capped at 8 s, each delay with up to 20 % jitter. Pure module: no Django.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

DEFAULT_RETRIES = 3
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 8.0
BACKOFF_JITTER = 0.2


@dataclass(frozen=True)
class Backoff:
    """How many times to retry, and how long to wait before each retry."""

    retries: int = DEFAULT_RETRIES
    base_seconds: float = BACKOFF_BASE_SECONDS
    cap_seconds: float = BACKOFF_CAP_SECONDS
    jitter: float = BACKOFF_JITTER

    def delays(self) -> Iterator[float]:
        """Yield `retries` delays: `min(cap, d * (1 + rand * jitter))`, d doubling from the base."""
        delay = self.base_seconds
        for _ in range(self.retries):
            yield min(self.cap_seconds, delay * (1 + random.random() * self.jitter))
            delay *= 2
