"""Shared plumbing of the htmx dashboard: the signed-in user's team, their role, and rendering.

Every dashboard view is wrapped in `team_view`, which resolves the active team the same way the
REST API does (`openclaw_site.guards.auth.resolve_user_team`, with the switcher's `TEAM_SESSION_KEY`).
Views take a `WebRequest` and look objects up through the selectors with ``request.web.team``;
another team's object is then simply not found, and `team_view` turns the selector's `NotFound`
into the 404 page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from openclaw_site.errors import DomainError
from openclaw_site.guards.auth import TEAM_SESSION_KEY, memberships_of, resolve_user_team
from openclaw_site.models import Membership, Role, Team
from openclaw_site.selectors import NotFound

_RANK: dict[str, int] = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2}

P = ParamSpec("P")
R = TypeVar("R", bound=HttpResponseBase)


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


def attach_web_context(request: HttpRequest) -> None:
    """Give a signed-in page outside `team_view` (a new team) the top bar's tabs and team switcher."""
    context = web_context_for(request)
    if context is not None:
        cast(WebRequest, request).web = context


def team_view(
    view: Callable[Concatenate[WebRequest, P], R],
) -> Callable[Concatenate[HttpRequest, P], R | HttpResponse]:
    """Require sign-in and a team; put the WebContext on ``request.web``; a NotFound is a 404."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, /, *args: P.args, **kwargs: P.kwargs) -> R | HttpResponse:
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
            owner = _other_team_showing(view, web_request, args, kwargs)
            if owner is None:
                raise Http404(str(missing)) from None
            return render(
                request, "404.html", {"switch_to": owner, "next": request.get_full_path()}, status=404
            )
        except DomainError as error:  # the dashboard's rendering of a refusal no page handles itself
            if error.code != "assistant_archived":
                raise
            return _refused(web_request, error)

    return wrapper


def _refused(request: WebRequest, error: DomainError) -> HttpResponse:
    """A write the service refused (an archived assistant): say why on the page the user came from."""
    messages.error(request, error.message)
    back = request.headers.get("referer", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("home")
    return HttpResponseClientRedirect(back) if is_htmx(request) else redirect(back)


def _other_team_showing(
    view: Callable[..., HttpResponseBase], request: WebRequest, args: Any, kwargs: Any
) -> Membership | None:
    """Return the user's other team in which this GET finds what it looks for, or None.

    A bookmarked URL of the team the user is not working in answers 404 with the offer to switch.
    The view runs once per other team inside a transaction that is rolled back, so nothing it
    might write stays and nothing it might queue is sent (tasks go out after a commit only).
    """
    if request.method != "GET":
        return None
    current = request.web
    try:
        for membership in current.memberships:
            if membership.team_id == current.team.pk:
                continue
            request.web = WebContext(
                team=membership.team, role=membership.role, memberships=current.memberships
            )
            if _answers(view, request, args, kwargs):
                return membership
    finally:
        request.web = current
    return None


def _answers(view: Callable[..., HttpResponseBase], request: WebRequest, args: Any, kwargs: Any) -> bool:
    with transaction.atomic():
        try:
            return view(request, *args, **kwargs).status_code < 400
        except Exception:  # NotFound, PermissionDenied, anything: not this team's page
            return False
        finally:
            transaction.set_rollback(True)


@dataclass(frozen=True)
class Confirmation:
    """What the page before a destructive POST asks when JavaScript (and so hx-confirm) is off."""

    question: str  # "Delete “Launch planning”?"
    consequence: str  # what the action removes, and whether it can be undone
    button: str  # the action's verb, on the button that does it
    cancel_url: str
    fields: tuple[tuple[str, str], ...] = ()  # hidden form fields the POST needs


def confirm_page(request: HtmxHttpRequest, confirmation: Confirmation) -> HttpResponse:
    """The GET of a destructive action's URL: ask, with a form that POSTs the action to the same URL.

    The dashboard's buttons for these actions are GET forms that htmx posts after its hx-confirm,
    so without JavaScript they land here first and nothing is changed by following a link.
    """
    return render_page(request, "confirm.html", {"confirmation": confirmation}, partial="confirm-panel")


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
