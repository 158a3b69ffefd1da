"""The MCP server at /mcp/, driven by the official `mcp` client against the live ASGI server."""

from __future__ import annotations

from datetime import date

import httpx2
import pytest
from django.utils import timezone

from memory_app.models import MemoryDocument, MemoryRevision
from memory_app.search.hybrid import MODES
from memory_app.search.snippets import SNIPPET_MODES
from sessions_app.context.prompt import local_today
from sessions_app.models import Message, Session
from tests import factories
from tests import messages as m
from tests.mcp_client import call_tool, list_tools, mcp_url, tool_error, tool_json

TOOLS = {
    "memory_search": ("memory:read", {"query": "launch"}),
    "memory_get": ("memory:read", {"path": "MEMORY.md"}),
    "memory_write": ("memory:write", {"mode": "append", "content": "- a note"}),
    "memory_propose": ("memory:write", {"kind": "retire", "sources": [{"path": "MEMORY.md", "line": 1}]}),
    "session_append": ("sessions:write", {"session_key": "chat-1", "messages": [m.user("hi")]}),
    "session_context": ("sessions:read", {"session_key": "chat-1"}),
}
NOTES = "\n".join(
    ["# Notes", "The launch date is 12 March.", "Zebra owns the marketing page.", "Bob likes tea."]
)


def scoped_secret(world, *scopes: str) -> str:
    return factories.make_api_key(world.acme, list(scopes))[1]


def test_lists_the_tools_with_schemas_a_model_can_read(asgi_live_server, world, acme_secret):
    tools = {tool.name: tool for tool in list_tools(mcp_url(asgi_live_server.url), acme_secret)}

    assert sorted(tools) == sorted(TOOLS)
    for tool in tools.values():
        assert len(tool.description or "") > 100
        properties = tool.input_schema["properties"]
        assert all(spec.get("description") for spec in properties.values()), tool.name
        assert "assistant" in properties and "assistant" not in tool.input_schema.get("required", [])
    search = tools["memory_search"].input_schema["properties"]
    assert search["max_results"]["anyOf"][0] == {"type": "integer", "minimum": 1, "maximum": 100}
    assert search["mode"]["anyOf"][0]["enum"] == list(MODES)
    assert search["snippet_mode"]["anyOf"][0]["enum"] == list(SNIPPET_MODES)
    assert tools["memory_search"].annotations.read_only_hint is True
    assert tools["memory_get"].input_schema["properties"]["from"]["anyOf"][0]["minimum"] == 1
    assert tools["memory_write"].input_schema["required"] == ["mode", "content"]
    assert tools["session_append"].input_schema["properties"]["messages"]["minItems"] == 1


def test_without_a_valid_key_the_endpoint_answers_401(asgi_live_server, world):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    missing = httpx2.post(mcp_url(asgi_live_server.url), json=ping, timeout=10)
    wrong = httpx2.post(
        mcp_url(asgi_live_server.url), json=ping, headers={"Authorization": "Bearer ocs_nope_x"}, timeout=10
    )

    assert missing.status_code == 401
    assert missing.json()["error"]["data"]["code"] == "not_authenticated"
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert wrong.status_code == 401
    assert wrong.json()["error"]["data"]["code"] == "invalid_api_key"


def test_only_mcp_and_an_assistant_below_it_are_mcp_paths(asgi_live_server, world, acme_secret):
    deeper = httpx2.post(
        f"{asgi_live_server.url}/mcp/helper/tools/",
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Authorization": f"Bearer {acme_secret}"},
        timeout=10,
    )
    django = httpx2.get(f"{asgi_live_server.url}/mcpx", timeout=10)

    assert deeper.status_code == 404 and deeper.json()["error"]["data"]["code"] == "not_found"
    assert django.status_code == 404 and "mcp_not_started" not in django.text


