"""Dashboard pages for an assistant's memory: the file tree, documents, revisions, and search.

Every write goes through `memory_app.documents` (revision + reindex + export on commit), with the
signed-in user as the provenance; these views only translate forms to those calls.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from memory_app.documents import (
    PathTaken,
    Provenance,
    StaleWrite,
    delete_document,
    rename_document,
    revert_document,
    write_document,
)
from memory_app.governance.provenance import LineProvenance, line_provenance
from memory_app.index.jobs import queue_reindex
from memory_app.models import Author, MemoryDocument, MemoryRevision
from memory_app.paths import DAILY_NOTE, ROOT_FILES, InvalidPath, validate_memory_path
from memory_app.selectors import (
    deleted_document_list,
    document_find,
    document_get,
    document_get_by_id,
    document_list,
    revision_before,
    revision_get,
    revision_list,
)
from memory_app.web.highlight import highlight_html
from memory_app.web.sessions import session_links
from openclaw_site.errors import ApiError
from openclaw_site.models import Assistant, Role
from openclaw_site.selectors import assistant_get
from openclaw_site.usage.fair_share import TeamWork, team_slot
from openclaw_site.web.base import Confirmation, WebRequest, confirm_page, is_htmx, render_page, team_view

UNPROCESSABLE = 422


def _provenance(request: WebRequest, note: str = "dashboard") -> Provenance:
    return Provenance(author=Author.USER, user=request.user, note=note)


def _redirect(request: WebRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if is_htmx(request) else redirect(url)


def document_url(assistant: Assistant, path: str) -> str:
    return reverse("memory-document", args=[assistant.slug, path])


# --- the tree ---------------------------------------------------------------------------------


@dataclass
class Folder:
    """A folder of the memory tree with its documents and subfolders."""

    name: str
    documents: list[MemoryDocument] = field(default_factory=list)
    folders: dict[str, Folder] = field(default_factory=dict)

    def sorted_folders(self) -> list[Folder]:
        return [self.folders[name] for name in sorted(self.folders)]


@dataclass
class MemoryTree:
    """MEMORY.md first, then daily notes newest first, then the other files by folder."""

    roots: list[MemoryDocument]
    daily: list[MemoryDocument]
    other: Folder


def memory_tree(assistant: Assistant) -> MemoryTree:
    """Group an assistant's documents the way a person scans them."""
    documents = list(document_list(assistant=assistant))
    roots = [d for d in documents if d.path in ROOT_FILES]
    daily = sorted((d for d in documents if DAILY_NOTE.match(d.path)), key=lambda d: d.path, reverse=True)
    other = Folder(name="memory")
    for document in documents:
        if document in roots or document in daily:
            continue
        folder = other
        for part in document.path.split("/")[1:-1]:
            folder = folder.folders.setdefault(part, Folder(name=part))
        folder.documents.append(document)
    return MemoryTree(roots=roots, daily=daily, other=other)


@require_GET
@team_view
def memory_index(request: WebRequest, slug: str) -> HttpResponse:
    """The assistant's memory documents as a tree."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    return render_page(
        request,
        "memory/tree.html",
        {"assistant": assistant, "tree": memory_tree(assistant), "tab": "memory"},
        partial="tree",
    )


# --- one document -----------------------------------------------------------------------------


def _line_range(request: WebRequest) -> tuple[int, int] | None:
    """The ``?from=&lines=`` range a search citation points at (1-based, inclusive)."""
    try:
        start = int(request.GET.get("from", ""))
        count = int(request.GET.get("lines", "1"))
    except ValueError:
        return None
    return (start, start + max(count, 1) - 1) if start >= 1 else None


def _numbered_lines(content: str, highlight: tuple[int, int] | None) -> list[dict[str, Any]]:
    lines = content.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # a final newline ends the last line; it does not start another
    low, high = highlight or (0, -1)
    return [{"number": n, "text": text, "marked": low <= n <= high} for n, text in enumerate(lines, start=1)]


def revision_links(assistant: Assistant, revisions: list[MemoryRevision]) -> dict[int, str]:
    """Map revision id to the URL of the session message that caused it (flush and agent writes)."""
    messages = session_links().message_urls(assistant, (r.message_pk for r in revisions if r.message_pk))
    links = {}
    for revision in revisions:
        url = messages.get(revision.message_pk) if revision.message_pk is not None else None
        if url is not None:
            links[revision.pk] = url
        elif revision.session_pk:
            links[revision.pk] = reverse("session", args=[revision.session_pk])
    return links


@require_GET
@team_view
def memory_document_by_id(request: WebRequest, slug: str, pk: int) -> HttpResponse:
    """Go to the document a job worked on (the Jobs page knows its id, not its path)."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    return redirect(document_url(assistant, document_get_by_id(assistant=assistant, pk=pk).path))


