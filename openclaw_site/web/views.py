"""Dashboard pages of the site itself: teams, assistants and their settings, API keys, jobs.

Small function views (django-htmx style): each renders a named partial of its template for an htmx
request and the whole page for a direct visit (`web.render_page`). Reads are open to every team
member; writes check the role first (`WebContext.require`) and change nothing when refused.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.db.models import Count, Max
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from openclaw_site.errors import DomainError
from openclaw_site.jobs import listing as jobs
from openclaw_site.models import Assistant, Role, TaskState, Team
from openclaw_site.selectors import api_key_get, api_key_list, assistant_get, assistant_list
from openclaw_site.teams import services
from openclaw_site.web.base import Confirmation, WebRequest, confirm_page, is_htmx, render_page, team_view
from openclaw_site.web.connection import connection
from openclaw_site.web.forms import ApiKeyForm, AssistantCreateForm, AssistantForm, CreatedKey, SettingsForm

UNPROCESSABLE = 422


def _redirect(request: WebRequest, url: str) -> HttpResponse:
    """Navigate to ``url``: a client-side redirect for htmx, a normal one otherwise."""
    return HttpResponseClientRedirect(url) if is_htmx(request) else redirect(url)


def _assistants(team: Team, *, archived: bool) -> list[Assistant]:
    return list(
        assistant_list(team=team, archived=archived)
        .annotate(
            session_count=Count("sessions", distinct=True),
            last_activity=Max("sessions__updated_at"),
            document_count=Count("memory_documents", distinct=True),
        )
        .order_by("name", "slug")
    )


@require_GET
@team_view
def home(request: WebRequest) -> HttpResponse:
    """The team's assistants with their session counts and last activity; archived ones on request."""
    archived = request.GET.get("archived") == "1"
    team = request.web.team
    context = {
        "assistants": _assistants(team, archived=archived),
        "archived_count": assistant_list(team=team, archived=True).count(),
        "showing_archived": archived,
    }
    return render_page(request, "site/home.html", context, partial="assistant-list")


@require_http_methods(["GET", "POST"])
@team_view
def assistant_create(request: WebRequest) -> HttpResponse:
    """Create an assistant (admins)."""
    request.web.require(Role.ADMIN)
    form = AssistantCreateForm(request.POST or None, team=request.web.team)
    if request.method == "POST":
        if form.is_valid():
            fields = {name: form.cleaned_data[name] for name in services.ASSISTANT_FIELDS}
            try:
                assistant = services.assistant_create(
                    team=request.web.team, slug=form.cleaned_data["slug"], **fields
                )
            except DomainError as error:  # a concurrent create of the same slug
                form.add_error(error.details.get("field"), error.message)
            else:
                messages.success(request, f"Created {assistant.name}.")
                return _redirect(request, reverse("assistant", args=[assistant.slug]))
        return render_page(
            request, "site/assistant_new.html", {"form": form}, partial="form", status=UNPROCESSABLE
        )
    return render_page(request, "site/assistant_new.html", {"form": form}, partial="form")


@require_GET
@team_view
def assistant_detail(request: WebRequest, slug: str) -> HttpResponse:
    """An assistant's overview: recent sessions, memory documents, search."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    sessions = assistant.sessions.annotate(message_count=Count("messages")).order_by("-updated_at")[:8]
    documents = assistant.memory_documents.order_by("-updated_at")[:8]
    return render_page(
        request,
        "site/assistant.html",
        {
            "assistant": assistant,
            "sessions": sessions,
            "documents": documents,
            "tab": "overview",
            "document_count": assistant.memory_documents.count(),
            "session_count": assistant.sessions.count(),
        },
    )


@require_http_methods(["GET", "POST"])
@team_view
def assistant_settings(request: WebRequest, slug: str) -> HttpResponse:
    """The assistant's fields and OpenClaw settings; admins save, others read."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    if request.method == "POST":
        request.web.require(Role.ADMIN)
    data = request.POST if request.method == "POST" else None
    form = AssistantForm(data, instance=assistant)
    settings_form = SettingsForm(data, current=assistant.settings)
    status = 200
    if request.method == "POST":
        # Both forms validate, so every bad field gets its message in one round trip.
        saved = all([form.is_valid(), settings_form.is_valid()]) and _save_settings(form, settings_form)
        if saved:
            messages.success(request, "Settings saved.")
            assistant.refresh_from_db()
            form, settings_form = AssistantForm(instance=assistant), SettingsForm(current=assistant.settings)
        else:
            assistant.refresh_from_db()  # the form validation wrote the rejected values onto it
            status = UNPROCESSABLE
    context = {
        "assistant": assistant,
        "form": form,
        "settings_form": settings_form,
        "tab": "settings",
        "read_only": not request.web.is_admin,
    }
    return render_page(
        request, "site/assistant_settings.html", context, partial="settings-form", status=status
    )


