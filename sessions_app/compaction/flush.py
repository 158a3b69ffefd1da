"""The pre-compaction memory flush: a silent turn that appends durable notes to today's daily note.

docs/openclaw-behaviour.md section 2 (`extensions/memory-core/src/flush-plan.ts`,
`src/auto-reply/reply/agent-runner-memory.ts`, `src/agents/pi-tools.read.ts`) with docs/design.md §D1-D2: at most one flush per compaction cycle, claimed with one conditional UPDATE so two
workers cannot both flush; skipped when the workspace is not writable; a failure is recorded and
never blocks the user's turn. With no model configured the offline extractor appends the durable
lines it finds, labelled offline.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Required, TypedDict
from zoneinfo import ZoneInfo

from django.conf import settings as django_settings
from django.db.models import F, Q
from django.utils import timezone as dj_timezone

from memory_app.documents import Provenance, append_to_document, daily_note_path
from memory_app.governance.trust import fetching_tools_seen
from memory_app.models import MemoryDocument
from memory_app.paths import InvalidPath, validate_memory_path
from memory_app.tools import build_memory_read
from openclaw_site.models import UsagePurpose, WorkspaceAccess
from openclaw_site.teams.assistant_settings import MemoryFlushSettings
from openclaw_site.usage.ledger import record_usage
from providers.chat import ChatModel, Completion, ToolCall, get_chat_model
from providers.errors import ProviderError
from providers.json_types import JSONObject
from providers.message_types import AgentMessage, ToolSpec
from providers.openai_chat import to_openai_messages
from sessions_app.compaction.summary import offline_flush_lines
from sessions_app.context.build import build_model_context
from sessions_app.context.figures import effective_model, record_calibration
from sessions_app.context.prompt import assistant_zone
from sessions_app.context.thresholds import prompt_tokens_of
from sessions_app.messages import MessageInput, epoch_ms
from sessions_app.models import Message, Session
from sessions_app.transcript import to_agent_message
from sessions_app.turn.model_output import (
    assistant_input,
    error_assistant_input,
    store_messages,
    tool_result_input,
)
from sessions_app.turn.silent import SILENT_REPLY_TOKEN, is_silent_reply_text

logger = logging.getLogger(__name__)

# flush-plan.ts, verbatim.
MEMORY_FLUSH_TARGET_HINT = "Store durable memories only in memory/YYYY-MM-DD.md (create memory/ if needed)."
MEMORY_FLUSH_APPEND_ONLY_HINT = (
    "If memory/YYYY-MM-DD.md already exists, APPEND new content only and do not overwrite existing entries."
)
MEMORY_FLUSH_READ_ONLY_HINT = (
    "Treat workspace bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, TOOLS.md, and "
    "AGENTS.md as read-only during this flush; never overwrite, replace, or edit them."
)
MEMORY_FLUSH_REQUIRED_HINTS = (
    MEMORY_FLUSH_TARGET_HINT,
    MEMORY_FLUSH_APPEND_ONLY_HINT,
    MEMORY_FLUSH_READ_ONLY_HINT,
)
DEFAULT_MEMORY_FLUSH_PROMPT = " ".join(
    [
        "Pre-compaction memory flush.",
        MEMORY_FLUSH_TARGET_HINT,
        MEMORY_FLUSH_READ_ONLY_HINT,
        MEMORY_FLUSH_APPEND_ONLY_HINT,
        "Do NOT create timestamped variant files (e.g., YYYY-MM-DD-HHMM.md); always use the canonical "
        "YYYY-MM-DD.md filename.",
        f"If nothing to store, reply with {SILENT_REPLY_TOKEN}.",
    ]
)
DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT = " ".join(
    [
        "Pre-compaction memory flush turn.",
        "The session is near auto-compaction; capture durable memories to disk.",
        MEMORY_FLUSH_TARGET_HINT,
        MEMORY_FLUSH_READ_ONLY_HINT,
        MEMORY_FLUSH_APPEND_ONLY_HINT,
        f"You may reply, but usually {SILENT_REPLY_TOKEN} is correct.",
    ]
)
NO_REPLY_HINT = f"\n\nIf no user-visible reply is needed, start with {SILENT_REPLY_TOKEN}."
OFFLINE_FLUSH_MARKER = "_(offline memory flush: no model configured)_"
OVERFLOW_FLUSH_MARKER = "_(offline memory flush: the session no longer fits the model)_"


# --- the plan (pure) --------------------------------------------------------------------------


@dataclass(frozen=True)
class FlushPlan:
    """The prompts and target of one flush (`MemoryFlushPlan`)."""

    prompt: str
    system_prompt: str
    relative_path: str
    date_stamp: str


def ensure_no_reply_hint(text: str) -> str:
    return text if SILENT_REPLY_TOKEN in text else text + NO_REPLY_HINT


def ensure_safety_hints(text: str) -> str:
    """Append each required hint that the text lacks (`ensureMemoryFlushSafetyHints`)."""
    result = text.strip()
    for hint in MEMORY_FLUSH_REQUIRED_HINTS:
        if hint not in result:
            result = f"{result}\n\n{hint}" if result else hint
    return result


def _ordinal(day: int) -> str:
    if 11 <= day <= 13:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def format_user_time(now: datetime, zone: ZoneInfo) -> str:
    """Format like OpenClaw's `formatUserTime` (12-hour): `Monday, February 16th, 2026 - 9:05 PM`."""
    local = now.astimezone(zone)
    hour = local.hour % 12 or 12
    period = "AM" if local.hour < 12 else "PM"
    return (
        f"{local:%A}, {local:%B} {local.day}{_ordinal(local.day)}, {local.year} - {hour}:{local:%M} {period}"
    )


