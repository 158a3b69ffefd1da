"""Login rate limiting with django-axes: lock per username and per client address.

After `OPENCLAW_LOGIN_FAILURE_LIMIT` failed sign-ins for one username, or from one address, that
username (from anywhere) or that address (for any username) is refused for
`OPENCLAW_LOGIN_COOLOFF_MINUTES`, with 429, a Retry-After header and a page that says so
(docs/design.md, Limits and refusals). A successful sign-in clears the user's failures.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_ip(request: HttpRequest) -> str | None:
    """The caller's address: REMOTE_ADDR, or the hop before our trusted proxies in X-Forwarded-For."""
    proxies = settings.TRUSTED_PROXY_COUNT
    forwarded = request.headers.get("x-forwarded-for", "")
    if proxies and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if len(hops) >= proxies:
            return hops[-proxies]
    return request.META.get("REMOTE_ADDR")


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    """The answer to a locked-out sign-in: 429, Retry-After, and what happened in plain words."""
    minutes = settings.LOGIN_COOLOFF_MINUTES
    response = render(
        request,
        "registration/locked_out.html",
        {"failure_limit": settings.AXES_FAILURE_LIMIT, "cooloff_minutes": minutes},
        status=429,
    )
    response["Retry-After"] = str(minutes * 60)
    return response
