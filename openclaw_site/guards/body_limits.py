"""Size and authentication before the body, on every route (docs/design.md, Limits and refusals).

A request body is judged from the request's headers before any of it is read:
- a Content-Length that is not a number is 400 `invalid_content_length`, one over the route's
  limit (`body_limit`: `OPENCLAW_MAX_UPLOAD_BYTES` for an upload route, else
  `OPENCLAW_MAX_REQUEST_BYTES`) is 413 `payload_too_large`;
- a body sent to the API (REST, `/v1/`) with no credentials at all (no Authorization header, and
  for REST no session cookie either) is 401 at once;
- a body that may be larger than `PREAUTH_BODY_BYTES` (declared so, or chunked with no
  Content-Length) is read only once its credentials are valid (a signed-in session on the
  dashboard), so nobody unknown can make the server store a large body. A smaller body with a key
  that turns out to be bad is read (at most that many bytes, in memory) and then refused 401 by the
  view's own authentication, as before.

Under ASGI `openclaw_site.platform.asgi_handler` asks here before it reads the body, then reads it with the
limit as a cap (a chunked body is cut off there); under WSGI `BodyGuardMiddleware` asks, and
Django reads at most the Content-Length. The MCP app applies the same checks itself
(`integrations.mcp_http`). Each refusal is shaped by its protocol: the error envelope under `/api/`,
OpenAI's error under `/v1/`, a short page on the dashboard.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from django.utils.html import escape
from django.utils.module_loading import import_string

from openclaw_site.errors import ApiError, error_body

# A body up to this size costs nothing to read (it is in the socket's buffers already); a larger
# one is read only from a caller whose credentials were checked first.
PREAUTH_BODY_BYTES = 64 * 1024
# Dashboard routes that take a file upload: their limit is OPENCLAW_MAX_UPLOAD_BYTES.
UPLOAD_URL_NAMES = frozenset({"workspace-import"})
# The OpenAI-compatible endpoint's error shape lives with it, in the top layer; named by a dotted
# path as the URLconf names its includes, so this layer imports nothing above it.
OPENAI_ERROR_PAYLOAD = "integrations.openai_format.error_payload"


class Surface(enum.Enum):
    REST = "rest"
    OPENAI = "openai"
    MCP = "mcp"  # served beside Django (integrations.mcp_http), which shapes its own refusals
    DASHBOARD = "dashboard"


def surface_of(path: str) -> Surface:
    """Which protocol answers at ``path``."""
    if path == "/mcp" or path.startswith("/mcp/"):
        return Surface.MCP
    if path.startswith("/api/") or path == "/healthz":
        return Surface.REST
    if path.startswith("/v1/") or path == "/v1":
        return Surface.OPENAI
    return Surface.DASHBOARD


def body_limit(path: str) -> int:
    """The most bytes a body sent to ``path`` may have."""
    if surface_of(path) is Surface.DASHBOARD and _is_upload_route(path):
        return int(settings.MAX_UPLOAD_BYTES)
    return int(settings.MAX_REQUEST_BYTES)


def _is_upload_route(path: str) -> bool:
    try:
        return resolve(path).url_name in UPLOAD_URL_NAMES
    except Resolver404:
        return False


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused before its body is read, in the error envelope's terms."""

    status: int
    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_api_error(cls, error: ApiError) -> Refusal:
        return cls(error.status_code, error.code, error.message, dict(error.details))


def too_large(limit: int, *, declared: int | None = None) -> Refusal:
    """413 for a body over ``limit`` bytes (``declared``: its Content-Length, when it had one)."""
    said = f"declares {declared} bytes" if declared is not None else "is longer"
    details: dict[str, Any] = {"limit": limit}
    if declared is not None:
        details["size"] = declared
    return Refusal(
        413,
        "payload_too_large",
        f"The request body {said}; this endpoint accepts at most {limit} bytes. Nothing was read or changed.",
        details,
    )