def current_time_line(now: datetime, zone: ZoneInfo) -> str:
    """Return `Current time: <local> (<tz>) / YYYY-MM-DD HH:MM UTC` (`resolveCronStyleNow`)."""
    utc = now.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    return f"Current time: {format_user_time(now, zone)} ({zone.key}) / {utc} UTC"


def _append_time_line(text: str, time_line: str) -> str:
    trimmed = text.rstrip()
    if not trimmed:
        return time_line
    return trimmed if "Current time:" in trimmed else f"{trimmed}\n{time_line}"


def build_flush_plan(flush: MemoryFlushSettings, *, now: datetime, zone: ZoneInfo) -> FlushPlan | None:
    """Build the flush prompts for `now` in the assistant's timezone; None when disabled."""
    if not flush.enabled:
        return None
    day = now.astimezone(zone).date()
    date_stamp = day.isoformat()
    # A blank prompt is no prompt: OpenClaw's own text is used.
    prompt = ensure_no_reply_hint(ensure_safety_hints(_text(flush.prompt) or DEFAULT_MEMORY_FLUSH_PROMPT))
    system = ensure_no_reply_hint(
        ensure_safety_hints(_text(flush.system_prompt) or DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT)
    )
    return FlushPlan(
        prompt=_append_time_line(prompt.replace("YYYY-MM-DD", date_stamp), current_time_line(now, zone)),
        system_prompt=system.replace("YYYY-MM-DD", date_stamp),
        relative_path=daily_note_path(day),
        date_stamp=date_stamp,
    )


def _text(value: str | None) -> str:
    return (value or "").strip()


# --- the two flush tools ----------------------------------------------------------------------


def flush_tool_specs(relative_path: str) -> list[ToolSpec]:
    """Return the only tools a flush turn gets: `read` and the append-only `write` (pi-tools.ts)."""
    return [
        {
            "name": "read",
            "description": (
                "Read a memory file (MEMORY.md or memory/*.md). Use offset/limit (1-based lines) "
                "for large files."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "MEMORY.md or memory/<name>.md"},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)"},
                    "limit": {"type": "integer", "minimum": 1, "description": "Number of lines"},
                },
                "required": ["path"],
            },
        },
        {
            "name": "write",
            "description": (
                f"Write content to a file. During memory flush, this tool may only append to {relative_path}."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": f"Must be {relative_path}"},
                    "content": {"type": "string", "description": "Markdown to append"},
                },
                "required": ["path", "content"],
            },
        },
    ]


class ToolFailure(Exception):
    """A tool call the model must be told failed (becomes an `isError` tool result)."""


def restricted_write_message(relative_path: str) -> str:
    return f"Memory flush writes are restricted to {relative_path}; use that path only."


def normalise_flush_path(raw: object) -> str:
    """Resolve a requested path against the workspace root the way the write guard compares it."""
    if not isinstance(raw, str) or not raw.strip():
        return ""
    path = raw.strip()
    if path.startswith("@"):
        return path  # never equal to the allowed path (pi-tools.read.ts)
    return posixpath.normpath(path.removeprefix("./"))


