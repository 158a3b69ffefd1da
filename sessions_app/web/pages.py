"""What the session pages need from the context engine, shaped for templates.

A thin read/act layer: it calls the engine's domain functions (`sessions_app.context.build`,
`sessions_app.compaction.compact`, `sessions_app.turn.loop`) and turns their results into small frozen value
objects a template can show. It computes no tokens, thresholds or summaries of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from django.conf import settings as django_settings

from openclaw_site.models import Assistant
from providers.message_types import AgentMessage, ToolSpec
from sessions_app.models import CompactionRun, Session

if TYPE_CHECKING:
    from sessions_app.compaction.compact import EntryRef
    from sessions_app.compaction.errors import CompactionError

# --- sessions ---------------------------------------------------------------------------------


def create_session(*, assistant: Assistant, key: str | None, title: str) -> Session:
    """Start a session (the same service the REST API uses)."""
    from sessions_app.services import session_create

    return session_create(assistant=assistant, key=key, title=title)


# --- the model --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelStatus:
    configured: bool
    model: str
    message: str


# The dashboard's own words for a missing model (the REST API's message speaks of its fields).
NO_MODEL_MESSAGE = (
    "No model is connected yet, so {name} can't reply. Whoever runs "
    "this server connects one (any OpenAI-compatible service) and restarts it; each assistant may then "
    "pick its own model in its settings. Meanwhile /compact works with the offline summary."
)


def model_status(assistant: Assistant) -> ModelStatus:
    """Say whether the assistant can reply, and how to make it able to."""
    from providers.chat import get_chat_model
    from sessions_app.context.figures import effective_model

    model = effective_model(assistant)
    if get_chat_model("chat") is not None:
        return ModelStatus(True, model, "")
    return ModelStatus(False, model, NO_MODEL_MESSAGE.format(name=assistant.name))


def _turn_error(error: Any, assistant: Assistant) -> ChatOutcome:
    """Return a refused or failed turn as the chat shows it, in the dashboard's words."""
    message = error.message
    if error.code == "model_not_configured":
        message = "Your message was not saved. " + NO_MODEL_MESSAGE.format(name=assistant.name)
    return ChatOutcome(error=message, status=error.status, stored=bool(error.stored))


# --- the gauge --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gauge:
    """The session's context size against its window and the two thresholds."""

    tokens: int
    window: int
    flush_threshold: int
    compaction_threshold: int
    flush_enabled: bool
    flushed_this_cycle: bool
    ratio: float | None
    flush_pending: bool = False
    compaction_pending: bool = False
    compaction_running: bool = False
    breakdown: Any = None  # sessions_app.context.build.ContextBreakdown of the next request

    BREAKDOWN_LABELS: ClassVar[dict[str, str]] = {
        "system_prompt": "System prompt",
        "memory_files": "Memory files",
        "tools": "Tool definitions",
        "summary": "Summary",
        "messages": "Messages",
        "free": "Free",
    }

    @property
    def parts(self) -> list[tuple[str, str, int, float]]:
        """(key, label, tokens, percent of the window) of each part of the window, free space last."""
        if self.breakdown is None or not self.window:
            return []
        return [
            (key, self.BREAKDOWN_LABELS[key], tokens, min(100.0, 100.0 * tokens / self.window))
            for key, tokens in self.breakdown.as_dict().items()
        ]

    @property
    def percent(self) -> float:
        return min(100.0, 100.0 * self.tokens / self.window) if self.window else 0.0

    @property
    def flush_percent(self) -> float:
        return 100.0 * self.flush_threshold / self.window if self.window else 0.0

    @property
    def compaction_percent(self) -> float:
        return 100.0 * self.compaction_threshold / self.window if self.window else 0.0

    @property
    def state(self) -> str:
        """ok, flush (at or past the flush threshold) or compact (past the compaction threshold)."""
        if self.tokens > self.compaction_threshold:
            return "compact"
        if self.flush_enabled and self.tokens >= self.flush_threshold:
            return "flush"
        return "ok"

    @property
    def busy(self) -> str:
        """What the workers are about to do or doing, in words ("" when nothing)."""
        if self.compaction_running:
            return "Compacting…"
        if self.compaction_pending:
            return "Compaction queued…"
        if self.flush_pending:
            return "Memory flush queued…"
        return ""

    @property
    def source_text(self) -> str:
        text = "Last reported usage plus CJK-weighted estimates of what came after it"
        if self.ratio:
            text += f", corrected by this model's measured ratio ×{self.ratio:.2f}"
        return text + "."


