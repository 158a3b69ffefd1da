"""The MCP endpoint over Streamable HTTP: ``/mcp/`` and ``/mcp/<assistant>/`` (docs/design.md, MCP).

`McpApplication` is the ASGI app `config.asgi` sends those paths to. Before any of the body
is read it refuses a Content-Length over `OPENCLAW_MAX_REQUEST_BYTES` (413) and authenticates the
bearer API key with `openclaw_site.guards.auth.bearer_api_key` (no key or a bad one: 401; a URL naming no
assistant of the key's team: 404); then it reads the body with that limit as a cap (a chunked body
is cut off there) and puts an `integrations.mcp_server.McpCaller` (the key's team and scopes, the
URL's assistant) on the scope's state, where the tools read it. A body the REST API's JSON guards
would refuse (`openclaw_site.guards.json_input`: too deep, a NUL or a lone surrogate anywhere) is refused
here, with the request's id, before the SDK parses it. Its refusals are JSON-RPC errors
(what the official client raises with their message), our error envelope's object in ``data``.

The SDK runs stateless with JSON responses: every POST is answered on its own, so any worker of
any process can take any request and nothing is kept between them. Its session manager lives for
the ASGI lifespan; each lifespan (each uvicorn worker, each test server) gets a fresh one.
"""

from __future__ import annotations

import json
import re
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import INVALID_REQUEST
from starlette.applications import Starlette
from starlette.types import Message, Receive, Scope, Send

from integrations.mcp_server import CALLER_STATE_KEY, McpCaller, run_sync, server
from openclaw_site.errors import ApiError, error_body
from openclaw_site.guards.auth import api_key_context, bearer_api_key
from openclaw_site.guards.body_limits import BodyGuard, Refusal, too_large
from openclaw_site.guards.json_input import MAX_JSON_DEPTH, JsonInputError, check_json_value
from openclaw_site.selectors import NotFound, assistant_get

MCP_PATH_PREFIX = "/mcp"
# /mcp, /mcp/, /mcp/<slug>, /mcp/<slug>/ (a slug as Django's <slug:> converter reads it).
_MCP_PATH = re.compile(r"^/mcp(?:/(?P<slug>[-a-zA-Z0-9_]+))?/?$")
# Every request must carry an API key, which a page rebinding DNS to this host cannot present,
# and the deployment's host names are Django's ALLOWED_HOSTS, not the SDK's localhost default.
_TRANSPORT_SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def is_mcp_path(path: str) -> bool:
    """Whether a request path belongs to the MCP endpoint (everything else is Django's)."""
    return path == MCP_PATH_PREFIX or path.startswith(f"{MCP_PATH_PREFIX}/")


def _caller_for(authorization: str, url_assistant: str | None) -> McpCaller:
    key = bearer_api_key(authorization)
    if key is None:
        raise ApiError(
            "not_authenticated",
            "Authentication required: send 'Authorization: Bearer <api key>'.",
            status_code=401,
        )
    if url_assistant is not None:
        try:
            assistant_get(team=key.team, slug=url_assistant)
        except NotFound:
            raise ApiError(
                "not_found",
                f"No assistant {url_assistant!r} in this key's team: the URL is /mcp/<assistant slug>/ "
                "(GET /api/v1/assistants/ lists them), or /mcp/ to name it per call.",
                status_code=404,
            ) from None
    return McpCaller(context=api_key_context(key), url_assistant=url_assistant)


async def _send_error(send: Send, error: ApiError, *, request_id: Any = None) -> None:
    """Answer with a JSON-RPC error (id null unless the request's was read) and close the connection."""
    headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
    if error.status_code == 401:
        headers.append((b"www-authenticate", b'Bearer realm="mcp"'))
    envelope = error_body(error.code, error.message, error.details)["error"]
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": INVALID_REQUEST, "message": error.message, "data": envelope},
        }
    ).encode()
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _api_error(refusal: Refusal) -> ApiError:
    return ApiError(refusal.code, refusal.message, status_code=refusal.status, details=refusal.details)


