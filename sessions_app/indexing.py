"""Session transcripts in the memory search index (docs/openclaw-behaviour.md §4.11, docs/design.md §D10).

A transcript is rendered as one line per user or assistant message (`User: ...` /
`Assistant: ...`; no tool results, no system messages, no silent flush turns), whitespace
collapsed and secrets redacted. Line i cites its message ``seq`` and carries the message time, so
results point at ``sessions/<key>.jsonl#L<seq>-L<seq>`` and decay by when things were said.

When: after ``deltaBytes`` bytes or ``deltaMessages`` messages arrived since the last index, 5 s
after the first such request (`SESSION_INDEX_DEBOUNCE_SECONDS`; later requests join that batch,
as OpenClaw's session watcher does), and after each compaction (``postCompactionForce``).
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import IntegrityError
from django.db.models import CharField, Count, F, OuterRef, Q, Subquery, Sum, TextField
from django.db.models.functions import Cast, Length
from django.utils import timezone

from memory_app.governance.forgotten import is_forgotten_session
from memory_app.index import config, debounce
from memory_app.index.entries import Growth, SourceEntry, register_source
from memory_app.index.extend import extend_entry, fill_from_newest, growth_point, worth_a_helper
from memory_app.index.rows import IndexOutcome, IndexOutcomeReport, index_entry, remove_entry_rows
from memory_app.index.status import register_index_job_kinds
from memory_app.models import ForgottenSource, IndexedSource, Source
from openclaw_site.jobs.runs import Skipped, WorkGone, defer_until, queued, queued_or_running, report_progress
from openclaw_site.jobs.status import fail_if_lock_gone, others_running, others_waiting
from openclaw_site.jobs.tasks import enqueue
from openclaw_site.platform.locks import LockTimeout, session_lock
from sessions_app.models import CompactionEntry, Message, Role, Session
from sessions_app.redaction import redact_sensitive_text
from sessions_app.selectors import session_owner

logger = logging.getLogger(__name__)

_WHITESPACE = re.compile(r"\s+")
_LABELS = {Role.USER: "User", Role.ASSISTANT: "Assistant"}


@dataclass(frozen=True)
class TranscriptLines:
    lines: list[str]
    seqs: list[int]
    times: list[Any]


def message_text(content: Any) -> str:
    """Return a message's text: the string, or its text blocks joined by a space."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block.get("text", "")
            for block in content
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        ]
        return " ".join(parts)
    return ""


def transcript_lines(messages: Any) -> TranscriptLines:
    """Render user/assistant messages as redacted one-line `User:`/`Assistant:` entries."""
    lines, seqs, times = [], [], []
    for message in messages:
        if message.role not in _LABELS or message.silent:
            continue
        text = _WHITESPACE.sub(" ", message_text(message.content)).strip()
        if not text:
            continue
        lines.append(f"{_LABELS[message.role]}: {redact_sensitive_text(text)}")
        seqs.append(message.seq)
        times.append(message.created_at)
    return TranscriptLines(lines, seqs, times)


def session_path(session: Session) -> str:
    """Return the path search results cite: the session's file in the export mirror."""
    return f"sessions/{session.key}.jsonl"


def session_entry(session: Session, *, from_seq: int = 1) -> SourceEntry:
    """Return the session's transcript as an index entry (hash as in docs/openclaw-behaviour.md §4.11).

    ``from_seq`` renders only the messages from that seq on: the tail that extends an index
    (memory_app.index.extend.extend_entry).
    """
    messages = (
        Message.objects.filter(session=session, seq__gte=from_seq)
        .only("seq", "role", "content", "silent", "created_at")
        .order_by("seq")
    )
    rendered = transcript_lines(messages)
    content = "\n".join(rendered.lines)
    stamps = [str(int(t.timestamp() * 1000)) for t in rendered.times]
    digest = hashlib.sha256(
        f"{content}\n{','.join(map(str, rendered.seqs))}\n{','.join(stamps)}".encode()
    ).hexdigest()
    return SourceEntry(
        source=Source.SESSIONS,
        path=session_path(session),
        content=content,
        source_hash=digest,
        session_pk=session.pk,
        line_map=tuple(rendered.seqs),
        line_times=tuple(rendered.times),
        timestamp=rendered.times[-1] if rendered.times else None,
        upto=session.last_seq,
    )


