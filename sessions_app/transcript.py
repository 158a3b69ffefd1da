"""Appending to a session's transcript and reading it back in OpenClaw's shapes.

`append_messages` is the only writer of messages: it takes the session row lock, so concurrent
appends get gap-free, unique ``seq`` values (one sequence shared with compaction entries).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Required, TypedDict

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BigIntegerField, Func, Sum, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from memory_app.tokens import estimate_message_tokens
from openclaw_site.jobs.tasks import coalesced, enqueue_coalesced
from openclaw_site.platform.row_sql import RowInsert, RowRead
from openclaw_site.teams.services import check_writable
from providers.message_types import AgentMessage
from sessions_app.messages import MessageInput, epoch_ms
from sessions_app.models import CompactionEntry, Message, Session, new_entry_id
from sessions_app.selectors import session_owner

# Every append and turn starts here (docs/design.md, Request cost).
_LOCKED_SESSION = RowRead(
    Session, "assistant", "assistant__team", where="t0.id = %s", suffix="FOR NO KEY UPDATE OF t0"
)
_SESSION = RowRead(Session, "assistant", "assistant__team", where="t0.id = %s")


def read_session(session_id: int) -> Session:
    """Return the session as stored now, with its assistant and team (not locked)."""
    return _SESSION.get([session_id])


def lock_session(session_id: int) -> Session:
    """Return the session row locked until the end of the current transaction."""
    # The session row only (`OF t0`): a lock on the joined assistant and team rows would serialise
    # every append of a team. FOR NO KEY UPDATE, the lock an UPDATE takes: appends still
    # take turns, but a foreign-key check on the row (a compaction run or entry another transaction
    # inserts, which locks it FOR KEY SHARE) does not wait for it, so the two cannot deadlock
    # (docs/design.md, Data model).
    return _LOCKED_SESSION.get([session_id])


def take_seq(session: Session) -> int:
    """Advance the locked session's shared sequence and return the new value."""
    session.last_seq += 1
    return session.last_seq


def unique_entry_id(session: Session, taken: set[str]) -> str:
    """Return an 8-hex id unused in the session (Pi checks collisions the same way, docs/openclaw-behaviour.md §1.1).

    Two queries: for the one entry id of a compaction. Appended messages get theirs from
    `_insert_with_fresh_ids`, which needs no query per message.
    """
    for _ in range(100):
        candidate = new_entry_id()
        if candidate in taken:
            continue
        clash = (
            Message.objects.filter(session=session, entry_id=candidate).exists()
            or CompactionEntry.objects.filter(session=session, entry_id=candidate).exists()
        )
        if not clash:
            taken.add(candidate)
            return candidate
    raise RuntimeError("could not find a free entry id")


# 32 random bits per id: a clash with an existing message is about one in 4 billion per message,
# so a retry is rare and one is nearly always enough.
MAX_ENTRY_ID_ATTEMPTS = 5


@transaction.atomic
def append_messages(
    *,
    session_id: int,
    messages: Iterable[MessageInput],
    silent: bool = False,
    flush_turn: bool = False,
    announce: bool = True,
    writable_checked: bool = False,
) -> list[Message]:
    """Append messages atomically (all or nothing) and return the stored rows.

    The cost follows the batch, not the history: one lock, one multi-row insert, one update of
    the session's counters (docs/design.md §D11). ``flush_turn``: the rows are a memory flush
    turn's (silent, and outside the model's view). ``announce=False`` leaves queuing the export
    and the indexer (`after_transcript_change`) to the caller, which stores more first (a turn).
    ``writable_checked``: a running turn's own output, whose turn checked the assistant writable
    when it began (`sessions_app.turn.loop.stream_turn`); every other append checks it here.
    Each row's ``session`` is the locked session as the append left it (its counters current).
    """
    session = lock_session(session_id)
    if not writable_checked:
        check_writable(session.assistant)
    now = timezone.now()
    rows = [
        _build(session, item, now=now, silent=silent or flush_turn or item.silent, flush_turn=flush_turn)
        for item in messages
    ]
    for row in rows:
        row.seq = take_seq(session)
    session.message_tokens = add_running_tokens(rows, before=session.message_tokens)
    _insert_with_fresh_ids(session, rows, now=now)
    if announce:
        after_transcript_change(session)
    return rows


# The append's insert: a drawn entry id that a stored message of the session holds is skipped, not
# an error, so the append draws again for that row without a savepoint (docs/design.md, Request cost).
# Each row comes back with its stored size, what PostgreSQL keeps of its content (the jsonb text).
_INSERT_MESSAGES = RowInsert(
    Message, unique="message_session_entry_unique", returning={"stored_bytes": "OCTET_LENGTH(content::text)"}
)