class _BodyTooLarge(Exception):
    """The body went past the limit while it was being read."""


async def _read_capped(receive: Receive, limit: int) -> tuple[bytes, list[Message]]:
    """Read the whole body, never past ``limit`` bytes; also return what came after it (a disconnect)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body), [dict(message)]
        body.extend(message.get("body", b""))
        if len(body) > limit:
            raise _BodyTooLarge()
        if not message.get("more_body", False):
            return bytes(body), []


def _json_refusal(body: bytes) -> tuple[ApiError, Any] | None:
    """Refuse a message the REST API would refuse: too deep, a NUL or a lone surrogate anywhere.

    Return the refusal and the message's id (null when it cannot be read), or None when the body
    may go on to the SDK (which answers text that is not JSON itself).
    """
    try:
        message = json.loads(body)
    except RecursionError:
        message = None
        problem: JsonInputError | None = JsonInputError(
            "json_too_deep", f"JSON nests deeper than {MAX_JSON_DEPTH} levels.", path="body"
        )
    except ValueError:
        return None
    else:
        try:
            check_json_value(message)
            problem = None
        except JsonInputError as error:
            problem = error
    if problem is None:
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    field = problem.path or "body"
    return ApiError(problem.code, problem.message, details={"field": field}), (
        request_id if isinstance(request_id, (str, int)) else None
    )


def _replaying(body: bytes, after: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that gives the body already read, then what followed, then the connection's."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}, *after]

    async def replay() -> Any:
        return pending.pop(0) if pending else await receive()

    return replay


def _header(scope: Scope, name: bytes) -> str:
    return next((value.decode("latin-1") for key, value in scope["headers"] if key == name), "")


class McpApplication:
    """ASGI app of the MCP endpoint: authentication and the assistant in front of the SDK's app."""

    def __init__(self, mcp_server: MCPServer) -> None:
        self._server = mcp_server
        self._app: Starlette | None = None

    def _build(self) -> Starlette:
        return self._server.streamable_http_app(
            streamable_http_path="/",
            stateless_http=True,
            json_response=True,
            max_request_body_size=settings.MAX_REQUEST_BYTES,
            transport_security=_TRANSPORT_SECURITY,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            self._app = self._build()  # a session manager runs once: a new one per lifespan
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":
            raise ValueError(f"The MCP endpoint serves HTTP only, not {scope['type']}.")
        await self._serve(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _MCP_PATH.match(scope["path"])
        if match is None:
            await _send_error(
                send, ApiError("not_found", f"No endpoint at {scope['path']}.", status_code=404)
            )
            return
        if self._app is None:
            await _send_error(
                send,
                ApiError(
                    "mcp_not_started",
                    "The MCP endpoint starts with the ASGI lifespan; run the server with lifespan on.",
                    status_code=503,
                ),
            )
            return
        guard = _guard_of_scope(scope)
        refusal = guard.refusal_from_headers()
        if refusal is not None:
            await _send_error(send, _api_error(refusal))
            return
        authorization = _header(scope, b"authorization")
        try:
            caller = await sync_to_async(run_sync, thread_sensitive=False)(
                lambda: _caller_for(authorization, match.group("slug"))
            )
        except ApiError as error:
            await _send_error(send, error)
            return
        try:
            body, after = await _read_capped(receive, guard.limit)
        except _BodyTooLarge:
            await _send_error(send, _api_error(too_large(guard.limit)))
            return
        refused = _json_refusal(body)
        if refused is not None:
            await _send_error(send, refused[0], request_id=refused[1])
            return
        state: dict[str, object] = {**scope.get("state", {}), CALLER_STATE_KEY: caller}
        scope = {**scope, "path": "/", "raw_path": b"/", "state": state}
        await self._app(scope, _replaying(body, after, receive), send)


def _guard_of_scope(scope: Scope) -> BodyGuard:
    """The body guard of an MCP request: the API's limit (`OPENCLAW_MAX_REQUEST_BYTES`), a key required."""
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
    return BodyGuard(scope["method"], scope["path"], headers, {})


mcp_application = McpApplication(server)
