"""Building the model's context: what a session's next model call is sent, and its token figures.

docs/design.md, How a message flows: system prompt + MEMORY.md + today's and yesterday's daily notes
(in the assistant's timezone) + the compaction view (latest summary + messages from its
`first_kept` on; OpenClaw's `buildSessionContext`) + context pruning on a copy. Reading never
changes anything stored; the turn loop records the pruning touch itself (`record_cache_touch`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import cached_property
from time import monotonic
from typing import Any, ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone as dj_timezone

from memory_app.documents import daily_note_path
from memory_app.models import MemoryDocument
from memory_app.tokens import (
    EstimateMemo,
    active_memo,
    calculate_context_tokens,
    corrected_estimate,
    correction_ratio,
    estimate_context_tokens,
    estimate_message_tokens,
    estimate_messages_tokens,
    estimate_text_tokens,
)
from openclaw_site.models import Assistant
from openclaw_site.platform.row_sql import RowRead
from openclaw_site.teams.assistant_settings import PruningSettings
from providers.chat import get_chat_model
from providers.openai_chat import EncodedMessages, convert_messages, settle_openai_messages, tool_flags_of
from sessions_app.compaction.cutpoint import build_session_context, extend_session_context
from sessions_app.context import view_cache
from sessions_app.context.pruning import PruneResult, prune_context, should_prune
from sessions_app.context.thresholds import (
    Thresholds,
    has_flushed_this_cycle,
    output_tokens_of,
    projected_next_turn_tokens,
    prompt_tokens_of,
    thresholds_for,
)
from sessions_app.messages import epoch_ms
from sessions_app.models import CompactionEntry, Message, ModelCalibration, Session
from sessions_app.transcript import to_agent_message

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."
# OpenClaw `bootstrapMaxChars` (20000 per injected file), trimmed head 70 % + tail 20 %.
MAX_INJECTED_FILE_CHARS = 20_000
MEMORY_FILES_HEADER = "# Project Context\n\nThe following memory files have been loaded:"
MEMORY_GUIDANCE = (
    "## Memory\n"
    "Your long-term memory is Markdown: MEMORY.md and daily notes memory/YYYY-MM-DD.md. "
    "Read more of it with memory_get{search_hint}.\n"
    "A tool result shortened to save context names its original message; call tool_result_get "
    "with that id to read it in full."
)
SEARCH_HINT = (
    "; before answering questions about prior work, decisions, dates, people, preferences or "
    "todos, run memory_search first"
)


# --- the session's entries and the compaction view -------------------------------------------


def session_entries(session: Session) -> list[dict[str, Any]]:
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


_Estimated = tuple[dict[str, Any], int | None]  # an entry and its message's stored estimate


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


def _compaction_entry(entry: CompactionEntry) -> dict[str, Any]:
    return {
        "type": "compaction",
        "id": entry.entry_id,
        "seq": entry.seq,
        "summary": entry.summary,
        "firstKeptEntryId": entry.first_kept_entry_id,
        "tokensBefore": entry.tokens_before,
        "timestamp": epoch_ms(entry.created_at),
    }


def latest_compaction_index(entries: Sequence[dict[str, Any]]) -> int:
    """Return the index of the newest compaction entry, or -1."""
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].get("type") == "compaction":
            return index
    return -1


def view_tokens(entries: list[dict[str, Any]], *, ratio: float | None) -> int:
    """Estimate the compaction view's size: reported usage plus corrected estimates of the rest.

    Usage reported before the latest compaction measured the old, longer context (OpenClaw bug reports, docs/openclaw-behaviour.md §5), so only
    assistants after it are trusted, as in cutpoint's `tokensBefore`; and, as Pi's
    `_checkCompaction` does, only those whose call started after the compaction was written (a
    call that raced a background compaction reports the old size).
    """
    context = build_session_context(entries)
    prev = latest_compaction_index(entries)
    newer = sum(1 for e in entries[prev + 1 :] if e.get("type") == "message") if prev >= 0 else len(context)
    head, tail = context[: len(context) - newer], context[len(context) - newer :]
    cutoff = entries[prev].get("timestamp") if prev >= 0 else None
    if isinstance(cutoff, int):
        tail = [_without_stale_usage(message, cutoff) for message in tail]
    estimate = estimate_context_tokens(tail)
    if estimate.last_usage_index is not None:
        return estimate.usage_tokens + corrected_estimate(estimate.trailing_tokens, ratio)
    return corrected_estimate(estimate_messages_tokens(head) + estimate.trailing_tokens, ratio)


def _without_stale_usage(message: dict[str, Any], cutoff_ms: int) -> dict[str, Any]:
    timestamp = message.get("timestamp")
    if message.get("role") == "assistant" and isinstance(timestamp, int) and timestamp <= cutoff_ms:
        return {**message, "usage": None}
    return message


def stored_view_figures(session: Session, *, ratio: float | None) -> tuple[int, int]:
    """Return `view_tokens` computed from stored per-message estimates, and `transcript_bytes`,
    in one statement (session API).

    Same rule as `view_tokens`: the last trustworthy usage after the latest compaction, plus the
    corrected estimates of the messages after it; without such usage, the whole view estimated.
    `_VIEW_TOKENS_SQL` reads the latest compaction, the sums, the newest usage candidate and the
    session's stored size at once, each by an index probe, so its cost does not grow with the
    session; only when that candidate reports no tokens are older ones paged through
    (`_last_usage`), and the sum after the one that counts is one more probe.
    """
    with connection.cursor() as cursor:
        cursor.execute(_VIEW_TOKENS_SQL, {"session": session.pk})
        row = cursor.fetchone()
    summary, compaction_seq, compaction_at, head, tail, usage_seq, usage, after_usage, total, size = row
    size = int(size or 0)
    head_tokens = 0 if compaction_seq is None else int(head) + _summary_tokens(summary)
    if usage_seq is None:
        return corrected_estimate(head_tokens + int(tail), ratio), size
    usage = json.loads(usage) if isinstance(usage, str) else usage
    tokens = calculate_context_tokens(usage) if isinstance(usage, dict) else 0
    if tokens <= 0:  # page back to a usage that counts, past the ones that report nothing
        newer = Message.objects.filter(session=session, flush_turn=False, seq__gt=compaction_seq or 0)
        if compaction_at is not None:
            newer = newer.filter(created_at__gt=compaction_at)
        tokens, usage_seq = _last_usage(newer)
        if usage_seq is None:
            return corrected_estimate(head_tokens + int(tail), ratio), size
        after_usage = int(total) - _running_tokens_at(session, usage_seq)
    return tokens + corrected_estimate(int(after_usage), ratio), size


def _running_tokens_at(session: Session, seq: int) -> int:
    """The visible messages' estimates summed up to ``seq`` (`Message.running_tokens`)."""
    running = (
        Message.objects.filter(session=session, seq__lte=seq)
        .order_by("-seq")
        .values_list("running_tokens", flat=True)
        .first()
    )
    return int(running or 0)


