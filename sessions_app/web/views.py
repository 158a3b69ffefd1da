"""Dashboard pages for sessions: the list, the session page (gauge, transcript, chat, context,
compaction) and a message permalink.

The views call the context engine's domain functions (`sessions_app.context.build`, `.agent`,
`.compaction`) and render what they return; nothing here computes tokens or summaries itself.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseBase
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from openclaw_site.errors import DomainError
from openclaw_site.models import Role
from openclaw_site.platform.streaming import sse_event, streaming_response
from openclaw_site.selectors import assistant_get, usage_records
from openclaw_site.usage import ledger as usage
from openclaw_site.web.base import Confirmation, WebRequest, confirm_page, is_htmx, render_page, team_view
from sessions_app import selectors, services
from sessions_app.models import CompactionRun, Message, Session
from sessions_app.web import pages
from sessions_app.web.transcript import build_transcript, compaction_cards, covered_messages, message_view

UNPROCESSABLE = 422


def _redirect(request: WebRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if is_htmx(request) else redirect(url)


class NewSessionForm(forms.Form):
    title = forms.CharField(
        max_length=200,
        required=False,
        help_text="Optional; shown in the list.",
        widget=forms.TextInput(attrs={"placeholder": "Planning the launch"}),
    )
    key = forms.CharField(
        max_length=128,
        required=False,
        help_text="Optional stable key for API clients; a random one otherwise.",
    )


@require_http_methods(["GET", "POST"])
@team_view
def session_list(request: WebRequest, slug: str) -> HttpResponse:
    """An assistant's sessions, newest activity first; members start new ones."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    form = NewSessionForm(request.POST or None)
    status = 200
    if request.method == "POST":
        request.web.require(Role.MEMBER)
        if form.is_valid():
            try:
                session = pages.create_session(
                    assistant=assistant,
                    key=form.cleaned_data["key"] or None,
                    title=form.cleaned_data["title"],
                )
            except DomainError as error:  # key taken or malformed
                form.add_error("key", error.message)
            else:
                return _redirect(request, reverse("session", args=[session.pk]))
        status = UNPROCESSABLE
    archived = request.GET.get("archived") == "1"
    return render_page(
        request,
        "sessions/list.html",
        {
            "assistant": assistant,
            "sessions": selectors.session_list(assistant=assistant, archived=archived),
            "archived_count": selectors.session_list(assistant=assistant, archived=True).count(),
            "showing_archived": archived,
            "form": form,
            "tab": "sessions",
        },
        partial="session-list",
        status=status,
    )


def _page_context(request: WebRequest, session: Session) -> dict[str, Any]:
    gauge = pages.gauge(session)
    return {
        "session": session,
        "assistant": session.assistant,
        "tab": "sessions",
        "transcript": build_transcript(session),
        "gauge": gauge,
        "poll": _should_poll(session, gauge),
        "runs": _runs(session),
        "model": pages.model_status(session.assistant),
        "memory_writes": _memory_writes(session),
        "spent": usage.totals(usage_records(team=request.web.team, session_id=session.pk)),
    }


def _memory_writes(session: Session) -> list[Any]:
    """Memory revisions this session caused (flush and agent writes), newest first."""
    from memory_app.models import MemoryRevision

    return list(
        MemoryRevision.objects.filter(assistant=session.assistant, session_pk=session.pk).exclude(
            author="user"
        )[:8]
    )


def _runs(session: Session) -> list[CompactionRun]:
    return list(selectors.compaction_run_list(session=session)[:20])


def _session_page(request: WebRequest, session: Session, *, partial: str) -> HttpResponse:
    """Render the session page, or the one part of it an htmx request asks for (`render_page`)."""
    return render_page(request, "sessions/session.html", _page_context(request, session), partial=partial)


@require_GET
@team_view
def session_detail(request: WebRequest, pk: int) -> HttpResponse:
    """The session page: gauge, transcript, chat box, what the model sees, compaction."""
    return _session_page(request, selectors.session_get(team=request.web.team, pk=pk), partial="live")


