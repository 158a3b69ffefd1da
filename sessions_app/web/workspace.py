"""Dashboard pages that move a whole workspace: the zip download and the import by upload.

Both are thin: `sessions_app.workspace.archives` writes the zip with `export_assistant` and
imports an upload through `import_workspace`, with the same checks as `manage.py import_workspace`.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.validators import validate_slug
from django.http import FileResponse, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from openclaw_site.errors import ApiError
from openclaw_site.models import Assistant, Role
from openclaw_site.selectors import NotFound, assistant_get
from openclaw_site.usage.fair_share import TeamWork, team_slot
from openclaw_site.web.base import Confirmation, WebRequest, confirm_page, is_htmx, render_page, team_view
from sessions_app.workspace.archives import import_zip, workspace_zip
from sessions_app.workspace.imports import WorkspaceImportError
from sessions_app.workspace.staging import discard_staged_upload, stage_upload, take_staged_upload

UNPROCESSABLE = 422


@require_GET
@team_view
def workspace_export(request: WebRequest, slug: str) -> HttpResponseBase:
    """The assistant's workspace (MEMORY.md, memory/, sessions/, assistant.json) as a zip download."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    name = f"{request.web.team.slug}-{assistant.slug}-{timezone.now():%Y%m%d-%H%M}.zip"
    return FileResponse(
        workspace_zip(assistant), as_attachment=True, filename=name, content_type="application/zip"
    )


class WorkspaceImportForm(forms.Form):
    assistant = forms.CharField(
        max_length=64,
        validators=[validate_slug],
        help_text="Slug of the assistant to create, or to replace with the box below ticked.",
    )
    archive = forms.FileField(
        label="Workspace (.zip)",
        help_text="A zip of an OpenClaw workspace: MEMORY.md, memory/*.md, sessions/*.jsonl (as Export writes it).",
    )
    replace = forms.BooleanField(
        required=False,
        label="Replace the assistant's sessions and memory if it exists",
    )


STAGED_IMPORT_KEY = "staged-workspace-import"


@require_http_methods(["GET", "POST"])
@team_view
def workspace_import(request: WebRequest) -> HttpResponse:
    """Import a zipped workspace into a new assistant, or replace an existing one (admins).

    Replacing asks first: the upload is staged and the confirmation page (inline for htmx) posts
    the import again with ``confirmed``; the staged file is taken from the user's session.
    """
    request.web.require(Role.ADMIN)
    if request.method == "GET":
        form = WorkspaceImportForm(initial={"assistant": request.GET.get("assistant", "")})
        return render_page(request, "sessions/import.html", {"form": form}, partial="import-form")
    staged = request.session.pop(STAGED_IMPORT_KEY, "") if request.POST.get("confirmed") else ""
    form = WorkspaceImportForm(request.POST, request.FILES)
    form.fields["archive"].required = not staged
    if form.is_valid():
        slug, replace = form.cleaned_data["assistant"], form.cleaned_data["replace"]
        existing = _existing_assistant(request, slug)
        if existing is not None and not replace:
            form.add_error(
                "replace", f"{existing.name} ({slug}) exists already: tick this box to replace it."
            )
        elif existing is not None and not staged:
            # An upload staged before and never confirmed is replaced by this one: remove it now.
            discard_staged_upload(request.session.get(STAGED_IMPORT_KEY, ""))
            request.session[STAGED_IMPORT_KEY] = stage_upload(form.cleaned_data["archive"])
            return confirm_page(request, _replace_confirmation(existing))
        else:
            try:
                with team_slot(request.web.team.pk, TeamWork.IMPORT):
                    upload = take_staged_upload(staged) if staged else form.cleaned_data["archive"]
                    with upload:
                        report = import_zip(
                            upload, team_slug=request.web.team.slug, assistant_slug=slug, replace=replace
                        )
            except WorkspaceImportError as error:
                form.add_error(None, f"Nothing was imported: {error}.")
            except ApiError as busy:  # another import of the team runs (openclaw_site.usage.fair_share)
                form.add_error(None, busy.message)
                response = render_page(
                    request, "sessions/import.html", {"form": form}, partial="import-form", status=429
                )
                response["Retry-After"] = str(busy.details["retry_after"])
                return response
            else:
                messages.success(request, report.lines()[0])
                url = reverse("assistant", args=[slug])
                return HttpResponseClientRedirect(url) if is_htmx(request) else redirect(url)
    return render_page(
        request, "sessions/import.html", {"form": form}, partial="import-form", status=UNPROCESSABLE
    )


def _existing_assistant(request: WebRequest, slug: str) -> Assistant | None:
    try:
        return assistant_get(team=request.web.team, slug=slug)
    except NotFound:
        return None


def _replace_confirmation(assistant: Assistant) -> Confirmation:
    sessions, documents = assistant.sessions.count(), assistant.memory_documents.count()
    return Confirmation(
        question=f"Replace {assistant.name} with the uploaded workspace?",
        consequence=f"This removes its {sessions} session{pluralize(sessions)} and {documents} memory "
        f"document{pluralize(documents)} and loads the workspace's instead. It cannot be undone.",
        button="Replace",
        cancel_url=reverse("workspace-import") + f"?assistant={assistant.slug}",
        fields=(("assistant", assistant.slug), ("replace", "on"), ("confirmed", "1")),
    )