def _summary_tokens(summary: str) -> int:
    return estimate_message_tokens({"role": "compactionSummary", "summary": summary})


_MESSAGES = Message._meta.db_table
_VISIBLE = f"FROM {_MESSAGES} m WHERE m.session_id = %(session)s AND NOT m.flush_turn"
# The newest assistant usage Pi would trust, after the latest compaction (and newer than it): one
# probe of the partial index `message_usage_candidate`, whose condition these lines repeat.
_USAGE_CANDIDATE = f"""
    SELECT m.seq, m.usage {_VISIBLE}
      AND m.role = 'assistant' AND m.usage IS NOT NULL AND NOT (m.stop_reason IN ('error', 'aborted'))
      AND m.seq > COALESCE((SELECT seq FROM latest), 0)
      AND m.created_at > COALESCE((SELECT created_at FROM latest), '-infinity')
    ORDER BY m.seq DESC LIMIT 1
"""


def _tokens_through(seq: str) -> str:
    """SQL for the visible messages' estimates summed up to ``seq``: the `running_tokens` of the
    newest message at or before it, one probe of the (session, seq) index."""
    return f"""COALESCE((SELECT m.running_tokens FROM {_MESSAGES} m
        WHERE m.session_id = %(session)s AND m.seq <= {seq} ORDER BY m.seq DESC LIMIT 1), 0)"""


