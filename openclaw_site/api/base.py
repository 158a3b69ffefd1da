"""What every API view shares: the team context, the request size limit, strict input, paging.

Views subclass `TeamApiView`, read the caller's team from ``self.team`` and look objects up through
the selectors with it, so another team's object is simply not found: the selector's `NotFound` is
a domain error the exception handler answers with the 404 error body (never a leak).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, overload

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import QuerySet
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from openclaw_site.errors import ApiError
from openclaw_site.guards.auth import TeamContext, request_team_context
from openclaw_site.guards.json_input import unstorable_text
from openclaw_site.models import Team


def not_found(what: str) -> ApiError:
    """Return the 404 for an object that does not exist in the caller's team."""
    return ApiError("not_found", f"{what} not found.", status_code=404)


def check_request_size(request: Request) -> None:
    """Refuse a body over OPENCLAW_MAX_REQUEST_BYTES with 413 before anything reads it."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError("invalid_content_length", "Content-Length is not a number.") from None
    if length > settings.MAX_REQUEST_BYTES:
        raise ApiError(
            "payload_too_large",
            f"The request body is {length} bytes; the limit is {settings.MAX_REQUEST_BYTES}.",
            status_code=413,
            details={"limit": settings.MAX_REQUEST_BYTES, "size": length},
        )


# The largest integer a query parameter may be: what every JSON client holds exactly, and well
# inside PostgreSQL's bigint (an OFFSET beyond it fails in the database).
QUERY_INT_MAX = 2**53 - 1


def check_request_text(request: Request, path_args: dict[str, Any]) -> None:
    """Refuse a query parameter or path part holding a NUL or a lone surrogate (400)."""
    values = [(name, value) for name in request.query_params for value in request.query_params.getlist(name)]
    values += [(name, value) for name, value in path_args.items() if isinstance(value, str)]
    for name, value in values:
        reason = unstorable_text(name + value)
        if reason is not None:
            raise ApiError("invalid_parameter", f"{name} {reason}.", details={"field": name})


class TeamApiView(APIView):
    """Base API view: the size limit is checked once the caller is known, then ``self.team`` is set."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        check_request_size(request)
        check_request_text(request, kwargs)

    @property
    def team_context(self) -> TeamContext:
        return request_team_context(self.request)

    @property
    def team(self) -> Team:
        return self.team_context.team

    def acting_user(self) -> User | None:
        """Return the signed-in user behind the request, or None for an API key."""
        return self.team_context.user

    def json_object(self) -> dict[str, Any]:
        """Return the request body, which must be a JSON object."""
        data = self.request.data
        if not isinstance(data, dict):
            raise ApiError("invalid_body", "The request body must be a JSON object.")
        return data


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of turning them into strings."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictSerializer(serializers.Serializer):
    """An input serializer that rejects keys it does not know (a typo must not pass silently)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


def validated(serializer_class: type[serializers.Serializer], data: Any, **kwargs: Any) -> dict[str, Any]:
    """Validate ``data``; on failure raise 400 ``validation_error`` naming the first bad field."""
    serializer = serializer_class(data=data, **kwargs)
    if serializer.is_valid():
        return dict(serializer.validated_data)
    errors = serializer.errors
    field, messages = next(iter(errors.items()))
    text = messages[0] if isinstance(messages, list) and messages else messages
    label = "body" if field == "non_field_errors" else field
    raise ApiError("validation_error", f"{label}: {text}", details={"field": label, "errors": errors})


@overload
def query_int(
    request: Request, name: str, *, default: int, minimum: int = 0, maximum: int | None = None
) -> int: ...


@overload
def query_int(
    request: Request, name: str, *, default: None = None, minimum: int = 0, maximum: int | None = None
) -> int | None: ...


def query_int(
    request: Request, name: str, *, default: int | None = None, minimum: int = 0, maximum: int | None = None
) -> int | None:
    """Read an integer query parameter (at most QUERY_INT_MAX), or raise 400 ``invalid_parameter``."""
    maximum = QUERY_INT_MAX if maximum is None else min(maximum, QUERY_INT_MAX)
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError("invalid_parameter", f"{name} must be an integer.", details={"field": name}) from None
    if value < minimum or value > maximum:
        bound = f"between {minimum} and {maximum}"
        raise ApiError("invalid_parameter", f"{name} must be {bound}.", details={"field": name})
    return value


def query_bool(request: Request, name: str, *, default: bool) -> bool:
    """Read a boolean query parameter (1/0, true/false, yes/no), or raise 400."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ApiError("invalid_parameter", f"{name} must be true or false.", details={"field": name})


@dataclass(frozen=True)
class Page:
    """One page of a list: its rows and where the next one starts."""

    items: list[Any]
    count: int
    limit: int
    offset: int

    def meta(self) -> dict[str, Any]:
        following = self.offset + self.limit
        return {
            "count": self.count,
            "limit": self.limit,
            "offset": self.offset,
            "next_offset": following if following < self.count else None,
        }


def page_meta_fields() -> dict[str, serializers.Field]:
    """Return the fields `Page.meta` adds to a list response, for the list's schema."""
    return {
        "count": serializers.IntegerField(),
        "limit": serializers.IntegerField(),
        "offset": serializers.IntegerField(),
        "next_offset": serializers.IntegerField(allow_null=True),
    }


def paginate(
    request: Request, queryset: QuerySet, *, default_limit: int = 100, max_limit: int = 1000
) -> Page:
    """Cut a queryset by ``?limit=&offset=``."""
    limit = query_int(request, "limit", default=default_limit, minimum=1, maximum=max_limit)
    offset = query_int(request, "offset", default=0, minimum=0)
    return Page(
        items=list(queryset[offset : offset + limit]), count=queryset.count(), limit=limit, offset=offset
    )
