"""Who is calling and for which team: API keys (Bearer) and browser sessions.

Every API view reads the caller's `TeamContext` (put on the request by `IsTeamMember`, read back
with `request_team_context`) and filters every query by ``team_context.team``; another team's object
is then simply not found (404), never a leak.
"""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework import authentication, permissions
from rest_framework.request import Request

from openclaw_site.errors import ApiError
from openclaw_site.models import API_KEY_PREFIX, ApiKey, Membership, Role, Scope, Team, hash_secret
from openclaw_site.platform.row_sql import RowRead

ROLE_SCOPES: dict[str, frozenset[str]] = {
    Role.VIEWER: frozenset({Scope.SESSIONS_READ, Scope.MEMORY_READ}),
    Role.MEMBER: frozenset(
        {Scope.SESSIONS_READ, Scope.SESSIONS_WRITE, Scope.MEMORY_READ, Scope.MEMORY_WRITE}
    ),
    Role.ADMIN: frozenset(Scope.values),
}

TEAM_SESSION_KEY = "active_team_id"
# The request attribute `IsTeamMember` sets and `request_team_context` reads.
_TEAM_CONTEXT_ATTRIBUTE = "team_context"


@dataclass(frozen=True)
class TeamContext:
    """The caller's team and what it may do there."""

    team: Team
    scopes: frozenset[str]
    user: User | None = None
    api_key: ApiKey | None = None
    role: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def has_scope(self, scope: str) -> bool:
        return Scope.ADMIN in self.scopes or scope in self.scopes


class ApiKeyPrincipal:
    """Stands in for ``request.user`` when a request authenticates with an API key."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False
    pk = None

    def __init__(self, api_key: ApiKey) -> None:
        self.api_key = api_key

    def __str__(self) -> str:
        return f"api-key:{self.api_key.prefix}"


# Every API request reads its key with the key's team (docs/design.md, Request cost).
_KEY_BY_PREFIX = RowRead(ApiKey, "team", where="t0.prefix = %s")


def authenticate_api_key(raw: str) -> ApiKey:
    """Return the active key for a presented secret, or raise a 401 ApiError."""
    if not raw.startswith(API_KEY_PREFIX) or raw.count("_") < 2:
        raise ApiError("invalid_api_key", "The API key is malformed.", status_code=401)
    prefix = raw[len(API_KEY_PREFIX) :].split("_", 1)[0]
    key = _KEY_BY_PREFIX.one([prefix])
    if key is None or not hmac.compare_digest(key.secret_hash, hash_secret(raw)):
        raise ApiError("invalid_api_key", "The API key is not valid.", status_code=401)
    if key.revoked_at is not None:
        raise ApiError("api_key_revoked", "The API key has been revoked.", status_code=401)
    if not key.is_active:
        raise ApiError("api_key_expired", "The API key has expired.", status_code=401)
    _touch(key)
    return key


# "Last used" is shown to the minute: writing it on every request would add a row update (and
# a contended row lock under bursts) to each call for nothing a reader could see.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _touch(key: ApiKey) -> None:
    """Record that the key was used, at most once per `LAST_USED_RESOLUTION`."""
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at >= LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)


# An open stream re-reads its key at most this often (one indexed row read), so a key revoked or
# expired while the stream runs ends it within about this many seconds of the next event.
KEY_RECHECK_SECONDS = 1.0


class KeyWatch:
    """Tells a long stream (REST SSE, `/v1/`) when the API key that opened it stops being valid.

    A stream outlives the request's authentication: without this, a revoked key's open stream ran
    on until the turn ended (docs/design.md, Limits and refusals). A browser session (no key) is
    never refused here.
    """

    def __init__(self, key: ApiKey | None, *, every_seconds: float = KEY_RECHECK_SECONDS) -> None:
        self._key_id = key.pk if key is not None else None
        self._every = every_seconds
        self._next_check = time.monotonic() + every_seconds

    def refusal(self) -> ApiError | None:
        """Return the 401 that ends the stream if the key was revoked or expired since it began."""
        if self._key_id is None or time.monotonic() < self._next_check:
            return None
        self._next_check = time.monotonic() + self._every
        key = ApiKey.objects.filter(pk=self._key_id).only("revoked_at", "expires_at").first()
        if key is None or key.revoked_at is not None:
            return ApiError(
                "api_key_revoked",
                "The API key was revoked while this stream was open, so the stream ends here; what "
                "the turn stored so far stays in the session.",
                status_code=401,
            )
        if not key.is_active:
            return ApiError(
                "api_key_expired",
                "The API key expired while this stream was open, so the stream ends here; what the "
                "turn stored so far stays in the session.",
                status_code=401,
            )
        return None


def bearer_api_key(header: str) -> ApiKey | None:
    """Return the key of an ``Authorization: Bearer ocs_...`` header (None when there is no header), or raise 401."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError("invalid_authorization", "Use 'Authorization: Bearer <api key>'.", status_code=401)
    return authenticate_api_key(token.strip())