# Each sum over a range of seqs is the session's total, or a `running_tokens`, less another.
_VIEW_TOKENS_SQL = f"""
    WITH latest AS (
        SELECT c.seq, c.created_at, c.summary, COALESCE(k.seq, c.seq) AS kept_from
        FROM {CompactionEntry._meta.db_table} c LEFT JOIN {_MESSAGES} k ON k.id = c.first_kept_id
        WHERE c.session_id = %(session)s ORDER BY c.seq DESC LIMIT 1
    ), candidate AS ({_USAGE_CANDIDATE}),
    totals AS (SELECT message_tokens, transcript_bytes FROM {Session._meta.db_table} WHERE id = %(session)s)
    SELECT
        (SELECT summary FROM latest),
        (SELECT seq FROM latest),
        (SELECT created_at FROM latest),
        {_tokens_through("(SELECT seq FROM latest) - 1")} - {_tokens_through("(SELECT kept_from FROM latest) - 1")},
        (SELECT message_tokens FROM totals) - {_tokens_through("COALESCE((SELECT seq FROM latest), 0)")},
        (SELECT seq FROM candidate),
        (SELECT usage FROM candidate),
        (SELECT message_tokens FROM totals) - {_tokens_through("(SELECT seq FROM candidate)")},
        (SELECT message_tokens FROM totals),
        (SELECT transcript_bytes FROM totals)
"""


def _last_usage(messages: Any) -> tuple[int, int | None]:
    """Return (context tokens, seq) of the newest assistant usage Pi trusts, or (0, None)."""
    candidates = (
        messages.filter(role="assistant", usage__isnull=False)
        .exclude(stop_reason__in=["error", "aborted"])
        .order_by("-seq")
        .values_list("seq", "usage")
    )
    # Nearly always the newest one counts: read a page at a time (a plain LIMIT query, not a
    # server-side cursor, which costs three round trips even when the first row answers).
    for offset in itertools.count(0, _USAGE_PAGE):
        page = list(candidates[offset : offset + _USAGE_PAGE])
        for seq, usage in page:
            tokens = calculate_context_tokens(usage) if isinstance(usage, dict) else 0
            if tokens > 0:
                return tokens, seq
        if len(page) < _USAGE_PAGE:
            return 0, None
    return 0, None


_USAGE_PAGE = 20


# --- calibration (docs/design.md §D3) ----------------------------------------------------------


def effective_model(assistant: Assistant) -> str:
    """Return the model name an assistant's turns use (its own, else LLM_MODEL)."""
    return assistant.model or django_settings.LLM_MODEL


# Every append, context build and turn corrects its estimates by the model's ratio: each process
# keeps the ratio it read for this long (docs/design.md §D3), and one it recorded until the next call.
CALIBRATION_SECONDS = 30.0
_ratios: dict[str, tuple[float, float | None]] = {}  # model -> (when read, ratio)


def calibration_ratio(model: str) -> float | None:
    """Return reported/estimated prompt tokens recorded for a model, or None before any call."""
    if not model:
        return None
    held = _ratios.get(model)
    if held is not None and monotonic() - held[0] < CALIBRATION_SECONDS:
        return held[1]
    row = ModelCalibration.objects.filter(model=model).first()
    ratio = (
        None
        if row is None or row.samples == 0
        else correction_ratio(row.estimated_tokens, row.reported_tokens)
    )
    _ratios[model] = (monotonic(), ratio)
    return ratio


def forget_calibrations() -> None:
    """Drop this process's copies of the ratios (the next read goes to the database)."""
    _ratios.clear()