@require_GET
@team_view
def memory_document(request: WebRequest, slug: str, path: str) -> HttpResponse:
    """Read a document with line numbers (a cited range highlighted) and its revisions."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    document = document_get(assistant=assistant, path=path)
    revisions = list(revision_list(assistant=assistant, path=path)[:50])
    highlight = _line_range(request)
    blame = request.GET.get("view") == "provenance"
    return render_page(
        request,
        "memory/document.html",
        {
            "assistant": assistant,
            "document": document,
            "lines": _numbered_lines(document.content, highlight),
            "highlight": highlight,
            # Markdown is shown rendered; the raw lines (which citations point at) one click away,
            # and who wrote each line (memory_app.governance.provenance) one click away too.
            "raw": bool(highlight) or request.GET.get("view") == "raw",
            "provenance": [_blame_line(entry) for entry in line_provenance(document)] if blame else None,
            "revisions": revisions,
            "revision_links": revision_links(assistant, revisions),
            "tab": "memory",
            "index": index_status(assistant, document),
        },
        partial="document-body",
    )


class BlameLine(LineProvenance):
    """A provenance entry with a short label of its origin."""

    label: str


def _blame_line(entry: LineProvenance) -> BlameLine:
    """A provenance entry with a short label of its origin, for the document's "Who wrote it" view."""
    origin: Mapping[str, Any] = entry["origin"]
    kind = origin.get("kind", "unknown")
    who = {
        "person": origin.get("user") or "a person",
        "api_key": f"key {(origin.get('api_key') or {}).get('name', '')}",
        "agent": f"agent{' · session ' + str(origin['session']) if origin.get('session') else ''}",
        "flush": f"flush · session {origin.get('session')}",
        "import": f"import {origin.get('import')}",
        "proposal": f"proposal {origin.get('proposal')}",
    }.get(kind, "unknown")
    return {**entry, "label": who}


class DocumentForm(forms.Form):
    content = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 22, "spellcheck": "false"}), required=False, strip=False
    )
    expected_hash = forms.CharField(widget=forms.HiddenInput, required=False)


