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
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from openclaw_site.models import Role
from openclaw_site.selectors import assistant_get
from openclaw_site.web.base import WebRequest, render_page, team_view
from sessions_app.workspace.archives import import_zip, workspace_zip
from sessions_app.workspace.imports import WorkspaceImportError

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


@require_http_methods(["GET", "POST"])
@team_view
def workspace_import(request: WebRequest) -> HttpResponse:
    """Import a zipped workspace into a new assistant, or replace an existing one (admins)."""
    request.web.require(Role.ADMIN)
    if request.method == "GET":
        form = WorkspaceImportForm(initial={"assistant": request.GET.get("assistant", "")})
        return render_page(request, "sessions/import.html", {"form": form}, partial="import-form")
    form = WorkspaceImportForm(request.POST, request.FILES)
    if form.is_valid():
        slug = form.cleaned_data["assistant"]
        try:
            report = import_zip(
                form.cleaned_data["archive"],
                team_slug=request.web.team.slug,
                assistant_slug=slug,
                replace=form.cleaned_data["replace"],
            )
        except WorkspaceImportError as error:
            form.add_error(None, f"Nothing was imported: {error}.")
        else:
            messages.success(request, report.lines()[0])
            return redirect(reverse("assistant", args=[slug]))
    return render_page(
        request, "sessions/import.html", {"form": form}, partial="import-form", status=UNPROCESSABLE
    )