def record_calibration(*, model: str, estimated: int, reported: int) -> None:
    """Add one call's estimated and reported prompt tokens to the model's totals (one upsert).

    The upsert returns the new totals, so this process's ratio for the model is the new one at once.
    """
    if not model or estimated <= 0 or reported <= 0:
        return
    table = ModelCalibration._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table} AS calibration (model, estimated_tokens, reported_tokens, samples, updated_at)
            VALUES (%s, %s, %s, 1, %s)
            ON CONFLICT (model) DO UPDATE SET
                estimated_tokens = calibration.estimated_tokens + EXCLUDED.estimated_tokens,
                reported_tokens = calibration.reported_tokens + EXCLUDED.reported_tokens,
                samples = calibration.samples + 1,
                updated_at = EXCLUDED.updated_at
            RETURNING estimated_tokens, reported_tokens
            """,
            [model, estimated, reported, dj_timezone.now()],
        )
        total_estimated, total_reported = cursor.fetchone()
    _ratios[model] = (monotonic(), correction_ratio(total_estimated, total_reported))


# --- system prompt: the assistant's own, then memory -----------------------------------------


def assistant_zone(assistant: Assistant) -> ZoneInfo:
    """Return the assistant's timezone; an invalid one falls back to UTC (`resolveUserTimezone`)."""
    try:
        return ZoneInfo((assistant.timezone or "UTC").strip())
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def local_today(assistant: Assistant, now: datetime) -> date:
    """Return today's date in the assistant's timezone."""
    return now.astimezone(assistant_zone(assistant)).date()


@dataclass(frozen=True)
class SystemPrompt:
    """The system prompt sent to the model and the memory documents injected into it."""

    text: str
    memory_paths: tuple[str, ...]
    memory_text: str = ""  # the injected memory files' part of ``text`` (for the context breakdown)


def build_system_prompt(
    assistant: Assistant, *, now: datetime, tool_names: tuple[str, ...] = ()
) -> SystemPrompt:
    """Compose the assistant's system prompt, memory guidance, MEMORY.md and the daily notes."""
    memory = memory_prompt(assistant, now=now, tool_names=tool_names)
    head = (assistant.system_prompt or "").strip() or DEFAULT_SYSTEM_PROMPT
    return SystemPrompt(
        text=f"{head}\n\n{memory.text}", memory_paths=memory.memory_paths, memory_text=memory.memory_text
    )


def memory_prompt(assistant: Assistant, *, now: datetime, tool_names: tuple[str, ...] = ()) -> SystemPrompt:
    """Compose the memory part of the system prompt: guidance, MEMORY.md and the daily notes.

    A host with a system prompt of its own (OpenClaw through its plugin) is sent this part alone.
    """
    today = local_today(assistant, now)
    wanted = ["MEMORY.md", "memory.md", daily_note_path(today), daily_note_path(today - timedelta(days=1))]
    # Every turn and context build reads these: plain SQL (docs/design.md, Request cost).
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT path, content FROM {MemoryDocument._meta.db_table} WHERE assistant_id = %s AND path = ANY(%s)",
            [assistant.pk, wanted],
        )
        documents = dict(cursor.fetchall())
    if "MEMORY.md" in documents:
        documents.pop("memory.md", None)  # OpenClaw loads MEMORY.md, else memory.md
    injected = [(path, documents[path]) for path in wanted if documents.get(path, "").strip()]
    parts = [MEMORY_GUIDANCE.format(search_hint=SEARCH_HINT if "memory_search" in tool_names else "")]
    parts.append(f"Time zone: {assistant_zone(assistant).key}")
    memory = [f"## {path}\n\n{trim_injected_file(content, path)}" for path, content in injected]
    if injected:
        parts += [MEMORY_FILES_HEADER, *memory]
    return SystemPrompt(
        text="\n\n".join(parts),
        memory_paths=tuple(path for path, _ in injected),
        memory_text="\n\n".join(memory),
    )


def trim_injected_file(content: str, path: str, *, max_chars: int = MAX_INJECTED_FILE_CHARS) -> str:
    """Keep the head (70 %) and tail (20 %) of a long file, saying so (OpenClaw `trimBootstrapContent`)."""
    content = content.rstrip()
    if len(content) <= max_chars:
        return content
    head, tail = int(max_chars * 0.7), int(max_chars * 0.2)
    marker = (
        f"\n[...truncated, read {path} for full content...]\n"
        f"…(truncated {path}: kept {head}+{tail} chars of {len(content)})…\n"
    )
    return content[:head] + marker + content[-tail:]


