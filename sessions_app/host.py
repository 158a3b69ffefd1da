"""Sessions driven by an agent host that runs its own loop: OpenClaw through its plugin.

The host keeps the model call and the tools; the server keeps the transcript, builds the context,
and owns the memory flush and compaction (docs/integrations.md, OpenClaw plugin). Everything here
goes through the same transcript, context and compaction code as a REST ingest or our own turn:
`commit_turn` is an append with the host's idempotency key, `host_context` is
`build_model_context` cut to the host's token budget, `compact_for_host` is `compact_session`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction

from memory_app.tokens import estimate_message_tokens
from openclaw_site.models import Assistant
from providers.message_types import AgentMessage
from sessions_app.compaction.compact import compact_session, preview_compaction
from sessions_app.compaction.cutpoint import summary_message_text
from sessions_app.compaction.errors import CompactionBusy, CompactionError, CompactionRefused
from sessions_app.compaction.runs import wait_for_active_run
from sessions_app.context.build import build_model_context
from sessions_app.context.prompt import memory_prompt
from sessions_app.messages import MESSAGE_FIELDS, MessageInput
from sessions_app.models import CompactionRun, Message, Session, TurnCommit
from sessions_app.services import session_get_or_create
from sessions_app.transcript import append_messages, lock_session
from sessions_app.turn.maintenance import schedule_maintenance

# What of an OpenClaw message is stored besides the AgentMessage fields: its time. Everything else
# is the host's own bookkeeping (`idempotencyKey`, `responseId`, ...), dropped before validation.
HOST_MESSAGE_FIELDS = MESSAGE_FIELDS | {"timestamp"}
# The tools the host's model is given by the plugin (it registers them in OpenClaw).
HOST_TOOL_NAMES = ("memory_search", "memory_get", "memory_write")
# The smallest budget a host may report: below it no context fits the summary and one turn.
MIN_TOKEN_BUDGET = 1000


def host_message(data: Any) -> Any:
    """Keep the AgentMessage fields of an OpenClaw message (a non-object is left for validation)."""
    if not isinstance(data, dict):
        return data
    return {key: value for key, value in data.items() if key in HOST_MESSAGE_FIELDS}


@dataclass(frozen=True)
class CommitResult:
    """A committed turn: ``duplicate`` when its advancement key was committed before."""

    status: Literal["committed", "duplicate"]
    session: Session
    first_seq: int
    last_seq: int


def commit_turn(
    *, assistant: Assistant, key: str, advancement_key: str, messages: Sequence[MessageInput]
) -> CommitResult:
    """Append a turn once per advancement key (the session is created on first sight).

    The key is checked and recorded under the session's row lock, in the append's transaction, so
    two commits of one turn store it once, whichever comes first.
    """
    session, _ = session_get_or_create(assistant=assistant, key=key)
    with transaction.atomic():
        lock_session(session.pk)
        earlier = TurnCommit.objects.filter(session=session, advancement_key=advancement_key).first()
        if earlier is not None:
            return CommitResult("duplicate", session, earlier.first_seq, earlier.last_seq)
        rows = append_messages(session_id=session.pk, messages=messages)
        TurnCommit.objects.create(
            session=session, advancement_key=advancement_key, first_seq=rows[0].seq, last_seq=rows[-1].seq
        )
    schedule_maintenance(session.pk, session=rows[0].session)
    return CommitResult("committed", rows[0].session, rows[0].seq, rows[-1].seq)


@dataclass(frozen=True)
class BootstrapResult:
    session: Session
    bootstrapped: bool
    imported_messages: int


def bootstrap_session(
    *, assistant: Assistant, key: str, messages: Sequence[MessageInput], after_seq: int = 0
) -> BootstrapResult:
    """Import a session's earlier history the first time the server sees it; later calls do nothing.

    A long history comes in batches: each imports only while the session's messages end at
    ``after_seq`` (0 for the first), so a batch sent twice or a commit that came first stops the
    import. What the server itself wrote since (a compaction or a memory flush the earlier batches
    called for) does not (docs/integrations.md, OpenClaw plugin).
    """
    session, _ = session_get_or_create(assistant=assistant, key=key)
    with transaction.atomic():
        locked = lock_session(session.pk)
        if not messages or not _messages_end_at(locked, after_seq):
            return BootstrapResult(locked, False, 0)
        rows = append_messages(session_id=session.pk, messages=messages)
    schedule_maintenance(session.pk, session=rows[0].session)
    return BootstrapResult(rows[0].session, True, len(rows))


def _messages_end_at(session: Session, seq: int) -> bool:
    """Tell whether nothing but the server's own entries (compaction entries, flush turns) follows
    ``seq``, the last seq an import batch answered; a new session ends at 0."""
    if session.last_seq == seq:
        return True
    if seq == 0 or seq > session.last_seq:
        return False
    return not Message.objects.filter(session_id=session.pk, seq__gt=seq, flush_turn=False).exists()


def record_token_budget(session: Session, token_budget: int) -> Session:
    """Make the host's budget the session's window (thresholds follow it); queue what it calls for."""
    if session.host_token_budget != token_budget:
        Session.objects.filter(pk=session.pk).update(host_token_budget=token_budget)
        session.host_token_budget = token_budget
        schedule_maintenance(session.pk)
    return session


@dataclass(frozen=True)
class HostContext:
    """What the host sends its model: the summary and kept messages within its budget, and the
    memory part of the system prompt."""

    session: Session
    messages: list[AgentMessage]
    estimated_tokens: int
    system_prompt_addition: str
    memory_files: tuple[str, ...]
    dropped_messages: int
    compacted: bool
    # ``messages`` as a JSON array, each of the view's own messages encoded once per process.
    messages_json: str


def host_context(session: Session, *, token_budget: int) -> HostContext:
    """Build the session's context (summary, kept messages, pruning) in the host's message shape,
    dropping the oldest whole turns that do not fit ``token_budget`` (a compaction is queued)."""
    session = record_token_budget(session, token_budget)
    context = build_model_context(session)
    messages = [_host_shape(message) for message in context.agent_messages]
    # The build's memo knows each view message's stored estimate, so no message is counted again
    # here (docs/benchmarks.md, OpenClaw plugin overhead: where the time goes).
    with context.estimates.active():
        budget = token_budget - _tokens(messages[:1]) if _is_summary(messages) else token_budget
        kept, dropped = fit_turns(messages[1:] if _is_summary(messages) else messages, budget=budget)
        if _is_summary(messages):
            kept = [messages[0], *kept]
        estimated = _tokens(kept)
    addition = memory_prompt(session.assistant, now=context.now, tool_names=HOST_TOOL_NAMES)
    return HostContext(
        session=session,
        messages=kept,
        estimated_tokens=estimated,
        system_prompt_addition=addition.text,
        memory_files=addition.memory_paths,
        dropped_messages=dropped,
        compacted=_is_summary(messages),
        messages_json=context.view_memo.json_array(kept, slot="host-json"),
    )


def _host_shape(message: AgentMessage) -> AgentMessage:
    """Return a view message as OpenClaw's AgentMessage: a compaction summary becomes the user
    message OpenClaw itself makes of one; our ``entryId`` stays (OpenClaw ignores it)."""
    if message.get("role") != "compactionSummary":
        return message
    return {
        "role": "user",
        "content": [{"type": "text", "text": summary_message_text(str(message.get("summary") or ""))}],
        "timestamp": message.get("timestamp") or 0,
        "entryId": message.get("entryId"),
        "compactionSummary": True,
    }


def _is_summary(messages: list[AgentMessage]) -> bool:
    return bool(messages) and bool(messages[0].get("compactionSummary"))


def _tokens(messages: Sequence[AgentMessage]) -> int:
    return sum(estimate_message_tokens(message) for message in messages)


def fit_turns(messages: list[AgentMessage], *, budget: int) -> tuple[list[AgentMessage], int]:
    """Keep the newest messages that fit ``budget``, starting at a user message so no tool result
    loses its call; return them and how many were dropped."""
    total, start = 0, len(messages)
    for index in range(len(messages) - 1, -1, -1):
        total += estimate_message_tokens(messages[index])
        if total > budget:
            break
        if messages[index].get("role") == "user":
            start = index
    if total <= budget:
        start = 0
    return messages[start:], start


@dataclass(frozen=True)
class HostCompaction:
    """The outcome of a compaction the host asked for (OpenClaw's ``CompactResult``)."""

    ok: bool
    compacted: bool
    reason: str
    run: CompactionRun | None = None

    @property
    def summary(self) -> str:
        entry = self.run.entry if self.run is not None else None
        return entry.summary if entry is not None else ""


# How long a host's compaction waits for one already running (a threshold compaction the last
# commit queued) before answering with that one's outcome.
BUSY_WAIT_SECONDS = 120.0


def compact_for_host(
    session: Session,
    *,
    token_budget: int | None,
    trigger: Literal["manual", "overflow"],
    instructions: str | None,
) -> HostCompaction:
    """Flush, then compact now (the host's `/compact` or its overflow recovery).

    Nothing to compact is an answer, not a failure: no run is recorded for it. A compaction already
    running is waited for, and its outcome is the answer.
    """
    if token_budget is not None:
        session = record_token_budget(session, token_budget)
    try:
        preview_compaction(session, trigger=trigger)
        run = compact_session(session_id=session.pk, trigger=trigger, instructions=instructions)
    except CompactionBusy:
        finished = wait_for_active_run(session.pk, timeout_seconds=BUSY_WAIT_SECONDS)
        done = finished is not None and finished.entry_id is not None
        return HostCompaction(ok=done, compacted=done, reason=_run_reason(finished), run=finished)
    except CompactionError as error:
        return host_outcome(error)
    assert run is not None  # only a threshold trigger answers None
    return HostCompaction(ok=True, compacted=True, reason="compacted", run=run)


def host_outcome(error: CompactionError) -> HostCompaction:
    """A compaction that did not happen, as OpenClaw's CompactResult: its reason is the error's
    message; a refusal (nothing to compact, already compacted) is an answer, a failure is not ok."""
    refused = isinstance(error, CompactionRefused)
    return HostCompaction(
        ok=refused, compacted=False, reason=error.message, run=None if refused else error.run
    )


def _run_reason(run: CompactionRun | None) -> str:
    if run is None:
        return "a compaction was running and left no record"
    return "compacted by the compaction that was running" if run.entry_id else (run.reason or run.state)
