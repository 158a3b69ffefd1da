"""A real HTTP server on 127.0.0.1 that speaks the OpenAI protocol with scripted answers.

The OpenAI path is tested with the real `openai` client against this server, never a mock
(docs/architecture.md, Tests). Chat replies are popped from a queue (`FakeOpenAI.queue`); when the queue is
empty `default_chat` answers. Embeddings are deterministic hashed bags of words, so texts that
share words are similar. A request with `"stream": true` gets the same reply as server-sent
`chat.completion.chunk`s, in OpenAI's format: the text in the reply's `chunks` (word by word when
it names none), `chunk_delay_seconds` between them, the tool calls, the finish reason, a usage
chunk when `stream_options.include_usage` asks, then `data: [DONE]`; `cut_after` ends the stream
after that many text chunks, as a dropped connection does.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import pytest

DEFAULT_EMBEDDING_DIMS = 384
DEFAULT_MODELS = ("fake-chat", "fake-embedding")
_WORD_RE = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Reply:
    """One scripted answer: an assistant message, or an error body, optionally delayed."""

    status: int = 200
    message: dict[str, Any] | None = None
    finish_reason: str = "stop"
    usage: dict[str, int] | None = None
    error: dict[str, Any] | None = None
    delay_seconds: float = 0.0
    then: Reply | None = None
    raw_body: bytes | None = None  # sent as is with `status` (a truncated or malformed answer)
    chunks: tuple[str, ...] | None = None
    chunk_delay_seconds: float = 0.0
    cut_after: int | None = None


ChatHandler = Callable[[dict[str, Any]], Reply | str]


def text_reply(
    text: str,
    *,
    usage: dict[str, int] | None = None,
    finish_reason: str = "stop",
    reasoning: str | None = None,
) -> Reply:
    """Script a plain assistant text answer.

    `usage` takes `prompt_tokens`, `completion_tokens`, optionally `cached_tokens` and
    `cache_write_tokens`; missing figures are computed from the request. `reasoning` is sent as
    `reasoning_content`, the field OpenAI-compatible reasoning servers (DeepSeek, vLLM) use.
    """
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return Reply(message=message, finish_reason=finish_reason, usage=usage)


def chunked_reply(
    *chunks: str,
    chunk_delay_seconds: float = 0.0,
    cut_after: int | None = None,
    usage: dict[str, int] | None = None,
) -> Reply:
    """Script a text answer streamed in exactly these pieces (a whole answer when not streamed)."""
    message = {"role": "assistant", "content": "".join(chunks)}
    return Reply(
        message=message,
        usage=usage,
        chunks=tuple(chunks),
        chunk_delay_seconds=chunk_delay_seconds,
        cut_after=cut_after,
    )


def tool_call_reply(
    calls: list[tuple[str, dict[str, Any]]],
    *,
    text: str = "",
    usage: dict[str, int] | None = None,
) -> Reply:
    """Script an assistant answer that calls tools (ids `call_1`, `call_2`, ...)."""
    tool_calls = [
        {
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        for index, (name, arguments) in enumerate(calls, start=1)
    ]
    message = {"role": "assistant", "content": text or None, "tool_calls": tool_calls}
    return Reply(message=message, finish_reason="tool_calls", usage=usage)


def error_reply(
    status: int,
    message: str,
    *,
    code: str | None = None,
    type: str = "invalid_request_error",
) -> Reply:
    """Script an OpenAI error answer (`{"error": {message, type, param, code}}`)."""
    error = {"message": message, "type": type, "param": None, "code": code}
    return Reply(status=status, error=error)


def malformed_reply(
    body: bytes = b'{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"in',
) -> Reply:
    """Script a 200 answer whose body is not the JSON it claims to be (truncated by default)."""
    return Reply(raw_body=body)


def delay_reply(seconds: float, then: Reply | None = None) -> Reply:
    """Script a pause before answering with `then` (default: the server's usual answer)."""
    return Reply(delay_seconds=seconds, then=then)


def fake_embedding(text: str, dims: int = DEFAULT_EMBEDDING_DIMS) -> list[float]:
    """Embed text as an L2-normalised signed hashed bag of lowercase words."""
    vector = [0.0] * dims
    for word in _WORD_RE.findall(text.lower()) or [""]:
        digest = hashlib.sha256(word.encode("utf-8")).digest()
        index = int.from_bytes(digest[:4], "big") % dims
        vector[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(value * value for value in vector)) or 1.0
    return [value / norm for value in vector]


def estimate_tokens(value: object) -> int:
    """Return a plausible token figure: the JSON length divided by four."""
    return len(json.dumps(value, ensure_ascii=False)) // 4


def _default_chat(request: dict[str, Any]) -> Reply:
    return text_reply("ok")


@dataclass
class FakeOpenAI:
    """Scripted OpenAI-compatible server; use as a context manager or start()/stop()."""

    embedding_dims: int = DEFAULT_EMBEDDING_DIMS
    models: tuple[str, ...] = DEFAULT_MODELS
    default_chat: ChatHandler = _default_chat
    chat_queue: deque[Reply] = field(default_factory=deque)
    embedding_errors: deque[Reply] = field(default_factory=deque)
    # The `usage.prompt_tokens` an embeddings reply bills per input text (None: the estimate);
    # `embedding_usage` False leaves usage out, as some OpenAI-compatible servers do.
    embedding_tokens_per_text: int | None = None
    embedding_usage: bool = True
    # Called with each embeddings request's body before it is answered (in the server's thread),
    # so a test can act while a caller waits for its vectors.
    on_embeddings: Callable[[dict[str, Any]], None] | None = None
    _requests: list[tuple[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """Return `http://127.0.0.1:<port>/v1`."""
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeOpenAI:
        """Listen on a free port in a daemon thread."""
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self  # type: ignore[attr-defined]
        # A short poll interval keeps stop() (and so every test teardown) fast.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; delayed answers are cut short."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def queue(self, *replies: Reply) -> None:
        """Append scripted chat replies, answered in order."""
        self.chat_queue.extend(replies)

    @property
    def requests(self) -> list[tuple[str, Any]]:
        """Return a copy of every (path, json body) received, in order."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """Return the bodies of the chat-completions requests received."""
        return [body for path, body in self.requests if path.endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        """Return the bodies of the embeddings requests received."""
        return [body for path, body in self.requests if path.endswith("/embeddings")]

    def record(self, path: str, body: Any) -> None:
        """Remember one request (called by the handler threads)."""
        with self._lock:
            self._requests.append((path, body))

    def sleep(self, seconds: float) -> None:
        """Wait, but wake up at once when the server stops."""
        self._stopping.wait(seconds)

    def next_chat_reply(self, request: dict[str, Any]) -> Reply:
        """Pop the next scripted reply, or ask `default_chat`."""
        try:
            return self.chat_queue.popleft()
        except IndexError:
            return self.default_chat_reply(request)

    def default_chat_reply(self, request: dict[str, Any]) -> Reply:
        """Ask `default_chat` (a plain string answer becomes a text reply)."""
        reply = self.default_chat(request)
        return text_reply(reply) if isinstance(reply, str) else reply

    def next_embedding_reply(self) -> Reply | None:
        """Pop the next scripted embeddings failure or delay, if any."""
        try:
            return self.embedding_errors.popleft()
        except IndexError:
            return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out closes its socket while a delayed answer sleeps; that is the
        # scenario under test, not a server fault.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    @property
    def fake(self) -> FakeOpenAI:
        fake: FakeOpenAI = self.server.fake  # type: ignore[attr-defined]
        return fake

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.fake.record(self.path, None)
        if self.path.rstrip("/").endswith("/models"):
            data = [
                {"id": model, "object": "model", "created": 0, "owned_by": "fake-openai"}
                for model in self.fake.models
            ]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_error(error_reply(404, f"Unknown path {self.path}", code="not_found"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except json.JSONDecodeError:
            self._send_error(error_reply(400, "Request body is not valid JSON"))
            return
        self.fake.record(self.path, body)
        if self.path.endswith("/chat/completions"):
            reply = self.fake.next_chat_reply(body)
            reply = self._after_delay(reply, lambda: self.fake.default_chat_reply(body))
            if body.get("stream") and reply.error is None and reply.raw_body is None:
                self._stream(reply, body)
            else:
                ready = reply.error is None and reply.raw_body is None
                self._answer(reply, _chat_body(reply, body) if ready else {})
        elif self.path.endswith("/embeddings"):
            if self.fake.on_embeddings is not None:
                self.fake.on_embeddings(body)
            reply = self._after_delay(self.fake.next_embedding_reply() or Reply(), Reply)
            self._answer(reply, self._embeddings_body(body) if reply.error is None else {})
        else:
            self._send_error(error_reply(404, f"Unknown path {self.path}", code="not_found"))

    def _after_delay(self, reply: Reply, fallback: Callable[[], Reply]) -> Reply:
        while reply.delay_seconds:
            self.fake.sleep(reply.delay_seconds)
            reply = reply.then or fallback()
        return reply

    def _answer(self, reply: Reply, payload: dict[str, Any]) -> None:
        if reply.raw_body is not None:
            self._send_raw(reply.status, reply.raw_body)
        elif reply.error is not None:
            self._send_error(reply)
        else:
            self._send_json(200, payload)

    def _stream(self, reply: Reply, request: dict[str, Any]) -> None:
        whole = _chat_body(reply, request)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for index, event in enumerate(_stream_events(reply, whole, request)):
                if index and reply.chunk_delay_seconds and event is not None:
                    self.fake.sleep(reply.chunk_delay_seconds)
                if event is None:  # cut here
                    return
                self.wfile.write(b"data: " + json.dumps(event).encode("utf-8") + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # The client stopped reading (a disconnect test).

    def _embeddings_body(self, request: dict[str, Any]) -> dict[str, Any]:
        texts = request.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        dims = int(request.get("dimensions") or self.fake.embedding_dims)
        as_base64 = request.get("encoding_format") == "base64"
        data = [
            {"object": "embedding", "index": index, "embedding": _encode(vector, as_base64)}
            for index, vector in enumerate(fake_embedding(str(text), dims) for text in texts)
        ]
        per_text = self.fake.embedding_tokens_per_text
        tokens = len(texts) * per_text if per_text is not None else sum(estimate_tokens(t) for t in texts)
        body = {"object": "list", "data": data, "model": request.get("model") or self.fake.models[-1]}
        if self.fake.embedding_usage:
            body["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
        return body

    def _send_error(self, reply: Reply) -> None:
        self._send_json(reply.status, {"error": reply.error})

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        self._send_raw(status, json.dumps(payload).encode("utf-8"))

    def _send_raw(self, status: int, raw: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # The client gave up (timeout test); nothing to answer.


def _encode(vector: list[float], as_base64: bool) -> list[float] | str:
    if not as_base64:
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def _chat_body(reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    message = dict(reply.message or {"role": "assistant", "content": "ok"})
    return {
        "id": f"chatcmpl-fake-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model") or DEFAULT_MODELS[0],
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}],
        "usage": _usage(reply, request, message),
    }


def _stream_events(
    reply: Reply, whole: dict[str, Any], request: dict[str, Any]
) -> Iterator[dict[str, Any] | None]:
    """Yield the chunks of a streamed answer; None where the stream is cut."""
    message = whole["choices"][0]["message"]
    base = {key: whole[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return {**base, "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    content = message.get("content") or ""
    pieces = reply.chunks if reply.chunks is not None else tuple(re.findall(r"\S+\s*|\s+", content))
    for index, piece in enumerate(pieces):
        if reply.cut_after is not None and index >= reply.cut_after:
            yield None
            return
        yield chunk({"content": piece})
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        first = {"index": index, "id": call["id"], "type": "function"}
        yield chunk(
            {
                "tool_calls": [
                    first | {"function": {"name": call["function"]["name"], "arguments": arguments[:half]}}
                ]
            }
        )
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]})
    yield chunk({}, finish_reason=reply.finish_reason)
    if (request.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": whole["usage"]}


def _usage(reply: Reply, request: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    given = reply.usage or {}
    # Estimated only when the script gave no figure: a long request's JSON is megabytes.
    prompt = (
        given["prompt_tokens"] if "prompt_tokens" in given else estimate_tokens(request.get("messages", []))
    )
    completion = (
        given["completion_tokens"]
        if "completion_tokens" in given
        else max(1, estimate_tokens([message.get("content"), message.get("tool_calls")]))
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": _prompt_details(given),
    }


def _prompt_details(given: dict[str, int]) -> dict[str, int]:
    details = {"cached_tokens": given.get("cached_tokens", 0)}
    if "cache_write_tokens" in given:
        details["cache_write_tokens"] = given["cache_write_tokens"]
    return details


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """Start a FakeOpenAI server for one test."""
    with FakeOpenAI() as server:
        yield server