# --- pruning ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PruningReport:
    """Whether pruning ran on this call, why, and what it changed."""

    mode: str
    ran: bool
    reason: str
    result: PruneResult

    @property
    def changed(self) -> bool:
        return self.result.changed

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "ran": self.ran,
            "reason": self.reason,
            "changed": self.changed,
            "changes": [
                {
                    "index": c.index,
                    "entry_id": c.entry_id,
                    "tool_name": c.tool_name,
                    "action": c.action,
                    "chars_before": c.chars_before,
                    "chars_after": c.chars_after,
                }
                for c in self.result.changes
            ],
        }


def prune_view(
    messages: list[dict[str, Any]],
    *,
    assistant: Assistant,
    context_window: int,
    last_touch: datetime | None,
    now: datetime,
) -> PruningReport:
    """Run the TTL gate and, when it is open, OpenClaw's pruning pass on a copy of the view."""
    settings = assistant.config.pruning
    touch_ms = epoch_ms(last_touch) if last_touch else None
    if not should_prune(settings, now_ms=epoch_ms(now), last_cache_touch_at_ms=touch_ms):
        return PruningReport(
            settings.mode,
            False,
            _closed_reason(settings, touch_ms, epoch_ms(now)),
            PruneResult(list(messages)),
        )
    result = prune_context(messages, settings=settings, context_window=context_window)
    reason = (
        "mode always: every call"
        if settings.mode == "always"
        else "cache TTL expired since the last model call"
    )
    return PruningReport(settings.mode, True, reason, result)


def _closed_reason(settings: PruningSettings, touch_ms: int | None, now_ms: int) -> str:
    if settings.mode == "off":
        return "mode off"
    if settings.ttl_ms <= 0:
        return "ttl is 0: pruning disabled"
    if touch_ms is None:
        return "no model call recorded yet (cache-ttl waits for the first one)"
    remaining = max(0, settings.ttl_ms - (now_ms - touch_ms))
    return f"prompt cache still warm: the TTL expires in {remaining // 1000} s"


def record_cache_touch(session_id: int, *, at: datetime) -> None:
    """Record that the provider cache was touched at `at` (OpenClaw's `openclaw.cache-ttl` entry)."""
    Session.objects.filter(pk=session_id).update(**cache_touch_fields(at=at))


def cache_touch_fields(*, at: datetime) -> dict[str, Any]:
    """Return the session fields a cache touch at `at` sets (for an update that sets more)."""
    return {"last_cache_touch_at": at}


