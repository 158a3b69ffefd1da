"""Reading OpenClaw transcripts (pure: no database)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessions_app.workspace.openclaw_jsonl import (
    BRANCH_SUMMARY_PREFIX,
    TranscriptError,
    bash_execution_text,
    parse_transcript,
)

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "openclaw_workspace"
MAIN = FIXTURE / "sessions" / "5f0c2a9e-8d1b-4c7e-9a3f-2b6d1e4c8a70.jsonl"
HEADER = {
    "type": "session",
    "version": 3,
    "id": "0b0e7a1c-1111-4222-8333-444455556666",
    "timestamp": "2026-03-01T10:00:00.000Z",
    "cwd": "/w",
}


def jsonl(*rows: dict) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def msg(entry_id: str, parent: str | None, role: str = "user", text: str = "hi", **extra) -> dict:
    message = {"role": role, "content": text, "timestamp": 1772359200000, **extra}
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-03-01T10:00:00.000Z",
        "message": message,
    }


def test_fixture_active_branch_keeps_messages_and_compaction_in_order():
    parsed = parse_transcript(MAIN.read_text(), source="main.jsonl")
    assert parsed.session_id == "5f0c2a9e-8d1b-4c7e-9a3f-2b6d1e4c8a70"
    ids = [entry.entry_id for entry in parsed.entries]
    assert ids == [
        "b2000001",
        "b2000002",
        "b2000003",
        "b2000004",
        "b2000005",
        "b2000006",
        "b2000007",
        "b2000008",
        "b2000009",
        "e5000001",
        "f6000001",
        "b200000a",
        "b200000b",
    ]
    assert "b20000ff" not in ids  # the abandoned branch
    assert parsed.skipped["off_branch"] == 1
    assert parsed.skipped["model_change"] == 1 and parsed.skipped["thinking_level_change"] == 1
    assert parsed.skipped["label"] == 1 and parsed.skipped["custom:openclaw.cache-ttl"] == 1


def test_fixture_messages_keep_openclaw_fields():
    entries = {e.entry_id: e for e in parse_transcript(MAIN.read_text(), source="main.jsonl").entries}
    assistant = entries["b2000002"].message
    assert assistant["role"] == "assistant" and assistant["stopReason"] == "toolUse"
    assert assistant["usage"]["totalTokens"] == 2385 and assistant["provider"] == "anthropic"
    assert [b["type"] for b in assistant["content"]] == ["thinking", "text", "toolCall"]
    result = entries["b2000003"].message
    assert (result["toolCallId"], result["toolName"], result["isError"]) == ("toolu_01", "read", False)
    assert entries["b2000003"].timestamp.microsecond == 400000


def test_fixture_pi_roles_are_mapped_like_convert_to_llm():
    entries = {e.entry_id: e for e in parse_transcript(MAIN.read_text(), source="main.jsonl").entries}
    bash = entries["b2000005"].message
    assert bash["role"] == "user"
    assert bash["content"][0]["text"] == "Ran `git log -1 --oneline`\n```\n9f1e2d3 Fix staging DSN\n```"
    assert bash["details"]["openclawRole"] == "bashExecution"
    custom = entries["f6000001"].message
    assert custom["role"] == "user" and custom["details"]["customType"] == "openclaw.post-compaction-context"


def test_fixture_flush_turn_and_no_reply_are_silent():
    entries = {e.entry_id: e for e in parse_transcript(MAIN.read_text(), source="main.jsonl").entries}
    assert entries["b2000008"].silent and entries["b2000009"].silent
    assert not entries["b200000a"].silent and not entries["b2000007"].silent


def test_compaction_cut_on_a_label_moves_to_the_next_message():
    compaction = next(
        e for e in parse_transcript(MAIN.read_text(), source="m").entries if e.kind == "compaction"
    )
    # firstKeptEntryId names the label entry d4000001; the next message on the branch is b2000005.
    assert compaction.first_kept_entry_id == "b2000005"
    assert compaction.tokens_before == 181234 and compaction.from_hook is True
    assert compaction.details == {"readFiles": ["deploy/config.yaml"], "modifiedFiles": []}


def test_cache_ttl_and_session_info_are_read():
    text = jsonl(
        HEADER,
        msg("aaaa0001", None),
        {
            "type": "custom",
            "id": "aaaa0002",
            "parentId": "aaaa0001",
            "timestamp": "2026-03-01T10:00:01.000Z",
            "customType": "openclaw.cache-ttl",
            "data": {"timestamp": 1772359201000},
        },
        {
            "type": "session_info",
            "id": "aaaa0003",
            "parentId": "aaaa0002",
            "timestamp": "2026-03-01T10:00:02.000Z",
            "name": "Planning",
        },
    )
    parsed = parse_transcript(text, source="t")
    assert parsed.last_cache_touch_ms == 1772359201000
    assert parsed.title == "Planning"
    assert [e.entry_id for e in parsed.entries] == ["aaaa0001"]


def test_branch_summary_entry_becomes_user_context():
    text = jsonl(
        HEADER,
        msg("aaaa0001", None),
        {
            "type": "branch_summary",
            "id": "aaaa0002",
            "parentId": "aaaa0001",
            "timestamp": "2026-03-01T10:00:01.000Z",
            "fromId": "zzzz0001",
            "summary": "Tried X.",
        },
    )
    entry = parse_transcript(text, source="t").entries[1]
    assert entry.message["content"][0]["text"] == f"{BRANCH_SUMMARY_PREFIX}Tried X.</summary>"


def test_excluded_bash_and_compaction_summary_messages_are_skipped():
    text = jsonl(
        HEADER,
        msg("aaaa0001", None),
        {
            **msg("aaaa0002", "aaaa0001"),
            "message": {
                "role": "bashExecution",
                "command": "ls",
                "output": "",
                "excludeFromContext": True,
                "timestamp": 1,
            },
        },
        {
            **msg("aaaa0003", "aaaa0002"),
            "message": {"role": "compactionSummary", "summary": "s", "tokensBefore": 1, "timestamp": 1},
        },
    )
    parsed = parse_transcript(text, source="t")
    assert [e.entry_id for e in parsed.entries] == ["aaaa0001"]
    assert parsed.skipped["message:compactionSummary"] == 1


def test_long_fallback_ids_are_renamed_with_their_references():
    long_id = "3f2a9c1e-0000-4000-8000-000000000001"
    text = jsonl(
        HEADER,
        msg(long_id, None),
        {
            "type": "compaction",
            "id": "cccc0001",
            "parentId": long_id,
            "timestamp": "2026-03-01T10:00:01.000Z",
            "summary": "s",
            "firstKeptEntryId": long_id,
            "tokensBefore": 10,
        },
    )
    entries = parse_transcript(text, source="t").entries
    assert len(entries[0].entry_id) == 8
    assert entries[1].first_kept_entry_id == entries[0].entry_id


def test_our_exports_mark_silence_explicitly():
    header = {**HEADER, "exportedBy": "openclaw-site"}
    text = jsonl(
        header,
        msg("aaaa0001", None, "user", "Pre-compaction memory flush. Store..."),
        {**msg("aaaa0002", "aaaa0001", "assistant", "NO_REPLY"), "silent": True},
    )
    entries = parse_transcript(text, source="t").entries
    assert [e.silent for e in entries] == [False, True]


def test_bash_execution_text_matches_pi():
    assert bash_execution_text({"command": "make", "output": "", "exitCode": 2}) == (
        "Ran `make`\n(no output)\n\nCommand exited with code 2"
    )


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "empty"),
        (
            '{"type":"session","version":3,"id":"x","timestamp":"2026-03-01T10:00:00Z"}\nnot json\n',
            "line 2: not valid JSON",
        ),
        ('{"type":"message","id":"a","parentId":null}\n', "first line must be the header"),
        ('{"type":"session","id":"x","timestamp":"2026-03-01T10:00:00Z"}\n', "version 1"),
        (jsonl(HEADER, msg("aaaa0001", "missing1")), "names no entry"),
        (jsonl(HEADER, msg("aaaa0001", None), msg("aaaa0001", None)), "duplicate entry id"),
        (jsonl(HEADER, msg("aaaa0001", "aaaa0002"), msg("aaaa0002", "aaaa0001")), "loops"),
        (jsonl(HEADER, {**msg("aaaa0001", None), "timestamp": "yesterday"}), "not ISO-8601"),
        (
            jsonl(
                HEADER,
                {"type": "compaction", "id": "c1", "parentId": None, "timestamp": "2026-03-01T10:00:00Z"},
            ),
            "needs summary",
        ),
    ],
)
def test_broken_transcripts_are_refused_with_the_line(text, problem):
    with pytest.raises(TranscriptError, match=problem):
        parse_transcript(text, source="sessions/bad.jsonl")
