"""A session's view: its latest compaction summary and the messages kept since, as entries of OpenClaw's session context (docs/openclaw-behaviour.md §1.5)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from memory_app.tokens import (
    active_memo,
)
from openclaw_site.platform.row_sql import RowRead
from sessions_app.compaction.cutpoint import build_session_context, extend_session_context
from sessions_app.context import view_cache
from sessions_app.messages import epoch_ms
from sessions_app.models import CompactionEntry, Message, Session
from sessions_app.transcript import to_agent_message


def session_entries(session: Session) -> list[view_cache.ViewEntry]:
    """Return the entries the model can still see, in seq order, in the cut-point entry shape.

    That is the latest compaction entry and everything from its first kept message on: what
    `build_session_context` shows and `prepare_compaction` may summarise. Nothing before it is
    read, so the cost follows the model's view, not the history (docs/design.md §D11); a view
    this process built before is extended with the messages stored since (`sessions_app.context.view_cache`).
    Flush-turn messages are left out: they are the assistant's private bookkeeping and must
    neither reach the model again nor become a cut point (docs/design.md §D1).

    The entries are shared with the cache: callers build new dicts, never change these.
    """
    return list(session_view(session).entries)


def session_view(session: Session) -> view_cache.CachedView:
    """Return the session's view as cached: `session_entries`, their model-visible messages
    (`build_session_context`) and the memo of what calls derived from them (`view_cache.ViewMemo`).

    With an estimate memo active, it also answers from the view's stored estimates.
    """
    compaction = _latest_compaction(session)
    cached = view_cache.get(session.pk, compaction)
    if cached is not None:
        # From the view's last message on: that message must still be there, as it was.
        newer = _message_entries(session, from_seq=cached.last_seq)
        if newer and (newer[0][0]["seq"], newer[0][0]["id"]) == (cached.last_seq, cached.last_entry_id):
            return _keep(session, compaction, cached, newer[1:])
    floor = compaction[1] if compaction is not None else 0
    items = [(entry["seq"], (entry, tokens)) for entry, tokens in _message_entries(session, from_seq=floor)]
    compactions = CompactionEntry.objects.filter(session=session, seq__gte=floor)
    items += [(c.seq, (_compaction_entry(c), None)) for c in compactions]
    pairs = [pair for _, pair in sorted(items, key=lambda item: item[0])]
    return _keep(session, compaction, None, pairs)


_Estimated = tuple[view_cache.ViewEntry, int | None]  # an entry and its message's stored estimate


# Every context build and turn reads the messages stored since its cached view (docs/design.md, Request cost).
_VISIBLE_MESSAGES_FROM = RowRead(
    Message, where="t0.session_id = %s AND NOT t0.flush_turn AND t0.seq >= %s", suffix="ORDER BY t0.seq"
)


def _message_entries(session: Session, *, from_seq: int) -> list[_Estimated]:
    messages = _VISIBLE_MESSAGES_FROM.all([session.pk, from_seq])
    return [
        (
            {"type": "message", "id": m.entry_id, "seq": m.seq, "message": to_agent_message(m)},
            m.estimated_tokens,
        )
        for m in messages
    ]


def _keep(
    session: Session,
    compaction: tuple[int, int] | None,
    cached: view_cache.CachedView | None,
    added: list[_Estimated],
) -> view_cache.CachedView:
    """Cache the view (``cached`` extended by ``added``), registering only the added messages."""
    memo = cached.memo if cached is not None else view_cache.ViewMemo()
    for entry, tokens in added:
        if entry["type"] == "message":
            memo.register(entry["message"], tokens)
    new_entries = [entry for entry, _ in added]
    entries = (*(cached.entries if cached is not None else ()), *new_entries)
    active = active_memo()
    if active is not None:
        active.consult(memo.estimates)
    context = extend_session_context(cached.context, new_entries) if cached is not None else None
    if context is None:
        context = build_session_context(entries)
        if context and context[0].get("role") == "compactionSummary":
            memo.register(context[0], None)  # the view's own too: converted and encoded once
    last = next((e for e in reversed(entries) if e["type"] == "message"), None)
    view = view_cache.CachedView(
        compaction=compaction,
        entries=entries,
        last_seq=last["seq"] if last else 0,
        last_entry_id=last["id"] if last else "",
        memo=memo,
        context=tuple(context),
        # Added entries extend a cached view with messages only, so its compaction stays where it was.
        compaction_index=cached.compaction_index if cached is not None else latest_compaction_index(entries),
    )
    view_cache.put(session.pk, view)
    return view


# Plain SQL: it runs on every context build and turn (docs/design.md, Request cost).
_LATEST_COMPACTION_SQL = f"""
    SELECT c.seq, k.seq FROM {CompactionEntry._meta.db_table} c
    LEFT JOIN {Message._meta.db_table} k ON k.id = c.first_kept_id
    WHERE c.session_id = %s ORDER BY c.seq DESC LIMIT 1
"""


def _latest_compaction(session: Session) -> tuple[int, int] | None:
    """Return the latest compaction's (seq, floor), the floor being the first seq the model can
    see (its first kept message, or the compaction itself); None before the first compaction."""
    with connection.cursor() as cursor:
        cursor.execute(_LATEST_COMPACTION_SQL, [session.pk])
        latest = cursor.fetchone()
    if latest is None:
        return None
    seq, first_kept_seq = latest
    return seq, first_kept_seq if first_kept_seq is not None else seq


def _compaction_entry(entry: CompactionEntry) -> view_cache.ViewEntry:
    return {
        "type": "compaction",
        "id": entry.entry_id,
        "seq": entry.seq,
        "summary": entry.summary,
        "firstKeptEntryId": entry.first_kept_entry_id,
        "tokensBefore": entry.tokens_before,
        "timestamp": epoch_ms(entry.created_at),
    }


def latest_compaction_index(entries: Sequence[view_cache.ViewEntry]) -> int:
    """Return the index of the newest compaction entry, or -1."""
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].get("type") == "compaction":
            return index
    return -1
