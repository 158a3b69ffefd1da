"""Streaming responses (server-sent events) that work under ASGI and WSGI (docs/design.md, Streaming).

Django buffers a sync iterator under ASGI, and the WSGI server of the browser tests needs one, so
`streaming_response` picks by the request: under WSGI the events' iterator is the response body;
under ASGI the iterator runs to its end in one thread of `STREAM_EXECUTOR` (a turn holds its lock
and its database connection in one thread) and an async iterator hands its chunks to the server.
A client that disconnects cancels the async side; the thread then closes the iterator at its
next chunk, as a WSGI server closes the body, so both paths end a cut stream the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import connections
from django.http import HttpRequest, StreamingHttpResponse

logger = logging.getLogger(__name__)

EVENT_STREAM = "text/event-stream"
# Large enough for every open stream of one process (settings.STREAM_WORKERS); a stream waits
# for a thread only beyond that.
STREAM_EXECUTOR = ThreadPoolExecutor(max_workers=settings.STREAM_WORKERS, thread_name_prefix="stream")
_END = object()
# The producers still running, so that a cut stream's producer is not garbage-collected.
_producers: set[asyncio.Future[None]] = set()


def sse_event(data: Any, *, event: str | None = None) -> bytes:
    """Encode one server-sent event; `data` is sent as JSON unless it is already a string."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    lines = [f"event: {event}"] if event else []
    lines += [f"data: {line}" for line in text.split("\n")]
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def streaming_response(
    request: HttpRequest, chunks: Callable[[], Iterator[bytes]], *, content_type: str = EVENT_STREAM
) -> StreamingHttpResponse:
    """Return a response streaming `chunks()`: async under ASGI, the iterator itself under WSGI."""
    django_request = getattr(request, "_request", request)  # a DRF Request wraps Django's
    content: Iterator[bytes] | AsyncIterator[bytes]
    content = _in_thread(chunks) if isinstance(django_request, ASGIRequest) else chunks()
    response = StreamingHttpResponse(content, content_type=content_type)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response


async def _in_thread(chunks: Callable[[], Iterator[bytes]]) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()
    stop = threading.Event()

    def put(item: object) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is gone (server shutdown); nobody is listening
            stop.set()

    def produce() -> None:
        iterator = chunks()
        try:
            for chunk in iterator:
                put(chunk)
                if stop.is_set():
                    break
        except Exception:
            logger.exception("a streamed response failed")
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()  # a cut stream: the generator stores what it had (e.g. an aborted reply)
            connections.close_all()  # this thread's connections; the pool's threads outlive requests
            put(_END)

    producer = asyncio.ensure_future(
        sync_to_async(produce, thread_sensitive=False, executor=STREAM_EXECUTOR)()
    )
    _producers.add(producer)
    producer.add_done_callback(_producers.discard)
    try:
        while True:
            item = await queue.get()
            if item is _END:
                return
            assert isinstance(item, bytes)
            yield item
    finally:
        stop.set()