def test_memory_search_answers_what_the_rest_search_answers(
    asgi_live_server, world, acme_secret, fake_embeddings
):
    factories.make_document(world.assistant, "MEMORY.md", NOTES)
    factories.make_document(world.assistant, "memory/2026-03-01.md", "Launch checklist: zebra signs off.")
    knobs = {"max_results": 3, "min_score": 0.0, "sources": ["memory"], "snippet_mode": "best"}

    found = tool_json(
        call_tool(
            mcp_url(asgi_live_server.url), acme_secret, "memory_search", {"query": "launch zebra", **knobs}
        )
    )
    rest = httpx2.get(
        f"{asgi_live_server.url}/api/v1/assistants/helper/search/",
        params={"q": "launch zebra", **knobs, "sources": "memory"},
        headers={"Authorization": f"Bearer {acme_secret}"},
        timeout=30,
    ).json()

    assert found["results"] and found["mode"] == "hybrid"
    assert found["results"] == rest["results"]
    assert {key: found[key] for key in ("query", "mode", "provider", "model")} == {
        key: rest[key] for key in ("query", "mode", "provider", "model")
    }
    assert all(result["citation"].startswith(result["path"] + "#L") for result in found["results"])


def test_memory_search_refuses_a_bad_knob_with_our_code(asgi_live_server, world, acme_secret):
    result = call_tool(
        mcp_url(asgi_live_server.url), acme_secret, "memory_search", {"query": "x", "max_results": 500}
    )

    assert result.is_error  # the schema's bound, checked before the tool runs


def test_memory_get_reads_a_line_range_with_the_continuation_notice(asgi_live_server, world, acme_secret):
    document = factories.make_document(world.assistant, "MEMORY.md", NOTES)
    revision = MemoryRevision.objects.get(document=document)

    window = tool_json(
        call_tool(
            mcp_url(asgi_live_server.url),
            acme_secret,
            "memory_get",
            {"path": "MEMORY.md", "from": 2, "lines": 2},
        )
    )
    missing = tool_json(
        call_tool(mcp_url(asgi_live_server.url), acme_secret, "memory_get", {"path": "memory/none.md"})
    )

    assert window["text"].startswith("The launch date is 12 March.\nZebra owns the marketing page.")
    assert "[More content available. Use from=4 to continue.]" in window["text"]
    assert (window["from"], window["lines"], window["nextFrom"]) == (2, 2, 4)
    assert window["revision"] == revision.pk
    assert missing == {"text": "", "path": "memory/none.md", "revision": None}


def test_memory_write_appends_to_todays_daily_note_as_the_agent(asgi_live_server, world, acme_secret):
    world.assistant.timezone = "Pacific/Kiritimati"  # UTC+14: "today" is the assistant's
    world.assistant.save()

    answer = tool_json(
        call_tool(
            mcp_url(asgi_live_server.url),
            acme_secret,
            "memory_write",
            {"mode": "append", "content": "- ship on Friday"},
        )
    )

    today: date = local_today(world.assistant, timezone.now())
    assert answer["path"] == f"memory/{today.isoformat()}.md"
    assert (
        MemoryDocument.objects.get(assistant=world.assistant, path=answer["path"]).content
        == "- ship on Friday"
    )
    revision = MemoryRevision.objects.get(pk=answer["revision"])
    assert (revision.author, revision.action) == ("agent", "append")
    assert revision.note.startswith("mcp via api key test key (")


