"""A session's token figures: the view's tokens from the last usage a model reported plus estimates after it, calibrated per model (docs/design.md §D3)."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from time import monotonic
from typing import Any

from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone as dj_timezone

from memory_app.tokens import (
    calculate_context_tokens,
    corrected_estimate,
    correction_ratio,
    estimate_context_tokens,
    estimate_message_tokens,
    estimate_messages_tokens,
)
from openclaw_site.models import Assistant
from providers.chat import get_chat_model
from providers.message_types import AgentMessage
from sessions_app.compaction.cutpoint import build_session_context
from sessions_app.context.thresholds import (
    FlushReason,
    Thresholds,
    ThresholdsDict,
    has_flushed_this_cycle,
    output_tokens_of,
    projected_next_turn_tokens,
    prompt_tokens_of,
    thresholds_for,
)
from sessions_app.context.view import latest_compaction_index
from sessions_app.context.view_cache import ViewEntry
from sessions_app.models import CompactionEntry, Message, ModelCalibration, Session


def view_tokens(entries: list[ViewEntry], *, ratio: float | None) -> int:
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


def _without_stale_usage(message: AgentMessage, cutoff_ms: int) -> AgentMessage:
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


class TokenFiguresDict(ThresholdsDict):
    """`TokenFigures` as the API shows them."""

    context_tokens: int
    last_prompt_tokens: int
    last_output_tokens: int
    projected_tokens: int
    transcript_bytes: int
    flushed_this_cycle: bool
    flush_due: bool
    flush_reason: FlushReason | None
    compaction_due: bool
    calibration_ratio: float | None


class SessionFigures(TokenFiguresDict):
    """A session's token figures as its API shows them (OpenClaw's SessionEntry fields and ours)."""

    total_tokens: int | None
    total_tokens_fresh: bool
    compaction_count: int
    memory_flush_compaction_count: int | None
    memory_flush_at: str | None
    model: str | None
    offline: bool


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
    def flush_reason(self) -> FlushReason | None:
        return self.thresholds.flush_reason(
            projected_tokens=self.projected_tokens,
            transcript_bytes=self.transcript_bytes,
            already_flushed=self.flushed_this_cycle,
        )

    @property
    def compaction_due(self) -> bool:
        return self.thresholds.should_compact(self.context_tokens)

    def as_dict(self) -> TokenFiguresDict:
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


def session_figures(session: Session, *, figures: TokenFigures | None = None) -> SessionFigures:
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