class NewDocumentForm(forms.Form):
    path = forms.CharField(
        max_length=255,
        help_text="MEMORY.md, or memory/<name>.md (folders allowed).",
        widget=forms.TextInput(attrs={"placeholder": "memory/projects.md", "autocomplete": "off"}),
    )
    content = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 16, "spellcheck": "false"}), required=False, strip=False
    )

    def __init__(self, *args: Any, assistant: Assistant, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.assistant = assistant

    def clean_path(self) -> str:
        path = self.cleaned_data["path"].strip()
        try:
            validate_memory_path(path)
        except InvalidPath as error:
            raise forms.ValidationError(f"Not a memory path: {error}.") from None
        if MemoryDocument.objects.filter(assistant=self.assistant, path=path).exists():
            raise forms.ValidationError(f"{path} already exists; open it to edit it.")
        return path


def _check_size(form: forms.Form) -> None:
    from django.conf import settings

    content = form.cleaned_data.get("content") or ""
    size = len(content.encode())
    if size > settings.MAX_MEMORY_DOCUMENT_BYTES:
        form.add_error(
            "content", f"The document is {size} bytes; the limit is {settings.MAX_MEMORY_DOCUMENT_BYTES}."
        )


@require_http_methods(["GET", "POST"])
@team_view
def memory_edit(request: WebRequest, slug: str, path: str) -> HttpResponse:
    """Edit a document; a save makes a revision, and a stale save (someone saved since) is refused."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    document = document_get(assistant=assistant, path=path)
    request.web.require(Role.MEMBER)
    if request.method == "GET":
        form = DocumentForm(initial={"content": document.content, "expected_hash": document.content_hash})
        return render_page(
            request,
            "memory/edit.html",
            {"assistant": assistant, "document": document, "form": form, "tab": "memory"},
            partial="edit-form",
        )
    form = DocumentForm(request.POST)
    if form.is_valid():
        _check_size(form)
    if form.is_valid():
        try:
            _, revision = write_document(
                assistant=assistant,
                path=path,
                content=form.cleaned_data["content"],
                provenance=_provenance(request),
                expected_hash=form.cleaned_data["expected_hash"] or None,
            )
        except StaleWrite:
            form.add_error(
                "content",
                "Someone saved this document after you opened it. Copy your text, reload, "
                "and apply your change again; nothing was saved.",
            )
        else:
            messages.success(request, f"Saved {path}." if revision else f"No changes to {path}.")
            return _redirect(request, document_url(assistant, path))
    return render_page(
        request,
        "memory/edit.html",
        {"assistant": assistant, "document": document, "form": form, "tab": "memory"},
        partial="edit-form",
        status=UNPROCESSABLE,
    )


@require_http_methods(["GET", "POST"])
@team_view
def memory_new(request: WebRequest, slug: str) -> HttpResponse:
    """Create a document; the path is checked with the rules OpenClaw indexes by."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    request.web.require(Role.MEMBER)
    initial = {"path": request.GET.get("path", "")}
    form = NewDocumentForm(request.POST or None, assistant=assistant, initial=initial)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            _check_size(form)
        if form.is_valid():
            path = form.cleaned_data["path"]
            write_document(
                assistant=assistant,
                path=path,
                content=form.cleaned_data["content"],
                provenance=_provenance(request),
                expected_hash="",
            )
            messages.success(request, f"Created {path}.")
            return _redirect(request, document_url(assistant, path))
        status = UNPROCESSABLE
    return render_page(
        request,
        "memory/new.html",
        {"assistant": assistant, "form": form, "tab": "memory"},
        partial="new-form",
        status=status,
    )


@require_http_methods(["GET", "POST"])
@team_view
def memory_delete(request: WebRequest, slug: str, path: str) -> HttpResponse:
    """Delete a document; its revisions stay, so it can be restored."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    document = document_get(assistant=assistant, path=path)
    request.web.require(Role.MEMBER)
    if request.method == "GET":
        return confirm_page(
            request,
            Confirmation(
                question=f"Delete {document.path}?",
                consequence="Search stops finding it and its exported file is removed; its revisions are "
                "kept under Deleted documents, where you can restore it.",
                button="Delete",
                cancel_url=reverse("memory-document", args=[assistant.slug, document.path]),
            ),
        )
    delete_document(document=document, provenance=_provenance(request))
    messages.success(request, f"Deleted {path}. Its revisions are kept under Deleted documents.")
    return _redirect(request, reverse("memory", args=[assistant.slug]))


class RenameDocumentForm(forms.Form):
    path = forms.CharField(max_length=255, label="New path")


@require_POST
@team_view
def memory_rename(request: WebRequest, slug: str, path: str) -> HttpResponse:
    """Move a document to another path (members); its revisions go with it."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    document = document_get(assistant=assistant, path=path)
    request.web.require(Role.MEMBER)
    form = RenameDocumentForm(request.POST)
    new_path = form.cleaned_data["path"].strip() if form.is_valid() else ""
    try:
        document = rename_document(document=document, new_path=new_path, provenance=_provenance(request))
    except InvalidPath as error:
        messages.error(request, f"Not renamed: {new_path or 'an empty path'} is not a memory path ({error}).")
    except PathTaken as error:
        messages.error(request, f"Not renamed: {error.message}")
    else:
        messages.success(request, f"Renamed {path} to {document.path}; its revisions moved with it.")
    return _redirect(request, document_url(assistant, document.path))


# --- revisions --------------------------------------------------------------------------------


def _diff(before: str, after: str, *, before_name: str, after_name: str) -> list[tuple[str, str]]:
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), before_name, after_name, lineterm="", n=3
    )
    kinds = {"+": "add", "-": "del", "@": "hunk"}
    return [
        (kinds.get(line[:1], "ctx") if not line.startswith(("+++", "---")) else "file", line)
        for line in lines
    ]


