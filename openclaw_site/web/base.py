"""Shared plumbing of the htmx dashboard: the signed-in user's team, their role, and rendering.

Every dashboard view is wrapped in `team_view`, which resolves the active team the same way the
REST API does (`openclaw_site.auth.resolve_user_team`, with the switcher's `TEAM_SESSION_KEY`).
Views take a `WebRequest` and look objects up through the selectors with ``request.web.team``;
another team's object is then simply not found, and `team_view` turns the selector's `NotFound`
into the 404 page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, Concatenate, ParamSpec, cast

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from django_htmx.middleware import HtmxDetails

from openclaw_site.auth import TEAM_SESSION_KEY, memberships_of, resolve_user_team
from openclaw_site.models import Membership, Role, Team
from openclaw_site.selectors import NotFound

_RANK: dict[str, int] = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2}

P = ParamSpec("P")


@dataclass(frozen=True)
class WebContext:
    """The signed-in user's active team, their role there, and their other teams (for the switcher)."""

    team: Team
    role: str
    memberships: tuple[Membership, ...]

    @property
    def can_write(self) -> bool:
        """Members and admins chat, edit memory and compact; viewers only read."""
        return _RANK[self.role] >= _RANK[Role.MEMBER]

    @property
    def is_admin(self) -> bool:
        """Only admins change assistants' settings and the team's API keys."""
        return self.role == Role.ADMIN

    def require(self, role: str) -> None:
        """Raise PermissionDenied unless the user's role is at least ``role``."""
        if _RANK[self.role] < _RANK[role]:
            raise PermissionDenied(f"This needs the {role} role in team {self.team.slug}.")


class HtmxHttpRequest(HttpRequest):
    """A request django-htmx's middleware has seen (settings.MIDDLEWARE): ``request.htmx`` is set."""

    htmx: HtmxDetails


class WebRequest(HtmxHttpRequest):
    """A dashboard request inside `team_view`: a signed-in user and their `WebContext`."""

    user: User
    web: WebContext


def web_context_for(request: HttpRequest) -> WebContext | None:
    """Return the signed-in user's WebContext, or None when they belong to no team."""
    user = request.user
    if not user.is_authenticated:  # team_view checks sign-in first; an anonymous user has no team
        return None
    memberships = memberships_of(user)
    chosen = resolve_user_team(
        user, requested_slug=None, session_team_id=request.session.get(TEAM_SESSION_KEY)
    )
    if chosen is None:
        return None
    return WebContext(team=chosen.team, role=chosen.role, memberships=tuple(memberships))


def team_view(
    view: Callable[Concatenate[WebRequest, P], HttpResponseBase],
) -> Callable[Concatenate[HttpRequest, P], HttpResponseBase]:
    """Require sign-in and a team; put the WebContext on ``request.web``; a NotFound is a 404."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, /, *args: P.args, **kwargs: P.kwargs) -> HttpResponseBase:
        context = web_context_for(request)
        if context is None:
            return render(request, "no_team.html", status=403)
        # The one place the dashboard's request type is asserted: login_required let only a
        # signed-in user through, the htmx middleware set ``htmx``, and ``web`` is set here.
        web_request = cast(WebRequest, request)
        web_request.web = context
        try:
            return view(web_request, *args, **kwargs)
        except NotFound as missing:
            raise Http404(str(missing)) from None

    return wrapper


def render_page(
    request: HtmxHttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    partial: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """Render ``template#partial`` for an htmx request and the full page otherwise.

    Every htmx endpoint also answers a direct visit (a bookmarked or reloaded URL) with the whole
    page, so nothing is reachable only through JavaScript.
    """
    name = f"{template}#{partial}" if partial and is_htmx(request) else template
    return render(request, name, context, status=status)


def is_htmx(request: HtmxHttpRequest) -> bool:
    """True for a request htmx made (and not a boosted navigation, which wants the full page)."""
    return bool(request.htmx) and not request.htmx.boosted
