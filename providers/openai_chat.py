"""The OpenAI-compatible chat model (`/chat/completions`, whole or streamed) and its message format.

`OpenAIChatModel` is the default `CHAT_MODEL_BACKEND`. Its API errors become `ProviderError`
(providers.errors) and are retried on the one schedule (providers.retry). Messages are converted
from OpenClaw's AgentMessage shape the way Pi's openai-completions provider does
(`transformMessages` + `convertMessages`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

import httpx2
import openai
from django.conf import settings
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion

from providers.chat import Completion, StopReason, StreamEvent, TextDelta, ToolCall, Usage
from providers.errors import ProviderError, malformed_response_error, provider_error_from
from providers.json_types import JSONObject
from providers.message_types import (
    AgentMessage,
    ChatCompletionChunk,
    ChatContentPart,
    ChatMessage,
    ChatRequest,
    ChatToolCall,
    ContentBlock,
    OpenAITool,
    ToolSpec,
)
from providers.model_text import storable_text, storable_value
from providers.openai_client import call_with_retries, make_openai_client
from providers.retry import BACKOFF_BASE_SECONDS, BACKOFF_CAP_SECONDS, DEFAULT_RETRIES, Backoff

# Pi's `COMPACTION_SUMMARY_PREFIX` / `COMPACTION_SUMMARY_SUFFIX` (sessions_app.compaction.cutpoint holds the
# same text for the summariser; this module may not import the apps).
COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
# Pi's `transformMessages`: a tool call left without a result gets this synthetic error result,
# because OpenAI rejects an assistant `tool_calls` message that no `tool` message answers.
MISSING_TOOL_RESULT_TEXT = "No result provided"
# Pi's openai-completions provider: images returned by a tool travel in a follow-up user message.
TOOL_IMAGES_TEXT = "Attached image(s) from tool result:"
_IMAGES_KEY: Final = "_images"
DEFAULT_TIMEOUT_SECONDS = 120.0


class OpenAIChatModel:
    """A chat model behind any OpenAI-compatible `/chat/completions` endpoint."""

    offline = False

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_retries: int = DEFAULT_RETRIES,
        backoff_base_seconds: float = BACKOFF_BASE_SECONDS,
        backoff_cap_seconds: float = BACKOFF_CAP_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name = model
        self.model = model
        self.base_url = base_url
        self.backoff = Backoff(
            retries=max_retries, base_seconds=backoff_base_seconds, cap_seconds=backoff_cap_seconds
        )
        self._sleep = sleep
        self._client = make_openai_client(base_url=base_url, api_key=api_key, timeout_seconds=timeout_seconds)

    @classmethod
    def from_settings(cls, *, purpose: str) -> OpenAIChatModel | None:
        """Return the model the LLM_* settings configure for a purpose, or None without one."""
        model = (settings.LLM_COMPACTION_MODEL if purpose == "compaction" else "") or settings.LLM_MODEL
        if not settings.LLM_BASE_URL or not model:
            return None
        return cls(
            base_url=settings.LLM_BASE_URL,
            api_key=settings.LLM_API_KEY,
            model=model,
            timeout_seconds=settings.LLM_TIMEOUT_SECONDS,
            max_retries=settings.LLM_MAX_RETRIES,
        )

    def complete(
        self,
        *,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec | OpenAITool] | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Send one chat request, retrying rate limits, 5xx and connection errors."""
        request = _request_body(
            model=model or self.model, messages=messages, tools=tools, max_tokens=max_tokens
        )
        # `post` is the client's documented way to send a body as it is: `chat.completions.create`
        # first walks every message against the SDK's TypedDicts, which took longer than the
        # rest of a turn on a long session (bench/sessions.py). The body is already plain JSON.
        content = request_content(request)
        response = call_with_retries(
            lambda: self._client.post("/chat/completions", content=content, cast_to=ChatCompletion),
            backoff=self.backoff,
            sleep=self._sleep,
            what="model call",
        )
        try:
            return completion_from(response, requested_model=request["model"])
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
            raise malformed_response_error(exc) from exc  # a 200 whose JSON is not a completion

    def stream(
        self,
        *,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec | OpenAITool] | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
    ) -> Generator[StreamEvent, None, None]:
        """Stream one chat request: text deltas, then the Completion (usage from the last chunk).

        Opening the stream is retried like `complete`; once text has arrived a failure is not
        retried (the caller has shown it) and becomes a ProviderError.
        """
        request = _request_body(
            model=model or self.model, messages=messages, tools=tools, max_tokens=max_tokens
        )
        request["stream"] = True
        request["stream_options"] = {"include_usage": True}
        content = request_content(request)
        chunks = call_with_retries(
            lambda: self._client.post(
                "/chat/completions",
                content=content,
                cast_to=ChatCompletion,
                stream=True,
                # Chunks stay plain JSON: building the SDK's model of each chunk cost more CPU
                # than the rest of a streamed turn (bench/streams.py).
                stream_cls=openai.Stream[object],
            ),
            backoff=self.backoff,
            sleep=self._sleep,
            what="model call",
        )
        if "text/event-stream" not in chunks.response.headers.get("content-type", ""):
            # A server that ignores `stream` (or fails) answers with a plain body instead.
            completion = _whole_answer(chunks, requested_model=request["model"])
            if completion.text:
                yield TextDelta(completion.text)
            yield completion
            return
        reply = StreamedReply(model=request["model"])
        try:
            for chunk in _chunks_or_provider_error(chunks):
                text = reply.add(chunk)
                if text:
                    yield TextDelta(text)
        finally:
            chunks.close()
        yield reply.completion()


