"""One retry policy for every provider call: the backoff schedule and which errors it retries.

OpenClaw's embedding schedule (docs/openclaw-behaviour.md §4.5), used for chat as well: 3 retries
from 500 ms doubling, capped at 8 s, each delay with up to 20 % jitter. Pure module: no Django.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # providers.errors imports this module for `ProviderError.retryable`
    from providers.errors import ProviderError

DEFAULT_RETRIES = 3
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 8.0
BACKOFF_JITTER = 0.2

# OpenClaw `isRetryableEmbeddingError`, matched on the error text. With a real status its digits
# decide instead: the `5\d\d` text match would also retry a 400 that says "maximum input length
# is 512 tokens", so the status-less pattern alone carries the digits.
_RETRYABLE_TEXT_RE = re.compile(
    r"rate_limit|too many requests|resource has been exhausted|cloudflare|tokens per day",
    re.IGNORECASE,
)
_RETRYABLE_STATUS_TEXT_RE = re.compile(r"\b(?:429|5\d\d)\b")


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


def is_retryable(error: ProviderError) -> bool:
    """Tell whether the same request may succeed if sent again (rate limit, 5xx, lost connection)."""
    # Timeouts are not retried: a slow model would only be slow again, and the caller's own
    # deadline matters more (the turn loop decides). An overflow needs a smaller prompt first.
    if error.is_timeout or error.is_context_overflow:
        return False
    if error.is_connection_error:
        return True
    text = f"{error.message} {error.code or ''}"
    if _RETRYABLE_TEXT_RE.search(text):
        return True
    if error.status is None:
        return bool(_RETRYABLE_STATUS_TEXT_RE.search(text))
    return error.status == 429 or error.status >= 500