@require_GET
@team_view
def memory_revision(request: WebRequest, slug: str, pk: int) -> HttpResponse:
    """One revision: its text and what it changed against the revision before it."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    revision = revision_get(assistant=assistant, pk=pk)
    previous = revision_before(revision=revision)
    document = document_find(assistant=assistant, path=revision.path)
    diff = _diff(
        previous.content if previous else "",
        revision.content,
        before_name=f"revision {previous.pk}" if previous else "(nothing)",
        after_name=f"revision {revision.pk}",
    )
    return render_page(
        request,
        "memory/revision.html",
        {
            "assistant": assistant,
            "revision": revision,
            "previous": previous,
            "document": document,
            "diff": diff,
            "link": revision_links(assistant, [revision]).get(revision.pk),
            "tab": "memory",
            "is_current": document is not None and document.content_hash == revision.content_hash,
        },
        partial="revision-body",
    )


@require_POST
@team_view
def memory_revert(request: WebRequest, slug: str, pk: int) -> HttpResponse:
    """Restore a document's text from a revision (recreating it if it was deleted)."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    revision = revision_get(assistant=assistant, pk=pk)
    request.web.require(Role.MEMBER)
    document = document_find(assistant=assistant, path=revision.path)
    note = f"reverted to revision {revision.pk}"
    if document is None:
        write_document(
            assistant=assistant,
            path=revision.path,
            content=revision.content,
            provenance=_provenance(request, note),
            expected_hash="",
        )
    else:
        revert_document(document=document, revision=revision, provenance=_provenance(request, note))
    messages.success(request, f"{revision.path} now has the text of revision {revision.pk}.")
    return _redirect(request, document_url(assistant, revision.path))


@require_POST
@team_view
def memory_reindex(request: WebRequest, slug: str) -> HttpResponse:
    """Queue a reindex of the assistant's memory and transcripts; its progress shows on the jobs page.

    The same tracked task as ``POST /api/v1/assistants/{slug}/reindex/``, so `GET /tasks/{id}/`
    and the jobs page follow it alike.
    """
    assistant = assistant_get(team=request.web.team, slug=slug)
    request.web.require(Role.MEMBER)
    full = request.POST.get("full") == "on"
    queue_reindex(assistant, full=full)
    messages.success(request, f"{'Full reindex' if full else 'Reindex'} of {assistant.name} queued.")
    return _redirect(request, reverse("jobs"))


@require_GET
@team_view
def memory_deleted(request: WebRequest, slug: str) -> HttpResponse:
    """Documents that were deleted, with their last revision to restore from."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    return render_page(
        request,
        "memory/deleted.html",
        {"assistant": assistant, "deleted": deleted_document_list(assistant=assistant), "tab": "memory"},
    )


# --- index status ----------------------------------------------------------------------------

INDEX_POLL_WINDOW = timedelta(minutes=2)


def index_status(assistant: Assistant, document: MemoryDocument) -> dict[str, Any]:
    """Say whether search already answers from the document's current text.

    A save bumps the document's content hash at once, while the reindex task (debounced, then
    run by a worker) rewrites its chunks later: the chunks of the live generation carry the hash
    of the text they came from, so "indexed" means they all carry the current one.
    """
    from memory_app.models import FTS_ONLY_MODEL, IndexState, MemoryChunk, Source

    state = IndexState.objects.filter(assistant=assistant).first()
    if not document.content.strip():
        return {"indexed": True, "chunks": 0, "text_only": False, "error": ""}
    chunks = MemoryChunk.objects.filter(
        assistant=assistant,
        source=Source.MEMORY,
        path=document.path,
        generation=state.active_generation if state else 1,
    )
    total = chunks.count()
    current = total > 0 and not chunks.exclude(source_hash=document.content_hash).exists()
    text_only = current and chunks.filter(model=FTS_ONLY_MODEL).exists()
    # Poll for a couple of minutes after a save; past that a worker is not picking the task up.
    recent = timezone.now() - document.updated_at < INDEX_POLL_WINDOW
    return {
        "indexed": current,
        "chunks": total,
        "text_only": text_only,
        "recent": recent,
        "error": (state.last_error if state else "") if not current else "",
    }


@require_GET
@team_view
def memory_index_status(request: WebRequest, slug: str, path: str) -> HttpResponse:
    """The little "indexed / indexing…" badge of a document, polled while a reindex runs."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    document = document_get(assistant=assistant, path=path)
    return render_page(
        request,
        "memory/document.html",
        {
            "assistant": assistant,
            "document": document,
            "index": index_status(assistant, document),
            "tab": "memory",
            "lines": _numbered_lines(document.content, None),
            "revisions": [],
            "revision_links": {},
        },
        partial="index-status",
    )