@require_GET
@team_view
def session_gauge(request: WebRequest, pk: int) -> HttpResponse:
    """The context gauge alone (refreshed after each turn and while a compaction runs)."""
    return _session_page(request, selectors.session_get(team=request.web.team, pk=pk), partial="gauge")


@require_GET
@team_view
def session_transcript(request: WebRequest, pk: int) -> HttpResponse:
    """The transcript alone."""
    return _session_page(request, selectors.session_get(team=request.web.team, pk=pk), partial="transcript")


# Poll while maintenance is due, but not forever: a flush that keeps failing or a compaction that
# is refused leaves the session "due" until the next turn, and the page must not poll for hours.
POLL_WINDOW = timedelta(minutes=3)


def _should_poll(session: Session, gauge: Any) -> bool:
    return bool(gauge and gauge.busy) and timezone.now() - session.updated_at < POLL_WINDOW


@require_GET
@team_view
def session_refresh(request: WebRequest, pk: int) -> HttpResponse:
    """Transcript, gauge and runs at once (out-of-band), polled while a flush or compaction is due."""
    session = selectors.session_get(team=request.web.team, pk=pk)
    if not is_htmx(request):
        return redirect("session", pk=session.pk)
    return _session_page(request, session, partial="refresh")


@require_GET
@team_view
def session_runs(request: WebRequest, pk: int) -> HttpResponse:
    """The compaction runs with their states and flush outcomes (polled while one is active)."""
    return _session_page(request, selectors.session_get(team=request.web.team, pk=pk), partial="runs")


@require_GET
@team_view
def compaction_covered(request: WebRequest, pk: int, entry_id: str) -> HttpResponse:
    """The original messages one compaction entry summarised."""
    session = selectors.session_get(team=request.web.team, pk=pk)
    messages_ = list(Message.objects.filter(session=session).order_by("seq").only("seq", "entry_id"))
    card = next((c for c in compaction_cards(session, messages_) if c.entry.entry_id == entry_id), None)
    if card is None:
        raise Http404("No such compaction entry in this session.")
    return render_page(
        request,
        "sessions/covered.html",
        {
            "session": session,
            "assistant": session.assistant,
            "card": card,
            "groups": covered_messages(session, card),
            "tab": "sessions",
        },
        partial="covered",
    )


@require_GET
@team_view
def session_message(request: WebRequest, pk: int, seq: int) -> HttpResponse:
    """One message with its neighbours: where memory revisions and search citations link to."""
    session = selectors.session_get(team=request.web.team, pk=pk)
    message = selectors.message_get(session=session, seq=seq)
    around = Message.objects.filter(session=session, seq__gte=seq - 3, seq__lte=seq + 3).order_by("seq")
    return render_page(
        request,
        "sessions/message.html",
        {
            "session": session,
            "assistant": session.assistant,
            "target": message,
            "views": [message_view(m) for m in around],
            "tab": "sessions",
        },
    )


class ChatForm(forms.Form):
    text = forms.CharField(
        max_length=100_000, strip=True, error_messages={"required": "Type a message first."}
    )


@require_POST
@team_view
def session_chat(request: WebRequest, pk: int) -> HttpResponse:
    """Post a user message and run the assistant's turn (or `/compact [instructions]`)."""
    session = selectors.session_get(team=request.web.team, pk=pk)
    request.web.require(Role.MEMBER)
    form = ChatForm(request.POST)
    if not form.is_valid():
        return _composer_error(request, session, str(form.errors["text"][0]), status=UNPROCESSABLE)
    text = form.cleaned_data["text"]
    if is_htmx(request) and not pages.is_command(text):
        refusal = pages.turn_refusal(session.assistant)
        if refusal is not None:
            return _composer_error(request, session, refusal.error, status=refusal.status)
        return _start_streamed_turn(request, session, text)
    outcome = pages.chat(session=session, text=text)
    if outcome.error and not outcome.stored:
        return _composer_error(request, session, outcome.error, status=outcome.status)
    session.refresh_from_db()
    if not is_htmx(request):
        (messages.error if outcome.error else messages.info)(
            request, outcome.error or outcome.notice or "Sent."
        )
        return redirect(reverse("session", args=[session.pk]) + "#composer")
    # A failed turn keeps what it stored: the page shows the transcript as it is now, with the
    # error by the composer (a 200, so htmx swaps it in; the error is in the content).
    context = _page_context(request, session) | {
        "composer_error": outcome.error,
        "composer_notice": outcome.notice,
    }
    return render_page(request, "sessions/session.html", context, partial="chat-result")