def _whole_answer(chunks: openai.Stream[object], *, requested_model: str) -> Completion:
    """Read a non-streamed answer to a streamed request as a completion, or say it is malformed."""
    try:
        body = chunks.response.read()
    finally:
        chunks.close()
    try:
        return completion_from(ChatCompletion.model_validate_json(body), requested_model=requested_model)
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
        raise malformed_response_error(exc) from exc


def _chunks_or_provider_error(chunks: openai.Stream[object]) -> Iterator[ChatCompletionChunk]:
    """Iterate a stream, turning a cut connection or an error event into a ProviderError."""
    try:
        for chunk in chunks:
            if isinstance(chunk, dict):
                yield cast(ChatCompletionChunk, chunk)  # read as the format says; a key may be missing
    except openai.OpenAIError as exc:
        raise provider_error_from(exc) from exc
    except httpx2.TimeoutException as exc:
        raise ProviderError("Request timed out.", is_timeout=True) from exc
    except httpx2.HTTPError as exc:
        raise ProviderError(f"The model's stream broke off: {exc}", is_connection_error=True) from exc


@dataclass
class _PartialToolCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class StreamedReply:
    """A reply put together from `chat.completion.chunk`s (OpenAI's streaming format, as JSON)."""

    model: str
    text: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    usage: JSONObject | None = None
    tool_calls: dict[int, _PartialToolCall] = field(default_factory=dict)

    def add(self, chunk: ChatCompletionChunk) -> str:
        """Take one chunk in; return the text it adds."""
        self.model = storable_text(str(chunk.get("model") or "")) or self.model
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices") or []
        if not choices:
            return ""
        choice = choices[0]
        self.finish_reason = choice.get("finish_reason") or self.finish_reason
        delta = choice.get("delta") or {}
        self.reasoning += storable_text(_reasoning_text_of(delta))
        for call in delta.get("tool_calls") or ():
            partial = self.tool_calls.setdefault(int(call.get("index", 0)), _PartialToolCall())
            partial.id = call.get("id") or partial.id
            function = call.get("function") or {}
            partial.name = function.get("name") or partial.name
            partial.arguments += function.get("arguments") or ""
        text = storable_text(str(delta.get("content") or ""))
        self.text += text
        return text

    def completion(self) -> Completion:
        """Return the whole reply, as `completion_from` would have for the same answer."""
        if self.finish_reason is None:
            raise ProviderError(
                "The model's stream ended before the reply was complete.", is_connection_error=True
            )
        calls = tuple(
            _parsed_tool_call(call.id, call.name, call.arguments)
            for _, call in sorted(self.tool_calls.items())
        )
        return Completion(
            text=self.text,
            tool_calls=calls,
            usage=usage_from(CompletionUsage.model_validate(self.usage) if self.usage else None),
            stop_reason=_stop_reason(self.finish_reason, has_tool_calls=bool(calls)),
            model=self.model,
            thinking=self.reasoning,
        )


