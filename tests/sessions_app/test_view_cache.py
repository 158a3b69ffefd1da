"""The per-process view cache (sessions_app.context.view_cache): a cached view is always the view the
database holds, extending it reads only the messages stored since, and what calls derive from its
messages (their OpenAI form, their JSON) is derived once and stays what a fresh build gives."""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from openclaw_site.teams.assistant_settings import validate_settings
from providers.openai_chat import to_openai_messages
from sessions_app.api.responses import context_payload, context_payload_json
from sessions_app.context import view_cache
from sessions_app.context.build import build_model_context
from sessions_app.context.view import session_entries
from sessions_app.messages import validate_message
from sessions_app.models import Session
from sessions_app.turn.model_output import store_messages
from tests import factories
from tests.messages import assistant, chatter, tool_call, tool_result, user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def empty_cache():
    view_cache.clear()
    yield
    view_cache.clear()


def fresh_entries(session, settings) -> list[dict]:
    """The view built from the database alone."""
    held = settings.SESSION_VIEW_CACHE_MESSAGES
    settings.SESSION_VIEW_CACHE_MESSAGES = 0
    try:
        view_cache.forget(session.pk)
        return session_entries(session)
    finally:
        settings.SESSION_VIEW_CACHE_MESSAGES = held


def test_a_cached_view_follows_appends_flush_turns_and_compactions(world, settings) -> None:
    session = factories.make_session(world.assistant, key="cached")
    messages = factories.add_messages(session, *chatter(5))
    session_entries(session)

    factories.add_messages(session, *chatter(2, start=5))
    assert session_entries(session) == fresh_entries(session, settings)
    session_entries(session)

    store_messages(session.pk, [validate_message(user("flush now"), max_bytes=10_000)], flush_turn=True)
    factories.add_compaction(session, first_kept=messages[6])
    assert [e["type"] for e in session_entries(session)][:1] == ["message"]
    assert session_entries(session) == fresh_entries(session, settings)

    factories.add_messages(session, *chatter(1, start=7))
    assert session_entries(session) == fresh_entries(session, settings)
    assert sum(e["type"] == "compaction" for e in session_entries(session)) == 1


def test_extending_a_view_reads_only_the_new_messages(world, settings) -> None:
    session = factories.make_session(world.assistant, key="cached")
    factories.add_messages(session, *chatter(20))
    session_entries(session)
    session.refresh_from_db()
    last_seq = session.last_seq
    factories.add_messages(session, *chatter(1, start=20))

    with CaptureQueriesContext(connection) as queries:
        entries = session_entries(session)

    reads = [q["sql"] for q in queries.captured_queries if 'FROM "sessions_app_message"' in q["sql"]]
    assert len(reads) == 1 and f"t0.seq >= {last_seq}" in reads[0]
    assert len(entries) == 42
    assert entries == fresh_entries(session, settings)


def test_a_view_read_inside_a_rolled_back_transaction_is_not_reused(world, settings) -> None:
    session = factories.make_session(world.assistant, key="cached")
    factories.add_messages(session, *chatter(3))
    with pytest.raises(RuntimeError), transaction.atomic():
        factories.add_messages(session, user("never stored"))
        assert session_entries(session)[-1]["message"]["content"] == "never stored"
        raise RuntimeError("roll back")

    factories.add_messages(session, user("stored"))

    entries = session_entries(session)
    assert [e["message"]["content"] for e in entries[-1:]] == ["stored"]
    assert entries == fresh_entries(session, settings)


def test_views_past_the_limit_are_evicted_least_recently_used_first(world, settings) -> None:
    settings.SESSION_VIEW_CACHE_MESSAGES = 20
    first, second = (factories.make_session(world.assistant, key=k) for k in ("first", "second"))
    for session in (first, second):
        factories.add_messages(session, *chatter(6))
        session_entries(session)

    assert view_cache.get(first.pk, None) is None
    assert view_cache.get(second.pk, None) is not None


def payloads(session) -> tuple[dict, dict]:
    """The /context/ payload as the JSON endpoint encodes it, and as the dict the MCP tool returns."""
    session = Session.objects.get(pk=session.pk)
    as_text = json.loads(context_payload_json(session))
    as_dict = json.loads(json.dumps(context_payload(Session.objects.get(pk=session.pk))))
    return as_text, as_dict


def test_the_context_json_is_the_payload_through_appends_pruning_and_compactions(world, settings) -> None:
    world.assistant.settings = validate_settings(
        {"contextPruning": {"mode": "always", "softTrimRatio": 0.0, "keepLastAssistants": 1}}
    )
    world.assistant.save()
    session = factories.make_session(world.assistant, key="encoded")
    rows = factories.add_messages(
        session,
        *chatter(3),
        assistant(calls=[tool_call("call_1")]),
        tool_result("call_1", "x" * 20_000),
        assistant(calls=[tool_call("call_2")]),  # never answered: a result is synthesised
    )
    for step in range(3):
        as_text, as_dict = payloads(session)
        assert as_text == as_dict
        assert as_text["pruning"]["changes"], "the old tool result is trimmed"
        if step == 0:
            assert as_text["messages"][-1]["role"] == "tool"  # the synthesised answer to call_2
            factories.add_messages(session, tool_result("call_2", "done"), user("and now?"))
        elif step == 1:
            factories.add_compaction(session, first_kept=rows[4])
    view_cache.forget(session.pk)
    assert payloads(session)[0] == as_text  # built from the database alone: the same


def test_a_view_converts_and_encodes_each_stored_message_once(world) -> None:
    session = factories.make_session(world.assistant, key="encoded")
    factories.add_messages(session, *chatter(5))
    first = build_model_context(Session.objects.get(pk=session.pk))
    first.messages_json()
    (added,) = factories.add_messages(session, user("one more"))

    converted: list[dict] = []

    def counting(message, convert):
        return first.view_memo.converted(message, lambda m: converted.append(m) or convert(m))

    second = build_model_context(Session.objects.get(pk=session.pk))
    assert second.view_memo is first.view_memo
    to_openai_messages(second.agent_messages, system_prompt=None, convert=counting)
    assert [m["entryId"] for m in converted] == [added.entry_id]
    # The old messages' OpenAI form is the very object made the first time, and so is its JSON.
    assert second.openai_messages[1] is first.openai_messages[1]
    assert second.view_memo.json(second.openai_messages[1]) is first.view_memo.json(first.openai_messages[1])


def test_a_memo_slot_derives_only_what_follows_the_values_it_saw_last() -> None:
    memo = view_cache.ViewMemo()
    first, second, third = ({"n": n} for n in range(3))
    derived: list[list[dict]] = []

    def derive(values):
        derived.append(list(values))
        return [value["n"] * 10 for value in values]

    assert memo.extended("slot", [first, second], derive) == [0, 10]
    assert memo.extended("slot", [first, second, third], derive) == [0, 10, 20]
    assert derived[-1] == [third]  # the head was the same objects: only the new one derived
    assert memo.extended("slot", [{"n": 0}, second, third], derive) == [0, 10, 20]
    assert len(derived[-1]) == 3  # an equal but other object at the head: derived anew