# --- search -----------------------------------------------------------------------------------


class SearchForm(forms.Form):
    q = forms.CharField(
        label="Query",
        max_length=2000,
        required=False,
        widget=forms.TextInput(
            attrs={"type": "search", "autocomplete": "off", "placeholder": "What did we decide about…"}
        ),
    )
    sources = forms.MultipleChoiceField(
        choices=[("memory", "Memory"), ("sessions", "Past sessions")],
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label="Look in",
    )
    mmr = forms.BooleanField(required=False, label="Diversify (MMR)")
    decay = forms.BooleanField(required=False, label="Prefer recent (decay)")
    # Present when the whole form was submitted; a bare ?q= link uses the assistant's settings.
    opts = forms.CharField(widget=forms.HiddenInput, required=False, initial="1")


def _search_defaults(assistant: Assistant) -> dict[str, Any]:
    search = assistant.config.memory_search
    return {
        "sources": list(search.sources),
        "mmr": search.query.hybrid.mmr.enabled,
        "decay": search.query.hybrid.temporal_decay.enabled,
        "opts": "1",
    }


def _search_form(request: WebRequest, assistant: Assistant) -> SearchForm:
    if request.GET.get("opts"):
        return SearchForm(request.GET)
    return SearchForm({**_search_defaults(assistant), "q": request.GET.get("q", "")})


@dataclass(frozen=True)
class ResultView:
    """One search result with where its citation leads in the dashboard."""

    result: Any
    url: str
    label: str
    session_title: str = ""
    snippet: SafeString = field(default_factory=SafeString)  # the query's words marked (web/highlight.py)


def _result_url(assistant: Assistant, result: Any) -> str:
    """Where a citation leads: the document at its lines, or the session message it quotes.

    Transcript chunks cite message seqs as their "lines" (memory_app.index's line map), so a
    session result's start line is the seq of the first message it quotes.
    """
    if result.source == "memory":
        lines = max(1, result.end_line - result.start_line + 1)
        return f"{document_url(assistant, result.path)}?from={result.start_line}&lines={lines}#L{result.start_line}"
    if result.session_id:
        return reverse("session-message", args=[result.session_id, result.start_line])
    return ""


def _session_titles(assistant: Assistant, results: list[Any]) -> dict[int, str]:
    return session_links().titles(assistant, (r.session_id for r in results if r.session_id))


@require_GET
@team_view
def search(request: WebRequest, slug: str) -> HttpResponse:
    """Hybrid search over memory and past sessions, with each result's score parts explained."""
    from memory_app.search.hybrid import SearchOptionError
    from memory_app.search.service import search_memory

    assistant = assistant_get(team=request.web.team, slug=slug)
    form = _search_form(request, assistant)
    response, error, results, status = None, "", [], 200
    if form.is_valid() and form.cleaned_data["q"].strip():
        data = form.cleaned_data
        try:
            with team_slot(assistant.team_id, TeamWork.SEARCH):
                response = search_memory(
                    assistant=assistant,
                    query=data["q"],
                    sources=data["sources"] or None,
                    mmr=data["mmr"],
                    decay=data["decay"],
                    explain=True,
                )
        except SearchOptionError as problem:
            error = str(problem)
        except ApiError as busy:  # the team's searches take every slot (openclaw_site.usage.fair_share)
            error, status = busy.message, busy.status_code
        if response is not None:
            titles = _session_titles(assistant, response.results)
            results = [
                ResultView(
                    result=r,
                    url=_result_url(assistant, r),
                    label=r.citation,
                    session_title=titles.get(r.session_id, "") if r.session_id is not None else "",
                    snippet=mark_safe(highlight_html(r.snippet, data["q"])),
                )
                for r in response.results
            ]
    return render_page(
        request,
        "memory/search.html",
        {
            "assistant": assistant,
            "form": form,
            "response": response,
            "results": results,
            "error": error,
            "query": form.cleaned_data.get("q", "") if form.is_valid() else "",
            "tab": "search",
        },
        partial="results",
        status=status,
    )
