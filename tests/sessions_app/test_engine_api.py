"""The context engine over REST: respond, /compact (chat and endpoint), /context, /compactions."""

from __future__ import annotations

import json

import pytest

from openclaw_site.platform.locks import session_lock
from openclaw_site.teams.assistant_settings import validate_settings
from sessions_app.compaction.runs import compaction_lock_name
from sessions_app.models import CompactionEntry, CompactionRun, Message, Session
from tests import factories
from tests.api_support import API, assert_error
from tests.chat_requests import router
from tests.fake_openai import error_reply, text_reply
from tests.messages import assistant, chatter, tool_call, tool_result, usage, user

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(world) -> Session:
    return factories.make_session(world.assistant, "main")


def messages_url(session: Session) -> str:
    return f"{API}/sessions/{session.pk}/messages/"


def say(api, session, text: str, **headers):
    return api.post(
        messages_url(session), {"role": "user", "content": text, "respond": True}, format="json", **headers
    )


def long_session(world, turns: int = 8) -> Session:
    world.assistant.settings = validate_settings({"compaction": {"keepRecentTokens": 300}})
    world.assistant.save()
    session = factories.make_session(world.assistant, "long")
    factories.add_messages(session, *chatter(turns))
    return session


def test_respond_returns_the_reply_and_every_stored_message(api, session, llm):
    llm.queue(text_reply("Hi there!", usage={"prompt_tokens": 321, "completion_tokens": 4}))
    response = say(api, session, "hello")
    assert response.status_code == 201
    body = response.json()
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert body["reply"]["text"] == "Hi there!" and body["reply"]["silent"] is False
    assert body["reply"]["entry_id"] == body["messages"][1]["entry_id"]
    assert body["messages"][1]["usage"]["input"] == 321
    assert body["tokens"]["flush_threshold"] == 176000 and body["tokens"]["compaction_threshold"] == 180000
    assert body["tokens"]["total_tokens"] == 321 and body["tokens"]["model"] == "fake-chat"


def test_respond_no_reply_is_silent(api, session, llm):
    llm.queue(text_reply("NO_REPLY"))
    body = say(api, session, "ping").json()
    assert (
        body["reply"]["text"] is None
        and body["reply"]["silent"] is True
        and body["reply"]["entry_id"] is None
    )
    assert Message.objects.get(session=session, role="assistant").silent
    transcript = api.get(messages_url(session)).json()["entries"]
    assert [e["message"]["role"] for e in transcript] == ["user"]  # silent hidden by default
    assert len(api.get(messages_url(session) + "?include_silent=1").json()["entries"]) == 2


def test_respond_failure_is_502_and_keeps_the_message(api, session, llm):
    llm.queue(error_reply(500, "boom"))
    error = assert_error(say(api, session, "are you there?"), 502, "model_error")
    assert "boom" in error["message"] and error["details"]["provider_status"] == 500
    assert [m["role"] for m in error["details"]["messages"]] == ["user", "assistant"]
    assert error["details"]["messages"][1]["stopReason"] == "error"
    assert list(Message.objects.filter(session=session).values_list("role", flat=True).order_by("seq")) == [
        "user",
        "assistant",
    ]


