"""The one error vocabulary (docs/architecture.md, Errors) and its REST rendering.

A refusal or failure the domain names is a `DomainError`: a stable ``code``, a ``message`` for
people, the HTTP ``status`` an adapter answers with, and ``details``. Services and domain code
raise it (or a subclass that owns its code and message); each adapter renders it in one place:
REST in `api_exception_handler` (``{"error": {"code", "message", "details"}}``), MCP in
`integrations.mcp_server.call_tool`, `/v1` in `integrations.openai_compat._error_response`, the
dashboard in `openclaw_site.web.base.team_view` and its pages' message helpers, tasks in their
report. `ApiError` is the same error raised by the HTTP layer itself (authentication, request
parsing, headers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypedDict

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response

logger = logging.getLogger(__name__)

# Errors that mean "the database cannot be reached now" (down, restarting, connections exhausted),
# not "this request is wrong": answered 503 with Retry-After (docs/design.md, Limits and refusals).
DATABASE_OUTAGE_ERRORS = (OperationalError, InterfaceError)
DATABASE_RETRY_AFTER_SECONDS = 10
DATABASE_UNAVAILABLE_MESSAGE = (
    "The database is unavailable; nothing was changed by this request. Try again in a few seconds."
)
DATABASE_BUSY_MESSAGE = (
    "Every database connection of this server process is in use, and none came free in time; "
    "nothing was changed by this request. Try again in a few seconds."
)


# A transaction PostgreSQL ended because another one wanted the same rows at the same moment (a
# deadlock, a serialization failure): the database is fine and the request may simply be sent
# again, so it is 409 `conflict_retry`, not the outage's 503 (docs/design.md, Limits and refusals).
CONFLICT_RETRY_AFTER_SECONDS = 1
CONFLICT_RETRY_MESSAGE = (
    "Another request changed the same data at the same moment, and the database stopped this one; "
    "nothing was changed by this request. Send it again."
)


def is_transaction_conflict(exception: BaseException) -> bool:
    """Tell whether a database error is a deadlock or serialization failure, not an outage.

    SQLSTATE class 40, "transaction rollback": 40P01 deadlock detected, 40001 serialization failure.
    """
    sqlstate = getattr(exception.__cause__, "sqlstate", None) or ""
    return isinstance(exception, DATABASE_OUTAGE_ERRORS) and sqlstate.startswith("40")


def conflict_retry_body() -> ErrorBody:
    return error_body("conflict_retry", CONFLICT_RETRY_MESSAGE)


def database_unavailable_message(exception: BaseException) -> str:
    """Say which outage it is: the database cannot be reached, or the connection pool is empty."""
    from psycopg_pool import PoolTimeout

    return (
        DATABASE_BUSY_MESSAGE
        if isinstance(exception.__cause__, PoolTimeout)
        else DATABASE_UNAVAILABLE_MESSAGE
    )


def database_unavailable_body(exception: BaseException) -> ErrorBody:
    return error_body("database_unavailable", database_unavailable_message(exception))


class DomainError(Exception):
    """A refusal or failure with a stable code, a message, an HTTP status hint and details.

    Nothing here is HTTP: ``status`` is what every adapter answers with (a 409 is a conflict on
    REST, MCP and /v1 alike), so the code, the message and the status are said once, where the
    error is raised. A subclass may compute ``details`` from what it carries (a compaction run).
    """

    def __init__(
        self, code: str, message: str, *, status: int = 400, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self._details = details or {}

    @property
    def details(self) -> dict[str, Any]:
        return self._details

    def envelope(self) -> ErrorBody:
        """Return the error as the one JSON shape: ``{"error": {"code", "message", "details"}}``."""
        return error_body(self.code, self.message, self.details)


def database_error(exception: BaseException) -> DomainError:
    """Return a database failure as the domain error MCP and `/v1` render in their own shapes.

    A deadlock or serialization failure is 409 `conflict_retry` (send the same request again), any
    other database error 503 `database_unavailable`; ``details.retry_after`` says when, as the
    REST answers' Retry-After does (docs/design.md, Limits and refusals).
    """
    if is_transaction_conflict(exception):
        return DomainError(
            "conflict_retry",
            CONFLICT_RETRY_MESSAGE,
            status=409,
            details={"retry_after": CONFLICT_RETRY_AFTER_SECONDS},
        )
    return DomainError(
        "database_unavailable",
        database_unavailable_message(exception),
        status=503,
        details={"retry_after": DATABASE_RETRY_AFTER_SECONDS},
    )


class ApiError(DomainError, exceptions.APIException):
    """A DomainError of the HTTP layer itself (a header, a body, a key); services raise DomainError."""

    def __init__(
        self, code: str, message: str, *, status_code: int = 400, details: dict[str, Any] | None = None
    ) -> None:
        DomainError.__init__(self, code, message, status=status_code, details=details)
        exceptions.APIException.__init__(self, detail=message, code=code)
        self.status_code = status_code


class ErrorDetail(TypedDict):
    """What went wrong: a stable code, a sentence, and the specifics (the field, the limit, ...)."""

    code: str
    message: str
    details: dict[str, Any]  # each error's own specifics (docs/architecture.md, Errors)


class ErrorBody(TypedDict):
    """The one error shape of every surface: ``{"error": {"code", "message", "details"}}``."""

    error: ErrorDetail


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> ErrorBody:
    """Return the JSON body of an error response."""
    return {"error": {"code": code, "message": message, "details": details or {}}}


_DRF_CODES: dict[type, tuple[str, str]] = {
    exceptions.ParseError: ("malformed_json", "The request body is not valid JSON."),
    exceptions.NotAuthenticated: (
        "not_authenticated",
        "Authentication required: send 'Authorization: Bearer <api key>' or sign in.",
    ),
    exceptions.AuthenticationFailed: ("authentication_failed", ""),
    exceptions.PermissionDenied: ("permission_denied", ""),
    exceptions.NotFound: ("not_found", "Not found."),
    exceptions.MethodNotAllowed: ("method_not_allowed", ""),
    exceptions.UnsupportedMediaType: ("unsupported_media_type", ""),
    exceptions.Throttled: ("rate_limited", ""),
    exceptions.ValidationError: ("validation_error", "The request is not valid."),
}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler that renders every error in our shape."""
    if isinstance(exc, RequestDataTooBig):
        return Response(
            error_body("payload_too_large", str(exc)), status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
        )
    if isinstance(exc, DomainError):  # the REST rendering of every domain error
        retry_after = exc.details.get("retry_after") if exc.status in (409, 429, 503) else None
        headers = {"Retry-After": str(retry_after)} if isinstance(retry_after, int) else None
        return Response(exc.envelope(), status=exc.status, headers=headers)
    if is_transaction_conflict(exc):
        logger.warning("transaction conflict, answered 409: %s", exc)
        return Response(
            conflict_retry_body(),
            status=status.HTTP_409_CONFLICT,
            headers={"Retry-After": str(CONFLICT_RETRY_AFTER_SECONDS)},
        )
    if isinstance(exc, DATABASE_OUTAGE_ERRORS):
        logger.error("database unavailable: %s", exc)
        return Response(
            database_unavailable_body(exc),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)},
        )
    from rest_framework.views import exception_handler  # rest_framework.views imports our auth classes

    response = exception_handler(exc, context)
    if response is None:
        return None
    code, message = _describe(exc)
    if isinstance(exc, exceptions.Throttled):
        seconds = max(1, round(getattr(exc, "wait", None) or 1))
        message = f"Too many requests with this API key; try again in {seconds} s (see Retry-After)."
    details = response.data if isinstance(exc, exceptions.ValidationError) else {}
    response.data = error_body(code, message, details if isinstance(details, dict) else {"errors": details})
    return response