class SessionTranscripts:
    """The `ExternalSource` that lets a full reindex of memory_app cover transcripts."""

    def keys(self, assistant_id: int, *, changed_only: bool = False) -> list[str]:
        forgotten = ForgottenSource.objects.filter(assistant_id=assistant_id, kind="session").values("key")
        sessions = Session.objects.filter(assistant_id=assistant_id).exclude(pk__in=forgotten)
        if changed_only:
            # Transcripts only grow: one whose last seq was indexed has nothing new.
            indexed = IndexedSource.objects.filter(
                assistant_id=assistant_id, source=Source.SESSIONS, key=Cast(OuterRef("pk"), CharField())
            )
            sessions = sessions.annotate(upto=Subquery(indexed.values("indexed_upto")[:1])).filter(
                Q(upto__isnull=True) | Q(upto__lt=F("last_seq"))
            )
        return [str(pk) for pk in sessions.order_by("pk").values_list("pk", flat=True)]

    def load(self, assistant_id: int, key: str) -> SourceEntry | None:
        if is_forgotten_session(int(key)):  # forgotten: never indexed again (memory_app.governance.forget)
            return None
        session = Session.objects.filter(assistant_id=assistant_id, pk=int(key)).first()
        return session_entry(session) if session is not None else None

    def is_current(self, entry: SourceEntry) -> bool:
        # Transcripts only grow; an older snapshot is still true, and `upto` keeps a slower run
        # from replacing a newer one (memory_app.index.rows.write_entry).
        return entry.session_pk is not None and Session.objects.filter(pk=entry.session_pk).exists()

    def schedule(self, assistant_id: int, keys: Sequence[str]) -> None:
        # The session's one index job (coalesced), which extends the transcript in slices.
        sessions = Session.objects.select_related("assistant").filter(
            assistant_id=assistant_id, pk__in=[int(k) for k in keys]
        )
        for session in sessions.order_by("pk"):
            _enqueue_index(session, force=False)


def index_session_transcript(session_id: int, force: bool = False) -> IndexOutcome:
    """Index a session's transcript now (``force``: rewrite its rows even if unchanged).

    A transcript only grows, so an index run reads and re-chunks only what came after the start
    of its last indexed chunk (docs/design.md §D10); the whole transcript is read when there is
    no index to extend, or when ``force`` asks for it.
    """
    session = Session.objects.select_related("assistant").filter(pk=session_id).first()
    if session is None or is_forgotten_session(
        session_id
    ):  # forgotten: not indexed (memory_app.governance.forget)
        return IndexOutcome()
    try:
        outcome = None if force else _extend_in_slices(session)
        if outcome is None:
            outcome = index_entry(session.assistant, session_entry(session), force=force)
    except (IntegrityError, ObjectDoesNotExist):  # a write for a session (or assistant) deleted meanwhile
        _stop_if_deleted(session)
        raise
    _stop_if_deleted(session)
    return outcome


SESSION_DELETED = (
    "the session was deleted while its transcript was being indexed; the rows this run wrote were removed."
)


def _stop_if_deleted(session: Session) -> None:
    """Stop a run whose session was deleted meanwhile (`WorkGone`), removing what it wrote.

    The delete removes the transcript's index rows (`_after_session_delete`), but a run that
    wrote a slice after that would leave rows of a transcript nobody has; each run looks after
    every slice it writes and takes them away (docs/design.md, Background work).
    """
    if Session.objects.filter(pk=session.pk).exists():
        return
    _drop_index_rows(session.assistant_id, session.pk)
    raise WorkGone(SESSION_DELETED)