class EncodedMessages(list[ChatMessage]):
    """Chat messages that know their JSON text, from a caller that keeps each message's encoding.

    The list must not be changed once made: `json` is the list as it was made (encoded on first
    use by ``encode``).
    """

    def __init__(self, messages: Iterable[ChatMessage], *, encode: Callable[[list[ChatMessage]], str]):
        super().__init__(messages)
        self._encode = encode
        self._json: str | None = None

    def json(self) -> str:
        if self._json is None:
            self._json = self._encode(self)
        return self._json


def request_content(request: ChatRequest) -> bytes:
    """Encode a request body as the SDK does (compact JSON, non-ASCII kept as it is).

    Messages that come encoded (`EncodedMessages`) are spliced in as they are, so a long session's
    request is not encoded again from scratch on every call.
    """
    messages = request.get("messages")
    if not isinstance(messages, EncodedMessages):
        return _dumps(request).encode()
    rest = _dumps({key: value for key, value in request.items() if key != "messages"})
    return f'{rest[:-1]},"messages":{messages.json()}}}'.encode()


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _request_body(
    *,
    model: str,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec | OpenAITool] | None,
    max_tokens: int | None,
) -> ChatRequest:
    # An `EncodedMessages` list is kept as it is: `request_content` splices in its JSON.
    kept = messages if isinstance(messages, list) else list(messages)
    body: ChatRequest = {"model": model, "messages": kept}
    if tools:
        body["tools"] = [_openai_tool(tool) for tool in tools]
    if max_tokens is not None:
        # `max_tokens` rather than `max_completion_tokens`: every OpenAI-compatible server
        # (vLLM, llama.cpp, Ollama, LiteLLM) accepts it.
        body["max_tokens"] = max_tokens
    return body


def _openai_tool(tool: ToolSpec | OpenAITool) -> OpenAITool:
    """Wrap a bare `{name, description, parameters}` spec in OpenAI's function-tool shape."""
    fields: Mapping[str, object] = tool
    if fields.get("type") == "function" and "function" in fields:
        return cast(OpenAITool, tool)
    function = {key: fields[key] for key in ("name", "description", "parameters") if key in fields}
    return {"type": "function", "function": cast(ToolSpec, function)}


def completion_from(response: Any, *, requested_model: str) -> Completion:
    """Build a Completion from an openai ChatCompletion."""
    if not response.choices:
        raise ProviderError("The model returned no choices.")
    choice = response.choices[0]
    message = choice.message
    tool_calls = tuple(_tool_call(call) for call in message.tool_calls or ())
    return Completion(
        text=storable_text(message.content or ""),
        tool_calls=tool_calls,
        usage=usage_from(response.usage),
        stop_reason=_stop_reason(choice.finish_reason, has_tool_calls=bool(tool_calls)),
        model=storable_text(response.model or requested_model),
        thinking=storable_text(_reasoning_text(message)),
    )


def _tool_call(call: Any) -> ToolCall:
    return _parsed_tool_call(call.id, call.function.name, call.function.arguments)


def _parsed_tool_call(call_id: str, name: str, arguments_json: str | None) -> ToolCall:
    try:
        arguments = json.loads(arguments_json or "{}")
    except json.JSONDecodeError:
        # Pi's parseStreamingJson answers {} for unparsable arguments; the tool then reports
        # the missing parameters to the model, which can try again.
        arguments = {}
    return ToolCall(
        id=storable_text(call_id or ""),
        name=storable_text(name or ""),
        arguments=storable_value(arguments) if isinstance(arguments, dict) else {},
    )


def _stop_reason(finish_reason: str | None, *, has_tool_calls: bool) -> StopReason:
    # Pi `mapStopReason` (openai-completions); some servers say "stop" with tool calls, and Pi's
    # agent loop runs tools whenever the content holds tool calls, so that is toolUse too.
    if finish_reason in ("tool_calls", "function_call") or has_tool_calls:
        return "toolUse"
    if finish_reason == "length":
        return "length"
    if finish_reason == "content_filter":
        return "error"
    return "stop"


