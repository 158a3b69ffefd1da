"""The message shapes on both sides of the model call (pure): OpenClaw's AgentMessage, which
sessions store and replay, and OpenAI's chat messages, tools and streamed chunks, which
`providers.openai_chat` converts AgentMessages into (docs/openclaw-behaviour.md §1).

The dicts stay plain JSON; these only name the keys each may hold. A message read back from a
transcript holds only the keys its AgentMessage declares (`sessions_app.messages.MESSAGE_FIELDS`).
"""

from __future__ import annotations

from typing import Literal, Required, TypedDict

from providers.json_types import JSONObject

# --- OpenClaw (Pi) -------------------------------------------------------------------------------


class ContentBlock(TypedDict, total=False):
    """One block of an AgentMessage's content: text, image, toolCall or thinking."""

    type: Required[str]
    text: str
    data: str  # image: base64
    mimeType: str
    id: str  # toolCall
    name: str
    arguments: JSONObject
    thinking: str


class AgentMessage(TypedDict, total=False):
    """OpenClaw's AgentMessage (plus our `entryId`), and the `compactionSummary` message a view opens with."""

    role: Required[str]
    content: str | list[ContentBlock]
    timestamp: int
    entryId: str | None  # None only for an imported entry that had no id
    toolCallId: str
    toolName: str
    isError: bool
    details: object
    usage: JSONObject | None
    stopReason: str
    errorMessage: str
    model: str
    provider: str
    api: str
    summary: str  # compactionSummary
    tokensBefore: int
    compactionSummary: bool  # the user message a summary becomes for the agent host (sessions_app.host)


# --- OpenAI chat completions ---------------------------------------------------------------------


class ImageURL(TypedDict):
    url: str


class ChatContentPart(TypedDict, total=False):
    """A part of a user message's content: `text` or `image_url`."""

    type: Required[str]
    text: str
    image_url: ImageURL


class ChatFunctionCall(TypedDict):
    name: str
    arguments: str  # JSON text


class ChatToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: ChatFunctionCall


class ChatMessage(TypedDict, total=False):
    """One OpenAI chat message (system, user, assistant or tool)."""

    role: Required[str]
    content: str | list[ChatContentPart] | None
    tool_calls: list[ChatToolCall]
    tool_call_id: str
    # A tool result's images, moved into a user message after the tool run; never sent.
    _images: list[ChatContentPart]


class ToolSpec(TypedDict, total=False):
    """A function tool as the product describes one: name, description, JSON Schema parameters."""

    name: Required[str]
    description: str
    parameters: JSONObject
    strict: bool


class OpenAITool(TypedDict):
    """A function tool in OpenAI's own wrapping."""

    type: Literal["function"]
    function: ToolSpec


class StreamOptions(TypedDict):
    include_usage: bool


class ChatRequest(TypedDict, total=False):
    """The body of a `/chat/completions` request."""

    model: Required[str]
    messages: Required[list[ChatMessage]]
    tools: list[OpenAITool]
    max_tokens: int
    stream: bool
    stream_options: StreamOptions


class ChunkFunction(TypedDict, total=False):
    name: str | None
    arguments: str | None


class ChunkToolCall(TypedDict, total=False):
    index: int
    id: str | None
    function: ChunkFunction | None


class ChunkDelta(TypedDict, total=False):
    content: str | None
    tool_calls: list[ChunkToolCall] | None
    # Non-standard fields some OpenAI-compatible servers stream the reasoning in.
    reasoning_content: str | None
    reasoning: str | None
    reasoning_text: str | None


class ChunkChoice(TypedDict, total=False):
    delta: ChunkDelta | None
    finish_reason: str | None


class ChatCompletionChunk(TypedDict, total=False):
    """One `chat.completion.chunk` of a streamed reply, as JSON."""

    model: str | None
    choices: list[ChunkChoice] | None
    usage: JSONObject | None