def test_memory_write_replaces_against_the_revision_it_read(asgi_live_server, world, acme_secret):
    url = mcp_url(asgi_live_server.url)
    factories.make_document(world.assistant, "MEMORY.md", NOTES)
    base = tool_json(call_tool(url, acme_secret, "memory_get", {"path": "MEMORY.md"}))["revision"]

    replaced = tool_json(
        call_tool(
            url,
            acme_secret,
            "memory_write",
            {
                "mode": "replace",
                "path": "MEMORY.md",
                "content": "# Notes\nLaunch moved to April.",
                "base_revision": base,
            },
        )
    )
    stale = tool_error(
        call_tool(
            url,
            acme_secret,
            "memory_write",
            {"mode": "replace", "path": "MEMORY.md", "content": "# lost update", "base_revision": base},
        )
    )

    assert replaced["changed"] and replaced["revision"] != base
    assert MemoryRevision.objects.get(pk=replaced["revision"]).author == "agent"
    assert stale["code"] == "stale_write"
    assert stale["message"] == (
        "MEMORY.md changed since you read it: read it again (memory_get) and retry with its revision."
    )
    assert stale["details"] == {"path": "MEMORY.md", "current_revision": replaced["revision"]}
    assert MemoryDocument.objects.get(assistant=world.assistant, path="MEMORY.md").content.endswith("April.")


def test_memory_write_is_refused_when_the_workspace_is_not_rw(asgi_live_server, world, acme_secret):
    world.assistant.workspace_access = "ro"
    world.assistant.save()

    error = tool_error(
        call_tool(
            mcp_url(asgi_live_server.url), acme_secret, "memory_write", {"mode": "append", "content": "- x"}
        )
    )

    assert error["code"] == "workspace_read_only"
    assert error["message"] == (
        "The workspace of assistant 'helper' is read only (ro). Agents may not write its memory."
    )
    assert error["details"] == {"workspace_access": "ro"}
    assert not MemoryDocument.objects.filter(assistant=world.assistant).exists()


def test_memory_write_refuses_a_path_outside_memory(asgi_live_server, world, acme_secret):
    error = tool_error(
        call_tool(
            mcp_url(asgi_live_server.url),
            acme_secret,
            "memory_write",
            {"mode": "replace", "path": "../etc/passwd.md", "content": "x"},
        )
    )

    assert error["code"] == "invalid_path"
    assert not MemoryRevision.objects.exists()


def test_session_append_creates_the_session_by_key_and_is_idempotent(asgi_live_server, world, acme_secret):
    url = mcp_url(asgi_live_server.url)
    batch = {
        "session_key": "agent:main:main",
        "messages": [m.user("what is the launch date?"), m.assistant("12 March.")],
        "idempotency_key": "batch-1",
    }

    first = tool_json(call_tool(url, acme_secret, "session_append", batch))
    again = tool_json(call_tool(url, acme_secret, "session_append", batch))
    conflict = tool_error(
        call_tool(url, acme_secret, "session_append", {**batch, "messages": [m.user("other")]})
    )

    session = Session.objects.get(assistant=world.assistant, key="agent:main:main")
    assert first["session"] == {"id": session.pk, "key": "agent:main:main", "created": True}
    assert [row["seq"] for row in first["messages"]] == [1, 2]
    assert again["replayed"] and again["messages"] == first["messages"]
    assert conflict["code"] == "idempotency_conflict"
    assert Message.objects.filter(session=session).count() == 2


def test_session_append_rejects_a_bad_message_and_stores_nothing(asgi_live_server, world, acme_secret):
    error = tool_error(
        call_tool(
            mcp_url(asgi_live_server.url),
            acme_secret,
            "session_append",
            {"session_key": "chat-1", "messages": [m.user("fine"), {"role": "robot", "content": "x"}]},
        )
    )

    assert error["code"] == "invalid_role" and error["details"] == {"field": "role", "index": 1}
    assert not Session.objects.filter(key="chat-1").exists()


