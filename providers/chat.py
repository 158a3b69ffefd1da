"""Chat models: the `ChatModel` protocol, its value objects, and the backend named in settings.

`CHAT_MODEL_BACKEND` names a class by dotted path, as Django's `EMAIL_BACKEND` does; its
`from_settings(purpose=...)` classmethod returns the model for that purpose, or None when it is not
configured (then compaction and the memory flush run offline and replies answer 503). The default
is `providers.openai_chat.OpenAIChatModel`.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from providers.json_types import JSONObject
from providers.message_types import ChatMessage, OpenAITool, ToolSpec

# "aborted": the reply was cut while streaming (the client went away); Pi's stop reason for it.
StopReason = Literal["stop", "toolUse", "length", "error", "aborted"]


@dataclass(frozen=True)
class Usage:
    """Token usage of one model call, in OpenClaw's terms."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total: int = 0

    def to_openclaw(self) -> dict[str, int]:
        """Return the AgentMessage `usage` dict (camelCase keys)."""
        return {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "totalTokens": self.total,
        }


@dataclass(frozen=True)
class ToolCall:
    """One tool call requested by the model."""

    id: str
    name: str
    arguments: JSONObject = field(default_factory=dict)


@dataclass(frozen=True)
class Completion:
    """The model's answer to one request."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage | None
    stop_reason: StopReason
    model: str
    thinking: str = ""


@dataclass(frozen=True)
class TextDelta:
    """A piece of the reply's text as the model streams it."""

    text: str


StreamEvent = TextDelta | Completion


class ChatModel(Protocol):
    """A chat model: takes OpenAI-format messages, returns a Completion or raises ProviderError.

    `stream` yields the reply's text as it arrives and ends with the same Completion `complete`
    returns (usage included); closing the iterator early closes the connection.
    """

    name: str
    offline: bool

    def complete(
        self,
        *,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec | OpenAITool] | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
    ) -> Completion: ...

    def stream(
        self,
        *,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec | OpenAITool] | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
    ) -> Generator[StreamEvent, None, None]: ...


_cache: dict[str, ChatModel | None] = {}
_cache_lock = threading.Lock()


def get_chat_model(purpose: str = "chat") -> ChatModel | None:
    """Return the configured chat model for a purpose ("chat" or "compaction"), or None."""
    with _cache_lock:
        if purpose not in _cache:
            backend = import_string(settings.CHAT_MODEL_BACKEND)
            _cache[purpose] = backend.from_settings(purpose=purpose)
        return _cache[purpose]


def reset_providers() -> None:
    """Forget the cached chat models (tests change settings)."""
    with _cache_lock:
        _cache.clear()
