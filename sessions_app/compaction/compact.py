"""The one compaction entry point (docs/design.md §D1): threshold, overflow, manual and budget.

`compact_session` takes the session's compaction lock (a Postgres session-level advisory lock
that dies with its holder; a partial unique constraint also allows one active `CompactionRun` per
session, and a run left active by a dead worker is taken over), runs the memory flush first when this cycle has not flushed, finds Pi's cut point,
summarises through the compaction model (OpenClaw's safeguard pipeline) or the offline
summariser, checks that identifiers survive, and commits the `CompactionEntry` with the session
figures in one transaction. A failure writes no entry and keeps history; the run says why.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Literal, TypedDict, overload

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.utils import timezone as dj_timezone

from memory_app.documents import daily_note_path
from memory_app.models import MemoryDocument
from memory_app.tokens import estimate_message_tokens, estimate_text_tokens
from openclaw_site.models import UsagePurpose
from openclaw_site.teams.services import check_writable
from openclaw_site.usage.ledger import record_usage
from providers.chat import ChatModel, get_chat_model
from providers.errors import ProviderError
from sessions_app.compaction.cutpoint import CompactionPlan, prepare_compaction
from sessions_app.compaction.errors import (
    ALREADY_COMPACTED,
    NOTHING_TO_COMPACT,
    SESSION_DELETED,
    CompactionFailed,
    CompactionRefused,
)
from sessions_app.compaction.flush import FlushOutcome, run_memory_flush, skip_reason
from sessions_app.compaction.runs import acquire_run, advance, heartbeat, hold_compaction_lock
from sessions_app.compaction.summary import (
    MAX_COMPACTION_SUMMARY_CHARS,
    SummaryError,
    ensure_identifiers,
    message_source_texts,
    offline_summary,
    summarize_session,
)
from sessions_app.compaction.summary.serialisation import ChatMessages
from sessions_app.context.figures import calibration_ratio, effective_model, token_figures, view_tokens
from sessions_app.context.prompt import local_today
from sessions_app.context.thresholds import effective_reserve, has_flushed_this_cycle
from sessions_app.context.view import latest_compaction_index, session_entries
from sessions_app.context.view_cache import ViewEntry
from sessions_app.messages import epoch_ms
from sessions_app.models import (
    ACTIVE_RUN_STATES,
    CompactionEntry,
    CompactionRun,
    Message,
    RunState,
    Session,
    Trigger,
)
from sessions_app.transcript import (
    after_transcript_change,
    lock_session,
    take_seq,
    unique_entry_id,
)

logger = logging.getLogger(__name__)


def _plan(session: Session, entries: list[ViewEntry]) -> CompactionPlan:
    """Return the cut-point plan, or raise Pi's refusal (already compacted / nothing to compact)."""
    keep = session.assistant.config.compaction.keep_recent_tokens
    plan = prepare_compaction(entries, keep_recent_tokens=keep)
    if plan is None and entries and entries[-1].get("type") == "compaction":
        raise CompactionRefused(*ALREADY_COMPACTED[:2], status=ALREADY_COMPACTED[2])
    if plan is None or plan.nothing_to_compact:
        raise CompactionRefused(*NOTHING_TO_COMPACT[:2], status=NOTHING_TO_COMPACT[2])
    return plan


class EntryRef(TypedDict):
    """A message a compaction would summarise, as a preview names it."""

    entry_id: str
    seq: int
    role: str | None


class CompactionDetails(TypedDict, total=False):
    """A compaction entry's `details` (OpenClaw's, and how the summary was made)."""

    readFiles: list[str]
    modifiedFiles: list[str]
    summarizedEntryIds: list[str]
    turnPrefixEntryIds: list[str]
    isSplitTurn: bool
    offline: bool
    boundaryOnly: bool
    modelCalls: int
    addedIdentifiers: list[str]
    preservedMessages: int
    toolFailures: int
    droppedMessages: int


@dataclass(frozen=True)
class CompactionPreview:
    """A dry run: what would be summarised and kept, and the token counts; nothing is written."""

    trigger: str
    first_kept_entry_id: str
    summarized: tuple[EntryRef, ...]
    turn_prefix: tuple[EntryRef, ...]
    is_split_turn: bool
    has_previous_summary: bool
    tokens_before: int
    tokens_kept: int
    tokens_after_estimate: int
    flush_would_run: bool
    flush_skip_reason: str | None
    offline: bool
    notes: tuple[str, ...] = field(default=())