# --- the model context ------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelContext:
    """Exactly what a model call for this session sends now, and how it was made."""

    system_prompt: SystemPrompt
    view: list[dict[str, Any]]
    pruning: PruningReport
    tools: list[dict[str, Any]]
    model: str
    ratio: float | None
    now: datetime
    entries: list[dict[str, Any]] = field(repr=False, default_factory=list)
    compaction_index: int = field(repr=False, default=-1)  # of the latest compaction in ``entries``
    # The estimates counted while building, which the figures below reuse (memory_app.tokens).
    estimates: EstimateMemo = field(repr=False, default_factory=EstimateMemo)
    # What earlier calls derived from the view's messages (sessions_app.context.view_cache).
    view_memo: view_cache.ViewMemo = field(repr=False, default_factory=view_cache.ViewMemo)

    @property
    def agent_messages(self) -> list[dict[str, Any]]:
        """Return the pruned AgentMessage list (what the model sees, before format conversion)."""
        return self.pruning.result.messages

    @cached_property
    def openai_messages(self) -> EncodedMessages:
        """Return the chat-completions `messages` exactly as sent (not to be changed).

        They carry their JSON, made of each message's kept encoding (`view_cache.ViewMemo`), which
        the model request splices in as it is.
        """
        memo = self.view_memo
        converted = memo.extended(
            "openai", self.agent_messages, lambda new: convert_messages(new, convert=memo.converted)
        )
        flags = memo.extended("tool-flags", converted, tool_flags_of)
        messages = settle_openai_messages(converted, system_prompt=self.system_prompt.text, tool_flags=flags)
        return EncodedMessages(messages, encode=self._encode_openai)

    def _encode_openai(self, messages: list[dict[str, Any]]) -> str:
        """Encode the request's messages; the system prompt, made anew each call, apart from the
        rest, whose kept encoding then still matches (`view_cache.ViewMemo.extended`)."""
        memo = self.view_memo
        if not self.system_prompt.text:
            return memo.json_array(messages, slot="openai-json")
        system, rest = memo.json(messages[0]), memo.json_array(messages[1:], slot="openai-json")
        return f"[{system}]" if rest == "[]" else f"[{system},{rest[1:]}"

    def messages_json(self) -> tuple[str, str]:
        """Return `openai_messages` and `agent_messages` as JSON arrays, each message encoded once."""
        return self.openai_messages.json(), self.view_memo.json_array(self.agent_messages, slot="agent-json")

    @cached_property
    def _message_estimates(self) -> tuple[int, int]:
        """Return the estimates of the summary messages and of the others, each counted once."""
        agent_messages = self.agent_messages
        memo = self.view_memo
        with self.estimates.active():
            tokens = memo.extended(
                "estimates", agent_messages, lambda new: [estimate_message_tokens(m) for m in new]
            )
        summaries = memo.extended(
            "summaries", agent_messages, lambda new: [m.get("role") == "compactionSummary" for m in new]
        )
        summary = sum(itertools.compress(tokens, summaries))  # kept per message: no pass over the view
        return summary, sum(tokens) - summary

    @cached_property
    def _tools_estimate(self) -> int:
        return estimate_text_tokens(json.dumps(self.tools, ensure_ascii=False)) if self.tools else 0

    @property
    def raw_prompt_estimate(self) -> int:
        """Estimate the whole request: system prompt, messages and tool specs (uncorrected)."""
        return (
            estimate_text_tokens(self.system_prompt.text)
            + sum(self._message_estimates)
            + self._tools_estimate
        )

    @property
    def prompt_estimate(self) -> int:
        """Return the request estimate corrected by the model's calibration ratio."""
        return corrected_estimate(self.raw_prompt_estimate, self.ratio)

    def breakdown(self, *, context_window: int) -> ContextBreakdown:
        """Split the request's estimate into its parts (corrected like `prompt_estimate`) and the free rest."""
        memory = estimate_text_tokens(self.system_prompt.memory_text) if self.system_prompt.memory_text else 0
        summary, messages = self._message_estimates
        raw = {
            "system_prompt": max(0, estimate_text_tokens(self.system_prompt.text) - memory),
            "memory_files": memory,
            "tools": self._tools_estimate,
            "summary": summary,
            "messages": messages,
        }
        parts = {name: corrected_estimate(tokens, self.ratio) for name, tokens in raw.items()}
        return ContextBreakdown(context_window=context_window, **parts)


@dataclass(frozen=True)
class ContextBreakdown:
    """Where a session's window goes: the estimated tokens of each part of the next request."""

    context_window: int
    system_prompt: int
    memory_files: int
    tools: int
    summary: int
    messages: int

    PARTS: ClassVar[tuple[str, ...]] = ("system_prompt", "memory_files", "tools", "summary", "messages")

    @property
    def used(self) -> int:
        return sum(getattr(self, name) for name in self.PARTS)

    @property
    def free(self) -> int:
        return max(0, self.context_window - self.used)

    def as_dict(self) -> dict[str, int]:
        return {**{name: getattr(self, name) for name in self.PARTS}, "free": self.free}


def build_model_context(
    session: Session, *, tools: list[dict[str, Any]] | None = None, now: datetime | None = None
) -> ModelContext:
    """Build the context of the session's next model call; nothing stored changes."""
    now = now or dj_timezone.now()
    assistant = session.assistant
    tools = list(tools or [])
    estimates = active_memo() or EstimateMemo()
    with estimates.active():
        cached_view = session_view(session)
        entries, view_memo, view = list(cached_view.entries), cached_view.memo, list(cached_view.context)
        pruning = prune_view(
            view,
            assistant=assistant,
            context_window=session.context_window,
            last_touch=session.last_cache_touch_at,
            now=now,
        )
    system_prompt = build_system_prompt(assistant, now=now, tool_names=tuple(t["name"] for t in tools))
    model = effective_model(assistant)
    return ModelContext(
        estimates=estimates,
        system_prompt=system_prompt,
        view=view,
        pruning=pruning,
        tools=tools,
        model=model,
        ratio=calibration_ratio(model),
        now=now,
        entries=entries,
        compaction_index=cached_view.compaction_index,
        view_memo=view_memo,
    )


