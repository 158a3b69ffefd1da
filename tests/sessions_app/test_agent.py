"""The assistant turn against the scripted OpenAI server: tools, usage, NO_REPLY, failures, overflow."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_app.tools import build_memory_read
from openclaw_site.models import TaskRecord
from openclaw_site.teams.assistant_settings import validate_settings
from providers.chat import reset_providers
from sessions_app.models import CompactionEntry, CompactionRun, Message, ModelCalibration, Session
from sessions_app.turn.events import MAX_OVERFLOW_COMPACTION_ATTEMPTS, OVERFLOW_USER_ERROR, TurnError
from sessions_app.turn.loop import run_turn
from sessions_app.turn.silent import visible_reply_text
from tests import factories
from tests.chat_requests import message_input, request_kinds, router, tool_names
from tests.fake_openai import delay_reply, error_reply, text_reply, tool_call_reply
from tests.messages import assistant, chatter, tool_call, tool_result, user

OVERFLOW_TEXT = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in "
    "9000 tokens. Please reduce the length of the messages."
)


@pytest.fixture
def session(world):
    return factories.make_session(world.assistant)


def turn(session, text: str = "hello"):
    return run_turn(session=session, message=message_input(user(text)))


def parsed(row: Message) -> dict:
    return json.loads(row.content[0]["text"])


@pytest.mark.django_db
def test_turn_runs_memory_get_and_stores_every_message_with_usage(llm, session):
    factories.make_document(session.assistant, "memory/notes.md", "line one\nline two\nline three")
    llm.queue(
        tool_call_reply(
            [("memory_get", {"path": "memory/notes.md", "from": 2, "lines": 1})],
            usage={"prompt_tokens": 800, "completion_tokens": 15},
        ),
        text_reply("Line two says: line two.", usage={"prompt_tokens": 900, "completion_tokens": 20}),
    )
    result = turn(session, "what is on line 2?")

    assert result.reply_text == "Line two says: line two." and not result.silent
    rows = list(Message.objects.filter(session=session).order_by("seq"))
    assert [r.role for r in rows] == ["user", "assistant", "toolResult", "assistant"]
    assert rows[1].content == [
        {
            "type": "toolCall",
            "id": "call_1",
            "name": "memory_get",
            "arguments": {"path": "memory/notes.md", "from": 2, "lines": 1},
        }
    ]
    assert rows[1].stop_reason == "toolUse"
    assert parsed(rows[2]) == {
        "text": "line two\n\n[More content available. Use from=3 to continue.]",
        "path": "memory/notes.md",
        "from": 2,
        "lines": 1,
        "truncated": True,
        "nextFrom": 3,
    }
    assert rows[2].tool_call_id == "call_1" and rows[2].tool_name == "memory_get" and not rows[2].is_error
    assert rows[3].usage == {
        "input": 900,
        "output": 20,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 920,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }
    assert (rows[3].stop_reason, rows[3].model, rows[3].api) == ("stop", "fake-chat", "openai-completions")

    first, second = llm.chat_requests
    assert tool_names(first) == ["memory_search", "memory_get", "tool_result_get"]
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": rows[2].content[0]["text"],
    }
    session.refresh_from_db()
    assert (session.total_tokens, session.total_tokens_fresh) == (900, True)
    assert session.last_cache_touch_at is not None
    calibration = ModelCalibration.objects.get(model="fake-chat")
    assert (
        calibration.samples == 2 and calibration.reported_tokens == 1700 and calibration.estimated_tokens > 0
    )


def test_memory_get_window_budget_and_notice():
    content = "\n".join(f"line {n}" for n in range(1, 201))
    read = build_memory_read(content, path="memory/long.md")
    assert (read.start, read.lines, read.next_from) == (1, 120, 121)
    assert read.text.endswith("line 120\n\n[More content available. Use from=121 to continue.]")
    huge = build_memory_read("x" * 13000, path="MEMORY.md")
    assert (
        huge.text
        == "x" * 12000
        + "\n\n[More content available. Requested excerpt exceeded the default maxChars budget.]"
    )
    assert huge.next_from is None and huge.truncated
    whole = build_memory_read("a\nb", path="MEMORY.md", start=1, count=5)
    assert whole.as_dict() == {"text": "a\nb", "path": "MEMORY.md", "from": 1, "lines": 2}


@pytest.mark.django_db
def test_memory_get_refuses_paths_outside_memory(llm, session):
    llm.queue(
        tool_call_reply(
            [("memory_get", {"path": "../etc/passwd"}), ("memory_get", {"path": "memory/none.md"})]
        ),
        text_reply("done"),
    )
    turn(session)
    bad, missing = Message.objects.filter(session=session, role="toolResult").order_by("seq")
    assert parsed(bad)["disabled"] is True and parsed(bad)["error"].startswith("path required")
    assert parsed(missing) == {"text": "", "path": "memory/none.md"}


@pytest.mark.django_db
def test_tool_result_get_pages_through_a_stored_result(llm, session):
    [_, _, stored] = factories.add_messages(
        session,
        user("dump"),
        assistant(calls=[tool_call("c1", "exec", {})]),
        tool_result("c1", "0123456789" * 3000),
    )
    llm.queue(
        tool_call_reply(
            [
                ("tool_result_get", {"id": stored.entry_id}),
                ("tool_result_get", {"id": stored.entry_id, "from": 24000}),
                ("tool_result_get", {"id": "deadbeef"}),
            ]
        ),
        text_reply("read it"),
    )
    turn(session)
    first, last, unknown = Message.objects.filter(
        session=session, role="toolResult", tool_name="tool_result_get"
    ).order_by("seq")
    page = parsed(first)
    assert (page["from"], page["length"], page["totalChars"], page["nextFrom"]) == (0, 12000, 30000, 12000)
    assert page["text"].endswith("\n\n[More content available. Use from=12000 to continue.]")
    assert parsed(last)["text"] == ("0123456789" * 3000)[24000:] and "nextFrom" not in parsed(last)
    assert unknown.is_error and unknown.content[0]["text"] == "No message deadbeef in this session."


@pytest.mark.django_db
def test_unknown_tool_gets_an_error_result_and_rounds_are_bounded(llm, session, settings):
    settings.LLM_MAX_TOOL_ROUNDS = 2
    llm.default_chat = lambda request: (
        tool_call_reply([("nope", {})]) if request.get("tools") else text_reply("final")
    )
    result = turn(session)
    results = Message.objects.filter(session=session, role="toolResult")
    assert results.count() == 2 and all(
        r.is_error and r.content[0]["text"] == "Tool nope not found" for r in results
    )
    assert result.reply_text == "final"
    assert [bool(r.get("tools")) for r in llm.chat_requests] == [True, True, False]


SILENT_MATRIX = [
    ("NO_REPLY", True, None),
    ("  no_reply \n", True, None),
    ('{"action":"NO_REPLY"}', True, None),
    ("**NO_REPLY", True, None),
    ("Done. NO_REPLY", False, "Done."),
    ("NO_REPLYThe answer is 4.", False, "The answer is 4."),
    ("NO_REPLY is the token I use", False, "NO_REPLY is the token I use"),
    ("Please do not NO_REPLY me", False, "Please do not NO_REPLY me"),
    ("Done no_reply", False, "Done no_reply"),
    ('{"action":"NO_REPLY","why":"x"}', False, '{"action":"NO_REPLY","why":"x"}'),
]


@pytest.mark.parametrize(("text", "silent", "visible"), SILENT_MATRIX)
def test_visible_reply_text(text, silent, visible):
    assert visible_reply_text(text) == visible
    assert (visible_reply_text(text) is None) == silent


@pytest.mark.django_db
@pytest.mark.parametrize(("text", "silent", "visible"), SILENT_MATRIX)
def test_no_reply_is_stored_silent_and_not_returned(llm, session, text, silent, visible):
    llm.queue(text_reply(text))
    result = turn(session)
    stored = Message.objects.get(session=session, role="assistant")
    assert stored.silent is silent and result.silent is silent
    assert stored.content == [{"type": "text", "text": text}]  # the transcript keeps what the model said
    assert result.reply_text == visible
    assert (result.reply is None) is silent
    assert not Message.objects.get(session=session, role="user").silent


@pytest.mark.django_db
def test_no_model_configured_answers_503_and_stores_nothing(no_llm, session):
    with pytest.raises(TurnError) as caught:
        turn(session)
    assert caught.value.status == 503 and caught.value.code == "model_not_configured"
    assert "LLM_BASE_URL" in caught.value.message
    assert not Message.objects.filter(session=session).exists()


@pytest.mark.django_db
def test_a_500_stores_the_user_message_and_an_error_message(llm, session):
    llm.queue(error_reply(500, "The server had an error while processing your request."))
    with pytest.raises(TurnError) as caught:
        turn(session, "keep me")
    assert (caught.value.status, caught.value.code) == (502, "model_error")
    user_row, error_row = Message.objects.filter(session=session).order_by("seq")
    assert user_row.content == "keep me"
    assert (error_row.role, error_row.stop_reason) == ("assistant", "error")
    assert error_row.error_message == "The server had an error while processing your request."
    assert [row.entry_id for row in caught.value.stored] == [user_row.entry_id, error_row.entry_id]
    llm.queue(text_reply("back again"))
    assert turn(session, "retry").reply_text == "back again"
    # The failed call is never replayed to the model.
    assert all(m.get("content") != "" for m in llm.chat_requests[-1]["messages"])


@pytest.mark.django_db
def test_a_timeout_answers_504_and_keeps_the_message(llm, session, settings):
    settings.LLM_TIMEOUT_SECONDS = 0.3
    reset_providers()
    llm.queue(delay_reply(5, text_reply("too late")))
    with pytest.raises(TurnError) as caught:
        turn(session, "slow one")
    assert (caught.value.status, caught.value.code) == (504, "model_timeout")
    assert list(
        Message.objects.filter(session=session).values_list("role", "stop_reason").order_by("seq")
    ) == [("user", ""), ("assistant", "error")]


def long_session(world, turns: int = 8) -> Session:
    world.assistant.settings = validate_settings({"compaction": {"keepRecentTokens": 300}})
    world.assistant.save()
    session = factories.make_session(world.assistant)
    factories.add_messages(session, *chatter(turns))
    return session


@pytest.mark.django_db
def test_overflow_compacts_and_the_turn_succeeds(llm, world):
    session = long_session(world)
    llm.queue(error_reply(400, OVERFLOW_TEXT, code="context_length_exceeded"))
    llm.default_chat = router(chat="Answer after compaction.")
    result = turn(session, "one more question")

    assert result.reply_text == "Answer after compaction."
    kinds = request_kinds(llm)
    assert (
        kinds[:3] == ["chat", "flush", "summary"] and set(kinds[3:-1]) <= {"summary"} and kinds[-1] == "chat"
    )
    [run] = result.compactions
    assert (run.trigger, run.state, run.flush_outcome) == ("overflow", "committed", "flushed")
    entry = CompactionEntry.objects.get(session=session)
    assert entry.tokens_before == 9000  # observed in the error text ("resulted in 9000 tokens")
    retried = llm.chat_requests[-1]["messages"]
    assert retried[1]["role"] == "user" and retried[1]["content"].startswith(
        "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
    )
    assert retried[-1] == {"role": "user", "content": "one more question"}
    session.refresh_from_db()
    assert session.compaction_count == 1 and session.total_tokens_fresh


def test_overflow_recovery_constants() -> None:
    assert MAX_OVERFLOW_COMPACTION_ATTEMPTS == 3
    assert OVERFLOW_USER_ERROR == (
        "Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh "
        "session, or use a larger-context model."
    )


@pytest.mark.django_db
def test_overflow_that_persists_gives_openclaws_error(llm, world):
    session = long_session(world)
    overflow = error_reply(400, "prompt is too long: 250,000 tokens > 200000 maximum")
    llm.default_chat = router(chat=lambda request: overflow)
    with pytest.raises(TurnError) as caught:
        turn(session, "again")
    assert (caught.value.status, caught.value.code, caught.value.message) == (
        422,
        "context_overflow",
        OVERFLOW_USER_ERROR,
    )
    assert (
        CompactionEntry.objects.filter(session=session).count() == 1
    )  # the second attempt: "Already compacted"
    assert list(
        CompactionRun.objects.filter(session=session).values_list("state", flat=True).order_by("id")
    ) == ["committed", "failed"]
    assert Message.objects.filter(session=session, stop_reason="error").count() == 1


@pytest.mark.django_db
def test_cache_ttl_pruning_runs_once_per_window_and_the_touch_follows_each_call(llm, world):
    from datetime import timedelta

    from django.utils import timezone

    world.assistant.settings = validate_settings(
        {
            "contextPruning": {
                "mode": "cache-ttl",
                "ttl": "5m",
                "softTrimRatio": 0.0,
                "keepLastAssistants": 1,
                "softTrim": {"maxChars": 10, "headChars": 6, "tailChars": 6},
            }
        }
    )
    world.assistant.save()
    session = factories.make_session(world.assistant)
    factories.add_messages(
        session,
        user("read"),
        assistant(calls=[tool_call("c1", "exec", {})]),
        tool_result("c1", "abcdefghij" * 1000),
        assistant("read it"),
    )
    stale_touch = timezone.now() - timedelta(minutes=10)
    Session.objects.filter(pk=session.pk).update(last_cache_touch_at=stale_touch)

    llm.queue(text_reply("first"), text_reply("second"))
    turn(session, "one")  # the cache went cold: prune, then touch
    turn(session, "two")  # touched a moment ago: the cache is warm, send the original
    first, second = (
        next(m for m in r["messages"] if m["role"] == "tool")["content"] for r in llm.chat_requests
    )
    assert first.startswith("abcdef\n...\nefghij\n\n[Tool result trimmed:")
    assert second == "abcdefghij" * 1000
    session.refresh_from_db()
    assert session.last_cache_touch_at > stale_touch


@pytest.mark.django_db(transaction=True)
def test_two_turns_at_once_on_one_session_run_one_after_the_other(llm, world):
    import threading

    from django.db import connection

    session = factories.make_session(world.assistant)
    llm.default_chat = lambda request: delay_reply(0.3, text_reply("answer"))
    barrier = threading.Barrier(2)
    replies: list[str] = []

    def ask(text: str) -> None:
        barrier.wait()
        try:
            replies.append(turn(session, text).reply_text)
        finally:
            connection.close()

    threads = [threading.Thread(target=ask, args=(text,)) for text in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert replies == ["answer", "answer"]
    roles = list(Message.objects.filter(session=session).order_by("seq").values_list("role", flat=True))
    assert roles == ["user", "assistant", "user", "assistant"]


@pytest.mark.django_db(transaction=True)
def test_a_turn_that_cannot_get_the_session_stores_nothing(llm, world, settings):
    from openclaw_site.platform.locks import session_lock

    settings.LLM_TIMEOUT_SECONDS = 0.2
    session = factories.make_session(world.assistant)
    with session_lock(f"turn:{session.pk}"):
        import threading

        errors: list[TurnError] = []

        def ask() -> None:
            from django.db import connection

            try:
                turn(session, "hello")
            except TurnError as error:
                errors.append(error)
            finally:
                connection.close()

        thread = threading.Thread(target=ask)
        thread.start()
        thread.join()
    assert errors and errors[0].code == "turn_in_progress" and errors[0].status == 409
    assert not Message.objects.filter(session=session).exists()


@pytest.mark.django_db
def test_a_turn_queues_its_export_and_index_once_for_all_it_stored(
    llm, session, django_capture_on_commit_callbacks
):
    factories.make_document(session.assistant, "memory/notes.md", "line one")
    llm.queue(tool_call_reply([("memory_get", {"path": "memory/notes.md"})]), text_reply("It says line one."))

    with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks(execute=True):
        turn(session, "what do my notes say?")

    folds = [
        q["sql"]
        for q in queries.captured_queries
        if "INSERT INTO openclaw_site_taskrecord" in q["sql"] and f"export-session:{session.pk}" in q["sql"]
    ]
    assert len(folds) == 1  # four messages stored, one fold for the export and the indexer
    assert f"transcript-changed:{session.pk}" in folds[0]
    assert Message.objects.filter(session=session).count() == 4
    export = TaskRecord.objects.get(coalesce_key=f"export-session:{session.pk}")
    assert export.kind == "export_session"


@pytest.mark.django_db
def test_a_failed_turn_still_queues_the_export_of_what_it_stored(
    llm, session, django_capture_on_commit_callbacks
):
    llm.queue(error_reply(500, "The server had an error while processing your request."))

    with pytest.raises(TurnError), django_capture_on_commit_callbacks(execute=True):
        turn(session, "hello?")

    assert [m.role for m in Message.objects.filter(session=session).order_by("seq")] == ["user", "assistant"]
    assert TaskRecord.objects.filter(coalesce_key=f"export-session:{session.pk}").exists()