def _entry_refs(entries: list[ViewEntry], ids: tuple[str, ...]) -> tuple[EntryRef, ...]:
    wanted = set(ids)
    return tuple(
        {"entry_id": e["id"], "seq": e["seq"], "role": e["message"].get("role")}
        for e in entries
        if e.get("type") == "message" and e["id"] in wanted
    )


def preview_compaction(session: Session, *, trigger: str) -> CompactionPreview:
    """Describe the compaction that would run now, without a lock and without writing."""
    entries = session_entries(session)
    plan = _plan(session, entries)
    ratio = calibration_ratio(effective_model(session.assistant))
    summarized_tokens = sum(
        estimate_message_tokens(m) for m in (*plan.messages_to_summarize, *plan.turn_prefix_messages)
    )
    # The summary's size is unknown before it is written: assume at most the 16000-char cap.
    summary_tokens = min(summarized_tokens, MAX_COMPACTION_SUMMARY_CHARS // 4)
    before = view_tokens(entries, ratio=ratio)
    kept = max(0, before - summarized_tokens - _previous_summary_tokens(plan))
    flushed = has_flushed_this_cycle(
        memory_flush_compaction_count=session.memory_flush_compaction_count,
        compaction_count=session.compaction_count,
    )
    skip = skip_reason(session) or ("already-flushed" if flushed else None)
    return CompactionPreview(
        trigger=trigger,
        first_kept_entry_id=plan.first_kept_entry_id,
        summarized=_entry_refs(entries, plan.summarized_entry_ids),
        turn_prefix=_entry_refs(entries, plan.prefix_entry_ids),
        is_split_turn=plan.is_split_turn,
        has_previous_summary=plan.previous_summary is not None,
        tokens_before=before,
        tokens_kept=kept,
        tokens_after_estimate=kept + summary_tokens,
        flush_would_run=skip is None,
        flush_skip_reason=skip,
        offline=get_chat_model("compaction") is None,
        notes=(
            "tokens_kept: the messages that stay verbatim. tokens_after_estimate: an upper bound that "
            "counts the summary at the size of what it replaces, capped at 16000 characters.",
        ),
    )


def _previous_summary_tokens(plan: CompactionPlan) -> int:
    return estimate_text_tokens(plan.previous_summary or "")


@overload
def compact_session(
    *,
    session_id: int,
    trigger: str,
    instructions: str | None = None,
    dry_run: Literal[True],
    observed_tokens: int | None = None,
) -> CompactionPreview: ...


@overload
def compact_session(
    *,
    session_id: int,
    trigger: str,
    instructions: str | None = None,
    dry_run: Literal[False] = False,
    observed_tokens: int | None = None,
) -> CompactionRun | None: ...


@overload
def compact_session(
    *,
    session_id: int,
    trigger: str,
    instructions: str | None = None,
    dry_run: bool = False,
    observed_tokens: int | None = None,
) -> CompactionRun | CompactionPreview | None: ...


def compact_session(
    *,
    session_id: int,
    trigger: str,
    instructions: str | None = None,
    dry_run: bool = False,
    observed_tokens: int | None = None,
) -> CompactionRun | CompactionPreview | None:
    """Compact a session through the one entry point; see the module docstring.

    Returns the committed run, a preview for `dry_run`, or None for a threshold trigger that is no
    longer due. Raises CompactionBusy, CompactionRefused (the run says why) or CompactionFailed.
    """
    if trigger not in Trigger.values:
        raise ValueError(f"unknown trigger {trigger!r}")
    session = Session.objects.select_related("assistant", "assistant__team").filter(pk=session_id).first()
    if session is None:
        raise CompactionRefused(*SESSION_DELETED[:2], status=SESSION_DELETED[2])
    if dry_run:
        return preview_compaction(session, trigger=trigger)
    check_writable(session.assistant)
    if trigger == Trigger.THRESHOLD and not token_figures(session).compaction_due:
        return None
    with ExitStack() as lock:
        hold_compaction_lock(lock, session)
        try:
            run = acquire_run(session, trigger=trigger, instructions=instructions)
        except IntegrityError:  # the session was deleted since it was read above
            _refuse_if_session_gone(session_id)
            raise
        try:
            return _compact(session, run, instructions=instructions, observed_tokens=observed_tokens)
        except CompactionRefused as refused:
            _refuse_if_session_gone(session_id)
            advance(run, RunState.FAILED, reason=f"{refused.code}: {refused.message}")
            refused.run = run
            raise
        except Exception as error:
            _refuse_if_session_gone(session_id)
            logger.warning("compaction of session %s failed: %s", session_id, error, exc_info=True)
            advance(run, RunState.FAILED, reason=failure_reason(error))
            raise CompactionFailed(run) from error


def _refuse_if_session_gone(session_id: int) -> None:
    """Deleting a session while it is compacted ends the compaction as a refusal, 410
    ``session_deleted``: its run went with the session, and there is nothing left to write to
    (docs/design.md, Limits and refusals)."""
    if not Session.objects.filter(pk=session_id).exists():
        raise CompactionRefused(*SESSION_DELETED[:2], status=SESSION_DELETED[2]) from None


def failure_reason(error: Exception) -> str:
    """Describe why a compaction failed, for the run receipt."""
    if isinstance(error, ProviderError):
        if error.is_timeout:
            return "summarization failed: the compaction model timed out"
        status = f" (HTTP {error.status})" if error.status else ""
        return f"summarization failed: model error{status}: {error.message}"[:500]
    if isinstance(error, SummaryError):
        return f"summarization failed: {error}"[:500]
    return f"{type(error).__name__}: {error}"[:500]


def _compact(
    session: Session, run: CompactionRun, *, instructions: str | None, observed_tokens: int | None
) -> CompactionRun:
    _plan(session, session_entries(session))  # refuse before flushing when there is nothing to do
    outcome = _flush_first(session, run)
    session.refresh_from_db()
    entries = session_entries(session)
    plan = _plan(session, entries)  # again: messages may have arrived during the flush
    ratio = calibration_ratio(effective_model(session.assistant))
    tokens_before = observed_tokens or view_tokens(entries, ratio=ratio)
    advance(run, RunState.SUMMARIZING, tokens_before=tokens_before)
    summary, offline, details = _summarize(
        session, run, plan, instructions=instructions, memory_text=_flushed_memory_text(session, outcome)
    )
    return _commit(
        session.pk,
        run,
        plan,
        summary=summary,
        offline=offline,
        details=details,
        tokens_before=tokens_before,
        prev_id=_latest_compaction_id(entries),
    )


def _flush_first(session: Session, run: CompactionRun) -> FlushOutcome:
    """Run the memory flush before summarising unless this cycle already flushed (docs/design.md §D1)."""
    # What the flush claim replaces, so a taker-over can undo the claim if this worker dies.
    before = {
        "memory_flush_compaction_count": session.memory_flush_compaction_count,
        "memory_flush_at": session.memory_flush_at.isoformat() if session.memory_flush_at else None,
    }
    advance(run, RunState.FLUSHING, flush_details={"before": before})
    outcome = run_memory_flush(session_id=session.pk)
    state = RunState.FLUSHED if outcome.status == "flushed" else RunState.FLUSH_SKIPPED
    advance(run, state, flush_outcome=outcome.label[:64], flush_details=outcome.as_dict())
    return outcome


def _flushed_memory_text(session: Session, outcome: FlushOutcome) -> str:
    """Return the memory an identifier may already live in: the flush target and today's note."""
    paths = {daily_note_path(local_today(session.assistant, dj_timezone.now()))}
    if outcome.path:
        paths.add(outcome.path)
    return "\n".join(
        MemoryDocument.objects.filter(assistant=session.assistant, path__in=paths).values_list(
            "content", flat=True
        )
    )


def _latest_compaction_id(entries: list[ViewEntry]) -> str | None:
    index = latest_compaction_index(entries)
    return entries[index]["id"] if index >= 0 else None


def _summarize(
    session: Session, run: CompactionRun, plan: CompactionPlan, *, instructions: str | None, memory_text: str
) -> tuple[str, bool, CompactionDetails]:
    """Return (summary, offline, details) from the compaction model, or the offline summariser."""
    model = get_chat_model("compaction")
    details: CompactionDetails = {
        "readFiles": [],
        "modifiedFiles": [],
        "summarizedEntryIds": list(plan.summarized_entry_ids),
        "turnPrefixEntryIds": list(plan.prefix_entry_ids),
        "isSplitTurn": plan.is_split_turn,
    }
    messages = [*plan.messages_to_summarize, *plan.turn_prefix_messages]
    if model is None:
        text = offline_summary(
            messages=messages, previous_summary=plan.previous_summary, instructions=instructions or ""
        )
        text = ensure_identifiers(
            text, source_texts=message_source_texts(messages), also_present_in=memory_text
        )
        return text, True, {**details, "offline": True}
    result = summarize_session(
        plan_messages=plan.messages_to_summarize,
        turn_prefix_messages=plan.turn_prefix_messages,
        previous_summary=plan.previous_summary,
        settings=session.assistant.config.compaction.summary,
        context_window=session.context_window,
        summarize=_summarizer(session, run, model),
        command_instructions=instructions,
        tokens_before=plan.tokens_before,
        also_present_in=memory_text,
    )
    return (
        result.summary,
        False,
        {
            **details,
            "offline": False,
            "boundaryOnly": result.boundary_only,
            "modelCalls": result.model_calls,
            "addedIdentifiers": list(result.added_identifiers),
            "preservedMessages": result.preserved_message_count,
            "toolFailures": result.tool_failure_count,
            "droppedMessages": result.dropped_message_count,
        },
    )


def _summarizer(session: Session, run: CompactionRun, model: ChatModel) -> Callable[[ChatMessages], str]:
    """Return the `summarize(chat) -> text` callback: the compaction model, within the timeout."""
    compaction = session.assistant.config.compaction
    model_name = compaction.model or django_settings.LLM_COMPACTION_MODEL or session.assistant.model or None
    # Pi generateSummary: maxTokens = floor(0.8 * reserveTokens).
    max_tokens = max(256, math.floor(0.8 * effective_reserve(compaction)))
    deadline = time.monotonic() + compaction.timeout_seconds

    def summarize(chat: ChatMessages) -> str:
        if time.monotonic() > deadline:
            raise SummaryError(f"compaction timed out after {compaction.timeout_seconds} s")
        heartbeat(run)
        completion = model.complete(messages=chat, model=model_name, max_tokens=max_tokens)
        record_usage(
            assistant=session.assistant,
            purpose=UsagePurpose.COMPACTION,
            model=completion.model,
            usage=completion.usage,
            session_id=session.pk,
        )
        return completion.text

    return summarize


@transaction.atomic
def _commit(
    session_id: int,
    run: CompactionRun,
    plan: CompactionPlan,
    *,
    summary: str,
    offline: bool,
    details: CompactionDetails,
    tokens_before: int,
    prev_id: str | None,
) -> CompactionRun:
    """Write the entry and the session figures together, under the session row lock."""
    session = lock_session(session_id)
    entries = session_entries(session)
    if _latest_compaction_id(entries) != prev_id:
        raise RuntimeError("the session was compacted by someone else meanwhile")
    if not CompactionRun.objects.filter(pk=run.pk, state__in=ACTIVE_RUN_STATES).exists():
        raise RuntimeError("this run was taken over by another worker (its lock connection was lost)")
    first_kept = Message.objects.get(session=session, entry_id=plan.first_kept_entry_id, flush_turn=False)
    now = dj_timezone.now()
    entry = CompactionEntry(
        session=session,
        seq=take_seq(session),
        entry_id=unique_entry_id(session, set()),
        summary=summary,
        first_kept=first_kept,
        first_kept_entry_id=first_kept.entry_id,
        tokens_before=tokens_before,
        trigger=run.trigger,
        details=details,
        from_hook=True,
        offline=offline,
        created_at=now,
    )
    new_entry: ViewEntry = {
        "type": "compaction",
        "id": entry.entry_id,
        "seq": entry.seq,
        "summary": summary,
        "firstKeptEntryId": entry.first_kept_entry_id,
        "timestamp": epoch_ms(now),
    }
    entry.tokens_after = view_tokens(
        [*entries, new_entry], ratio=calibration_ratio(effective_model(session.assistant))
    )
    entry.save()
    # docs/openclaw-behaviour.md §1.10: compactionCount + 1, totalTokens = tokensAfter (fresh), usage counters
    # cleared.
    session.compaction_count += 1
    session.total_tokens, session.total_tokens_fresh, session.last_usage = entry.tokens_after, True, None
    session.save(
        update_fields=[
            "last_seq",
            "compaction_count",
            "total_tokens",
            "total_tokens_fresh",
            "last_usage",
            "updated_at",
        ]
    )
    advance(
        run,
        RunState.COMMITTED,
        entry=entry,
        tokens_before=tokens_before,
        tokens_after=entry.tokens_after,
        offline=offline,
        reason="",
    )
    after_transcript_change(session)  # export mirror + transcript indexing, after the commit
    return run


def coverage_map(session: Session) -> dict[str, str]:
    """Map each summarised message's entry id to the compaction entry that summarised it."""
    covered: dict[str, str] = {}
    for entry in CompactionEntry.objects.filter(session=session).order_by("seq"):
        for entry_id in [
            *entry.details.get("summarizedEntryIds", []),
            *entry.details.get("turnPrefixEntryIds", []),
        ]:
            covered.setdefault(entry_id, entry.entry_id)
    return covered