@dataclass
class FlushToolbox:
    """Runs a flush turn's tool calls for one assistant, session and target path."""

    session: Session
    relative_path: str
    appended: list[Appended] = field(default_factory=list)
    # The flush saw a fetching tool's result: what it writes is untrusted (memory_app.governance.trust).
    untrusted: bool = False

    def run(self, name: str, arguments: JSONObject, *, message_pk: int) -> str:
        if name == "read":
            return self.read(arguments)
        if name == "write":
            return self.write(arguments, message_pk=message_pk)
        raise ToolFailure(f"Tool {name} not found")

    def read(self, arguments: JSONObject) -> str:
        try:
            path = validate_memory_path(normalise_flush_path(arguments.get("path")))
        except InvalidPath as error:
            raise ToolFailure(f"Memory flush can only read MEMORY.md and memory/*.md: {error}") from None
        document = MemoryDocument.objects.filter(assistant=self.session.assistant, path=path).first()
        if document is None:
            raise ToolFailure(f"File not found: {path}")
        offset, limit = arguments.get("offset"), arguments.get("limit")
        read = build_memory_read(
            document.content,
            path=path,
            start=offset if isinstance(offset, int) else None,
            count=limit if isinstance(limit, int) else None,
            default_lines=2000,
            max_chars=50 * 1024,
        )
        return read.text

    def write(self, arguments: JSONObject, *, message_pk: int) -> str:
        content = arguments.get("content")
        if not isinstance(content, str) or normalise_flush_path(arguments.get("path")) == "":
            raise ToolFailure("write needs path and content")
        if normalise_flush_path(arguments.get("path")) != self.relative_path:
            raise ToolFailure(restricted_write_message(self.relative_path))
        outcome = append_to_document(
            assistant=self.session.assistant,
            path=self.relative_path,
            addition=content,
            provenance=Provenance(
                author="flush",
                session_pk=self.session.pk,
                message_pk=message_pk,
                note="pre-compaction memory flush",
                untrusted=self.untrusted,
            ),
        )
        skipped = [f"{d.text.strip()} ({d.path}#L{d.line})" for d in outcome.duplicates]
        if outcome.revision is None:
            return "Nothing appended: memory already holds " + "; ".join(skipped) + "."
        self.appended.append(
            {"path": self.relative_path, "revision": outcome.revision.pk, "chars": len(content)}
        )
        if skipped:
            return (
                f"Appended content to {self.relative_path}; left out lines memory already holds: "
                + "; ".join(skipped)
                + "."
            )
        return f"Appended content to {self.relative_path}."


# --- the outcome ------------------------------------------------------------------------------


class Appended(TypedDict, total=False):
    """One append a flush made: the characters a model's write added, or the lines the offline flush did."""

    path: Required[str]
    revision: Required[int]
    chars: int
    lines: int


class FlushOutcomeDict(TypedDict):
    """`FlushOutcome` as a run's details, the flush task and the API show it."""

    status: str
    label: str
    reason: str
    offline: bool
    path: str
    appended: list[Appended]
    reply_silent: bool | None
    stored: list[str]


@dataclass(frozen=True)
class FlushOutcome:
    """What one flush attempt did; `label` is what a CompactionRun records."""

    status: str  # flushed | skipped | failed
    reason: str = ""
    offline: bool = False
    path: str = ""
    appended: tuple[Appended, ...] = ()
    reply_silent: bool | None = None
    stored: tuple[str, ...] = ()  # entry ids of the flush-turn messages it stored

    @property
    def wrote(self) -> bool:
        """Tell whether the flush changed anything: a transcript message or a memory append."""
        return bool(self.stored or self.appended)

    @property
    def label(self) -> str:
        if self.status == "flushed":
            return "flushed(offline)" if self.offline else "flushed"
        return f"flush_{self.status}({self.reason})"

    def as_dict(self) -> FlushOutcomeDict:
        return {
            "status": self.status,
            "label": self.label,
            "reason": self.reason,
            "offline": self.offline,
            "path": self.path,
            "appended": list(self.appended),
            "reply_silent": self.reply_silent,
            "stored": list(self.stored),
        }


# --- the cycle claim (docs/design.md §D1-D2) ----------------------------------------------------