@dataclass(frozen=True)
class BodyGuard:
    """What a request's headers say about its body, and the checks due before reading it.

    ``headers`` are lower-cased names; ``cookies`` the request's cookies.
    """

    method: str
    path: str
    headers: Mapping[str, str]
    cookies: Mapping[str, str]

    @property
    def surface(self) -> Surface:
        return surface_of(self.path)

    @cached_property
    def limit(self) -> int:
        return body_limit(self.path)

    def declared_length(self) -> int | None:
        """The Content-Length, None when there is none; raises ValueError when it is no number."""
        raw = self.headers.get("content-length")
        if raw is None or raw.strip() == "":
            return None
        if not raw.strip().isdigit():
            raise ValueError(raw)
        return int(raw)

    def chunked(self) -> bool:
        return "chunked" in self.headers.get("transfer-encoding", "").lower()

    def refusal_from_headers(self) -> Refusal | None:
        """The refusal the headers alone decide (no database): a bad or too large length, no credentials."""
        try:
            declared = self.declared_length()
        except ValueError:
            return Refusal(400, "invalid_content_length", "Content-Length must be a number of bytes.", {})
        if declared is not None and declared > self.limit:
            return too_large(self.limit, declared=declared)
        has_body = bool(declared) or (declared is None and self.chunked())
        if has_body and self.surface is not Surface.DASHBOARD and not self._has_credentials():
            return _no_credentials(self.surface)
        return None

    def needs_credentials_check(self) -> bool:
        """Whether the body may exceed `PREAUTH_BODY_BYTES`: then its credentials are checked first."""
        try:
            declared = self.declared_length()
        except ValueError:
            return False
        if declared is None:
            return self.chunked()
        return declared > PREAUTH_BODY_BYTES

    def refusal_by_credentials(self) -> Refusal | None:
        """Check the credentials against the database: None when the caller may send the body."""
        authorization = self.headers.get("authorization", "")
        if authorization and self.surface is not Surface.DASHBOARD:
            from openclaw_site.guards.auth import bearer_api_key

            try:
                bearer_api_key(authorization)
            except ApiError as error:
                return Refusal.from_api_error(error)
            return None
        if self.surface is not Surface.OPENAI and _signed_in(self.cookies):
            return None
        if self.surface is Surface.DASHBOARD:
            return Refusal(
                401,
                "not_authenticated",
                f"Sign in first: a body over {PREAUTH_BODY_BYTES} bytes is accepted only from a "
                "signed-in user. Nothing was read or changed.",
            )
        return _no_credentials(self.surface)

    def _has_credentials(self) -> bool:
        if self.headers.get("authorization"):
            return True
        return self.surface is Surface.REST and bool(self.cookies.get(settings.SESSION_COOKIE_NAME))


def _no_credentials(surface: Surface) -> Refusal:
    how = "'Authorization: Bearer <api key>'" + (" or sign in" if surface is Surface.REST else "")
    return Refusal(401, "not_authenticated", f"Authentication required: send {how}.")


def _signed_in(cookies: Mapping[str, str]) -> bool:
    """Whether the session cookie belongs to a signed-in user (Django's own check, hash included)."""
    session_key = cookies.get(settings.SESSION_COOKIE_NAME)
    if not session_key:
        return False
    from importlib import import_module

    from django.contrib.auth import get_user

    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    return bool(get_user(SimpleNamespace(session=store)).is_authenticated)  # type: ignore[arg-type]


def refusal_response(surface: Surface, refusal: Refusal) -> HttpResponse:
    """The refusal in its protocol's shape; the connection is closed, its body left unread."""
    response: HttpResponse
    if surface in (Surface.REST, Surface.MCP):
        response = JsonResponse(
            error_body(refusal.code, refusal.message, refusal.details), status=refusal.status
        )
    elif surface is Surface.OPENAI:
        payload: Callable[..., dict[str, Any]] = import_string(OPENAI_ERROR_PAYLOAD)
        response = JsonResponse(
            payload(refusal.code, refusal.message, status=refusal.status), status=refusal.status
        )
    else:
        response = HttpResponse(_page(refusal), status=refusal.status, content_type="text/html")
    if refusal.status == 401 and surface is not Surface.DASHBOARD:
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    response["Connection"] = "close"
    return response


def _page(refusal: Refusal) -> str:
    title = "Too large" if refusal.status == 413 else "Not accepted"
    sign_in = f'<p><a href="{escape(settings.LOGIN_URL)}">Sign in</a></p>' if refusal.status == 401 else ""
    return f"<!doctype html><title>{title}</title><h1>{title}</h1><p>{escape(refusal.message)}</p>{sign_in}"


def guard_of_request(request: HttpRequest) -> BodyGuard:
    headers = {name.lower(): value for name, value in request.headers.items()}
    return BodyGuard(request.method or "GET", request.path, headers, request.COOKIES)


BODY_CHECKED_ATTRIBUTE = "openclaw_body_checked"


class BodyGuardMiddleware:
    """The guard under WSGI (and Django's test client): before anything reads the body.

    Under ASGI the handler has run the same checks before reading the body and marked the request.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not getattr(request, BODY_CHECKED_ATTRIBUTE, False):
            guard = guard_of_request(request)
            refusal = guard.refusal_from_headers()
            if refusal is None and guard.needs_credentials_check():
                refusal = guard.refusal_by_credentials()
            if refusal is not None:
                return refusal_response(guard.surface, refusal)
        return self.get_response(request)
