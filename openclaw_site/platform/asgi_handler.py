"""Django under ASGI with each request in one thread: middleware, view and close (docs/design.md, Serving).

Django's own ASGI handler runs the middleware chain in async mode. Our middleware is synchronous
(django-axes alone is async-capable), so each request crossed between the event loop and a fresh
thread of its own several times: the sync middleware, back to the loop for django-axes and the
URL resolver, a thread again for the view, and once more to close the response. A profile of
eight clients posting messages found about a third of the web process's CPU in those crossings.

`ThreadedASGIHandler` keeps what the loop is good at (reading the body, sending the response,
noticing a client that leaves a stream) and hands everything else to one call in a thread of
`REQUEST_EXECUTOR`: the request-started signal, the whole synchronous middleware chain and view,
and, for a whole response, its close (the request-finished signal, which gives the thread's
database connections back). A streamed response's own work runs in a thread of
`openclaw_site.platform.streaming`; the request's thread gives its connections back before the stream
starts, and the response is closed when the stream ends, as Django closes it.

Before the body is read, the request's headers are judged (`openclaw_site.guards.body_limits`: a
Content-Length over the route's limit, a body with no credentials, and the credentials of a body
that may be large, checked in a request thread); the body is then read with the route's limit as
a cap, so a chunked body is cut off there (docs/design.md, Limits and refusals).
"""

from __future__ import annotations

import asyncio
import contextvars
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.db import close_old_connections
from django.http import FileResponse, HttpResponseBase
from django.http.cookie import parse_cookie
from django.urls import set_script_prefix

from openclaw_site.guards.body_limits import (
    BODY_CHECKED_ATTRIBUTE,
    BodyGuard,
    Refusal,
    refusal_response,
    too_large,
)


def request_executor() -> ThreadPoolExecutor:
    """A pool of request threads: one per request being handled; a request beyond that waits."""
    return ThreadPoolExecutor(max_workers=settings.REQUEST_THREADS, thread_name_prefix="request")


# Streams run in their own pool (openclaw_site.platform.streaming), so an open stream holds none of these.
REQUEST_EXECUTOR = request_executor()

T = TypeVar("T")


async def in_request_thread(function: Callable[..., T], *args: Any) -> T:
    """Run `function(*args)` in a request thread, in a copy of the caller's context variables."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(REQUEST_EXECUTOR, context.run, function, *args)


class ThreadedASGIHandler(ASGIHandler):
    """Django's ASGI handler with the middleware loaded synchronously and run in one thread hop."""

    def __init__(self) -> None:
        base.BaseHandler.__init__(self)  # not ASGIHandler's: it loads the middleware in async mode
        self.load_middleware(is_async=False)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        guard = _guard_of_scope(scope)
        refusal = guard.refusal_from_headers()
        if refusal is None and guard.needs_credentials_check():
            refusal = await in_request_thread(_checked_credentials, guard)
        if refusal is not None:
            await self._refuse(guard, refusal, send)
            return
        try:
            body_file = await self.read_capped_body(receive, guard.limit)
        except RequestAborted:
            return
        except _BodyTooLarge:
            await self._refuse(guard, too_large(guard.limit), send)
            return
        if guard.declared_length() is None:
            scope = _with_content_length(scope, body_file)
        try:
            response = await in_request_thread(self._respond, scope, body_file)
            if not response.streaming:
                await self.send_response(response, send)
                return
            await self._stream(response, receive, send)
        finally:
            body_file.close()

    def _respond(self, scope: dict[str, Any], body_file: Any) -> HttpResponseBase:
        """Handle the request in this thread; a whole response comes back already closed."""
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        if request is not None:
            setattr(request, BODY_CHECKED_ATTRIBUTE, True)  # BodyGuardMiddleware need not again
        response = self.get_response(request) if request is not None else error_response
        assert response is not None  # create_request returns a request or the response refusing it
        response._handler_class = self.__class__  # type: ignore[attr-defined]
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size
        if response.streaming:
            close_old_connections()  # the stream queries in its own thread; this one is done
        else:
            response.close()  # request_finished: this thread's connections go back
        return response

    async def read_capped_body(self, receive: Any, limit: int) -> Any:
        """Read the body as Django does (in memory, then a temporary file), never past ``limit`` bytes."""
        body_file = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - the caller closes it
            max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE, mode="w+b"
        )
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                body_file.close()
                raise RequestAborted()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                body_file.close()
                raise _BodyTooLarge()
            body_file.write(chunk)
            if not message.get("more_body", False):
                break
        body_file.seek(0)
        return body_file

    async def _refuse(self, guard: BodyGuard, refusal: Refusal, send: Any) -> None:
        """Answer before (the rest of) the body is read; the response closes the connection."""
        await self.send_response(refusal_response(guard.surface, refusal), send)

    async def _stream(self, response: HttpResponseBase, receive: Any, send: Any) -> None:
        """Send a streamed response until it ends or the client leaves, then close it."""
        if not response.is_async:  # type: ignore[attr-defined]
            # Django would read it whole in a thread and warn on every such response (a static file,
            # an export, a CSV): read it here without the warning, a file a block at a time.
            parts = response.streaming_content  # type: ignore[attr-defined]
            by_part = isinstance(response, FileResponse)
            response.streaming_content = _read_in_threads(parts, by_part=by_part)  # type: ignore[attr-defined]
        sending = asyncio.ensure_future(self.send_response(response, send))
        listening = asyncio.ensure_future(self.listen_for_disconnect(receive))
        try:
            await asyncio.wait({sending, listening}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (listening, sending):  # a client that left cancels the stream's async side
                task.cancel()
            _, sent = await asyncio.gather(listening, sending, return_exceptions=True)
            await in_request_thread(response.close)
        if isinstance(sent, Exception):  # not a cancellation: the stream itself failed
            raise sent


class _BodyTooLarge(Exception):
    """The body went past its route's limit while it was being read."""


def _guard_of_scope(scope: dict[str, Any]) -> BodyGuard:
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]},{text}" if key in headers else text
    cookies = parse_cookie(headers.get("cookie", ""))
    return BodyGuard(scope.get("method", "GET"), scope.get("path", "/"), headers, cookies)


def _with_content_length(scope: dict[str, Any], body_file: Any) -> dict[str, Any]:
    """The scope of a chunked request with the length of the body read, which Django's parsers go by."""
    size = body_file.seek(0, 2)
    body_file.seek(0)
    return {**scope, "headers": [*scope.get("headers", []), (b"content-length", str(size).encode())]}


def _checked_credentials(guard: BodyGuard) -> Refusal | None:
    """Check a request's credentials in a request thread, its connections given back as a request's are."""
    close_old_connections()
    try:
        return guard.refusal_by_credentials()
    finally:
        close_old_connections()


_END = object()


async def _read_in_threads(parts: Iterator[bytes], *, by_part: bool) -> AsyncIterator[bytes]:
    """Yield a synchronous stream's parts from request threads: a file's blocks one by one, any
    other stream (whose iterator may query the database) whole from one thread, as Django does."""
    if not by_part:
        whole: list[bytes] = await in_request_thread(list, parts)
        for part in whole:
            yield part
        return
    while (block := await in_request_thread(next, parts, _END)) is not _END:
        yield block