def _reasoning_text(message: Any) -> str:
    return _reasoning_text_of(message.model_extra or {})


def _reasoning_text_of(fields: Mapping[str, object]) -> str:
    # Pi reads the first of these non-standard fields that OpenAI-compatible servers use.
    for key in ("reasoning_content", "reasoning", "reasoning_text"):
        value = fields.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def usage_from(usage: Any) -> Usage | None:
    """Convert OpenAI usage (prompt tokens include cached ones) to OpenClaw's split figures."""
    if usage is None:
        return None
    details = usage.prompt_tokens_details
    cache_read = (details.cached_tokens if details else None) or 0
    cache_write = (getattr(details, "cache_write_tokens", None) if details else None) or 0
    input_tokens = max(0, (usage.prompt_tokens or 0) - cache_read - cache_write)
    output = usage.completion_tokens or 0
    return Usage(
        input=input_tokens,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total=input_tokens + output + cache_read + cache_write,
    )


# ``convert(message, openai_message_parts)``: a caller's stand-in for the per-message conversion.
MessageConverter = Callable[[AgentMessage, Callable[[AgentMessage], list[ChatMessage]]], list[ChatMessage]]


def to_openai_messages(
    agent_messages: Sequence[AgentMessage],
    *,
    system_prompt: str | None,
    convert: MessageConverter | None = None,
) -> list[ChatMessage]:
    """Convert AgentMessages to OpenAI chat messages (new dicts; `entryId` is never sent).

    ``convert(message, openai_message_parts)`` may stand in for the per-message conversion (a
    caller that remembers what it converted before); what it returns must not be changed.
    """
    return settle_openai_messages(
        convert_messages(agent_messages, convert=convert), system_prompt=system_prompt
    )


def convert_messages(
    agent_messages: Sequence[AgentMessage],
    *,
    convert: MessageConverter | None = None,
) -> list[ChatMessage]:
    """Convert message by message (the first step of `to_openai_messages`: a list converts as its parts do)."""
    converted: list[ChatMessage] = []
    for message in agent_messages:
        if message.get("role") == "assistant" and message.get("stopReason") in ("error", "aborted"):
            continue  # Pi `transformMessages`: incomplete turns are never replayed.
        converted.extend(convert(message, openai_message_parts) if convert else openai_message_parts(message))
    return converted


def settle_openai_messages(
    converted: list[ChatMessage], *, system_prompt: str | None, tool_flags: Sequence[bool] | None = None
) -> list[ChatMessage]:
    """Put the system prompt first and close the tool runs (the last step of `to_openai_messages`).

    ``tool_flags`` (`tool_flags` of ``converted``, which a caller may keep between calls) lets the
    messages between tool runs pass through without a look at each.
    """
    flags = tool_flags_of(converted) if tool_flags is None else tool_flags
    if not system_prompt:
        return _settle_tool_runs(converted, list(flags))
    return _settle_tool_runs([{"role": "system", "content": system_prompt}, *converted], [False, *flags])


def tool_flags_of(messages: Sequence[ChatMessage]) -> list[bool]:
    """Per OpenAI message: whether it is a tool answer or makes tool calls (where a run may need closing)."""
    return [message["role"] == "tool" or bool(message.get("tool_calls")) for message in messages]


def _settle_tool_runs(messages: list[ChatMessage], flags: list[bool]) -> list[ChatMessage]:
    """Close each run of tool messages: answer forgotten calls, then attach tool images."""
    settled: list[ChatMessage] = []
    run: list[ChatMessage] = []
    expected: list[str] = []
    index, end = 0, len(messages)
    while index < end:
        if not run and not expected:  # no run open: the plain messages up to the next flag pass
            try:
                following = flags.index(True, index)
            except ValueError:
                following = end
            settled.extend(messages[index:following])
            index = following
            if index == end:
                break
        message = messages[index]
        index += 1
        if message["role"] == "tool":
            run.append(message)
            continue
        if run or expected:
            settled.extend(_close_tool_run(run, expected))
            run, expected = [], []
        settled.append(message)
        calls = message.get("tool_calls")
        if calls:
            expected = [call["id"] for call in calls]
    if run or expected:
        settled.extend(_close_tool_run(run, expected))
    return settled