def _insert_with_fresh_ids(session: Session, rows: list[Message], *, now: Any) -> None:
    """Give the rows random entry ids, insert them and record the append, drawing again on the rare clash.

    The unique constraint on (session, entry_id) finds a clash with a stored message: that row is
    not inserted and gets a new id. The session's UPDATE (`_record_append`) finds one with a
    compaction entry, whose ids share the space: it then changes nothing, and this append's rows,
    still uncommitted and under the session's lock, are deleted and drawn again.
    """
    for _ in range(MAX_ENTRY_ID_ATTEMPTS):
        pending = [row for row in rows if row.pk is None]  # the insert gives the others their pk
        _draw_ids(pending, keep={row.entry_id for row in rows if row.pk is not None})
        _INSERT_MESSAGES.insert(pending)
        if any(row.pk is None for row in pending):
            continue
        added_bytes = sum(row.stored_bytes for row in rows)
        if _record_append(session, added_bytes=added_bytes, now=now, entry_ids=[r.entry_id for r in rows]):
            return
        Message.objects.filter(pk__in=[row.pk for row in rows]).delete()
        for row in rows:  # deleted: they are new rows again
            row.pk, row._state.adding = None, True
    raise RuntimeError(f"no free entry ids after {MAX_ENTRY_ID_ATTEMPTS} draws")


def _record_append(session: Session, *, added_bytes: int, now: Any, entry_ids: list[str]) -> bool:
    """Store the locked session's new last seq and token total and add the new rows' stored size
    (``added_bytes``, which their insert returned): one statement.

    The UPDATE returns the new size total for the session instance the caller goes on with. It
    updates nothing and answers False when a compaction entry of the session holds one of
    ``entry_ids``. (The size was once summed here from the new rows, by seq; with a new session's
    statistics not yet gathered, PostgreSQL read that sum through the entry-id index and filtered
    every message of the session, 3.8 ms per append at 5,000 messages.)
    """
    sql = f"""
        UPDATE {Session._meta.db_table}
        SET last_seq = %s, message_tokens = %s, updated_at = %s, transcript_bytes = transcript_bytes + %s
        WHERE id = %s AND NOT EXISTS (
            SELECT 1 FROM {CompactionEntry._meta.db_table} WHERE session_id = %s AND entry_id = ANY(%s))
        RETURNING transcript_bytes
    """
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                session.last_seq,
                session.message_tokens,
                now,
                added_bytes,
                session.pk,
                session.pk,
                entry_ids,
            ],
        )
        row = cursor.fetchone()
    if row is None:
        return False
    (session.transcript_bytes,) = row
    session.updated_at = now
    return True


def _draw_ids(rows: list[Message], *, keep: set[str]) -> None:
    """Give every row a new random entry id, distinct within the batch (``keep``: the others' ids)."""
    drawn = set(keep)
    for row in rows:
        candidate = new_entry_id()
        while candidate in drawn:
            candidate = new_entry_id()
        drawn.add(candidate)
        row.entry_id = candidate


def stored_content_bytes(session: Session) -> int:
    """Return the UTF-8 size of the content stored for the session's messages (one query)."""
    total = Message.objects.filter(session=session).aggregate(size=Sum(_content_octets()))
    return int(total["size"] or 0)


def _content_octets() -> Func:
    return Func(Cast("content", TextField()), function="OCTET_LENGTH", output_field=BigIntegerField())


def _build(session: Session, item: MessageInput, *, now: Any, silent: bool, flush_turn: bool) -> Message:
    return message_row(session, item, silent=silent, flush_turn=flush_turn, created_at=item.created_at or now)


def add_running_tokens(rows: list[Message], *, before: int) -> int:
    """Fill in the rows' `running_tokens` (rows in seq order, ``before`` the session's total so
    far, flush-turn rows adding nothing) and return the new total."""
    total = before
    for row in rows:
        if not row.flush_turn:
            total += row.estimated_tokens
        row.running_tokens = total
    return total


