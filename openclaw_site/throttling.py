"""A rate limit per API key: at most `OPENCLAW_API_KEY_RATE_PER_MINUTE` requests a minute.

One fixed one-minute window per key, counted in Django's cache (`cache.add` then `cache.incr`, both
atomic: Redis when REDIS_URL is set, so every web process shares the count; without it each
process counts on its own). A request over the limit is 429 `rate_limited` with Retry-After, the
seconds left in the window (docs/design.md, Limits and refusals). Browser sessions are not limited
here (sign-in is, by django-axes).
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from openclaw_site.models import ApiKey

WINDOW_SECONDS = 60


class ApiKeyRateThrottle(BaseThrottle):
    def __init__(self) -> None:
        self.retry_after: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        limit = settings.API_KEY_RATE_PER_MINUTE
        key = request.auth
        if not limit or not isinstance(key, ApiKey):
            return True
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        name = f"ratelimit:api-key:{key.pk}:{window}"
        if cache.add(name, 1, timeout=WINDOW_SECONDS * 2):
            return True
        try:
            count = cache.incr(name)
        except ValueError:  # expired between add and incr
            cache.add(name, 1, timeout=WINDOW_SECONDS * 2)
            return True
        if count <= limit:
            return True
        self.retry_after = (window + 1) * WINDOW_SECONDS - now
        return False

    def wait(self) -> float | None:
        return self.retry_after