def gauge(session: Session) -> Gauge:
    """Return the session's gauge figures (`context.token_figures`) and what maintenance is due.

    A due flush or compaction has been queued by the turn that crossed the threshold
    (`sessions_app.turn.maintenance.schedule_maintenance`); the page polls until a worker has done it.
    """
    from sessions_app.compaction.flush import skip_reason
    from sessions_app.context.build import build_model_context
    from sessions_app.context.figures import token_figures
    from sessions_app.models import ACTIVE_RUN_STATES
    from sessions_app.turn.tools import turn_tools

    figures = token_figures(session)
    limits = figures.thresholds
    return Gauge(
        tokens=figures.context_tokens,
        window=limits.context_window,
        flush_threshold=limits.flush_threshold,
        compaction_threshold=limits.compaction_threshold,
        flush_enabled=limits.flush_enabled,
        flushed_this_cycle=figures.flushed_this_cycle,
        ratio=figures.ratio,
        flush_pending=figures.flush_reason is not None and skip_reason(session) is None,
        compaction_pending=figures.compaction_due,
        compaction_running=CompactionRun.objects.filter(
            session=session, state__in=ACTIVE_RUN_STATES
        ).exists(),
        # The same split GET /sessions/{id}/context/ reports as "breakdown".
        breakdown=build_model_context(session, tools=turn_tools()).breakdown(
            context_window=limits.context_window
        ),
    )


# --- what the model sees ----------------------------------------------------------------------


@dataclass(frozen=True)
class ContextMessage:
    """One message of the model's context as the page lists it."""

    index: int
    role: str
    label: str
    text: str
    chars: int
    change: Any = None  # pruning.PruneChange when pruning trimmed or cleared it
    tool_calls: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContextView:
    system_prompt: str
    memory_paths: tuple[str, ...]
    messages: list[ContextMessage]
    pruning_mode: str
    pruning_ran: bool
    pruning_reason: str
    changes: int
    prompt_estimate: int
    model: str
    tools: tuple[str, ...]
    window: int
    cleared: int = 0
    trimmed: int = 0


_LABELS = {
    "user": "User",
    "assistant": "Assistant",
    "toolResult": "Tool result",
    "system": "System",
    "compactionSummary": "Compaction summary",
}


def _text(message: AgentMessage) -> str:
    if message.get("role") == "compactionSummary":
        return str(message.get("summary", ""))
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "thinking":
            parts.append(f"[thinking] {block.get('thinking', '')}")
        elif kind == "image":
            parts.append("[image]")
    return "\n".join(parts)


def _tool_calls(message: AgentMessage) -> tuple[str, ...]:
    content = message.get("content")
    if not isinstance(content, list):
        return ()
    return tuple(
        f"{b.get('name')}({json.dumps(b.get('arguments', {}), ensure_ascii=False)})"
        for b in content
        if b.get("type") == "toolCall"
    )


def model_context(session: Session) -> ContextView:
    """Return exactly what the next model call would send (`context.build_model_context`)."""
    from sessions_app.context.build import build_model_context

    context = build_model_context(session, tools=_agent_tools(session))
    changes = {change.index: change for change in context.pruning.result.changes}
    messages = []
    for index, message in enumerate(context.agent_messages):
        role = str(message.get("role", ""))
        label = _LABELS.get(role, role)
        if role == "toolResult":
            label = f"Result of {message.get('toolName', '')}"
        text = _text(message)
        messages.append(
            ContextMessage(
                index=index,
                role=role,
                label=label,
                text=text,
                chars=len(text),
                change=changes.get(index),
                tool_calls=_tool_calls(message),
            )
        )
    actions = [c.action for c in changes.values()]
    return ContextView(
        system_prompt=context.system_prompt.text,
        memory_paths=context.system_prompt.memory_paths,
        messages=messages,
        pruning_mode=context.pruning.mode,
        pruning_ran=context.pruning.ran,
        pruning_reason=context.pruning.reason,
        changes=len(changes),
        prompt_estimate=context.prompt_estimate,
        model=context.model,
        tools=tuple(t.get("name", "") for t in context.tools),
        window=session.context_window,
        cleared=actions.count("cleared"),
        trimmed=sum(1 for a in actions if a != "cleared"),
    )