# The text of a chat post waits in the browser's session until its event stream asks for it.
_PENDING_CHAT = "chat-stream:{session}:{token}"


def _start_streamed_turn(request: WebRequest, session: Session, text: str) -> HttpResponse:
    """Answer the post with the transcript and a live reply that connects to the turn's events."""
    token = secrets.token_urlsafe(12)
    request.session[_PENDING_CHAT.format(session=session.pk, token=token)] = text
    context = _page_context(request, session) | {
        "pending_text": text,
        "stream_url": reverse("session-chat-stream", args=[session.pk, token]),
    }
    return render_page(request, "sessions/session.html", context, partial="chat-streaming")


@require_GET
@team_view
def session_chat_stream(request: WebRequest, pk: int, token: str) -> HttpResponseBase:
    """Run the posted turn as server-sent events: `delta` (reply text), then `done` (the page's parts)."""
    session = selectors.session_get(team=request.web.team, pk=pk)
    request.web.require(Role.MEMBER)
    text = request.session.pop(_PENDING_CHAT.format(session=session.pk, token=token), None)
    if text is None:
        return HttpResponse(status=204)  # run already (an EventSource reconnecting): stop here
    return streaming_response(request, lambda: _chat_events(request, session, text))


def _chat_events(request: WebRequest, session: Session, text: str) -> Iterator[bytes]:
    outcome = pages.ChatOutcome()
    for item in pages.streamed_turn(session=session, text=text):
        if isinstance(item, str):
            yield sse_event(escape(item), event="delta")
        else:
            outcome = item
    session.refresh_from_db()
    context = _page_context(request, session) | {
        "composer_error": outcome.error,
        "composer_notice": outcome.notice,
    }
    yield sse_event(render_to_string("sessions/session.html#chat-streamed", context, request), event="done")


def _composer_error(request: WebRequest, session: Session, message: str, *, status: int) -> HttpResponse:
    context = _page_context(request, session) | {"composer_error": message}
    if not is_htmx(request):
        messages.error(request, message)
        return render_page(request, "sessions/session.html", context, status=status)
    response = render_page(
        request, "sessions/session.html", context, partial="composer-notice", status=status
    )
    response["HX-Retarget"] = "#composer-notice"
    response["HX-Reswap"] = "outerHTML"
    return response


@require_GET
@team_view
def session_context(request: WebRequest, pk: int) -> HttpResponse:
    """What the model sees: the compaction view after pruning, with trimmed and cleared results marked."""
    session = selectors.session_get(team=request.web.team, pk=pk)
    return render_page(
        request,
        "sessions/context.html",
        {
            "session": session,
            "assistant": session.assistant,
            "context": pages.model_context(session),
            "tab": "sessions",
        },
        partial="context",
    )


class CompactForm(forms.Form):
    instructions = forms.CharField(
        max_length=4000,
        required=False,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "Focus on decisions and open TODOs"}),
        help_text="Optional focus for the summary (at most 800 characters are used).",
    )