# --- session token figures --------------------------------------------------------------------


@dataclass(frozen=True)
class TokenFigures:
    """A session's token figures against its thresholds (session API, /context, the triggers)."""

    thresholds: Thresholds
    context_tokens: int
    last_prompt_tokens: int
    last_output_tokens: int
    transcript_bytes: int
    flushed_this_cycle: bool
    ratio: float | None
    prompt_estimate: int = 0

    @property
    def projected_tokens(self) -> int:
        """Return the projected next request: last prompt + last output + new prompt estimate.

        Never below the context estimate, which also counts messages stored since the last call
        (ingested ones, or the new user message itself), as OpenClaw takes the larger count.
        """
        projected = projected_next_turn_tokens(
            last_prompt_tokens=self.last_prompt_tokens,
            last_output_tokens=self.last_output_tokens,
            prompt_estimate=self.prompt_estimate,
        )
        return max(projected, self.context_tokens)

    @property
    def flush_reason(self) -> str | None:
        return self.thresholds.flush_reason(
            projected_tokens=self.projected_tokens,
            transcript_bytes=self.transcript_bytes,
            already_flushed=self.flushed_this_cycle,
        )

    @property
    def compaction_due(self) -> bool:
        return self.thresholds.should_compact(self.context_tokens)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.thresholds.as_dict(),
            "context_tokens": self.context_tokens,
            "last_prompt_tokens": self.last_prompt_tokens,
            "last_output_tokens": self.last_output_tokens,
            "projected_tokens": self.projected_tokens,
            "transcript_bytes": self.transcript_bytes,
            "flushed_this_cycle": self.flushed_this_cycle,
            "flush_due": self.flush_reason is not None,
            "flush_reason": self.flush_reason,
            "compaction_due": self.compaction_due,
            "calibration_ratio": self.ratio,
        }


def token_figures(session: Session, *, prompt_estimate: int = 0) -> TokenFigures:
    """Compute a session's token figures; `prompt_estimate` is the next user message, if known.

    The view's size and the transcript's are read from what is stored (`stored_view_figures`),
    so a caller's session instance may predate the latest append.
    """
    assistant = session.assistant
    ratio = calibration_ratio(effective_model(assistant))
    context_tokens, size = stored_view_figures(session, ratio=ratio)
    usage = session.last_usage if session.total_tokens_fresh else None
    fresh_total = (session.total_tokens or 0) if session.total_tokens_fresh else 0
    return TokenFigures(
        thresholds=thresholds_for(assistant.config.compaction, context_window=session.context_window),
        context_tokens=context_tokens,
        last_prompt_tokens=prompt_tokens_of(usage) or fresh_total,
        last_output_tokens=output_tokens_of(usage),
        transcript_bytes=size,
        flushed_this_cycle=has_flushed_this_cycle(
            memory_flush_compaction_count=session.memory_flush_compaction_count,
            compaction_count=session.compaction_count,
        ),
        ratio=ratio,
        prompt_estimate=corrected_estimate(prompt_estimate, ratio),
    )


def session_figures(session: Session, *, figures: TokenFigures | None = None) -> dict[str, Any]:
    """Return the token figures the session API shows (OpenClaw's SessionEntry fields and ours).

    ``figures``: the session's `token_figures`, when the caller has just computed them.
    """
    return {
        **(figures or token_figures(session)).as_dict(),
        "total_tokens": session.total_tokens,
        "total_tokens_fresh": session.total_tokens_fresh,
        "compaction_count": session.compaction_count,
        "memory_flush_compaction_count": session.memory_flush_compaction_count,
        "memory_flush_at": session.memory_flush_at.isoformat() if session.memory_flush_at else None,
        "model": effective_model(session.assistant) or None,
        "offline": get_chat_model("chat") is None,
    }