def test_respond_with_an_idempotency_key_runs_once(api, session, llm):
    llm.queue(text_reply("once"))
    first = say(api, session, "hello", HTTP_IDEMPOTENCY_KEY="k-1")
    again = say(api, session, "hello", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == again.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert len(llm.chat_requests) == 1 and Message.objects.filter(session=session).count() == 2


def test_other_teams_and_viewers_cannot_drive_the_engine(api, other_api, scoped_api, session, llm):
    for path in ("context/", "compactions/"):
        assert_error(other_api.get(f"{API}/sessions/{session.pk}/{path}"), 404, "not_found")
    assert_error(other_api.post(f"{API}/sessions/{session.pk}/compact/", {}, format="json"), 404, "not_found")
    assert_error(say(other_api, session, "hi"), 404, "not_found")
    viewer = scoped_api("sessions:read", "memory:read")
    assert viewer.get(f"{API}/sessions/{session.pk}/context/").status_code == 200
    # The context holds MEMORY.md's text: without memory:read it is not shown.
    no_memory = scoped_api("sessions:read").get(f"{API}/sessions/{session.pk}/context/")
    assert assert_error(no_memory, 403, "insufficient_scope")["details"]["required_scope"] == "memory:read"
    assert_error(
        viewer.post(f"{API}/sessions/{session.pk}/compact/", {}, format="json"), 403, "insufficient_scope"
    )
    assert llm.chat_requests == []


def test_compact_chat_command_compacts_and_is_not_stored(api, world, llm):
    session = long_session(world)
    count = Message.objects.filter(session=session).count()
    llm.default_chat = router()
    response = api.post(
        messages_url(session), {"role": "user", "content": "/compact: keep the ids"}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["command"] == "compact" and body["messages"] == []
    assert body["reply"]["text"].startswith("⚙️ Compacted (") and "• Context " in body["reply"]["text"]
    assert body["run"]["state"] == "committed" and body["run"]["trigger"] == "manual"
    assert body["run"]["instructions"] == "keep the ids" and body["run"]["flush_outcome"] == "flushed"
    assert Message.objects.filter(session=session, flush_turn=False).count() == count
    again = api.post(
        messages_url(session), {"role": "user", "content": "/compact", "respond": True}, format="json"
    )
    assert_error(again, 409, "already_compacted")


def test_compact_endpoint_dry_run_then_compact(api, world, llm):
    session = long_session(world)
    url = f"{API}/sessions/{session.pk}/compact/"
    preview = api.post(url, {"dry_run": True, "instructions": "focus"}, format="json")
    assert preview.status_code == 200 and preview.json()["dry_run"] is True and preview.json()["summarized"]
    assert not CompactionRun.objects.exists() and llm.chat_requests == []

    llm.default_chat = router()
    response = api.post(url, {"instructions": "Focus on decisions"}, format="json")
    assert response.status_code == 201
    run = response.json()["run"]
    assert (
        run["state"] == "committed"
        and run["entry"]["firstKeptEntryId"] == preview.json()["first_kept_entry_id"]
    )
    assert response.json()["tokens"]["compaction_count"] == 1

    listing = api.get(f"{API}/sessions/{session.pk}/compactions/").json()
    assert [e["id"] for e in listing["entries"]] == [run["entry"]["id"]]
    assert listing["runs"][0]["id"] == run["id"]
    transcript = api.get(messages_url(session) + "?limit=1000").json()["entries"]
    covered = [e for e in transcript if e.get("covered_by")]
    assert covered and all(e["covered_by"] == run["entry"]["id"] for e in covered)
    assert transcript[-1]["type"] == "compaction"


def test_compact_endpoint_errors(api, world, llm, session):
    assert_error(
        api.post(f"{API}/sessions/{session.pk}/compact/", {"dry_run": "yes"}, format="json"),
        400,
        "validation_error",
    )
    assert_error(
        api.post(f"{API}/sessions/{session.pk}/compact/", {"bogus": 1}, format="json"),
        400,
        "validation_error",
    )
    factories.add_messages(session, user("hi"), assistant("hello"))
    assert_error(
        api.post(f"{API}/sessions/{session.pk}/compact/", {}, format="json"), 422, "nothing_to_compact"
    )

    busy_session = long_session(world)
    CompactionRun.objects.create(session=busy_session, trigger="threshold", state="summarizing")
    with session_lock(compaction_lock_name(busy_session.pk)):
        assert_error(
            api.post(f"{API}/sessions/{busy_session.pk}/compact/", {}, format="json"),
            409,
            "compaction_in_progress",
        )
    CompactionRun.objects.filter(session=busy_session).update(state="failed")

    llm.default_chat = router(summary=lambda request: error_reply(500, "summariser down"))
    error = assert_error(
        api.post(f"{API}/sessions/{busy_session.pk}/compact/", {}, format="json"), 502, "compaction_failed"
    )
    assert (
        error["details"]["run"]["state"] == "failed"
        and "summariser down" in error["details"]["run"]["reason"]
    )
    assert not CompactionEntry.objects.exists()


def test_context_shows_exactly_what_the_next_call_sends_and_changes_nothing(api, world, session, llm):
    world.assistant.settings = validate_settings(
        {
            "contextPruning": {
                "mode": "always",
                "softTrimRatio": 0.0,
                "keepLastAssistants": 1,
                "softTrim": {"maxChars": 10, "headChars": 6, "tailChars": 6},
            }
        }
    )
    world.assistant.save()
    factories.make_document(world.assistant, "MEMORY.md", "Prefers short answers.")
    [_, _, result, *_] = factories.add_messages(
        session,
        user("read it"),
        assistant(calls=[tool_call("c1", "exec", {})]),
        tool_result("c1", "abcdefghij" * 1000),
        assistant("It repeats."),
    )
    llm.queue(text_reply("first"))
    assert say(api, session, "first question").status_code == 201
    before = Session.objects.filter(pk=session.pk).values().get()
    count = Message.objects.count()

    context = api.get(f"{API}/sessions/{session.pk}/context/").json()
    assert Session.objects.filter(pk=session.pk).values().get() == before and Message.objects.count() == count
    trimmed = (
        "abcdef\n...\nefghij\n\n[Tool result trimmed: kept first 6 chars and last 6 chars of 10000 chars.]"
        f"\n[Original: message {result.entry_id}; call tool_result_get to read it in full.]"
    )
    assert {"role": "tool", "tool_call_id": "c1", "content": trimmed} in context["messages"]
    assert context["pruning"]["changes"][0]["entry_id"] == result.entry_id
    assert context["pruning"]["changes"][0]["action"] == "trimmed"
    assert (
        context["memory_files"] == ["MEMORY.md"]
        and "Prefers short answers." in context["messages"][0]["content"]
    )
    assert (context["context_window"], context["flush_threshold"], context["compaction_threshold"]) == (
        200000,
        176000,
        180000,
    )
    assert context["estimated_tokens"] > 0 and context["agent_messages"][2]["content"][0]["text"] == trimmed

    llm.queue(text_reply("second"))
    assert say(api, session, "second question").status_code == 201
    sent = llm.chat_requests[-1]
    assert sent["messages"] == [*context["messages"], {"role": "user", "content": "second question"}]
    assert sent["tools"] == context["tools"]


def test_session_detail_carries_token_figures(api, session):
    factories.add_messages(session, user("hi"), assistant("hello", usage=usage(1200, 30)))
    tokens = api.get(f"{API}/sessions/{session.pk}/").json()["tokens"]
    assert tokens["context_tokens"] == 1230 and tokens["context_window"] == 200000
    assert tokens["flush_threshold"] == 176000 and tokens["compaction_threshold"] == 180000
    assert tokens["flushed_this_cycle"] is False and tokens["memory_flush_compaction_count"] is None
    listed = api.get(f"{API}/assistants/{session.assistant.slug}/sessions/").json()["sessions"]
    assert listed[0]["tokens"]["compaction_threshold"] == 180000
    assert json.dumps(tokens)  # plain JSON