def _agent_tools(session: Session) -> list[ToolSpec]:
    """The tool specs an assistant turn offers, so the shown system prompt matches the real one."""
    from sessions_app.turn.tools import turn_tools

    return list(turn_tools())


# --- compaction -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preview:
    """A dry run's figures, or why there is nothing to compact."""

    ok: bool
    message: str = ""
    summarized: tuple[EntryRef, ...] = ()
    turn_prefix: tuple[EntryRef, ...] = ()
    first_kept_entry_id: str = ""
    first_kept_seq: int | None = None
    tokens_before: int = 0
    tokens_kept: int = 0
    tokens_after_estimate: int = 0
    flush_would_run: bool = False
    flush_skip_reason: str | None = None
    offline: bool = False
    is_split_turn: bool = False
    has_previous_summary: bool = False
    notes: tuple[str, ...] = ()


def compaction_preview(*, session: Session, instructions: str) -> Preview:
    """Return what a manual compaction would do now, writing nothing (the API's dry run)."""
    from sessions_app.compaction.compact import compact_session
    from sessions_app.compaction.errors import CompactionError

    try:
        preview = compact_session(
            session_id=session.pk, trigger="manual", instructions=instructions or None, dry_run=True
        )
    except CompactionError as refused:
        return Preview(ok=False, message=compaction_error_text(session, refused))
    from sessions_app.models import Message

    first_kept_seq = (
        Message.objects.filter(session=session, entry_id=preview.first_kept_entry_id)
        .values_list("seq", flat=True)
        .first()
    )
    return Preview(
        ok=True,
        summarized=preview.summarized,
        turn_prefix=preview.turn_prefix,
        first_kept_entry_id=preview.first_kept_entry_id,
        first_kept_seq=first_kept_seq,
        tokens_before=preview.tokens_before,
        tokens_kept=preview.tokens_kept,
        tokens_after_estimate=preview.tokens_after_estimate,
        flush_would_run=preview.flush_would_run,
        flush_skip_reason=preview.flush_skip_reason,
        offline=preview.offline,
        is_split_turn=preview.is_split_turn,
        has_previous_summary=preview.has_previous_summary,
        notes=preview.notes,
    )


def compaction_error_text(session: Session, error: CompactionError) -> str:
    """The dashboard's words for a compaction that did not happen: the error's own message, and
    for nothing to compact, how far a small session is from having something.

    Compaction keeps the most recent keepRecentTokens verbatim (docs/openclaw-behaviour.md §1.1), so
    it has something to summarise once the session's messages pass that many tokens.
    """
    from sessions_app.compaction.command import format_token_count as count
    from sessions_app.context.figures import token_figures

    if error.code != "nothing_to_compact":
        return error.message
    figures = token_figures(session)
    keep, now = session.assistant.config.compaction.keep_recent_tokens, figures.context_tokens
    head = (
        f"Nothing to compact yet: this session holds about {count(now)} tokens, and compaction keeps "
        f"the most recent {count(keep)} tokens word for word (keepRecentTokens)."
    )
    more = (
        f" It has something to summarise once the session passes {count(keep)} tokens, about "
        f"{count(keep - now)} more."
        if now < keep
        else " Everything since the last compaction is still within that recent part."
    )
    automatic = f" Automatic compaction starts at {count(figures.thresholds.compaction_threshold)} tokens."
    return head + more + automatic


@dataclass(frozen=True)
class CompactResult:
    ok: bool
    message: str
    run: CompactionRun | None = None


def compact(*, session: Session, instructions: str) -> CompactResult:
    """Compact now through the one entry point; a refusal or failure changes nothing."""
    from sessions_app.compaction.command import manual_reply_text
    from sessions_app.compaction.compact import compact_session
    from sessions_app.compaction.errors import CompactionError

    try:
        # A session too small to compact is told so by a dry run, which records no failed run.
        compact_session(session_id=session.pk, trigger="manual", dry_run=True)
        run = compact_session(session_id=session.pk, trigger="manual", instructions=instructions or None)
    except CompactionError as error:
        return CompactResult(False, compaction_error_text(session, error), error.run)
    if run is None:  # only a threshold trigger that is no longer due returns no run
        raise RuntimeError(f"A manual compaction of session {session.pk} returned no run.")
    return CompactResult(True, manual_reply_text(run, context_window=session.context_window), run)


