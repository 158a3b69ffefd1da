"""One set of guards on every surface (docs/design.md, Limits and refusals).

REST (Django's client and the live ASGI server), MCP (the official `mcp` client) and `/v1` (the
official `openai` SDK) share one rate budget per API key, refuse the same JSON, read memory
content only with `memory:read`, end a revoked key's open stream, and end every stream with
`done` / `error` (`[DONE]` after an error chunk on `/v1`) even when something unexpected fails.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import pytest
from django.core.cache import cache
from mcp.shared.exceptions import MCPError

from memory_app.models import MemoryDocument
from openclaw_site.guards import throttling
from openclaw_site.teams import services
from sessions_app.models import Message, Session
from sessions_app.turn import loop as agent
from tests import factories
from tests import messages as m
from tests.api_support import API, assert_error
from tests.conftest import ALL_SCOPES, bearer_client
from tests.fake_openai import chunked_reply
from tests.mcp_client import call_tool, mcp_url, tool_error, tool_json
from tests.streaming_support import django_stream_lines, raw_sse_events, sse_events

WORDS = tuple(f"word{index} " for index in range(40))


def sdk(server: Any, secret: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=secret, max_retries=0)


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def mcp_error(error: BaseException) -> MCPError:
    """The MCPError the official client raised, out of the exception groups it may come in."""
    if isinstance(error, MCPError):
        return error
    assert isinstance(error, BaseExceptionGroup), error
    return next(mcp_error(inner) for inner in error.exceptions)


# --- one rate budget per key ------------------------------------------------------------------


def test_rest_mcp_and_v1_share_one_rate_budget_per_key(asgi_live_server, world, settings, monkeypatch):
    cache.clear()
    monkeypatch.setattr(throttling, "WINDOW_SECONDS", 10**9)  # one window for the whole test
    settings.API_KEY_RATE_PER_MINUTE = 3
    _, secret = factories.make_api_key(world.acme, ALL_SCOPES)
    _, other = factories.make_api_key(world.acme, ALL_SCOPES)
    rest = f"{asgi_live_server.url}{API}/assistants/"
    headers = {"Authorization": f"Bearer {secret}"}

    assert httpx2.get(rest, headers=headers, timeout=30).status_code == 200  # 1: REST
    assert [model.id for model in sdk(asgi_live_server, secret).models.list()] == ["helper"]  # 2: /v1
    tool_json(call_tool(mcp_url(asgi_live_server.url), secret, "memory_get", {"path": "MEMORY.md"}))  # 3

    refused = httpx2.get(rest, headers=headers, timeout=30)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    assert int(refused.headers["Retry-After"]) >= 1
    with pytest.raises(openai.RateLimitError) as limited:
        sdk(asgi_live_server, secret).models.list()
    assert limited.value.code == "rate_limited" and "this API key" in limited.value.message
    assert int(limited.value.response.headers["Retry-After"]) >= 1
    error = tool_error(call_tool(mcp_url(asgi_live_server.url), secret, "memory_get", {"path": "MEMORY.md"}))
    assert error["code"] == "rate_limited" and error["details"]["retry_after"] >= 1
    # Another key of the same team has its own budget.
    assert httpx2.get(rest, headers={"Authorization": f"Bearer {other}"}, timeout=30).status_code == 200


# --- the JSON guards on /v1 and MCP -----------------------------------------------------------


V1_REFUSALS = [
    pytest.param(
        {"messages": [{"role": "user", "content": "a\x00b"}]}, "invalid_text", "messages[0].content", id="nul"
    ),
    pytest.param(
        {"messages": [{"role": "user", "content": "hi"}], "metadata": nested(70)},
        "json_too_deep",
        None,
        id="deep",
    ),
    pytest.param(
        {"messages": [{"role": "user", "content": "hi"}], "stream": True, "stream_options": ["x"]},
        "invalid_request",
        "stream_options",
        id="stream-options-not-an-object",
    ),
    pytest.param(
        {
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "stream_options": {"include_usage": "yes"},
        },
        "invalid_request",
        "stream_options.include_usage",
        id="include-usage-not-a-boolean",
    ),
    pytest.param(
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
        "respond_needs_user_message",
        None,
        id="ends-with-the-assistant",
    ),
]


@pytest.mark.parametrize(("body", "code", "param"), V1_REFUSALS)
def test_v1_refuses_what_rest_refuses_and_leaves_no_session(
    asgi_live_server, acme_secret, llm, body, code, param
):
    client = sdk(asgi_live_server, acme_secret)
    extra = {key: value for key, value in body.items() if key != "messages"}

    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(
            model="helper",
            messages=body["messages"],
            extra_body=extra,
            extra_headers={"X-Session-Key": "fresh"},
        )

    assert bad.value.code == code
    if param is not None:
        assert bad.value.param == param
    assert not Session.objects.exists() and not Message.objects.exists()
    assert llm.chat_requests == []


def test_v1_refuses_a_lone_surrogate_as_invalid_text(asgi_live_server, acme_secret, llm):
    body = '{"model": "helper", "messages": [{"role": "user", "content": "x\\ud800y"}]}'
    response = httpx2.post(
        f"{asgi_live_server.url}/v1/chat/completions",
        content=body.encode(),
        headers={"Authorization": f"Bearer {acme_secret}", "Content-Type": "application/json"},
        timeout=30,
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_text" and "lone surrogate" in error["message"]
    assert not Session.objects.exists()


MCP_REFUSALS = [
    pytest.param("memory_write", {"mode": "append", "content": "a\x00b"}, "invalid_text", id="nul-in-a-note"),
    pytest.param(
        "session_append",
        {"session_key": "fresh", "messages": [m.user("a\x00b")]},
        "invalid_text",
        id="nul-in-a-message",
    ),
    pytest.param(
        "session_append",
        {"session_key": "fresh", "messages": [{**m.user("hi"), "details": nested(70)}]},
        "json_too_deep",
        id="deep-details",
    ),
]


@pytest.mark.parametrize(("tool", "arguments", "code"), MCP_REFUSALS)
def test_mcp_refuses_what_rest_refuses_and_changes_nothing(
    asgi_live_server, world, acme_secret, tool, arguments, code
):
    with pytest.raises(BaseException) as raised:  # the client wraps it in exception groups
        call_tool(mcp_url(asgi_live_server.url), acme_secret, tool, arguments)

    refused = mcp_error(raised.value)
    data = refused.error.data
    assert data["code"] == code and data["details"]["field"].startswith("params.arguments")
    assert str(refused) == data["message"]
    assert not Session.objects.exists() and not MemoryDocument.objects.exists()


def test_a_refused_session_append_leaves_no_session(asgi_live_server, world, acme_secret):
    invalid = {"role": "toolResult", "content": "42"}  # no toolCallId: refused by the REST validation

    error = tool_error(
        call_tool(
            mcp_url(asgi_live_server.url),
            acme_secret,
            "session_append",
            {"session_key": "fresh", "messages": [m.user("hi"), invalid]},
        )
    )

    assert error["code"] == "missing_tool_call_id"
    assert not Session.objects.exists() and not Message.objects.exists()


# --- scopes by what is read -------------------------------------------------------------------


def test_the_context_shows_memory_only_to_a_key_that_may_read_memory(asgi_live_server, world):
    session = factories.make_session(world.assistant, "chat-1")
    factories.make_document(world.assistant, "MEMORY.md", "- the vault code is 1234\n")
    _, sessions_only = factories.make_api_key(world.acme, ["sessions:read"])
    _, both = factories.make_api_key(world.acme, ["sessions:read", "memory:read"])
    context = f"{API}/sessions/{session.pk}/context/"

    error = assert_error(bearer_client(sessions_only).get(context), 403, "insufficient_scope")
    assert error["details"]["required_scope"] == "memory:read"
    refused = tool_error(
        call_tool(mcp_url(asgi_live_server.url), sessions_only, "session_context", {"session_key": "chat-1"})
    )
    assert refused["code"] == "insufficient_scope" and refused["details"]["required_scope"] == "memory:read"

    allowed = bearer_client(both).get(context)
    assert allowed.status_code == 200 and "vault code is 1234" in allowed.json()["system_prompt"]
    shown = tool_json(
        call_tool(mcp_url(asgi_live_server.url), both, "session_context", {"session_key": "chat-1"})
    )
    assert "vault code is 1234" in shown["system_prompt"]


# --- a revoked key ends its open streams ------------------------------------------------------


def test_revoking_a_key_ends_its_open_rest_stream(asgi_live_server, world, llm):
    key, secret = factories.make_api_key(world.acme, ALL_SCOPES)
    session = factories.make_session(world.assistant, "long")
    llm.queue(chunked_reply(*WORDS, chunk_delay_seconds=0.25))
    events: list[tuple[str, Any]] = []

    with httpx2.stream(
        "POST",
        f"{asgi_live_server.url}{API}/sessions/{session.pk}/messages/",
        json={"role": "user", "content": "talk for a while", "respond": True, "stream": True},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=60,
    ) as response:
        for name, data in raw_sse_events(response.iter_lines()):
            events.append((name, json.loads(data)))
            if name == "delta" and len(events) == 2:
                services.api_key_revoke(key=key)

    name, last = events[-1]
    assert name == "error" and last["error"]["code"] == "api_key_revoked"
    deltas = "".join(data["text"] for kind, data in events if kind == "delta")
    assert deltas and len(deltas) < len("".join(WORDS))  # it ended before the model did
    assert list(Message.objects.filter(session=session).values_list("role", flat=True)) == [
        "user",
        "assistant",
    ]


def test_revoking_a_key_ends_its_open_v1_stream(asgi_live_server, world, llm):
    key, secret = factories.make_api_key(world.acme, ALL_SCOPES)
    llm.queue(chunked_reply(*WORDS, chunk_delay_seconds=0.25))
    text = ""

    stream = sdk(asgi_live_server, secret).chat.completions.create(
        model="helper", messages=[{"role": "user", "content": "talk"}], stream=True, user="long"
    )
    with pytest.raises(openai.APIError) as ended:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                if not text:
                    services.api_key_revoke(key=key)
                text += chunk.choices[0].delta.content

    assert ended.value.body["code"] == "api_key_revoked"  # type: ignore[index]
    assert text and len(text) < len("".join(WORDS))


# --- every stream ends with done or error -----------------------------------------------------


def boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("an unexpected fault")


def test_a_rest_stream_that_fails_unexpectedly_ends_with_error(world, api, llm, monkeypatch):
    session = factories.make_session(world.assistant, "main")
    llm.queue(chunked_reply("Hel", "lo"))
    monkeypatch.setattr(agent, "maintenance_for", boom)  # fails after the reply was stored

    response = api.post(
        f"{API}/sessions/{session.pk}/messages/",
        {"role": "user", "content": "hi", "respond": True, "stream": True},
        format="json",
    )
    events = list(sse_events(django_stream_lines(response)))

    assert events[0][0] == "started" and events[-1][0] == "error"
    assert events[-1][1]["error"]["code"] == "server_error"
    assert "stays in the session" in events[-1][1]["error"]["message"]


def test_a_v1_stream_that_fails_unexpectedly_ends_with_an_error_then_done(
    asgi_live_server, acme_secret, llm, monkeypatch
):
    llm.queue(chunked_reply("Hel", "lo"))
    monkeypatch.setattr(agent, "maintenance_for", boom)

    with httpx2.stream(
        "POST",
        f"{asgi_live_server.url}/v1/chat/completions",
        json={"model": "helper", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        headers={"Authorization": f"Bearer {acme_secret}"},
        timeout=30,
    ) as response:
        data = [payload for _, payload in raw_sse_events(response.iter_lines())]

    assert data[-1] == "[DONE]"
    assert json.loads(data[-2])["error"]["code"] == "server_error"