def _save_settings(form: AssistantForm, settings_form: SettingsForm) -> bool:
    """Save both forms; a refusal that needs both (settings that do not fit the window) goes on the form."""
    fields = {name: form.cleaned_data[name] for name in services.ASSISTANT_FIELDS}
    try:
        services.assistant_update(assistant=form.instance, settings=settings_form.document, **fields)
    except DomainError as error:
        settings_form.add_error(None, error.message)
        return False
    return True


@require_http_methods(["GET", "POST"])
@team_view
def api_keys(request: WebRequest) -> HttpResponse:
    """The team's API keys; admins create them (the secret is shown once) and revoke them."""
    team = request.web.team
    form = ApiKeyForm(request.POST or None)
    created: CreatedKey | None = None
    status = 200
    if request.method == "POST":
        request.web.require(Role.ADMIN)
        if form.is_valid():
            key, secret = services.api_key_create(
                team=team,
                name=form.cleaned_data["name"],
                scopes=form.cleaned_data["scopes"],
                created_by=request.user,
                expires_at=form.expires_at(),
            )
            created, form = CreatedKey(name=key.name, secret=secret), ApiKeyForm()
        else:
            status = UNPROCESSABLE
    context = {
        "form": form,
        "created": created,
        "keys": api_key_list(team=team),
        **_connect_context(request),
    }
    # A GET from htmx comes from the assistant picker: only the connection panel changes.
    partial = "connect-panel" if request.method == "GET" else "keys-panel"
    response = render_page(request, "site/api_keys.html", context, partial=partial, status=status)
    response["Cache-Control"] = "no-store"  # the one page that ever holds a secret
    return response


def _connect_context(request: WebRequest) -> dict[str, Any]:
    """The assistant picked on the API keys page (``?assistant=``, else the first) and how to reach it."""
    assistants = list(assistant_list(team=request.web.team, archived=False))
    slug = request.GET.get("assistant", "")
    chosen = assistant_get(team=request.web.team, slug=slug) if slug else next(iter(assistants), None)
    if chosen is None:
        return {"assistants": assistants, "connect": None}
    if chosen not in assistants:
        assistants.append(chosen)  # an archived one named in the URL stays shown
    base_url = request.build_absolute_uri("/")
    return {"assistants": assistants, "connect": connection(base_url=base_url, slug=chosen.slug)}


@require_http_methods(["GET", "POST"])
@team_view
def api_key_revoke(request: WebRequest, pk: int) -> HttpResponse:
    """Revoke a key of the team now; its clients get 401 from the next request on."""
    request.web.require(Role.ADMIN)
    key = api_key_get(team=request.web.team, pk=pk)
    if request.method == "GET":
        return confirm_page(
            request,
            Confirmation(
                question=f"Revoke “{key.name}”?",
                consequence="Its clients get 401 from their next request on. It cannot be undone.",
                button="Revoke",
                cancel_url=reverse("api-keys"),
            ),
        )
    if key.revoked_at is None:
        services.api_key_revoke(key=key)
        messages.success(request, f"Revoked {key.name}.")
    if is_htmx(request):
        context = {
            "keys": api_key_list(team=request.web.team),
            "form": ApiKeyForm(),
            "created": None,
        }
        return render_page(request, "site/api_keys.html", context, partial="key-table")
    return redirect("api-keys")


