"""The endpoints the OpenClaw plugin calls: a session by key, turns, bootstrap, context, compact, tools."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from memory_app.models import MemoryDocument
from sessions_app.models import CompactionRun, Message, Session, TurnCommit
from tests import factories
from tests.api_support import API, assert_error, snapshot
from tests.messages import assistant, chatter, tool_call, tool_result, user

pytestmark = pytest.mark.django_db

KEY = "agent:ops:telegram:dm:42"
BY_KEY = f"{API}/assistants/helper/sessions/by-key/{KEY}"


def openclaw_turn(text: str = "hello") -> list[dict]:
    """One OpenClaw turn as `commitTurn` receives it: user, assistant with a tool call, result, reply."""
    return [
        user(f"[Sat 2026-12-05 03:23 UTC] {text}", timestamp=1764904980000, idempotencyKey="idem-1"),
        assistant(calls=[tool_call("call_1", "read", {"path": "a.txt"})], responseId="resp-1"),
        tool_result("call_1", "file text", name="read"),
        assistant("done"),
    ]


def commit(api, key: str = "turn-1", messages: list[dict] | None = None, url: str = BY_KEY):
    body = {"advancement_key": key, "messages": messages or openclaw_turn()}
    return api.post(f"{url}/turns/", body, format="json")


def test_a_turn_is_stored_once_in_the_session_named_by_the_key(api, world):
    first = commit(api)
    assert first.status_code == 201, first.content
    assert first.json()["status"] == "committed" and first.json()["last_seq"] == 4
    session = Session.objects.get(assistant=world.assistant, key=KEY)
    stored = list(Message.objects.filter(session=session).order_by("seq"))
    assert [m.role for m in stored] == ["user", "assistant", "toolResult", "assistant"]
    assert stored[0].content == "[Sat 2026-12-05 03:23 UTC] hello"
    assert stored[1].content == [
        {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "a.txt"}}
    ]
    assert (stored[2].tool_call_id, stored[2].tool_name) == ("call_1", "read")
    again = commit(api)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    assert again.json()["first_seq"] == 1 and Message.objects.filter(session=session).count() == 4
    assert commit(api, "turn-2", openclaw_turn("second")).json()["first_seq"] == 5


@pytest.mark.django_db(transaction=True)
def test_two_commits_of_one_turn_at_once_store_it_once(acme_secret, world):
    from tests.conftest import bearer_client

    factories.make_session(world.assistant, KEY)
    answers: list[int] = []

    def send() -> None:
        answers.append(commit(bearer_client(acme_secret)).status_code)
        connection.close()

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [200, 200, 200, 201]
    assert Message.objects.filter(session__key=KEY).count() == 4 and TurnCommit.objects.count() == 1


def test_a_bad_message_or_key_stores_nothing(api):
    before = snapshot()
    bad = openclaw_turn()
    bad[2] = {"role": "toolResult", "content": "no call id"}
    error = assert_error(commit(api, messages=bad), 400, "missing_tool_call_id")
    assert error["details"]["index"] == 2
    assert_error(commit(api, url=f"{API}/assistants/helper/sessions/by-key/a b"), 400, "validation_error")
    assert_error(
        api.post(f"{BY_KEY}/turns/", {"messages": openclaw_turn()}, format="json"), 400, "validation_error"
    )
    assert snapshot() == before


def test_another_teams_key_reaches_nothing(other_api, world):
    factories.make_session(world.assistant, KEY)
    before = snapshot()
    assert_error(commit(other_api), 404, "not_found")
    assert_error(other_api.get(f"{BY_KEY}/"), 404, "not_found")
    assert_error(
        other_api.post(f"{BY_KEY}/context/", {"token_budget": 50000}, format="json"), 404, "not_found"
    )
    assert_error(
        other_api.post(
            f"{API}/assistants/helper/tools/memory_search/", {"arguments": {"query": "x"}}, format="json"
        ),
        404,
        "not_found",
    )
    assert snapshot() == before


def test_bootstrap_imports_history_once(api, world):
    history = [user("earlier"), assistant("earlier answer")]
    first = api.post(f"{BY_KEY}/bootstrap/", {"messages": history}, format="json").json()
    assert (first["bootstrapped"], first["imported_messages"], first["last_seq"]) == (True, 2, 2)
    more = api.post(
        f"{BY_KEY}/bootstrap/", {"messages": [user("more")], "after_seq": 2}, format="json"
    ).json()
    assert more["imported_messages"] == 1 and more["last_seq"] == 3
    replay = api.post(f"{BY_KEY}/bootstrap/", {"messages": history}, format="json").json()
    assert (replay["bootstrapped"], replay["imported_messages"], replay["last_seq"]) == (False, 0, 3)


def test_a_compaction_between_import_batches_does_not_stop_the_import(api, world, no_llm):
    first = api.post(f"{BY_KEY}/bootstrap/", {"messages": chatter(40, words=200)}, format="json").json()
    compacted = api.post(f"{BY_KEY}/compact/", {"token_budget": 30000}, format="json").json()
    assert compacted["compacted"]
    more = api.post(
        f"{BY_KEY}/bootstrap/", {"messages": [user("more")], "after_seq": first["last_seq"]}, format="json"
    ).json()
    assert (more["bootstrapped"], more["imported_messages"], more["last_seq"]) == (True, 1, 82)
    assert commit(api).status_code == 201
    late = api.post(
        f"{BY_KEY}/bootstrap/", {"messages": [user("late")], "after_seq": more["last_seq"]}, format="json"
    ).json()
    assert (late["bootstrapped"], late["imported_messages"]) == (False, 0)
    assert Message.objects.filter(session__key=KEY, content="late").count() == 0


def test_context_follows_the_hosts_budget(api, world):
    session = factories.make_session(world.assistant, KEY)
    factories.add_messages(session, *chatter(3, words=300))
    factories.make_document(world.assistant, "MEMORY.md", "The weekly sync is on Tuesdays.")
    body = api.post(f"{BY_KEY}/context/", {"token_budget": 60000}, format="json").json()
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"] * 3
    assert "The weekly sync is on Tuesdays." in body["system_prompt_addition"]
    assert "memory_search" in body["system_prompt_addition"] and body["memory_files"] == ["MEMORY.md"]
    assert body["tokens"]["context_window"] == 60000 and body["dropped_messages"] == 0
    assert Session.objects.get(pk=session.pk).host_token_budget == 60000
    small = api.post(f"{BY_KEY}/context/", {"token_budget": 3000}, format="json").json()
    assert small["dropped_messages"] > 0 and small["estimated_tokens"] <= 3000
    assert small["messages"][0]["role"] == "user"


def test_context_starts_from_the_summary_after_a_compaction(api, world, no_llm):
    session = factories.make_session(world.assistant, KEY)
    factories.add_messages(session, *chatter(40, words=200))
    done = api.post(f"{BY_KEY}/compact/", {"token_budget": 30000}, format="json").json()
    assert done["ok"] and done["compacted"] and done["result"]["summary"]
    body = api.post(f"{BY_KEY}/context/", {"token_budget": 30000}, format="json").json()
    first = body["messages"][0]
    assert first["role"] == "user" and first["compactionSummary"] is True and body["compacted"]
    assert first["content"][0]["text"].startswith("The conversation history before this point was compacted")


def test_compacting_a_short_session_answers_without_a_failed_run(api, world):
    session = factories.make_session(world.assistant, KEY)
    factories.add_messages(session, user("hi"), assistant("hello"))
    body = api.post(f"{BY_KEY}/compact/", {}, format="json").json()
    assert (body["ok"], body["compacted"]) == (True, False) and "Nothing to compact" in body["reason"]
    assert not CompactionRun.objects.filter(session=session).exists()


def test_context_needs_memory_read(scoped_api, world):
    factories.make_session(world.assistant, KEY)
    client = scoped_api("sessions:read", "sessions:write")
    assert_error(
        client.post(f"{BY_KEY}/context/", {"token_budget": 50000}, format="json"), 403, "insufficient_scope"
    )


def test_memory_tools_answer_like_our_agents(api, world):
    tools = f"{API}/assistants/helper/tools"
    wrote = api.post(
        f"{tools}/memory_write/",
        {"arguments": {"mode": "append", "content": "Deploys go out on Fridays."}},
        format="json",
    )
    assert wrote.status_code == 200, wrote.content
    path = wrote.json()["details"]["path"]
    assert path.startswith("memory/") and MemoryDocument.objects.get(assistant=world.assistant, path=path)
    found = api.post(
        f"{tools}/memory_search/", {"arguments": {"query": "Fridays deploys"}}, format="json"
    ).json()
    assert found["details"]["results"][0]["path"] == path and '"results"' in found["text"]
    read = api.post(f"{tools}/memory_get/", {"arguments": {"path": path}}, format="json").json()
    assert "Deploys go out on Fridays." in read["details"]["text"]
    assert_error(api.post(f"{tools}/exec/", {}, format="json"), 404, "unknown_tool")


def test_memory_write_needs_the_write_scope(scoped_api):
    client = scoped_api("memory:read")
    before = snapshot()
    body = {"arguments": {"mode": "append", "content": "x"}}
    assert_error(
        client.post(f"{API}/assistants/helper/tools/memory_write/", body, format="json"),
        403,
        "insufficient_scope",
    )
    assert snapshot() == before


def test_a_refused_memory_write_answers_like_the_mcp_tool(api, world):
    tools = f"{API}/assistants/helper/tools"
    document = factories.make_document(world.assistant, "MEMORY.md", "# Memory")
    current = document.revisions.get().pk
    before = snapshot()
    stale = {"mode": "replace", "path": "MEMORY.md", "content": "# blind", "base_revision": None}

    error = assert_error(
        api.post(f"{tools}/memory_write/", {"arguments": stale}, format="json"), 409, "stale_write"
    )

    assert error["message"] == (
        "MEMORY.md changed since you read it: read it again (memory_get) and retry with its revision."
    )
    assert error["details"] == {"path": "MEMORY.md", "current_revision": current}
    assert snapshot() == before
    world.assistant.workspace_access = "ro"
    world.assistant.save()
    before = snapshot()
    note = {"mode": "append", "content": "- x"}
    error = assert_error(
        api.post(f"{tools}/memory_write/", {"arguments": note}, format="json"), 403, "workspace_read_only"
    )
    assert error["message"] == (
        "The workspace of assistant 'helper' is read only (ro). Agents may not write its memory."
    )
    assert error["details"] == {"workspace_access": "ro"}
    assert snapshot() == before


def test_an_openclaw_session_shows_on_the_dashboard_like_any_other(api, world):
    from tests.views_support import signed_in

    commit(api)
    session = Session.objects.get(key=KEY)
    page = signed_in(world.bob).get(f"/sessions/{session.pk}/").content.decode()
    assert KEY in page and "[Sat 2026-12-05 03:23 UTC] hello" in page and "Called <code>read</code>" in page
    listing = signed_in(world.bob).get("/assistants/helper/sessions/").content.decode()
    assert KEY in listing