def _extend_in_slices(session: Session) -> IndexOutcome | None:
    """Extend the transcript's index slice by slice; None when only a whole pass will do.

    A slice with vectors left is followed by the next one in the same run while no other job
    waits in the queue; once one does, the rest goes to the back of the queue, behind it. The
    session's own next job, queued meanwhile (a change, the periodic refresh), waits for this run:
    once it may start, the rest is folded into it, which keeps it from waiting behind the whole
    transcript; and after `SESSION_INDEX_RUN_SECONDS` the rest is queued in any case (docs/design.md,
    "A transcript indexed in slices, text first, vectors after").
    """
    budget = settings.SESSION_INDEX_SLICE_SECONDS or None
    ends = time.monotonic() + settings.SESSION_INDEX_RUN_SECONDS
    done: IndexOutcome | None = None
    while True:
        growth = growth_point(session.assistant, source=Source.SESSIONS, session_pk=session.pk)
        if growth is None:
            return _queue_rest(session, done)
        if session.last_seq <= growth.upto and not growth.pending:
            return done or IndexOutcome(skipped=1, note="up to date")
        if done is not None:  # going on past a slice: maybe with a helper
            _ask_for_help(session, growth)
        tail = session_entry(session, from_seq=growth.line)
        outcome = extend_entry(session.assistant, tail, growth=growth, budget_seconds=budget)
        if outcome is None:
            return _queue_rest(session, done)
        _stop_if_deleted(session)
        _report_vectors(outcome)
        if done is not None:
            outcome.add(done)
            outcome.entries = 1
        done = outcome
        if not outcome.more:
            return outcome
        if time.monotonic() >= ends or _others_waiting(session) or _next_job_may_start(session):
            return _queue_rest(session, outcome)


def _others_waiting(session: Session) -> bool:
    """Tell whether a job other than this transcript's index run and helper is queued."""
    return others_waiting(except_key=(_index_key(session, force=False), _fill_key(session)))


def _ask_for_help(session: Session, growth: Growth) -> None:
    """Queue the transcript's vector helper when this run is the only task in sight.

    Nothing else queued or running means a worker (a core) is idle while this run embeds on
    one: the helper (`fill_session_vectors`) embeds the waiting rows from the newest back on it,
    once enough of them wait before the last chunk (`HELPER_MIN_ROWS`). With other work about,
    the workers have it, and the helper would only take turns from it. A helper record that is
    running without its lock lost its worker and is failed, so it stands in the way of neither
    this nor other runs.
    """
    key = _fill_key(session)
    helper_about = queued_or_running(key) and not fail_if_lock_gone(
        key, lock=_helper_lock(session), grace_seconds=HELPER_START_GRACE_SECONDS
    )
    if helper_about or others_running():
        return
    if not worth_a_helper(session.assistant, source=Source.SESSIONS, session_pk=session.pk, growth=growth):
        return
    enqueue(
        "sessions_app.tasks.fill_session_vectors",
        session.pk,
        owner=session_owner(session=session),
        task_name=f"fill-session-{session.pk}",
        coalesce_key=key,
    )


def fill_session_vectors(session_id: int) -> dict[str, Any]:
    """Task body: embed a busy transcript's waiting rows from the newest back, beside its index run.

    Slice after slice, as the run does, until none is left before the transcript's last chunk,
    `SESSION_INDEX_RUN_SECONDS` have passed, or another job waits; what is left the index run
    embeds in any case, so the helper never queues itself again (docs/design.md, "A helper for a
    lone transcript's vectors"). It holds the transcript's helper lock while it works: that the
    lock is gone tells its run that the helper's worker died.
    """
    session = Session.objects.select_related("assistant").filter(pk=session_id).first()
    if session is None:
        return {"skipped": "session deleted"}
    try:
        with session_lock(_helper_lock(session), timeout_seconds=0):
            return _fill_while_worth_it(session)
    except LockTimeout:
        return {"skipped": "another helper is at work on this transcript"}


def _fill_while_worth_it(session: Session) -> dict[str, Any]:
    budget = settings.SESSION_INDEX_SLICE_SECONDS  # asked for only by a sliced run
    ends = time.monotonic() + settings.SESSION_INDEX_RUN_SECONDS
    embedded = 0
    while True:
        filled = fill_from_newest(
            session.assistant, source=Source.SESSIONS, session_pk=session.pk, budget_seconds=budget
        )
        if filled is None:
            return {"embedded": embedded, "note": "nothing to help with"}
        embedded += filled.embedded
        _stop_if_deleted(session)
        if not filled.more:
            return {"embedded": embedded, "note": "no waiting rows left before the last chunk"}
        if time.monotonic() >= ends or _others_waiting(session):
            return {"embedded": embedded, "note": "left the rest to the index run"}


