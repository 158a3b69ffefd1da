"""What the model is sent: system prompt, memory, the compaction view, pruning (docs/design.md, How a message flows)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from openclaw_site.teams.assistant_settings import validate_settings
from sessions_app.context.build import build_model_context
from sessions_app.context.figures import calibration_ratio, record_calibration, token_figures
from sessions_app.models import ModelCalibration
from tests import factories
from tests.messages import assistant, chatter, tool_call, tool_result, usage, user

NOW = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)  # still Feb 28 in Los Angeles
TRIMMED = (
    "abcdef\n...\nefghij\n\n[Tool result trimmed: kept first 6 chars and last 6 chars of 10000 chars.]"
    "\n[Original: message {entry}; call tool_result_get to read it in full.]"
)


def prune_settings(**pruning):
    base = {
        "softTrimRatio": 0.0,
        "keepLastAssistants": 1,
        "softTrim": {"maxChars": 10, "headChars": 6, "tailChars": 6},
    }
    return validate_settings({"contextPruning": {**base, **pruning}})


@pytest.fixture
def tool_session(world):
    session = factories.make_session(world.assistant)
    rows = factories.add_messages(
        session,
        user("read the log"),
        assistant(calls=[tool_call("call_1", "exec", {"cmd": "cat log"})]),
        tool_result("call_1", "abcdefghij" * 1000),
        assistant("The log repeats the alphabet."),
        user("thanks"),
    )
    return session, rows


@pytest.mark.django_db
def test_system_prompt_holds_memory_and_the_local_daily_notes(world):
    helper = world.assistant
    helper.system_prompt = "You are Helper."
    helper.timezone = "America/Los_Angeles"
    helper.save()
    factories.make_document(helper, "MEMORY.md", "User's name is Dana.")
    factories.make_document(helper, "memory/2026-02-28.md", "Today: shipped v2.")
    factories.make_document(helper, "memory/2026-02-27.md", "Yesterday: planned v2.")
    factories.make_document(helper, "memory/2026-02-26.md", "Older: not injected.")
    factories.make_document(helper, "memory/2026-03-01.md", "UTC today: not injected.")
    context = build_model_context(factories.make_session(helper), now=NOW)

    text = context.system_prompt.text
    assert text.startswith("You are Helper.\n\n## Memory\n")
    assert context.system_prompt.memory_paths == ("MEMORY.md", "memory/2026-02-28.md", "memory/2026-02-27.md")
    assert "## MEMORY.md\n\nUser's name is Dana." in text
    assert "## memory/2026-02-28.md\n\nToday: shipped v2." in text
    assert "## memory/2026-02-27.md\n\nYesterday: planned v2." in text
    assert "Older" not in text and "UTC today" not in text
    assert "Time zone: America/Los_Angeles" in text
    assert context.openai_messages == [{"role": "system", "content": text}]


@pytest.mark.django_db
def test_memory_search_hint_only_with_the_tool(world):
    session = factories.make_session(world.assistant)
    plain = build_model_context(session, tools=[{"name": "memory_get"}]).system_prompt.text
    searching = build_model_context(session, tools=[{"name": "memory_search"}]).system_prompt.text
    assert "run memory_search first" not in plain and "run memory_search first" in searching


@pytest.mark.django_db
def test_pruning_always_trims_old_tool_results_and_names_the_original(world, tool_session):
    session, rows = tool_session
    world.assistant.settings = prune_settings(mode="always")
    world.assistant.save()
    context = build_model_context(session, now=NOW)

    pruned = context.agent_messages[2]
    assert pruned["content"] == [{"type": "text", "text": TRIMMED.format(entry=rows[2].entry_id)}]
    assert context.pruning.as_dict()["changes"] == [
        {
            "index": 2,
            "entry_id": rows[2].entry_id,
            "tool_name": "exec",
            "action": "trimmed",
            "chars_before": 10000,
            "chars_after": len(TRIMMED.format(entry=rows[2].entry_id)),
        }
    ]
    assert context.openai_messages[3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": TRIMMED.format(entry=rows[2].entry_id),
    }
    rows[2].refresh_from_db()
    assert rows[2].content[0]["text"] == "abcdefghij" * 1000  # storage is never touched


@pytest.mark.django_db
def test_cache_ttl_gate(world, tool_session):
    session, _ = tool_session
    world.assistant.settings = prune_settings(mode="cache-ttl", ttl="5m")
    world.assistant.save()

    first = build_model_context(session, now=NOW)
    assert not first.pruning.ran and first.pruning.reason.startswith("no model call recorded yet")
    session.last_cache_touch_at = NOW - timedelta(minutes=1)
    warm = build_model_context(session, now=NOW)
    assert not warm.pruning.ran and warm.pruning.reason == "prompt cache still warm: the TTL expires in 240 s"
    session.last_cache_touch_at = NOW - timedelta(minutes=5)
    cold = build_model_context(session, now=NOW)
    assert cold.pruning.ran and cold.pruning.changed

    world.assistant.settings = prune_settings(mode="off")
    off = build_model_context(session, now=NOW)
    assert not off.pruning.ran and off.pruning.reason == "mode off"


@pytest.mark.django_db
def test_deny_wins_over_allow(world, tool_session):
    session, _ = tool_session
    world.assistant.settings = prune_settings(mode="always", tools={"allow": ["ex*"], "deny": ["EXEC"]})
    assert not build_model_context(session, now=NOW).pruning.changed


@pytest.mark.django_db
def test_token_figures_use_reported_usage_plus_estimates_after_it(world):
    session = factories.make_session(world.assistant)
    factories.add_messages(
        session, user("hi"), assistant("hello", usage=usage(170000, 2000)), user("x" * 4000)
    )  # 1000 estimated tokens after the usage
    session.refresh_from_db()
    figures = token_figures(session)
    assert figures.context_tokens == 172000 + 1000
    assert figures.thresholds.flush_threshold == 176000
    assert not figures.compaction_due and figures.flush_reason is None
    session.last_usage, session.total_tokens_fresh = usage(175000, 2000), True
    figures = token_figures(session, prompt_estimate=1000)
    assert figures.projected_tokens == 178000 and figures.flush_reason == "tokens"
    assert figures.transcript_bytes > 4000


@pytest.mark.django_db
def test_calibration_corrects_estimates_not_reported_usage(world):
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("x" * 4000))  # 1000 estimated tokens, no usage anywhere
    assert token_figures(session).context_tokens == 1000
    ModelCalibration.objects.create(model="", estimated_tokens=1000, reported_tokens=1300, samples=1)
    world.assistant.model = "calibrated-model"
    world.assistant.save()
    ModelCalibration.objects.create(
        model="calibrated-model", estimated_tokens=1000, reported_tokens=1300, samples=4
    )
    session.refresh_from_db()
    assert token_figures(session).context_tokens == 1300


@pytest.mark.django_db
def test_a_process_uses_the_ratio_its_call_recorded_without_reading_it_again():
    record_calibration(model="m", estimated=1000, reported=1200)
    record_calibration(model="m", estimated=1000, reported=1400)
    with CaptureQueriesContext(connection) as queries:
        assert calibration_ratio("m") == pytest.approx(1.3)
    assert len(queries) == 0
    assert ModelCalibration.objects.get(model="m").samples == 2


@pytest.mark.django_db
def test_stored_figures_agree_with_the_view_and_ignore_stale_usage(world, no_llm):
    from sessions_app.compaction.compact import compact_session
    from sessions_app.context.figures import view_tokens
    from sessions_app.context.view import session_entries
    from sessions_app.messages import validate_message
    from sessions_app.transcript import append_messages

    world.assistant.settings = validate_settings({"compaction": {"keepRecentTokens": 300}})
    world.assistant.save()
    session = factories.make_session(world.assistant)
    factories.add_messages(session, *chatter(8))
    run = compact_session(session_id=session.pk, trigger="manual")
    session.refresh_from_db()
    after = token_figures(session).context_tokens
    assert after == view_tokens(session_entries(session), ratio=None) == run.entry.tokens_after

    # A call that started before the compaction was written reports the old, larger context.
    stale = validate_message(assistant("late", usage=usage(150000, 10)), max_bytes=10**6)
    stale = stale.__class__(**{**stale.__dict__, "created_at": run.entry.created_at - timedelta(seconds=1)})
    append_messages(session_id=session.pk, messages=[stale])
    assert token_figures(session).context_tokens < 10000
    assert token_figures(session).context_tokens == view_tokens(session_entries(session), ratio=None)
    factories.add_messages(session, user("now"), assistant("fresh", usage=usage(5000, 10)))
    assert token_figures(session).context_tokens == 5010 == view_tokens(session_entries(session), ratio=None)


@pytest.mark.django_db
def test_stored_figures_pass_over_usage_pi_would_not_trust(world, no_llm):
    from sessions_app.context.figures import view_tokens
    from sessions_app.context.view import session_entries

    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("a"), assistant("counted", usage=usage(3000, 20)))
    factories.add_messages(session, user("b"), assistant("empty usage", usage=usage(0, 0)))
    factories.add_messages(session, user("c"), assistant("failed", usage=usage(9000, 5), stopReason="error"))
    factories.add_messages(session, user("d" * 400))

    figures = token_figures(session)
    # The all-zero and the failed call's usage are passed over: 3,020 reported, the rest estimated.
    assert figures.context_tokens == view_tokens(session_entries(session), ratio=None)
    assert 3020 < figures.context_tokens < 3300
    assert figures.transcript_bytes == session.__class__.objects.get(pk=session.pk).transcript_bytes > 400


@pytest.mark.django_db
def test_force_flush_by_transcript_size(world):
    world.assistant.settings = validate_settings(
        {"compaction": {"memoryFlush": {"forceFlushTranscriptBytes": "1kb"}}}
    )
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("x" * 600))
    assert token_figures(session).flush_reason is None
    factories.add_messages(session, user("y" * 600))
    assert token_figures(session).flush_reason == "transcript_bytes"


def _plain_sums(session):
    """The visible messages' estimates, each message's running sum and the total, added up in Python."""
    from sessions_app.models import Message

    total, running = 0, {}
    for row in Message.objects.filter(session=session).order_by("seq"):
        total += 0 if row.flush_turn else row.estimated_tokens
        running[row.seq] = total
    return running, total


@pytest.mark.django_db
def test_running_sums_match_the_messages_through_flush_turns_compactions_and_an_import(
    world, no_llm, tmp_path
):
    """The per-message running sums the figures are read from agree with adding the estimates up."""
    from sessions_app.compaction.compact import compact_session
    from sessions_app.context.figures import view_tokens
    from sessions_app.context.view import session_entries
    from sessions_app.messages import validate_message
    from sessions_app.models import Message, Session
    from sessions_app.turn.model_output import store_messages
    from sessions_app.workspace.exports import export_assistant
    from sessions_app.workspace.imports import import_workspace
    from sessions_app.workspace.storage import LocalExportStorage

    world.assistant.settings = validate_settings({"compaction": {"keepRecentTokens": 300}})
    world.assistant.save()
    session = factories.make_session(world.assistant)

    def check(target):
        running, total = _plain_sums(target)
        stored = dict(Message.objects.filter(session=target).values_list("seq", "running_tokens"))
        assert stored == running
        assert Session.objects.get(pk=target.pk).message_tokens == total
        assert token_figures(target).context_tokens == view_tokens(session_entries(target), ratio=None)

    factories.add_messages(session, *chatter(6))
    check(session)
    flush = [validate_message(m, max_bytes=10**6) for m in (user("flush now"), assistant("NO_REPLY" * 40))]
    store_messages(session.pk, flush, flush_turn=True)
    factories.add_messages(session, user("after the flush " * 20), assistant("ok"))
    check(session)
    compact_session(session_id=session.pk, trigger="manual")
    factories.add_messages(session, user("after the summary " * 10))
    check(session)
    # A usage that reports nothing: the figures page back past it (to none after the compaction).
    factories.add_messages(session, assistant("empty usage", usage=usage(0, 0)), user("and on"))
    check(session)

    export_assistant(world.assistant.pk, storage=LocalExportStorage(tmp_path), base="")
    import_workspace(directory=tmp_path, team_slug="globex", assistant_slug="copy")
    imported = Session.objects.get(assistant__slug="copy", assistant__team=world.globex)
    assert imported.message_tokens == _plain_sums(session)[1] > 0
    check(imported)