class JobFilterForm(forms.Form):
    state = forms.ChoiceField(choices=[("", "Any state"), *TaskState.choices], required=False)
    kind = forms.CharField(required=False, max_length=64)
    assistant = forms.SlugField(required=False)


@require_GET
@team_view
def jobs_page(request: WebRequest) -> HttpResponse:
    """The team's background tasks grouped by job, failures first, filtered and paginated."""
    team = request.web.team
    form = JobFilterForm(request.GET)
    data = form.cleaned_data if form.is_valid() else {}
    slug = data.get("assistant")
    where = jobs.JobFilter(
        state=data.get("state", ""),
        kind=data.get("kind", ""),
        assistant=assistant_get(team=team, slug=slug) if slug else None,
    )
    page, rows = jobs.job_page(team, where, number=request.GET.get("page", 1))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "jobs": rows,
        "page": page,
        "where": where,
        "query": query.urlencode(),
        "kinds": [(kind, jobs.kind_label(kind)) for kind in jobs.team_kinds(team)],
        "states": TaskState.choices,
        "assistants": assistant_list(team=team),
        "active": jobs.worth_polling(rows),
    }
    return render_page(request, "site/jobs.html", context, partial="job-table")


class AssistantRenameForm(forms.Form):
    name = forms.CharField(max_length=200, label="New name")


@require_POST
@team_view
def assistant_rename(request: WebRequest, slug: str) -> HttpResponse:
    """Rename an assistant (admins); the slug, which URLs, keys' clients and exports use, stays."""
    request.web.require(Role.ADMIN)
    assistant = assistant_get(team=request.web.team, slug=slug)
    form = AssistantRenameForm(request.POST)
    if not form.is_valid():
        messages.error(request, "A name is needed (at most 200 characters).")
    else:
        try:
            services.assistant_update(assistant=assistant, name=form.cleaned_data["name"])
        except DomainError as error:  # archived: read-only until restored
            messages.error(request, error.message)
        else:
            messages.success(request, f"Renamed to {form.cleaned_data['name']}.")
    return _redirect(request, reverse("assistant", args=[assistant.slug]))


@require_http_methods(["GET", "POST"])
@team_view
def assistant_archive(request: WebRequest, slug: str) -> HttpResponse:
    """Archive an assistant (read-only from then on) or bring it back (admins); nothing is deleted."""
    request.web.require(Role.ADMIN)
    assistant = assistant_get(team=request.web.team, slug=slug)
    if request.method == "GET":
        return confirm_page(
            request,
            Confirmation(
                question=f"Archive {assistant.name}?",
                consequence="It keeps its sessions, memory and exports, which stay readable, but it becomes "
                "read-only: no messages, turns or memory writes until you restore it.",
                button="Archive",
                cancel_url=reverse("assistant", args=[assistant.slug]),
                fields=(("archived", "1"),),
            ),
        )
    archived = request.POST.get("archived") != "0"
    services.assistant_archive(assistant=assistant, archived=archived)
    messages.success(request, f"{'Archived' if archived else 'Restored'} {assistant.name}.")
    return _redirect(request, reverse("assistant", args=[assistant.slug]))


@require_http_methods(["GET", "POST"])
@team_view
def assistant_delete(request: WebRequest, slug: str) -> HttpResponse:
    """Delete an assistant with its sessions, memory and exported files (admins)."""
    request.web.require(Role.ADMIN)
    assistant = assistant_get(team=request.web.team, slug=slug)
    if request.method == "GET":
        return confirm_page(
            request,
            Confirmation(
                question=f"Delete {assistant.name}?",
                consequence="This removes its sessions, memory documents, revisions and exported files. "
                "It cannot be undone.",
                button="Delete assistant",
                cancel_url=reverse("assistant", args=[assistant.slug]),
            ),
        )
    services.assistant_delete(assistant=assistant)
    messages.success(request, f"Deleted {assistant.name}, its sessions, memory and exported files.")
    return _redirect(request, reverse("home"))