def claim_flush(session_id: int, *, now: datetime) -> int | None:
    """Mark this compaction cycle flushed if nobody has; return the cycle, or None if already done.

    One conditional UPDATE: of two workers, exactly one sees a row changed.
    """
    cycle = Session.objects.filter(pk=session_id).values_list("compaction_count", flat=True).first()
    if cycle is None:
        return None
    not_flushed = Q(memory_flush_compaction_count__isnull=True) | ~Q(
        memory_flush_compaction_count=F("compaction_count")
    )
    claimed = Session.objects.filter(not_flushed, pk=session_id, compaction_count=cycle).update(
        memory_flush_compaction_count=cycle,
        memory_flush_at=now,
    )
    return cycle if claimed else None


def release_flush(session_id: int, *, cycle: int, previous: int | None, previous_at: datetime | None) -> None:
    """Undo a claim after a failed flush, so the next turn of the same cycle can try again."""
    Session.objects.filter(pk=session_id, compaction_count=cycle, memory_flush_compaction_count=cycle).update(
        memory_flush_compaction_count=previous,
        memory_flush_at=previous_at,
    )


# --- running a flush --------------------------------------------------------------------------


def skip_reason(session: Session) -> str | None:
    """Return why this session's flush is skipped (read-only workspace, disabled), or None."""
    assistant = session.assistant
    if assistant.workspace_access != WorkspaceAccess.RW:
        return "read-only"
    if not assistant.config.compaction.memory_flush.enabled:
        return "disabled"
    return None


def run_memory_flush(*, session_id: int, now: datetime | None = None) -> FlushOutcome:
    """Run the flush for the session's current cycle, once; never raises for a model failure."""
    now = now or dj_timezone.now()
    session = Session.objects.select_related("assistant").get(pk=session_id)
    reason = skip_reason(session)
    if reason is not None:
        return FlushOutcome(status="skipped", reason=reason)
    previous, previous_at = session.memory_flush_compaction_count, session.memory_flush_at
    cycle = claim_flush(session_id, now=now)
    if cycle is None:
        return FlushOutcome(status="skipped", reason="already-flushed")
    plan = build_flush_plan(
        session.assistant.config.compaction.memory_flush, now=now, zone=assistant_zone(session.assistant)
    )
    assert plan is not None  # disabled was handled by skip_reason
    try:
        model = get_chat_model("chat")
        if model is None:
            return offline_flush(session, plan)
        try:
            return model_flush(session, plan, model=model, now=now)
        except FlushTurnFailed as failed:
            if not failed.error.is_context_overflow or failed.stored:
                raise
            # The session no longer fits the model (the overflow path compacts right after this):
            # keep its durable lines with the extractor rather than lose them with the history.
            return offline_flush(session, plan, reason="context overflow")
    except Exception as error:  # a failed flush never blocks the turn (docs/openclaw-behaviour.md §2.5)
        logger.warning("memory flush of session %s failed: %s", session_id, error, exc_info=True)
        release_flush(session_id, cycle=cycle, previous=previous, previous_at=previous_at)
        stored = error.stored if isinstance(error, FlushTurnFailed) else ()
        return FlushOutcome(
            status="failed", reason=_failure_reason(error), path=plan.relative_path, stored=stored
        )


def _failure_reason(error: Exception) -> str:
    if isinstance(error, FlushTurnFailed):
        error = error.error
    if isinstance(error, ProviderError):
        return "timeout" if error.is_timeout else f"model error: {error.message}"[:200]
    return f"{type(error).__name__}: {error}"[:200]


def offline_flush(session: Session, plan: FlushPlan, *, reason: str = "") -> FlushOutcome:
    """Append the durable lines the offline extractor finds, under an offline label."""
    context = build_model_context(session)
    existing = MemoryDocument.objects.filter(
        assistant=session.assistant, path__in=[plan.relative_path, "MEMORY.md", "memory.md"]
    ).values_list("content", flat=True)
    lines = offline_flush_lines(messages=context.view, existing_text="\n".join(existing))
    if not lines:
        return FlushOutcome(
            status="flushed", reason=reason or "nothing to store", offline=True, path=plan.relative_path
        )
    last = Message.objects.filter(session=session, flush_turn=False).order_by("-seq").first()
    outcome = append_to_document(
        assistant=session.assistant,
        path=plan.relative_path,
        addition="\n".join([OVERFLOW_FLUSH_MARKER if reason else OFFLINE_FLUSH_MARKER, *lines]) + "\n",
        provenance=Provenance(
            author="flush",
            session_pk=session.pk,
            message_pk=last.pk if last else None,
            note=f"offline memory flush ({reason or 'no model configured'})",
            untrusted=bool(fetching_tools_seen(context.view)),
        ),
    )
    if outcome.revision is None:  # every line was already in memory
        return FlushOutcome(
            status="flushed", reason=reason or "nothing new to store", offline=True, path=plan.relative_path
        )
    appended: tuple[Appended, ...] = (
        {"path": plan.relative_path, "revision": outcome.revision.pk, "lines": len(lines)},
    )
    return FlushOutcome(
        status="flushed", reason=reason, offline=True, path=plan.relative_path, appended=appended
    )


