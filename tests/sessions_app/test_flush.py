"""The pre-compaction memory flush (docs/openclaw-behaviour.md section 2; docs/design.md §D1-D2)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from memory_app.models import MemoryDocument, MemoryRevision
from openclaw_site.teams.assistant_settings import MemoryFlushSettings, parse_settings
from sessions_app.compaction.flush import (
    DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT,
    build_flush_plan,
    claim_flush,
    run_memory_flush,
)
from sessions_app.context.build import build_model_context
from sessions_app.models import Message, Session
from tests import factories
from tests.chat_requests import last_user_text, system_text, tool_names
from tests.fake_openai import error_reply, text_reply, tool_call_reply
from tests.messages import assistant, user

# 03:30 UTC on the 17th is still the evening of the 16th in New York.
NOW = datetime(2026, 2, 17, 3, 30, tzinfo=UTC)
NEW_YORK = ZoneInfo("America/New_York")
EXPECTED_PROMPT = (
    "Pre-compaction memory flush. Store durable memories only in memory/2026-02-16.md (create memory/ if needed). "
    "Treat workspace bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, TOOLS.md, and AGENTS.md as "
    "read-only during this flush; never overwrite, replace, or edit them. If memory/2026-02-16.md already exists, "
    "APPEND new content only and do not overwrite existing entries. Do NOT create timestamped variant files (e.g., "
    "2026-02-16-HHMM.md); always use the canonical 2026-02-16.md filename. If nothing to store, reply with NO_REPLY.\n"
    "Current time: Monday, February 16th, 2026 - 10:30 PM (America/New_York) / 2026-02-17 03:30 UTC"
)
EXPECTED_SYSTEM_PROMPT = (
    "Pre-compaction memory flush turn. The session is near auto-compaction; capture durable memories to disk. "
    "Store durable memories only in memory/2026-02-16.md (create memory/ if needed). Treat workspace "
    "bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, TOOLS.md, and AGENTS.md as read-only during "
    "this flush; never overwrite, replace, or edit them. If memory/2026-02-16.md already exists, APPEND new content "
    "only and do not overwrite existing entries. You may reply, but usually NO_REPLY is correct."
)


def flush_settings(**memory_flush: object) -> MemoryFlushSettings:
    """Return the typed `compaction.memoryFlush` settings of a validated document (defaults filled)."""
    return parse_settings({"compaction": {"memoryFlush": memory_flush}}).compaction.memory_flush


def test_default_plan_is_openclaws_text_with_the_local_date_and_time():
    plan = build_flush_plan(flush_settings(), now=NOW, zone=NEW_YORK)
    assert plan.relative_path == "memory/2026-02-16.md"
    assert plan.prompt == EXPECTED_PROMPT
    assert plan.system_prompt == EXPECTED_SYSTEM_PROMPT
    assert DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT.count("YYYY-MM-DD") == 2


def test_custom_prompts_get_the_safety_hints_and_no_reply_hint():
    plan = build_flush_plan(
        flush_settings(prompt="Save what matters.", systemPrompt="Flush now. Reply NO_REPLY."),
        now=NOW,
        zone=ZoneInfo("UTC"),
    )
    assert plan.prompt.startswith(
        "Save what matters.\n\nStore durable memories only in memory/2026-02-17.md (create memory/ if needed)."
        "\n\nIf memory/2026-02-17.md already exists, APPEND new content only and do not overwrite existing entries."
        "\n\nTreat workspace bootstrap/reference files"
    )
    assert (
        "\n\nIf no user-visible reply is needed, start with NO_REPLY.\nCurrent time: Tuesday, February 17th, 2026 - "
        "3:30 AM (UTC) / 2026-02-17 03:30 UTC" in plan.prompt
    )
    assert "If no user-visible reply is needed" not in plan.system_prompt  # it already says NO_REPLY
    assert build_flush_plan(flush_settings(enabled=False), now=NOW, zone=NEW_YORK) is None
    prompt_with_time = build_flush_plan(
        flush_settings(prompt="Current time: given"), now=NOW, zone=NEW_YORK
    ).prompt
    assert prompt_with_time.count("Current time:") == 1


@pytest.fixture
def session(world):
    helper = world.assistant
    helper.timezone = "America/New_York"
    helper.save()
    session = factories.make_session(helper)
    factories.add_messages(
        session,
        user("We decided to deploy on Fridays. Remember ticket ABC-12345678."),
        assistant("Noted, Fridays it is."),
    )
    return session


@pytest.mark.django_db
def test_flush_turn_appends_to_todays_note_with_flush_provenance(llm, session):
    llm.queue(
        tool_call_reply(
            [("write", {"path": "memory/2026-02-16.md", "content": "- Deploys happen on Fridays."})]
        ),
        text_reply("NO_REPLY"),
    )
    outcome = run_memory_flush(session_id=session.pk, now=NOW)

    assert outcome.label == "flushed" and outcome.reply_silent
    document = MemoryDocument.objects.get(assistant=session.assistant, path="memory/2026-02-16.md")
    assert document.content == "- Deploys happen on Fridays."
    revision = MemoryRevision.objects.get(document=document)
    call_message = Message.objects.get(
        session=session, role="assistant", flush_turn=True, stop_reason="toolUse"
    )
    assert (revision.author, revision.session_pk, revision.message_pk) == (
        "flush",
        session.pk,
        call_message.pk,
    )
    result = Message.objects.get(session=session, role="toolResult")
    assert result.content[0]["text"] == "Appended content to memory/2026-02-16.md."
    assert not result.is_error

    first = llm.chat_requests[0]
    assert tool_names(first) == ["read", "write"]
    assert system_text(first).endswith("\n\n" + EXPECTED_SYSTEM_PROMPT)
    assert last_user_text(first) == EXPECTED_PROMPT
    assert "We decided to deploy on Fridays" in json.dumps(first["messages"])

    flush_rows = Message.objects.filter(session=session, flush_turn=True)
    assert flush_rows.count() == 4 and all(row.silent for row in flush_rows)
    # Flush-turn messages never reach the model again.
    view_ids = [m.get("entryId") for m in build_model_context(session).agent_messages]
    assert not set(view_ids) & set(flush_rows.values_list("entry_id", flat=True))
    session.refresh_from_db()
    assert session.memory_flush_compaction_count == 0 and session.memory_flush_at == NOW


@pytest.mark.django_db
def test_writes_outside_the_daily_note_are_refused_with_openclaws_message(llm, session):
    factories.make_document(session.assistant, "MEMORY.md", "# Core\n")
    llm.queue(
        tool_call_reply(
            [
                ("write", {"path": "MEMORY.md", "content": "overwrite!"}),
                ("write", {"path": "./memory/2026-02-16.md", "content": "- kept"}),
                ("edit", {"path": "memory/2026-02-16.md"}),
            ]
        ),
        text_reply("NO_REPLY"),
    )
    run_memory_flush(session_id=session.pk, now=NOW)
    results = list(Message.objects.filter(session=session, role="toolResult").order_by("seq"))
    assert [(r.content[0]["text"], r.is_error) for r in results] == [
        ("Memory flush writes are restricted to memory/2026-02-16.md; use that path only.", True),
        ("Appended content to memory/2026-02-16.md.", False),
        ("Tool edit not found", True),
    ]
    assert MemoryDocument.objects.get(assistant=session.assistant, path="MEMORY.md").content == "# Core\n"


@pytest.mark.django_db
def test_flush_reads_memory_and_appends_after_existing_text(llm, session):
    factories.make_document(session.assistant, "memory/2026-02-16.md", "- earlier note")
    llm.queue(
        tool_call_reply([("read", {"path": "memory/2026-02-16.md"})]),
        tool_call_reply([("write", {"path": "memory/2026-02-16.md", "content": "- later note"})]),
        text_reply("Stored."),
    )
    outcome = run_memory_flush(session_id=session.pk, now=NOW)
    read = Message.objects.filter(session=session, role="toolResult").order_by("seq").first()
    assert read.content[0]["text"] == "- earlier note"
    assert MemoryDocument.objects.get(path="memory/2026-02-16.md").content == "- earlier note\n- later note"
    assert outcome.reply_silent is False


@pytest.mark.django_db
def test_flush_runs_once_per_compaction_cycle(llm, session):
    llm.queue(text_reply("NO_REPLY"))
    assert run_memory_flush(session_id=session.pk, now=NOW).label == "flushed"
    again = run_memory_flush(session_id=session.pk, now=NOW)
    assert again.label == "flush_skipped(already-flushed)"
    assert len(llm.chat_requests) == 1
    Session.objects.filter(pk=session.pk).update(compaction_count=1)  # a new cycle
    llm.queue(text_reply("NO_REPLY"))
    assert run_memory_flush(session_id=session.pk, now=NOW).label == "flushed"
    assert Session.objects.get(pk=session.pk).memory_flush_compaction_count == 1


@pytest.mark.django_db
def test_claim_is_a_conditional_update(session):
    assert claim_flush(session.pk, now=NOW) == 0
    assert claim_flush(session.pk, now=NOW) is None


@pytest.mark.django_db
@pytest.mark.parametrize("access", ["ro", "none"])
def test_read_only_workspace_skips_the_flush(llm, session, access):
    session.assistant.workspace_access = access
    session.assistant.save()
    outcome = run_memory_flush(session_id=session.pk, now=NOW)
    assert outcome.label == "flush_skipped(read-only)"
    assert llm.chat_requests == []
    assert Session.objects.get(pk=session.pk).memory_flush_compaction_count is None


@pytest.mark.django_db
def test_a_failed_flush_is_recorded_and_can_run_again(llm, session):
    llm.queue(error_reply(500, "upstream exploded"))
    outcome = run_memory_flush(session_id=session.pk, now=NOW)
    assert outcome.status == "failed" and "upstream exploded" in outcome.reason
    # The first call failed: the prompt was never stored, the transcript is as it was.
    assert outcome.stored == () and not outcome.wrote
    assert not Message.objects.filter(session=session, flush_turn=True).exists()
    assert Session.objects.get(pk=session.pk).memory_flush_compaction_count is None  # claim released
    llm.queue(text_reply("NO_REPLY"))
    assert run_memory_flush(session_id=session.pk, now=NOW).label == "flushed"


@pytest.mark.django_db
def test_a_flush_failing_after_a_tool_call_lists_what_it_stored(llm, session):
    llm.queue(tool_call_reply([("read", {"path": "MEMORY.md"})]), error_reply(500, "upstream exploded"))
    outcome = run_memory_flush(session_id=session.pk, now=NOW)
    rows = list(Message.objects.filter(session=session, flush_turn=True).order_by("seq"))
    assert [(row.role, row.stop_reason) for row in rows] == [
        ("user", ""),
        ("assistant", "toolUse"),
        ("toolResult", ""),
        ("assistant", "error"),
    ]
    assert outcome.status == "failed" and outcome.stored == tuple(row.entry_id for row in rows)
    assert outcome.as_dict()["stored"] == [row.entry_id for row in rows]


@pytest.mark.django_db
def test_offline_flush_appends_durable_lines_labelled_offline(no_llm, session):
    outcome = run_memory_flush(session_id=session.pk, now=NOW)
    assert outcome.label == "flushed(offline)" and outcome.offline
    note = MemoryDocument.objects.get(assistant=session.assistant, path="memory/2026-02-16.md").content
    assert note.startswith("_(offline memory flush: no model configured)_\n")
    assert "- Decision: We decided to deploy on Fridays." in note
    assert "- Identifier: 12345678" in note
    revision = MemoryRevision.objects.get(path="memory/2026-02-16.md")
    assert revision.author == "flush" and revision.session_pk == session.pk
    assert revision.message_pk == Message.objects.filter(session=session).order_by("-seq").first().pk


@pytest.mark.django_db
def test_flush_turn_marks_survive_export_and_import(llm, session, tmp_path):
    from sessions_app.workspace.exports import export_assistant
    from sessions_app.workspace.imports import import_workspace
    from sessions_app.workspace.storage import LocalExportStorage

    llm.queue(tool_call_reply([("read", {"path": "MEMORY.md"})]), text_reply("NO_REPLY"))
    run_memory_flush(session_id=session.pk, now=NOW)
    export_assistant(session.assistant.pk, storage=LocalExportStorage(tmp_path), base="")
    import_workspace(directory=tmp_path, team_slug="globex", assistant_slug="copy")

    def flags(target: Session) -> list[tuple]:
        return list(
            Message.objects.filter(session=target)
            .order_by("seq")
            .values_list("entry_id", "silent", "flush_turn")
        )

    copy = Session.objects.get(assistant__slug="copy", key=session.key)
    assert flags(copy) == flags(session) and sum(flag for *_, flag in flags(copy)) == 4


@pytest.mark.django_db
def test_a_flush_that_overflows_the_model_falls_back_to_the_extractor(llm, session):
    llm.queue(error_reply(400, "prompt is too long: 210000 tokens > 200000 maximum"))
    outcome = run_memory_flush(session_id=session.pk, now=NOW)
    assert (outcome.label, outcome.reason) == ("flushed(offline)", "context overflow")
    note = MemoryDocument.objects.get(path="memory/2026-02-16.md").content
    assert note.startswith("_(offline memory flush: the session no longer fits the model)_\n")
    assert "- Decision: We decided to deploy on Fridays." in note
    assert Session.objects.get(pk=session.pk).memory_flush_compaction_count == 0