def message_row(session: Session, item: MessageInput, **fields: Any) -> Message:
    """Return an unsaved row for a validated message, its token estimate filled in.

    `fields` are the row's own columns (seq, entry id, silent, times); the append and the import
    are the two writers. An append's rows get their entry ids when they are inserted.
    """
    row = _INSERT_MESSAGES.build(
        {"session": session},
        role=item.role,
        content=item.content,
        tool_call_id=item.tool_call_id,
        tool_name=item.tool_name,
        is_error=item.is_error,
        details=item.details,
        usage=item.usage,
        stop_reason=item.stop_reason,
        error_message=item.error_message,
        model=item.model,
        provider=item.provider,
        api=item.api,
        # Not the field's default, a random id an append would only draw again.
        **{"entry_id": ""} | fields,
    )
    row.estimated_tokens = estimate_message_tokens(to_agent_message(row))
    return row


def after_transcript_change(session: Session) -> None:
    """Queue the export mirror and the transcript indexer for after the commit (one fold for both)."""
    owner = session_owner(session=session)
    delay = settings.SESSION_JOB_DELAY_SECONDS  # the appends of that time share one run of each
    enqueue_coalesced(
        coalesced(
            "sessions_app.tasks.export_session",
            session.pk,
            owner=owner,
            task_name=f"export-session-{session.pk}",
            coalesce_key=f"export-session:{session.pk}",
            delay_seconds=delay,
        ),
        coalesced(
            "sessions_app.tasks.transcript_changed",
            session.pk,
            owner=owner,
            task_name=f"transcript-{session.pk}",
            coalesce_key=f"transcript-changed:{session.pk}",
            delay_seconds=delay,
        ),
    )


class TranscriptEntry(TypedDict, total=False):
    """An entry of a transcript in OpenClaw's JSONL v3 shape (plus our ``seq`` and ``silent``)."""

    type: Required[str]  # "message" or "compaction"
    id: Required[str]
    seq: Required[int]
    timestamp: Required[str]  # ISO 8601
    silent: bool
    message: AgentMessage
    summary: str
    firstKeptEntryId: str | None
    tokensBefore: int
    details: object
    fromHook: bool
    covered_by: str  # the compaction entry that summarised this message (the REST transcript)


def to_agent_message(message: Message) -> AgentMessage:
    """Return a stored message as OpenClaw's AgentMessage dict (plus our ``entryId``)."""
    data: AgentMessage = {
        "role": message.role,
        "content": message.content,
        "timestamp": epoch_ms(message.created_at),
        "entryId": message.entry_id,
    }
    if message.role == "toolResult":
        data["toolCallId"] = message.tool_call_id
        data["toolName"] = message.tool_name
        data["isError"] = message.is_error
        if message.details is not None:
            data["details"] = message.details
    if message.role == "assistant":
        data["usage"] = message.usage
        data["stopReason"] = message.stop_reason or "stop"
        data["model"] = message.model
        if message.provider:
            data["provider"] = message.provider
        if message.api:
            data["api"] = message.api
        if message.error_message:
            data["errorMessage"] = message.error_message
    return data


def transcript_entries(
    session: Session, *, include_silent: bool = True, after_seq: int = 0, limit: int | None = None
) -> list[TranscriptEntry]:
    """Return messages and compaction entries in ``seq`` order as JSONL v3 entry dicts.

    ``after_seq`` and ``limit`` page through a long transcript (the REST API's ``?after_seq=``).
    """
    messages = Message.objects.filter(session=session, seq__gt=after_seq).order_by("seq")
    if not include_silent:
        messages = messages.filter(silent=False)
    compactions = CompactionEntry.objects.filter(session=session, seq__gt=after_seq).order_by("seq")
    if limit is not None:
        # Each kind cut at ``limit`` still holds the first ``limit`` entries of the merge.
        messages, compactions = messages[:limit], compactions[:limit]
    items: list[tuple[int, TranscriptEntry]] = [(m.seq, message_entry_dict(m)) for m in messages]
    items += [(c.seq, compaction_entry_dict(c)) for c in compactions]
    entries = [entry for _, entry in sorted(items, key=lambda pair: pair[0])]
    return entries if limit is None else entries[:limit]


def message_entry_dict(message: Message) -> TranscriptEntry:
    return {
        "type": "message",
        "id": message.entry_id,
        "seq": message.seq,
        "silent": message.silent,
        "timestamp": message.created_at.isoformat(),
        "message": to_agent_message(message),
    }


def compaction_entry_dict(entry: CompactionEntry) -> TranscriptEntry:
    return {
        "type": "compaction",
        "id": entry.entry_id,
        "seq": entry.seq,
        "timestamp": entry.created_at.isoformat(),
        "summary": entry.summary,
        "firstKeptEntryId": entry.first_kept_entry_id,
        "tokensBefore": entry.tokens_before,
        "details": entry.details,
        "fromHook": entry.from_hook,
    }