@require_http_methods(["GET", "POST"])
@team_view
def session_compact(request: WebRequest, pk: int) -> HttpResponse:
    """GET: the dry-run preview (nothing written). POST: compact now (members)."""
    session = selectors.session_get(team=request.web.team, pk=pk)
    form = CompactForm(request.POST or request.GET or None)
    instructions = form.cleaned_data["instructions"] if form.is_valid() else ""
    if request.method == "GET":
        preview = pages.compaction_preview(session=session, instructions=instructions)
        return render_page(
            request,
            "sessions/compact.html",
            {
                "session": session,
                "assistant": session.assistant,
                "form": form,
                "preview": preview,
                "tab": "sessions",
            },
            partial="preview",
        )
    request.web.require(Role.MEMBER)
    if not form.is_valid():
        return render_page(
            request,
            "sessions/compact.html",
            {
                "session": session,
                "assistant": session.assistant,
                "form": form,
                "preview": None,
                "tab": "sessions",
            },
            partial="preview",
            status=UNPROCESSABLE,
        )
    result = pages.compact(session=session, instructions=instructions)
    if not Session.objects.filter(pk=session.pk).exists():  # deleted while it was compacted
        messages.error(request, result.message)
        return _redirect(request, reverse("sessions", args=[session.assistant.slug]))
    if not is_htmx(request):
        (messages.success if result.ok else messages.error)(request, result.message)
        return redirect("session", pk=session.pk)
    session.refresh_from_db()
    context = _page_context(request, session) | {"compact_result": result}
    return render_page(request, "sessions/session.html", context, partial="compact-result")


# --- everyday actions: rename, archive, delete, retry -------------------------------------------


class RenameSessionForm(forms.Form):
    title = forms.CharField(max_length=200, required=False, strip=True)


@require_POST
@team_view
def session_rename(request: WebRequest, pk: int) -> HttpResponse:
    """Give a session a new title (members); an htmx request gets the page's toolbar back."""
    session = selectors.session_get(team=request.web.team, pk=pk)
    request.web.require(Role.MEMBER)
    form = RenameSessionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "A title has at most 200 characters.")
        return _redirect(request, reverse("session", args=[session.pk]))
    session = services.session_update(session=session, title=form.cleaned_data["title"])
    if is_htmx(request):
        return render_page(request, "sessions/session.html", {"session": session}, partial="session-toolbar")
    messages.success(request, "Renamed the session.")
    return redirect("session", pk=session.pk)


@require_http_methods(["GET", "POST"])
@team_view
def session_archive(request: WebRequest, pk: int) -> HttpResponse:
    """Archive a session or bring it back (members); its transcript and export stay."""
    session = selectors.session_get(team=request.web.team, pk=pk)
    request.web.require(Role.MEMBER)
    if request.method == "GET":
        return confirm_page(
            request,
            Confirmation(
                question=f"Archive “{session.title or session.key}”?",
                consequence="It leaves the list of sessions; its transcript and exported file stay, "
                "and you can restore it.",
                button="Archive",
                cancel_url=reverse("session", args=[session.pk]),
                fields=(("archived", "1"),),
            ),
        )
    archived = request.POST.get("archived") != "0"
    services.session_archive(session=session, archived=archived)
    messages.success(request, "Archived the session." if archived else "Restored the session.")
    return _redirect(request, reverse("session", args=[session.pk]))


@require_http_methods(["GET", "POST"])
@team_view
def session_delete(request: WebRequest, pk: int) -> HttpResponse:
    """Delete a session with its transcript, compactions and exported file (members)."""
    session = selectors.session_get(team=request.web.team, pk=pk)
    request.web.require(Role.MEMBER)
    if request.method == "GET":
        return confirm_page(
            request,
            Confirmation(
                question=f"Delete “{session.title or session.key}”?",
                consequence="This removes its transcript, compactions and exported file. It cannot be undone.",
                button="Delete session",
                cancel_url=reverse("session", args=[session.pk]),
            ),
        )
    services.session_delete(session=session)
    messages.success(request, f"Deleted {session.title or 'the session'}.")
    return _redirect(request, reverse("sessions", args=[session.assistant.slug]))


@require_POST
@team_view
def session_retry(request: WebRequest, pk: int) -> HttpResponse:
    """Run a failed turn again on its user message (members); answers like the chat box does."""
    session = selectors.session_get(team=request.web.team, pk=pk)
    request.web.require(Role.MEMBER)
    outcome = pages.retry(session=session)
    if not is_htmx(request):
        (messages.error if outcome.error else messages.info)(
            request, outcome.error or outcome.notice or "Retried."
        )
        return redirect(reverse("session", args=[session.pk]) + "#composer")
    session.refresh_from_db()
    context = _page_context(request, session) | {
        "composer_error": outcome.error,
        "composer_notice": outcome.notice,
    }
    return render_page(request, "sessions/session.html", context, partial="chat-result")
