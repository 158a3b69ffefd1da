"""Dashboard pages for teams and their people: the members page, a new team, switching teams.

Thin: forms are parsed here, the writes are `openclaw_site.teams.members`, reads go through the selectors.
Team admins add, re-role and remove members; everyone sees who is in the team.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.validators import validate_slug
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.text import slugify
from django.views.decorators.http import require_http_methods, require_POST

from openclaw_site.errors import DomainError
from openclaw_site.guards.auth import TEAM_SESSION_KEY
from openclaw_site.models import Membership, Role
from openclaw_site.selectors import membership_get, membership_list
from openclaw_site.teams import members as teams
from openclaw_site.web.base import (
    Confirmation,
    WebRequest,
    attach_web_context,
    confirm_page,
    is_htmx,
    render_page,
    team_view,
)

UNPROCESSABLE = 422


class AddMemberForm(forms.Form):
    identifier = forms.CharField(
        max_length=254,
        label="Username or e-mail",
        help_text="An existing user, or the e-mail address of someone new: they get a link to set a password.",
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.MEMBER)


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


def _members_page(
    request: WebRequest, form: AddMemberForm, *, status: int = 200, invited: str = ""
) -> HttpResponse:
    context = {
        "members": membership_list(team=request.web.team),
        "form": form,
        "roles": Role.choices,
        "invited": invited,
        "inline_messages": is_htmx(request),  # a swapped panel carries its own flash messages
    }
    return render_page(request, "site/team.html", context, partial="member-panel", status=status)


@require_http_methods(["GET", "POST"])
@team_view
def team_members(request: WebRequest) -> HttpResponse:
    """The team's members and roles; admins add people (existing users, or new ones by e-mail)."""
    if request.method == "GET":
        return _members_page(request, AddMemberForm())
    request.web.require(Role.ADMIN)
    form = AddMemberForm(request.POST)
    if not form.is_valid():
        return _members_page(request, form, status=UNPROCESSABLE)
    try:
        added = teams.member_add(
            team=request.web.team,
            identifier=form.cleaned_data["identifier"],
            role=form.cleaned_data["role"],
            site_url=request.build_absolute_uri("/").rstrip("/"),
        )
    except DomainError as error:
        form.add_error("identifier", error.message)
        return _members_page(request, form, status=UNPROCESSABLE)
    name = added.membership.user.get_username()
    invited = request.build_absolute_uri(added.set_password_path) if added.created_user else ""
    messages.success(request, f"Added {name} as {added.membership.get_role_display().lower()}.")
    return _members_page(request, AddMemberForm(), invited=invited)


@require_POST
@team_view
def member_role(request: WebRequest, pk: int) -> HttpResponse:
    """Change a member's role (admins); the last admin stays one."""
    request.web.require(Role.ADMIN)
    membership = membership_get(team=request.web.team, pk=pk)
    form = RoleForm(request.POST)
    if form.is_valid():
        _apply(
            request,
            lambda: teams.member_set_role(membership=membership, role=form.cleaned_data["role"]),
            f"{membership.user.get_username()} is now {form.cleaned_data['role']}.",
        )
    return _members_page(request, AddMemberForm()) if is_htmx(request) else redirect("team")


@require_http_methods(["GET", "POST"])
@team_view
def member_remove(request: WebRequest, pk: int) -> HttpResponse:
    """Remove a member from the team (admins); never the last admin."""
    request.web.require(Role.ADMIN)
    membership = membership_get(team=request.web.team, pk=pk)
    if request.method == "GET":
        return confirm_page(
            request,
            Confirmation(
                question=f"Remove {membership.user.get_username()} from {request.web.team.name}?",
                consequence="They lose access to its assistants at once; their account stays, and you can "
                "add them again.",
                button="Remove",
                cancel_url=reverse("team"),
            ),
        )
    _apply(
        request,
        lambda: teams.member_remove(membership=membership),
        f"Removed {membership.user.get_username()}.",
    )
    if membership.user_id == request.user.pk and not Membership.objects.filter(pk=membership.pk).exists():
        request.session.pop(TEAM_SESSION_KEY, None)
        return redirect("home")
    return _members_page(request, AddMemberForm()) if is_htmx(request) else redirect("team")


def _apply(request: WebRequest, change: Callable[[], object], done: str) -> None:
    try:
        change()
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, done)


class NewTeamForm(forms.Form):
    name = forms.CharField(max_length=200)
    slug = forms.CharField(
        max_length=64,
        required=False,
        validators=[validate_slug],
        help_text="Short name: letters, digits, - and _. Empty: made from the name.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("slug") and data.get("name"):
            data["slug"] = slugify(data["name"])[:64]
            if not data["slug"]:
                self.add_error(
                    "slug", "Give a short name: the name has no letters or digits to make one from."
                )
        return data


@login_required
@require_http_methods(["GET", "POST"])
def team_new(request: HttpRequest) -> HttpResponse:
    """Create a team; its creator is its first admin and works in it from now on."""
    user = cast(User, request.user)  # login_required let only a signed-in user through
    attach_web_context(request)
    form = NewTeamForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            team = teams.team_create(
                name=form.cleaned_data["name"], slug=form.cleaned_data["slug"], creator=user
            )
        except DomainError as error:
            form.add_error("slug", error.message)
        else:
            membership = Membership.objects.get(team=team, user=user)
            request.session[TEAM_SESSION_KEY] = team.pk
            teams.remember_team(membership)
            messages.success(request, f"Created {team.name}. Add its members here.")
            return redirect("team")
    status = UNPROCESSABLE if request.method == "POST" else 200
    return render(request, "site/team_new.html", {"form": form}, status=status)


@require_POST
@team_view
def switch_team(request: WebRequest) -> HttpResponse:
    """Make another of the user's teams the active one, remembered for their next sign-in too."""
    slug = request.POST.get("team", "")
    membership = next((m for m in request.web.memberships if m.team.slug == slug), None)
    if membership is None:
        raise Http404("You are not a member of that team.")
    request.session[TEAM_SESSION_KEY] = membership.team_id
    teams.remember_team(membership)
    messages.success(request, f"Now working in {membership.team.name}.")
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("home")
    if is_htmx(request):
        from django_htmx.http import HttpResponseClientRedirect

        return HttpResponseClientRedirect(target)
    return redirect(target)