def _close_tool_run(run: list[ChatMessage], expected: list[str]) -> list[ChatMessage]:
    # OpenAI rejects tool calls without a `tool` answer, and any non-tool message inside the run,
    # so (as Pi does) missing results are synthesised and tool images follow the whole run.
    answered = {message["tool_call_id"] for message in run}
    tools = [_without_images(m) if _IMAGES_KEY in m else m for m in run]
    missing = [_missing_result(call_id) for call_id in expected if call_id not in answered]
    images = [part for message in run for part in message.get(_IMAGES_KEY, [])]
    if not images:
        return tools + missing
    parts: list[ChatContentPart] = [{"type": "text", "text": TOOL_IMAGES_TEXT}, *images]
    return [*tools, *missing, {"role": "user", "content": parts}]


def _without_images(message: ChatMessage) -> ChatMessage:
    copy = message.copy()
    del copy[_IMAGES_KEY]
    return copy


def _missing_result(call_id: str) -> ChatMessage:
    return {"role": "tool", "tool_call_id": call_id, "content": MISSING_TOOL_RESULT_TEXT}


def openai_message_parts(message: AgentMessage) -> list[ChatMessage]:
    """Return the OpenAI messages one AgentMessage becomes (none, one, or a tool result's)."""
    role = message.get("role")
    if role == "user":
        return [{"role": "user", "content": _user_content(message.get("content"))}]
    if role == "assistant":
        return _assistant_message(message)
    if role == "toolResult":
        return _tool_result_messages(message)
    if role == "system":
        return [{"role": "system", "content": _text_of(message.get("content"))}]
    if role == "compactionSummary":
        summary = str(message.get("summary", ""))
        text = COMPACTION_SUMMARY_PREFIX + summary + COMPACTION_SUMMARY_SUFFIX
        return [{"role": "user", "content": text}]
    return []  # Roles the model never sees (custom entries and the like).


def _user_content(content: str | list[ContentBlock] | None) -> str | list[ChatContentPart]:
    if isinstance(content, str):
        return content
    blocks = list(content or [])
    if not any(block.get("type") == "image" for block in blocks):
        return _text_of(blocks)
    return [_content_part(block) for block in blocks if block.get("type") in ("text", "image")]


def _content_part(block: ContentBlock) -> ChatContentPart:
    if block.get("type") == "image":
        url = f"data:{block.get('mimeType', 'image/png')};base64,{block.get('data', '')}"
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "text", "text": block.get("text", "")}


def _text_of(content: str | list[ContentBlock] | None) -> str:
    if isinstance(content, str):
        return content
    texts = [block.get("text", "") for block in content or [] if block.get("type") == "text"]
    return "\n".join(texts)


def _blocks(message: AgentMessage) -> list[ContentBlock]:
    blocks = message.get("content") or []
    return [{"type": "text", "text": blocks}] if isinstance(blocks, str) else blocks


def _assistant_message(message: AgentMessage) -> list[ChatMessage]:
    blocks = _blocks(message)
    # Thinking blocks are dropped: OpenAI-compatible servers do not take them back.
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    calls = [_openai_tool_call(b) for b in blocks if b.get("type") == "toolCall"]
    if not text.strip() and not calls:
        return []  # Pi convertMessages skips assistant messages with nothing to say.
    converted: ChatMessage = {"role": "assistant", "content": text if text.strip() else None}
    if calls:
        converted["tool_calls"] = calls
    return [converted]


def _openai_tool_call(block: ContentBlock) -> ChatToolCall:
    arguments = json.dumps(block.get("arguments") or {}, ensure_ascii=False)
    return {
        "id": block["id"],
        "type": "function",
        "function": {"name": block["name"], "arguments": arguments},
    }


def _tool_result_messages(message: AgentMessage) -> list[ChatMessage]:
    blocks = _blocks(message)
    images = [_content_part(b) for b in blocks if b.get("type") == "image"]
    text = _text_of(blocks) or ("(see attached image)" if images else "")
    tool: ChatMessage = {"role": "tool", "tool_call_id": message.get("toolCallId", ""), "content": text}
    if images:
        tool[_IMAGES_KEY] = images  # Moved after the run by _close_tool_run, never sent.
    return [tool]