def test_session_context_is_what_the_rest_context_answers(asgi_live_server, world, acme_secret):
    session = factories.make_session(world.assistant, key="chat-1")
    factories.add_messages(session, m.user("hello"), m.assistant("hi there", usage=m.usage(1200)))

    context = tool_json(
        call_tool(mcp_url(asgi_live_server.url), acme_secret, "session_context", {"session_key": "chat-1"})
    )
    rest = httpx2.get(
        f"{asgi_live_server.url}/api/v1/sessions/{session.pk}/context/",
        headers={"Authorization": f"Bearer {acme_secret}"},
        timeout=30,
    ).json()

    assert context == rest
    assert context["messages"][-1]["content"] == "hi there"
    assert context["context_window"] > context["compaction_threshold"] > context["flush_threshold"] > 0


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_key_without_the_tools_scope_is_refused(asgi_live_server, world, tool):
    scope, arguments = TOOLS[tool]
    others = [s for s in ("memory:read", "memory:write", "sessions:read", "sessions:write") if s != scope]

    error = tool_error(
        call_tool(mcp_url(asgi_live_server.url), scoped_secret(world, *others), tool, arguments)
    )

    assert error["code"] == "insufficient_scope"
    assert error["details"] == {"required_scope": scope}
    assert not Session.objects.exists() and not MemoryDocument.objects.exists()


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_another_teams_assistant_is_not_found(asgi_live_server, world, acme_secret, tool):
    _, arguments = TOOLS[tool]

    by_argument = tool_error(
        call_tool(mcp_url(asgi_live_server.url, None), acme_secret, tool, {**arguments, "assistant": "rival"})
    )

    assert by_argument == {"code": "not_found", "message": "Assistant 'rival' not found.", "details": {}}
    assert not Session.objects.exists() and not MemoryDocument.objects.exists()


@pytest.mark.parametrize("slug", ["rival", "no-such-assistant"])
def test_a_url_naming_no_assistant_of_the_team_is_refused_before_any_call(
    asgi_live_server, world, acme_secret, slug
):
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    response = httpx2.post(
        mcp_url(asgi_live_server.url, slug),
        json=initialize,
        headers={"Authorization": f"Bearer {acme_secret}", "Accept": "application/json, text/event-stream"},
        timeout=30,
    )

    assert response.status_code == 404
    error = response.json()["error"]["data"]  # a JSON-RPC error, our envelope's object in data
    assert error["code"] == "not_found" and f"No assistant {slug!r} in this key's team" in error["message"]
    assert "/mcp/<assistant slug>/" in error["message"]


def test_the_assistant_comes_from_the_url_or_the_argument_never_both(asgi_live_server, world, acme_secret):
    factories.make_document(world.assistant, "MEMORY.md", NOTES)
    bare = mcp_url(asgi_live_server.url, None)

    by_argument = tool_json(
        call_tool(bare, acme_secret, "memory_get", {"path": "MEMORY.md", "assistant": "helper"})
    )
    unnamed = tool_error(call_tool(bare, acme_secret, "memory_get", {"path": "MEMORY.md"}))
    both = tool_error(
        call_tool(
            mcp_url(asgi_live_server.url),
            acme_secret,
            "memory_get",
            {"path": "MEMORY.md", "assistant": "other"},
        )
    )

    assert by_argument["text"].startswith("# Notes")
    assert unnamed["code"] == "assistant_required"
    assert both["code"] == "assistant_mismatch"


def test_a_note_written_before_the_index_has_anything_is_found_by_the_next_search(
    asgi_live_server, world, acme_secret, fake_embeddings, monkeypatch
):
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)  # tasks wait in the broker, as behind a busy worker
    url = mcp_url(asgi_live_server.url)
    call_tool(
        url, acme_secret, "memory_write", {"mode": "append", "content": "- The demo launches on 12 March."}
    )

    found = tool_json(call_tool(url, acme_secret, "memory_search", {"query": "when does the demo launch"}))
    rest = httpx2.get(
        f"{asgi_live_server.url}/api/v1/assistants/helper/search/",
        params={"q": "demo launch"},
        headers={"Authorization": f"Bearer {acme_secret}"},
        timeout=30,
    ).json()

    today = local_today(world.assistant, timezone.now())
    assert [r["citation"] for r in found["results"]] == [f"memory/{today.isoformat()}.md#L1"]
    assert [r["citation"] for r in rest["results"]] == [f"memory/{today.isoformat()}.md#L1"]
