"""What a turn yields and returns: its events (started, reply deltas, tool calls and results, finished), its result, and the errors that refuse or end it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from openclaw_site.errors import DomainError
from providers.chat import ToolCall
from sessions_app.context.figures import TokenFigures
from sessions_app.models import CompactionRun, Message, Session

logger = logging.getLogger(__name__)


MODEL_NOT_CONFIGURED = (
    "No chat model is configured, so the assistant cannot reply. Set LLM_BASE_URL to any "
    "OpenAI-compatible endpoint (e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1), "
    "LLM_API_KEY and LLM_MODEL (or the assistant's `model`), then restart the server. Nothing was "
    'stored; post the message without "respond" to store it anyway.'
)


# The turn's overflow recovery (docs/openclaw-behaviour.md §1.4, T3): compact and retry the call at
# most this many times, then give the user this error.
MAX_OVERFLOW_COMPACTION_ATTEMPTS = 3


OVERFLOW_USER_ERROR = (
    "Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh "
    "session, or use a larger-context model."
)


class TurnError(DomainError):
    """A turn that could not produce a reply; what was stored is kept and listed (``stored``).

    Raised before anything is stored, it is a refusal every adapter renders like any domain error;
    after, the adapters answer with its envelope and the stored messages in its details.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int,
        details: dict[str, Any] | None = None,
        stored: list[Message] | None = None,
    ) -> None:
        super().__init__(code, message, status=status, details=details)
        self.stored = stored or []


@dataclass
class TurnResult:
    """What a turn stored and what the user gets back."""

    user_message: Message
    messages: list[Message] = field(default_factory=list)
    reply: Message | None = None
    reply_text: str | None = None
    silent: bool = False
    compactions: list[CompactionRun] = field(default_factory=list)
    scheduled: dict[str, bool] = field(default_factory=dict)
    # Calls of tools the caller supplied (the OpenAI-compatible endpoint): the turn stops there
    # and the caller answers them in its next request.
    client_tool_calls: tuple[ToolCall, ...] = ()
    # The session as the turn left it and its token figures (what the response reports).
    final_session: Session | None = None
    figures: TokenFigures | None = None


@dataclass(frozen=True)
class TurnStarted:
    """The turn's input is stored (the user message, or a client's tool results)."""

    inputs: list[Message]


@dataclass(frozen=True)
class ReplyDelta:
    """More of the reply's visible text."""

    text: str


@dataclass(frozen=True)
class ToolCalled:
    """The model called a tool (ours run next; the caller's end the turn)."""

    call: ToolCall
    client: bool = False


@dataclass(frozen=True)
class ToolResultStored:
    """One of our tools answered; its toolResult message is stored."""

    message: Message


@dataclass(frozen=True)
class TurnFinished:
    """The turn is over: everything it stored, the reply and the token figures' scheduling."""

    result: TurnResult


TurnEvent = TurnStarted | ReplyDelta | ToolCalled | ToolResultStored | TurnFinished


FAILED_TURN_KIND = "assistant_turn"  # "Assistant turn" on the Jobs page