class FlushTurnFailed(Exception):
    """A model call of the flush turn failed; ``stored`` lists the flush messages already stored."""

    def __init__(self, error: ProviderError, *, stored: tuple[str, ...]) -> None:
        super().__init__(error.message)
        self.error = error
        self.stored = stored


def model_flush(session: Session, plan: FlushPlan, *, model: ChatModel, now: datetime) -> FlushOutcome:
    """Run the silent flush turn: the session's context, the flush prompt, `read` and `write` only.

    The prompt is stored together with the first answer, so a flush whose first call fails leaves
    the transcript as it was. A later failure (after tool calls that may have written memory)
    stores the error answer too and raises FlushTurnFailed listing every message stored
    (docs/design.md, Limits and refusals).
    """
    tools = flush_tool_specs(plan.relative_path)
    context = build_model_context(session, now=now)
    system_prompt = f"{context.system_prompt.text}\n\n{plan.system_prompt}"
    toolbox = FlushToolbox(
        session=session,
        relative_path=plan.relative_path,
        untrusted=bool(fetching_tools_seen(context.agent_messages)),
    )
    prompt = MessageInput(role="user", content=plan.prompt)
    turn: list[AgentMessage] = [{"role": "user", "content": plan.prompt, "timestamp": epoch_ms(now)}]
    stored: list[Message] = []
    rounds = django_settings.LLM_MAX_TOOL_ROUNDS
    for round_number in range(rounds + 1):
        messages = to_openai_messages([*context.agent_messages, *turn], system_prompt=system_prompt)
        try:
            completion = model.complete(
                messages=messages,
                tools=tools if round_number < rounds else None,
                model=session.assistant.model or None,
            )
        except ProviderError as error:
            if stored:
                name = session.assistant.model or model.name
                stored += _store(session, [error_assistant_input(error, model_name=name)])
            raise FlushTurnFailed(error, stored=tuple(row.entry_id for row in stored)) from error
        record_usage(
            assistant=session.assistant,
            purpose=UsagePurpose.FLUSH,
            model=completion.model,
            usage=completion.usage,
            session_id=session.pk,
        )
        new_rows = _store(session, [*([] if stored else [prompt]), assistant_input(completion)])
        if not stored:
            turn = []
        stored += new_rows
        row = new_rows[-1]
        turn += [to_agent_message(r) for r in new_rows]
        _calibrate(session, context, completion)
        if not completion.tool_calls or round_number >= rounds:
            break
        results = _store(
            session, [_run_tool(toolbox, call, message_pk=row.pk) for call in completion.tool_calls]
        )
        stored += results
        turn += [to_agent_message(r) for r in results]
    final_text = completion.text.strip()
    return FlushOutcome(
        status="flushed",
        path=plan.relative_path,
        appended=tuple(toolbox.appended),
        reply_silent=not final_text or is_silent_reply_text(final_text),
        stored=tuple(row.entry_id for row in stored),
    )


def _store(session: Session, inputs: list[MessageInput]) -> list[Message]:
    """Store flush-turn messages: silent, flagged, never in the model's context again."""
    return store_messages(session.pk, inputs, flush_turn=True)


def _run_tool(toolbox: FlushToolbox, call: ToolCall, *, message_pk: int) -> MessageInput:
    try:
        return tool_result_input(
            call, toolbox.run(call.name, call.arguments, message_pk=message_pk), is_error=False
        )
    except ToolFailure as failure:
        return tool_result_input(call, str(failure), is_error=True)


def _calibrate(session: Session, context: Any, completion: Completion) -> None:
    if completion.usage is not None:
        record_calibration(
            model=effective_model(session.assistant),
            estimated=context.raw_prompt_estimate,
            reported=prompt_tokens_of(completion.usage.to_openclaw()),
        )