def api_key_context(key: ApiKey) -> TeamContext:
    """Return what an API key may do: its team and its scopes."""
    return TeamContext(team=key.team, scopes=frozenset(key.scopes), api_key=key)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer ocs_...``."""

    def authenticate(self, request: Request) -> tuple[ApiKeyPrincipal, ApiKey] | None:
        key = bearer_api_key(request.headers.get("authorization", ""))
        return None if key is None else (ApiKeyPrincipal(key), key)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


def memberships_of(user: User) -> list[Membership]:
    return list(Membership.objects.filter(user=user).select_related("team").order_by("team__slug"))


def resolve_user_team(user: User, *, requested_slug: str | None, session_team_id: Any) -> Membership | None:
    """Pick the membership a signed-in user acts through: the X-Team header, the switcher, or the only one."""
    memberships = memberships_of(user)
    if requested_slug:
        return next((m for m in memberships if m.team.slug == requested_slug), None)
    if session_team_id is not None:
        chosen = next((m for m in memberships if m.team_id == session_team_id), None)
        if chosen is not None:
            return chosen
    # A new sign-in lands in the team the user last worked in (the first by slug if none yet).
    used = [m for m in memberships if m.last_used_at is not None]
    if used:
        return max(used, key=lambda m: m.last_used_at or m.created_at)
    return memberships[0] if memberships else None


def team_context_for(request: Request) -> TeamContext:
    """Build the caller's TeamContext or raise 401/403."""
    user = request.user
    if isinstance(user, ApiKeyPrincipal):
        return api_key_context(user.api_key)
    if user is None or not user.is_authenticated:
        raise ApiError(
            "not_authenticated",
            "Authentication required: send 'Authorization: Bearer <api key>' or sign in.",
            status_code=401,
        )
    membership = resolve_user_team(
        user,
        requested_slug=request.headers.get("x-team"),
        session_team_id=request.session.get(TEAM_SESSION_KEY) if hasattr(request, "session") else None,
    )
    if membership is None:
        raise ApiError(
            "no_team", "You are not a member of any team (or of the team named in X-Team).", status_code=403
        )
    return TeamContext(
        team=membership.team, scopes=ROLE_SCOPES[membership.role], user=user, role=membership.role
    )


class IsTeamMember(permissions.BasePermission):
    """Resolve the team context and check the view's ``required_scopes`` for the method."""

    def has_permission(self, request: Request, view: Any) -> bool:
        context = team_context_for(request)
        setattr(request, _TEAM_CONTEXT_ATTRIBUTE, context)
        check_scope(context, required_scopes(view, request.method))
        return True


def check_scope(context: TeamContext, scopes: tuple[str, ...]) -> None:
    """Raise 403 ``insufficient_scope`` unless the caller holds one of ``scopes`` (none: anyone may)."""
    if scopes and not any(context.has_scope(scope) for scope in scopes):
        wanted = "' or '".join(scopes)
        raise ApiError(
            "insufficient_scope",
            f"This request needs the '{wanted}' scope.",
            status_code=403,
            details={"required_scope": scopes[0] if len(scopes) == 1 else list(scopes)},
        )


def request_team_context(request: Request) -> TeamContext:
    """Return the TeamContext `IsTeamMember` put on the request, or raise if it has not run."""
    context = getattr(request, _TEAM_CONTEXT_ATTRIBUTE, None)
    if not isinstance(context, TeamContext):
        raise RuntimeError("No team context on this request: the view must use the IsTeamMember permission.")
    return context


def required_scope(view: Any, method: str | None) -> str | tuple[str, ...] | None:
    """Return the scope a view needs for a method: ``read_scope`` for safe methods, else ``write_scope``.

    A tuple means any one of its scopes will do (assistant reads accept sessions:read or memory:read).
    """
    if method in permissions.SAFE_METHODS:
        return getattr(view, "read_scope", None)
    return getattr(view, "write_scope", None)


def required_scopes(view: Any, method: str | None) -> tuple[str, ...]:
    """Return the scopes of which the caller needs one (empty: any team member may call)."""
    scope = required_scope(view, method)
    if scope is None:
        return ()
    return (scope,) if isinstance(scope, str) else tuple(scope)