def _next_job_may_start(session: Session) -> bool:
    """Tell whether the session's next index job is queued and would run if it had the transcript.

    A change, or the periodic refresh, queued it while this run went on; with its debounce still
    ahead it would only go back to the queue, so this run goes on until then.
    """
    key = _index_key(session, force=False)
    return queued(key) and not debounce.is_ahead(
        assistant_id=session.assistant_id, source=Source.SESSIONS, key=str(session.pk)
    )


def _queue_rest(session: Session, done: IndexOutcome | None) -> IndexOutcome | None:
    """Queue the session's index job again if ``done`` left vectors to add; return ``done``."""
    if done is not None and done.more:
        _enqueue_index(session, force=False)
    return done


def _report_vectors(outcome: IndexOutcome) -> None:
    """Show on the Jobs page how far a transcript's vectors are (its text is all searchable)."""
    if outcome.lines and outcome.lines_with_vectors is not None:
        done, total = outcome.lines_with_vectors, outcome.lines
        message = (
            f"text searchable; vectors up to message {done:,} of {total:,}"
            if done < total
            else "vectors complete"
        )
        report_progress(done, total, message)


def pending_delta(session: Session) -> tuple[int, int]:
    """Return (bytes, messages) appended since the transcript was last indexed."""
    ticket = (
        IndexedSource.objects.filter(
            assistant_id=session.assistant_id, source=Source.SESSIONS, key=str(session.pk)
        )
        .values("indexed_upto")
        .first()
    )
    upto = ticket["indexed_upto"] if ticket else 0
    # Length of the stored JSON text: close to the bytes the JSONL file grows by.
    stats = Message.objects.filter(session=session, seq__gt=upto).aggregate(
        count=Count("id"), size=Sum(Length(Cast("content", TextField())))
    )
    return int(stats["size"] or 0), int(stats["count"] or 0)


def thresholds_reached(session: Session) -> bool:
    """Tell whether the new content passes `sync.sessions.deltaBytes` or `deltaMessages`."""
    sync = session.assistant.config.memory_search.sync.sessions
    pending_bytes, pending_messages = pending_delta(session)
    if pending_messages == 0:
        return False
    # docs/openclaw-behaviour.md §4.6: a threshold <= 0 means any change.
    delta_bytes, delta_messages = sync.delta_bytes, sync.delta_messages
    return (delta_bytes <= 0 or pending_bytes >= delta_bytes) or (
        delta_messages <= 0 or pending_messages >= delta_messages
    )


def index_is_due(session: Session) -> bool:
    """Tell whether this module's own rules ask for an index of what came since the last one.

    They do once the delta thresholds are reached, or when a compaction came after the last index
    (``postCompactionForce``). Below the thresholds a transcript waits for more messages or for the
    periodic refresh (memory_app.tasks.refresh_indexes).
    """
    if thresholds_reached(session):
        return True
    if not session.assistant.config.memory_search.sync.sessions.post_compaction_force:
        return False
    upto = (
        IndexedSource.objects.filter(
            assistant_id=session.assistant_id, source=Source.SESSIONS, key=str(session.pk)
        )
        .values_list("indexed_upto", flat=True)
        .first()
    )
    return CompactionEntry.objects.filter(session=session, seq__gt=upto or 0).exists()


def schedule_session_index(session_id: int, *, force: bool = False) -> bool:
    """Queue a debounced index of the transcript; return whether one was queued."""
    session = Session.objects.select_related("assistant").filter(pk=session_id).first()
    if session is None or Source.SESSIONS not in config.indexed_sources(session.assistant):
        return False
    debounce.request(
        assistant_id=session.assistant_id,
        source=Source.SESSIONS,
        key=str(session.pk),
        delay_seconds=settings.SESSION_INDEX_DEBOUNCE_SECONDS,
        max_delay_seconds=settings.SESSION_INDEX_DEBOUNCE_SECONDS,  # fixed: from the first request
    )
    _enqueue_index(session, force=force)
    return True