def _describe(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, Http404):
        return "not_found", "Not found."
    if isinstance(exc, PermissionDenied):
        return "permission_denied", "You do not have permission to do this."
    for kind, (code, message) in _DRF_CODES.items():
        if isinstance(exc, kind):
            detail = getattr(exc, "detail", "")
            return code, message or str(detail)
    return "error", str(exc)


class ApiErrorMiddleware:
    """Give 404s, 405s and 500s outside DRF views the same JSON shape under /api/."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not self._is_api(request) or response.get("Content-Type", "").startswith("application/json"):
            return response
        if response.status_code == 404:
            return JsonResponse(error_body("not_found", f"No endpoint at {request.path}."), status=404)
        if response.status_code == 405:
            return JsonResponse(
                error_body("method_not_allowed", f"{request.method} is not allowed here."), status=405
            )
        if response.status_code == 413:
            return JsonResponse(error_body("payload_too_large", "The request body is too large."), status=413)
        if response.status_code >= 500:
            return JsonResponse(
                error_body("server_error", "Internal server error."), status=response.status_code
            )
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, DATABASE_OUTAGE_ERRORS):
            return database_unavailable_response(request, exception)
        if not self._is_api(request):
            return None
        if isinstance(exception, RequestDataTooBig):
            return JsonResponse(error_body("payload_too_large", str(exception)), status=413)
        if isinstance(exception, Http404):
            return JsonResponse(error_body("not_found", "Not found."), status=404)
        logger.exception("Unhandled error on %s %s", request.method, request.path)
        return JsonResponse(error_body("server_error", "Internal server error."), status=500)

    @staticmethod
    def _is_api(request: HttpRequest) -> bool:
        return request.path.startswith("/api/") or request.path == "/healthz"


def database_unavailable_response(request: HttpRequest, exception: Exception) -> HttpResponse:
    """503 with Retry-After: JSON under /api/, a short page elsewhere (the dashboard).

    A deadlock or serialization failure is no outage: 409 `conflict_retry`, in the same shapes.
    """
    if is_transaction_conflict(exception):
        logger.warning("transaction conflict on %s %s: %s", request.method, request.path, exception)
        if ApiErrorMiddleware._is_api(request):
            conflict: HttpResponse = JsonResponse(conflict_retry_body(), status=409)
        else:
            conflict = HttpResponse(CONFLICT_RETRY_MESSAGE, status=409, content_type="text/plain")
        conflict["Retry-After"] = str(CONFLICT_RETRY_AFTER_SECONDS)
        return conflict
    logger.error("database unavailable on %s %s: %s", request.method, request.path, exception)
    if ApiErrorMiddleware._is_api(request):
        response: HttpResponse = JsonResponse(database_unavailable_body(exception), status=503)
    else:
        response = HttpResponse(
            database_unavailable_message(exception), status=503, content_type="text/plain"
        )
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
    return response
