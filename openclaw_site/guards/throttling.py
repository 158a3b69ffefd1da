"""A rate limit per API key: at most `OPENCLAW_API_KEY_RATE_PER_MINUTE` requests a minute.

One budget per key across every surface: a REST request, a `/v1/` request and an MCP tool call
each take one from the same count (docs/design.md, Limits and refusals). One fixed one-minute
window per key, counted in Django's cache (`cache.add` then `cache.incr`, both atomic: Redis when
REDIS_URL is set, so every web process shares the count; without it each process counts on its
own). A request over the limit is refused with `rate_limited` (429) and the seconds left in the
window (Retry-After, and `details.retry_after`), each surface in its own error shape. Browser
sessions are not limited here (sign-in is, by django-axes).
"""

from __future__ import annotations

import math
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from openclaw_site.errors import ApiError
from openclaw_site.models import ApiKey

WINDOW_SECONDS = 60


def charge_api_key(key: ApiKey) -> float | None:
    """Count one request of ``key``; return the seconds to wait when it is over its rate, else None."""
    limit = settings.API_KEY_RATE_PER_MINUTE
    if not limit:
        return None
    now = time.time()
    window = int(now // WINDOW_SECONDS)
    name = f"ratelimit:api-key:{key.pk}:{window}"
    if cache.add(name, 1, timeout=WINDOW_SECONDS * 2):
        return None
    try:
        count = cache.incr(name)
    except ValueError:  # expired between add and incr
        cache.add(name, 1, timeout=WINDOW_SECONDS * 2)
        return None
    if count <= limit:
        return None
    return (window + 1) * WINDOW_SECONDS - now


def retry_after_seconds(wait: float) -> int:
    """The whole seconds of a Retry-After header for a wait (at least 1)."""
    return max(1, math.ceil(wait))


def rate_limited_error(wait: float) -> ApiError:
    """The 429 ``rate_limited`` refusal, for the surfaces outside DRF (`/v1/`, MCP)."""
    seconds = retry_after_seconds(wait)
    return ApiError(
        "rate_limited",
        f"Too many requests with this API key; try again in {seconds} s (see Retry-After).",
        status_code=429,
        details={"retry_after": seconds},
    )


def check_api_key_rate(key: ApiKey) -> None:
    """Count one request of ``key`` and raise the 429 `rate_limited_error` when it is over its rate."""
    wait = charge_api_key(key)
    if wait is not None:
        raise rate_limited_error(wait)


class ApiKeyRateThrottle(BaseThrottle):
    """The REST API's side of the budget (DRF's throttle, answered by `errors.api_exception_handler`)."""

    def __init__(self) -> None:
        self.retry_after: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        key = request.auth
        if not isinstance(key, ApiKey):
            return True
        self.retry_after = charge_api_key(key)
        return self.retry_after is None

    def wait(self) -> float | None:
        return self.retry_after
