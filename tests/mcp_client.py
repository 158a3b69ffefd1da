"""The official MCP Python client against the live ASGI server: list the tools, call one.

Each helper opens its own Streamable HTTP connection with the API key as the bearer, runs one
request and closes it, from a synchronous test (the test thread keeps the ORM to itself).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Tool

T = TypeVar("T")


def mcp_url(base_url: str, assistant: str | None = "helper") -> str:
    """The MCP endpoint of the server: /mcp/<assistant>/, or /mcp/ naming none."""
    return f"{base_url}/mcp/{assistant}/" if assistant else f"{base_url}/mcp/"


async def _with_session(url: str, secret: str, use: Callable[[ClientSession], Awaitable[T]]) -> T:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await use(session)


def _run(coroutine: Awaitable[T]) -> T:
    """Run the client on an event loop of its own thread: the test thread may already have one
    running (Playwright's sync API keeps it for the session's browser)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()  # type: ignore[arg-type]


def list_tools(url: str, secret: str) -> list[Tool]:
    async def use(session: ClientSession) -> list[Tool]:
        return (await session.list_tools()).tools

    return _run(_with_session(url, secret, use))


def call_tool(url: str, secret: str, name: str, arguments: dict[str, Any]) -> CallToolResult:
    async def use(session: ClientSession) -> CallToolResult:
        return await session.call_tool(name, arguments)

    return _run(_with_session(url, secret, use))


def tool_json(result: CallToolResult) -> dict[str, Any]:
    """The JSON a tool answered (its structured content and its text say the same)."""
    assert not result.is_error, result.content
    text = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert result.structured_content == text
    return text


def tool_error(result: CallToolResult) -> dict[str, Any]:
    """The error of a refused call (``isError``): our envelope's ``{"code", "message", "details"}``."""
    assert result.is_error, result.content
    envelope = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert result.structured_content == envelope
    return envelope["error"]