# --- chat -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChatOutcome:
    """What a chat post did: a reply, a compaction, or an error to show by the composer.

    ``stored`` says whether the transcript changed (a failed turn keeps what it stored), so the
    page refreshes it even when it also shows an error.
    """

    error: str = ""
    status: int = 200
    notice: str = ""
    stored: bool = True
    scheduled: dict[str, Any] = field(default_factory=dict)


def is_command(text: str) -> bool:
    """Tell whether a chat text is a command (`/compact [instructions]`) rather than a message."""
    from sessions_app.compaction.command import NOT_A_COMMAND, parse_compact_command

    return parse_compact_command(text) is not NOT_A_COMMAND


def turn_refusal(assistant: Assistant) -> ChatOutcome | None:
    """Return why no turn can run now (no model configured), or None."""
    from sessions_app.turn.events import TurnError
    from sessions_app.turn.loop import require_chat_model

    try:
        require_chat_model()
    except TurnError as error:
        return _turn_error(error, assistant)
    return None


def chat(*, session: Session, text: str) -> ChatOutcome:
    """Post the user's message and run the assistant's turn; `/compact [instructions]` compacts."""
    from sessions_app.compaction.command import NOT_A_COMMAND, parse_compact_command

    instructions = parse_compact_command(text)
    if instructions is not NOT_A_COMMAND:
        # Like OpenClaw's commands, /compact is not stored as a message.
        result = compact(session=session, instructions=instructions if isinstance(instructions, str) else "")
        if result.ok:
            return ChatOutcome(notice=result.message)
        return ChatOutcome(error=result.message, status=409, stored=result.run is not None)
    return _assistant_turn(session=session, text=text)


def _assistant_turn(*, session: Session, text: str) -> ChatOutcome:
    """Run the turn on the text to its end (`streamed_turn` without showing the reply as it comes)."""
    outcome = ChatOutcome()
    for item in streamed_turn(session=session, text=text):
        if isinstance(item, ChatOutcome):
            outcome = item
    return outcome


def streamed_turn(*, session: Session, text: str) -> Iterator[str | ChatOutcome]:
    """Run `sessions_app.turn.loop.stream_turn` on the text, as the REST API's ``"respond": true`` does.

    Yields the reply's visible text as it arrives, then the ChatOutcome.
    """
    from sessions_app.messages import MessageError, validate_message
    from sessions_app.turn.events import ReplyDelta, TurnError, TurnFinished
    from sessions_app.turn.loop import stream_turn

    try:
        message = validate_message({"role": "user", "content": text}, max_bytes=max_message_bytes())
    except MessageError as error:
        yield ChatOutcome(error=error.message, status=413 if error.too_large else 422, stored=False)
        return
    try:
        for event in stream_turn(session=session, inputs=[message]):
            if isinstance(event, ReplyDelta):
                yield event.text
            elif isinstance(event, TurnFinished):
                result = event.result
    except TurnError as error:
        yield _turn_error(error, session.assistant)
        return
    notice = (
        "The assistant chose not to reply (NO_REPLY); the turn is stored as silent." if result.silent else ""
    )
    yield ChatOutcome(notice=notice, scheduled=dict(result.scheduled))


def retry(*, session: Session) -> ChatOutcome:
    """Run the session's failed last turn again (`sessions_app.turn.loop.retry_turn`)."""
    from sessions_app.turn.events import TurnError
    from sessions_app.turn.loop import retry_turn

    try:
        result = retry_turn(session=session)
    except TurnError as error:
        return _turn_error(error, session.assistant)
    notice = "The assistant chose not to reply (NO_REPLY)." if result.silent else ""
    return ChatOutcome(notice=notice, scheduled=dict(result.scheduled))


def max_message_bytes() -> int:
    return django_settings.MAX_MESSAGE_BYTES