def _enqueue_index(session: Session, *, force: bool) -> None:
    enqueue(
        "sessions_app.tasks.index_session_transcript",
        session.pk,
        force,
        owner=session_owner(session=session),
        task_name=f"index-session-{session.pk}",
        coalesce_key=_index_key(session, force=force),
    )


def _index_key(session: Session, *, force: bool) -> str:
    return f"index-session:{session.pk}{':force' if force else ''}"


def _fill_key(session: Session) -> str:
    return f"fill-session:{session.pk}"


def _helper_lock(session: Session) -> str:
    return f"transcript-helper:{session.pk}"


# How long a helper may take from its record turning running to holding its lock; one running
# longer without it lost its worker (`fail_if_lock_gone`).
HELPER_START_GRACE_SECONDS = 10.0


def note_transcript_change(session_id: int) -> bool:
    """React to new messages: queue an index once the delta thresholds are reached."""
    session = Session.objects.select_related("assistant").filter(pk=session_id).first()
    if session is None or Source.SESSIONS not in config.indexed_sources(session.assistant):
        return False
    if not thresholds_reached(session):
        return False
    return schedule_session_index(session_id)


def run_debounced_index(session_id: int, force: bool = False) -> IndexOutcomeReport | Skipped:
    """Task body: index the transcript once the pending request is due.

    The session's one pending index job stands for every request folded into it: started before
    the request is due, it goes back to the queue until then (`defer_until`, memory_app.index.debounce).
    """
    session = Session.objects.filter(pk=session_id).values("assistant_id").first()
    if session is None:
        return {"skipped": "session deleted"}
    assistant_id, key = session["assistant_id"], str(session_id)
    try:
        with session_lock(f"transcript-index:{session_id}", timeout_seconds=0):
            due = debounce.take_turn(assistant_id=assistant_id, source=Source.SESSIONS, key=key)
            if due is not None:
                defer_until(due)
            return index_session_transcript(session_id, force=force).as_dict()
    except LockTimeout:
        # The run before this job is still going (a change queued this one meanwhile). Run side by
        # side, each would find the rows the other wrote and fall back to a whole pass.
        defer_until(timezone.now() + timedelta(seconds=BUSY_RETRY_SECONDS))


# How long a job waits in the queue when another run of the same transcript's index is under way.
BUSY_RETRY_SECONDS = 1.0


# --- signal wiring (called from SessionsAppConfig.ready) -------------------------------------


def _after_compaction(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    """Re-index the transcript after each compaction (`postCompactionForce`, docs/openclaw-behaviour.md §4.6)."""
    if not created:
        return
    from django.db import transaction

    session_id = instance.session_id

    def schedule() -> None:
        session = Session.objects.select_related("assistant").filter(pk=session_id).first()
        if session is None:
            return
        if session.assistant.config.memory_search.sync.sessions.post_compaction_force:
            schedule_session_index(session_id, force=False)

    transaction.on_commit(schedule)


def _after_session_delete(sender: Any, instance: Session, **kwargs: Any) -> None:
    """Drop a deleted session's chunks (no foreign key carries the delete over to memory_app)."""
    _drop_index_rows(instance.assistant_id, instance.pk)


def _drop_index_rows(assistant_id: int, session_id: int) -> None:
    remove_entry_rows(assistant_id=assistant_id, source=Source.SESSIONS, session_pk=session_id)
    IndexedSource.objects.filter(
        assistant_id=assistant_id, source=Source.SESSIONS, key=str(session_id)
    ).delete()


def connect() -> None:
    """Register transcripts with the indexer and hook compaction and session deletes."""
    from django.db.models.signals import post_delete, post_save

    register_source(Source.SESSIONS, SessionTranscripts())
    # A transcript's index jobs count toward its assistant's index state (memory_app.index.status).
    register_index_job_kinds("transcript_changed", "index_session_transcript", "fill_session_vectors")
    post_save.connect(
        _after_compaction, sender=CompactionEntry, dispatch_uid="transcript_index.after_compaction"
    )
    post_delete.connect(
        _after_session_delete, sender=Session, dispatch_uid="transcript_index.after_session_delete"
    )
