"""The assistant turn: store the user message, call the model with tools, store everything it did.

docs/design.md, How a message flows: context (sessions_app.context.build) → model with `memory_search`
(when memory_app.tools provides it), `memory_get` and `tool_result_get` → store assistant and
tool messages with usage → tokens vs thresholds (flush task, compaction task). A context overflow
goes through the one compaction entry point inline and the call is retried, at most
MAX_OVERFLOW_COMPACTION_ATTEMPTS times (docs/openclaw-behaviour.md §1.4 T3). Every message is stored as
soon as it exists, each in its own transaction, so a failure loses nothing that happened before.

With no model configured, `run_turn` refuses before storing anything (a rejected request changes
nothing): the client can store the message without `respond`, or retry once a model is set.

The turn is one loop, `stream_turn`, that yields what happens as it happens (docs/design.md,
Streaming): the reply's text as the model streams it (held back while it may still become
NO_REPLY), each tool call and stored result, and the finished turn. `run_turn` consumes the same
events and returns the result. A consumer that stops listening (a client gone) closes the
generator: what the model had generated is stored with stopReason `aborted`.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator, Sequence
from typing import Any, NoReturn

from django.conf import settings as django_settings
from django.utils import timezone as dj_timezone

from openclaw_site.jobs.tasks import record_failure
from openclaw_site.models import UsagePurpose
from openclaw_site.platform.locks import LockTimeout, session_lock
from openclaw_site.teams.services import check_writable
from openclaw_site.usage.ledger import record_usage
from providers.chat import ChatModel, Completion, TextDelta, ToolCall, get_chat_model
from providers.errors import ProviderError
from providers.message_types import ToolSpec
from providers.overflow import is_compaction_failure_error, parse_observed_tokens
from sessions_app.compaction.compact import compact_session
from sessions_app.compaction.errors import CompactionBusy, CompactionError
from sessions_app.compaction.flush import skip_reason
from sessions_app.compaction.runs import wait_for_active_run
from sessions_app.context.build import (
    ModelContext,
    build_model_context,
    cache_touch_fields,
    record_cache_touch,
)
from sessions_app.context.figures import record_calibration, token_figures
from sessions_app.context.thresholds import prompt_tokens_of
from sessions_app.messages import MessageInput, text_of
from sessions_app.models import CompactionRun, Message, RunState, Session
from sessions_app.selectors import session_owner
from sessions_app.transcript import after_transcript_change, read_session
from sessions_app.turn.events import (
    FAILED_TURN_KIND,
    MAX_OVERFLOW_COMPACTION_ATTEMPTS,
    MODEL_NOT_CONFIGURED,
    OVERFLOW_USER_ERROR,
    ReplyDelta,
    ToolCalled,
    ToolResultStored,
    TurnError,
    TurnEvent,
    TurnFinished,
    TurnResult,
    TurnStarted,
)
from sessions_app.turn.history import UNSEEN_STOP_REASONS, held_history
from sessions_app.turn.maintenance import maintenance_for
from sessions_app.turn.model_output import (
    assistant_input,
    error_assistant_input,
    store_messages,
    tool_result_input,
    usage_dict,
)
from sessions_app.turn.silent import ReplyStream, streamable_text, visible_reply_text
from sessions_app.turn.tools import run_tool, server_tool_names, turn_tools

logger = logging.getLogger(__name__)


def run_turn(*, session: Session, message: MessageInput) -> TurnResult:
    """Store a user message and run the assistant's turn on it; raise TurnError when it fails.

    ``session`` is the caller's team-checked session (a selector's); see `stream_turn`.
    """
    if message.role != "user":
        raise TurnError(
            "respond_needs_user_message", '"respond" runs a turn on a user message only.', status=400
        )
    return finished_turn(stream_turn(session=session, inputs=[message]))


def require_chat_model() -> ChatModel:
    """Return the chat model, or raise the TurnError that says none is configured."""
    model = get_chat_model("chat")
    if model is None:
        raise TurnError(
            "model_not_configured",
            MODEL_NOT_CONFIGURED,
            status=503,
            details={"settings": ["LLM_BASE_URL", "LLM_API_KEY", "LLM_MODEL"]},
        )
    return model


def finished_turn(events: Iterator[TurnEvent]) -> TurnResult:
    """Run a streamed turn to its end and return its result."""
    for event in events:
        if isinstance(event, TurnFinished):
            return event.result
    raise RuntimeError("A turn ended without finishing.")


def stream_turn(
    *,
    session: Session,
    inputs: Sequence[MessageInput],
    client_tools: Sequence[ToolSpec] = (),
    resent_history: bool = False,
) -> Generator[TurnEvent, None, None]:
    """Store the turn's input and run the turn, yielding its events; raise TurnError when it fails.

    `inputs` ends with a user message or tool results (the answers to a caller's tool calls);
    empty, the turn answers what the session already ends with (a retried request).
    `client_tools` are offered to the model beside ours; calling one ends the turn.
    With `resent_history`, `inputs` is a client's whole conversation: only what the session does
    not hold yet is stored (`sessions_app.turn.history.held_history`, compared under the turn's lock),
    and a conversation the session answered already gets that answer again.

    ``session`` is the caller's team-checked session (a selector's). The turn carries the row its
    input's append locked and returned, and each later append's, down to the model calls, the
    tools and the result; it reads the row again only after a compaction changed it. Writability
    is checked once, under the turn's lock and before anything is stored or the model is asked:
    by the input's append, or for a turn without new input on the row it reads
    (`_writable_session`); the turn's own appends then store what it makes without asking again.
    """
    if inputs and inputs[-1].role not in ("user", "toolResult"):
        raise TurnError(
            "respond_needs_user_message",
            "A turn runs on a user message or on tool results.",
            status=400,
        )
    model = require_chat_model()
    session_id = session.pk
    # One turn at a time per session, across processes: a second message waits for the first
    # reply so the transcript reads user, assistant, user, assistant (never interleaved).
    try:
        with session_lock(f"turn:{session_id}", timeout_seconds=_wait_for_turn_seconds()):
            if resent_history:
                held = held_history(session_id, inputs, server_tools=server_tool_names())
                if held.answered_by is not None:
                    check_writable(session.assistant)  # stores nothing, but refuses as a turn would
                    yield from _replayed_turn(held.answered_by)
                    return
                inputs = held.unseen
            # The append checks writability on the row it locks (the turn's one check).
            rows = store_messages(session_id, list(inputs), announce=False) if inputs else []
            turn: _Turn | None = None
            try:
                yield TurnStarted(rows)
                current = rows[-1].session if rows else _writable_session(session_id)
                last = rows[-1] if rows else _unanswered_row(session_id)
                turn = _Turn(current, model, last, client_tools=client_tools)
                yield from turn.events()
            finally:
                _announce_turn([*rows, *(turn.result.messages if turn else [])])
    except LockTimeout:
        raise TurnError(
            "turn_in_progress",
            "Another turn is running in this session; nothing was stored. Retry when it has finished.",
            status=409,
        ) from None


def _announce_turn(stored: list[Message]) -> None:
    """Queue the export and the indexer once for everything a turn stored, however it ended.

    A turn stores its input, then replies, tool results or an error, each without announcing
    (``announce=False``): one fold for the turn instead of one per append. Should the process
    die in between, the transcript waits for its next change (docs/design.md, Background work).
    """
    if stored:
        after_transcript_change(stored[-1].session)  # the session as the last append locked it


def _unanswered_row(session_id: int) -> Message:
    """Return the message a turn without new input answers, or refuse: the session is answered.

    Failed and cut replies, which the model never sees, and flush turns do not answer it.
    """
    last = (
        Message.objects.filter(session_id=session_id, flush_turn=False)
        .exclude(stop_reason__in=UNSEEN_STOP_REASONS)
        .order_by("-seq")
        .first()
    )
    if last is None or last.role == "assistant":
        raise TurnError(
            "nothing_to_answer",
            "Every message is already in the session and answered; send a new message.",
            status=400,
        )
    return last


def _replayed_turn(reply: Message) -> Iterator[TurnEvent]:
    """Answer a conversation again with the reply the session already holds; nothing is stored."""
    prompt = (
        Message.objects.filter(session_id=reply.session_id, seq__lt=reply.seq, flush_turn=False)
        .exclude(role="assistant")
        .order_by("-seq")
        .first()
    )
    server_tools = server_tool_names()
    calls = tuple(
        ToolCall(id=block["id"], name=block["name"], arguments=block.get("arguments") or {})
        for block in reply.content or []
        if isinstance(block, dict)
        and block.get("type") == "toolCall"
        and block.get("name") not in server_tools
    )
    text = None if reply.silent else visible_reply_text(text_of(reply.content)) or ""
    result = TurnResult(
        user_message=prompt or reply,
        reply=None if reply.silent else reply,
        reply_text=text,
        silent=reply.silent,
        client_tool_calls=calls,
    )
    yield TurnStarted([])
    if text:
        yield ReplyDelta(text)
    for call in calls:
        yield ToolCalled(call, client=True)
    yield TurnFinished(result)


def _writable_session(session_id: int) -> Session:
    """Read the session under the turn's lock and refuse a turn of an archived assistant: the check
    of a turn that stores no input first, made before the model is called."""
    session = read_session(session_id)
    check_writable(session.assistant)
    return session


def retry_turn(*, session: Session) -> TurnResult:
    """Run the turn again on the user message whose turn failed (the session's last visible row).

    Nothing new is stored for the user: the failed call's error message stays in the transcript
    as a record, and the model, which never sees error messages, answers the same prompt again.
    ``session`` is the caller's team-checked session; the turn reads it once under its lock.
    """
    model = require_chat_model()
    session_id = session.pk
    try:
        with session_lock(f"turn:{session_id}", timeout_seconds=_wait_for_turn_seconds()):
            current = _writable_session(session_id)
            return finished_turn(_Turn(current, model, _failed_turn_prompt(session_id)).events())
    except LockTimeout:
        raise TurnError("turn_in_progress", "Another turn is running in this session.", status=409) from None


def _failed_turn_prompt(session_id: int) -> Message:
    """Return the user message of the session's failed last turn, or refuse with 409."""
    rows = Message.objects.filter(session_id=session_id, flush_turn=False).order_by("-seq")
    last = rows.first()
    if last is None or last.role != "assistant" or last.stop_reason != "error":
        raise TurnError(
            "nothing_to_retry", "The last turn did not fail; there is nothing to retry.", status=409
        )
    prompt = rows.filter(seq__lt=last.seq, role="user").first()
    if prompt is None:
        raise TurnError("nothing_to_retry", "The failed turn has no user message to answer.", status=409)
    return prompt


class _Turn:
    """One assistant turn: model calls, tool rounds and overflow recovery."""

    def __init__(
        self,
        session: Session,
        model: ChatModel,
        user_row: Message,
        *,
        client_tools: Sequence[ToolSpec] = (),
    ) -> None:
        self.session_id = session.pk
        self._session: Session | None = session
        self.model = model
        self.client_tools = list(client_tools)
        self.client_tool_names = {tool["name"] for tool in self.client_tools}
        self.result = TurnResult(user_message=user_row)
        self.overflow_attempts = 0
        self.skip_next_touch = False
        self.call_started_at = dj_timezone.now()

    def session(self) -> Session:
        """Return the session as the turn's last append locked and left it; after a compaction
        changed the row (``_session`` None), read it once again."""
        if self._session is None:
            self._session = read_session(self.session_id)
        return self._session

    def _store(self, inputs: list[MessageInput]) -> list[Message]:
        """Append what the turn made (writability was checked when the turn began) and carry on
        with the session row the append locked and returned."""
        rows = store_messages(self.session_id, inputs, announce=False, writable_checked=True)
        if rows:
            self._session = rows[-1].session
        return rows

    def events(self) -> Iterator[TurnEvent]:
        self._before_first_call()
        rounds_left = django_settings.LLM_MAX_TOOL_ROUNDS
        while True:
            reply = ReplyStream()
            completion = yield from self._call(with_tools=rounds_left > 0, reply=reply)
            final = not completion.tool_calls or rounds_left <= 0
            assistant_row = self._store_assistant(completion, final=final)
            rest = reply.settle(visible_reply_text(completion.text))
            if rest:
                yield ReplyDelta(rest)
            if final:
                break
            rounds_left -= 1
            ours = [call for call in completion.tool_calls if call.name not in self.client_tool_names]
            theirs = tuple(call for call in completion.tool_calls if call.name in self.client_tool_names)
            for call in completion.tool_calls:
                yield ToolCalled(call, client=call in theirs)
            session = self.session()
            results = self._store([self._tool_result(call, session) for call in ours])
            self.result.messages += results
            for row in results:
                yield ToolResultStored(row)
            if theirs:
                self._hand_over(assistant_row, completion, theirs)
                break
        self.result.final_session = self.session()
        self.result.figures = token_figures(self.result.final_session)
        after = maintenance_for(self.result.final_session, self.result.figures)
        self.result.scheduled = {
            key: bool(value) or bool(self.result.scheduled.get(key))
            for key, value in after.items()
            if key in ("compaction", "flush")
        }
        yield TurnFinished(self.result)

    def _hand_over(self, row: Message, completion: Completion, calls: tuple[ToolCall, ...]) -> None:
        """End the turn on the caller's tool calls: the message that made them is the reply."""
        self.result.client_tool_calls = calls
        self.result.reply = row
        self.result.reply_text = visible_reply_text(completion.text) or ""

    @staticmethod
    def _tool_result(call: ToolCall, session: Session) -> MessageInput:
        text, is_error = run_tool(call, session=session)
        return tool_result_input(call, text, is_error=is_error)

    # -- before the first call --

    def _before_first_call(self) -> None:
        """Queue a due flush (projected with the new prompt); compact inline if already over (budget)."""
        session = self.session()
        figures = token_figures(session, prompt_estimate=self.result.user_message.estimated_tokens)
        if not figures.compaction_due:
            if figures.flush_reason and skip_reason(session) is None:
                self.result.scheduled = maintenance_for(session, figures)
            return
        self._session = None  # a compaction (or one running) changes the row: read it again
        try:
            run = compact_session(session_id=self.session_id, trigger="budget")
        except CompactionBusy:
            return  # a compaction is running: proceed on the pre-compaction view, nothing is lost
        except CompactionError as error:
            logger.info("budget compaction of session %s did not run: %s", self.session_id, error)
            return
        if isinstance(run, CompactionRun):
            self.result.compactions.append(run)
            self.skip_next_touch = True

    # -- one model call, with overflow recovery --

    def _call(self, *, with_tools: bool, reply: ReplyStream) -> Generator[TurnEvent, None, Completion]:
        while True:
            session = self.session()
            tools = [*turn_tools(), *self.client_tools] if with_tools else []
            context = build_model_context(session, tools=tools)
            if context.pruning.changed and context.pruning.mode == "cache-ttl":
                # Once per TTL window (docs/openclaw-behaviour.md §3.2).
                record_cache_touch(self.session_id, at=context.now)
            self.call_started_at = dj_timezone.now()
            try:
                completion = yield from self._streamed_call(context, session, reply)
            except ProviderError as error:
                if error.is_context_overflow and self._recover_from_overflow(error):
                    continue
                self._fail(error, session=session, partial_text=reply.text)
            self._record_success(session, context, completion)
            return completion

    def _streamed_call(
        self, context: ModelContext, session: Session, reply: ReplyStream
    ) -> Generator[TurnEvent, None, Completion]:
        """Call the model streaming; yield the text that may be shown; store a cut reply as aborted."""
        stream = self.model.stream(
            messages=context.openai_messages,
            tools=context.tools or None,
            model=session.assistant.model or None,
        )
        try:
            for event in stream:
                if not isinstance(event, TextDelta):
                    return event
                shown = reply.add(event.text)
                if shown:
                    yield ReplyDelta(shown)
        except GeneratorExit:  # the consumer went away mid-reply
            self._store_cut_reply(reply, model_name=session.assistant.model or self.model.name)
            raise
        finally:
            stream.close()
        raise ProviderError("The model's stream ended without a reply.")

    def _store_cut_reply(self, reply: ReplyStream, *, model_name: str) -> None:
        """Store what the model generated before the listener left, with stopReason `aborted`."""
        cut = Completion(text=reply.text, tool_calls=(), usage=None, stop_reason="aborted", model=model_name)
        silent = not streamable_text(reply.text)  # nobody saw any of it
        [row] = self._store([assistant_input(cut, silent=silent, started_at=self.call_started_at)])
        self.result.messages.append(row)

    def _recover_from_overflow(self, error: ProviderError) -> bool:
        """Compact (trigger overflow) and tell whether the call should be retried (docs/openclaw-behaviour.md §1.4 T3)."""
        if self.overflow_attempts >= MAX_OVERFLOW_COMPACTION_ATTEMPTS or is_compaction_failure_error(
            error.message
        ):
            return False
        self.overflow_attempts += 1
        self._session = None  # a compaction (or one running) changes the row: read it again
        try:
            run = compact_session(
                session_id=self.session_id,
                trigger="overflow",
                observed_tokens=parse_observed_tokens(error.message),
            )
        except CompactionBusy:
            finished = wait_for_active_run(self.session_id, timeout_seconds=_wait_seconds())
            run = finished if finished is not None and finished.state == RunState.COMMITTED else None
        except CompactionError as failure:
            logger.info("overflow compaction of session %s did not run: %s", self.session_id, failure)
            return False
        if not isinstance(run, CompactionRun):
            return False
        self.result.compactions.append(run)
        self.skip_next_touch = True
        return True

    def _record_success(self, session: Session, context: ModelContext, completion: Completion) -> None:
        """Keep the session's usage figures, the model's calibration and the cache touch current."""
        record_usage(
            assistant=session.assistant,
            purpose=UsagePurpose.TURN,
            model=completion.model,
            usage=completion.usage,
            session_id=self.session_id,
        )
        usage = usage_dict(completion)
        fields: dict[str, Any] = {}
        if usage is not None:
            fields.update(total_tokens=prompt_tokens_of(usage), total_tokens_fresh=True, last_usage=usage)
            record_calibration(
                model=context.model or completion.model,
                estimated=context.raw_prompt_estimate,
                reported=prompt_tokens_of(usage),
            )
        # OpenClaw skips the cache-ttl touch right after a compaction (OpenClaw bug reports, docs/openclaw-behaviour.md §3.2).
        if self.skip_next_touch:
            self.skip_next_touch = False
        else:
            fields.update(cache_touch_fields(at=dj_timezone.now()))
        if fields:  # the usage and the touch in one statement
            Session.objects.filter(pk=self.session_id).update(**fields)

    def _store_assistant(self, completion: Completion, *, final: bool) -> Message:
        visible = visible_reply_text(completion.text) if final and not completion.tool_calls else None
        silent = final and not completion.tool_calls and visible is None
        [row] = self._store([assistant_input(completion, silent=silent, started_at=self.call_started_at)])
        self.result.messages.append(row)
        if final:
            self.result.silent = silent
            self.result.reply = None if silent else row
            self.result.reply_text = None if silent else (visible or "")
        return row

    def _fail(self, error: ProviderError, *, session: Session, partial_text: str = "") -> NoReturn:
        """Store the failed call as an assistant error message (with the text that arrived before
        a stream broke off) and raise the matching TurnError."""
        model_name = session.assistant.model or self.model.name
        failed = error_assistant_input(
            error,
            model_name=model_name,
            partial_text=partial_text,
            silent=bool(partial_text) and not streamable_text(partial_text),
        )
        [row] = self._store([failed])
        self.result.messages.append(row)
        # The Jobs page lists the failure (failures first), linked to the session, where it is retried.
        record_failure(
            owner=session_owner(session=session),
            kind=FAILED_TURN_KIND,
            error=f"{model_name}: {error.message or 'the model call failed'}",
        )
        stored = [self.result.user_message, *self.result.messages]
        details = {
            "provider_message": error.message,
            "provider_status": error.status,
            "user_message_id": self.result.user_message.entry_id,
        }
        if error.is_context_overflow:
            raise TurnError(
                "context_overflow",
                OVERFLOW_USER_ERROR,
                status=422,
                details={**details, "overflow_attempts": self.overflow_attempts},
                stored=stored,
            )
        if error.is_timeout:
            seconds = django_settings.LLM_TIMEOUT_SECONDS
            raise TurnError(
                "model_timeout",
                f"The model did not answer within {seconds:g} s. Your message is stored; try again.",
                status=504,
                details=details,
                stored=stored,
            )
        reason = (error.message or "no details").rstrip(". ")
        raise TurnError(
            "model_error",
            f"The model call failed ({reason}). Your message is stored; try again.",
            status=502,
            details=details,
            stored=stored,
        )


def _wait_for_turn_seconds() -> float:
    return float(django_settings.LLM_TIMEOUT_SECONDS)


def _wait_seconds() -> float:
    return float(django_settings.LLM_TIMEOUT_SECONDS) * 4
