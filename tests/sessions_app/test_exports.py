"""The export mirror: OpenClaw's transcript format, sessions.json, memory files, atomic writes, the API."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_app.documents import Provenance, delete_document, write_document
from sessions_app.transcript import transcript_entries
from sessions_app.workspace import exports
from sessions_app.workspace.storage import LocalExportStorage, UnsafeName
from tests import factories

pytestmark = pytest.mark.django_db

USAGE = {"input": 1200, "output": 85, "cacheRead": 10, "cacheWrite": 5}


@pytest.fixture
def export_root(settings, tmp_path) -> Path:
    settings.EXPORT_ROOT = tmp_path / "exports"
    return settings.EXPORT_ROOT


def lines_of(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def conversation(world):
    session = factories.make_session(world.assistant, "agent:main:main", title="Deploys")
    factories.add_messages(
        session,
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": "Where do we deploy? ünïcode 部署",
            "timestamp": "2026-02-16T09:00:05.123456Z",
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "deploy.yaml"}},
            ],
            "usage": USAGE,
            "stopReason": "toolUse",
            "model": "gpt-x",
            "provider": "openai",
            "api": "openai-completions",
        },
        {
            "role": "toolResult",
            "toolCallId": "call_1",
            "toolName": "read",
            "content": "region: eu-west-3",
            "details": {"bytes": 17},
        },
        {"role": "assistant", "content": "eu-west-3.", "model": "gpt-x"},
    )
    factories.add_messages(
        session,
        {"role": "user", "content": "Pre-compaction memory flush. ...", "silent": True},
        {"role": "assistant", "content": "NO_REPLY", "silent": True},
    )
    return session


def test_jsonl_has_openclaw_header_and_entry_fields(world):
    session = conversation(world)
    rows = lines_of("".join(exports.session_jsonl_lines(session)))
    header = rows[0]
    assert header["type"] == "session" and header["version"] == 3
    assert header["id"] == str(session.session_uuid)
    assert header["cwd"] == "acme/helper"
    assert datetime.fromisoformat(header["timestamp"].replace("Z", "+00:00")) == session.created_at
    for row in rows[1:]:
        assert {"type", "id", "parentId", "timestamp", "message"} <= set(row)
        assert row["type"] == "message" and len(row["id"]) == 8
        assert isinstance(row["message"]["timestamp"], int)


def test_entries_chain_by_parent_id_in_seq_order(world):
    session = conversation(world)
    rows = lines_of("".join(exports.session_jsonl_lines(session)))[1:]
    assert rows[0]["parentId"] is None
    assert [row["parentId"] for row in rows[1:]] == [row["id"] for row in rows[:-1]]
    assert [row["id"] for row in rows] == [e["id"] for e in transcript_entries(session)]


def test_messages_carry_openclaw_shapes(world):
    session = conversation(world)
    rows = lines_of("".join(exports.session_jsonl_lines(session)))[1:]
    system, user, call, result, answer, _flush, _silent = (row["message"] for row in rows)
    # Pi has no system role: a custom message of our type that Pi sends as context.
    assert system == {
        "role": "custom",
        "customType": "openclaw-site.system",
        "content": "Be brief.",
        "display": False,
        "timestamp": system["timestamp"],
    }
    assert user["timestamp"] == 1771232405123 and user["content"].endswith("部署")
    assert call["usage"] == {
        **USAGE,
        "totalTokens": 1300,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }
    assert (call["stopReason"], call["model"], call["provider"], call["api"]) == (
        "toolUse",
        "gpt-x",
        "openai",
        "openai-completions",
    )
    assert result == {
        "role": "toolResult",
        "content": [{"type": "text", "text": "region: eu-west-3"}],
        "toolCallId": "call_1",
        "toolName": "read",
        "isError": False,
        "details": {"bytes": 17},
        "timestamp": result["timestamp"],
    }
    assert answer["content"] == [{"type": "text", "text": "eu-west-3."}]
    assert answer["stopReason"] == "stop" and answer["usage"]["totalTokens"] == 0
    assert "silent" not in rows[0] and rows[5]["silent"] is True and rows[6]["silent"] is True


def test_compaction_entry_has_pi_fields(world):
    session = conversation(world)
    messages = list(session.messages.order_by("seq"))
    factories.add_compaction(session, first_kept=messages[4])
    rows = lines_of("".join(exports.session_jsonl_lines(session)))
    compaction = rows[-1]
    assert compaction == {
        "type": "compaction",
        "id": "c0ffee01",
        "parentId": rows[-2]["id"],
        "timestamp": "2026-02-16T10:00:00.000000Z",
        "summary": "## Decisions\n- eu-west-3",
        "firstKeptEntryId": messages[4].entry_id,
        "tokensBefore": 181234,
        "details": {"readFiles": ["deploy.yaml"], "modifiedFiles": []},
        "fromHook": True,
        "trigger": "manual",
        "tokensAfter": 9000,
    }


def test_export_session_writes_transcript_and_session_store(world, export_root):
    session = conversation(world)
    session.refresh_from_db()
    session.total_tokens, session.total_tokens_fresh, session.compaction_count = 23120, True, 2
    session.memory_flush_at = datetime(2026, 2, 16, 9, 30, tzinfo=UTC)
    session.memory_flush_compaction_count = 1
    session.save()
    assert exports.export_session(session.pk)
    base = export_root / "acme" / "helper" / "sessions"
    transcript = (base / "agent:main:main.jsonl").read_text()
    assert transcript == "".join(exports.session_jsonl_lines(session))
    store = json.loads((base / "sessions.json").read_text())
    assert store["agent:main:main"] == {
        "sessionId": str(session.session_uuid),
        "sessionFile": "agent:main:main.jsonl",
        "updatedAt": store["agent:main:main"]["updatedAt"],
        "sessionStartedAt": store["agent:main:main"]["sessionStartedAt"],
        "totalTokensFresh": True,
        "compactionCount": 2,
        "contextTokens": 200000,
        "label": "Deploys",
        "totalTokens": 23120,
        "memoryFlushAt": 1771234200000,
        "memoryFlushCompactionCount": 1,
        "model": "gpt-x",
    }


def test_never_flushed_session_has_no_flush_keys(world):
    session = factories.make_session(world.assistant, "s1")
    entry = exports.session_store(world.assistant)["s1"]
    assert "memoryFlushAt" not in entry and "memoryFlushCompactionCount" not in entry
    assert entry["sessionId"] == str(session.session_uuid)


def test_unsafe_session_keys_get_safe_file_names(world, export_root):
    session = factories.make_session(world.assistant, "../../etc/passwd")
    exports.export_session(session.pk)
    files = sorted(p.name for p in (export_root / "acme" / "helper" / "sessions").iterdir())
    assert files == ["..%2F..%2Fetc%2Fpasswd.jsonl", "sessions.json"]


def test_atomic_write_leaves_no_temp_files(world, export_root):
    conversation(world)
    factories.make_document(world.assistant, "memory/notes/2026-02-16.md", "note")
    exports.export_assistant(world.assistant.pk)
    every = list(export_root.rglob("*"))
    assert not [p for p in every if p.name.endswith(".tmp")]
    assert {p.relative_to(export_root / "acme" / "helper").as_posix() for p in every if p.is_file()} == {
        "assistant.json",
        "memory/notes/2026-02-16.md",
        "sessions/agent:main:main.jsonl",
        "sessions/sessions.json",
    }


def test_a_failed_write_keeps_the_old_file_and_no_temp(tmp_path):
    storage = LocalExportStorage(tmp_path)
    storage.save_text("sessions/a.jsonl", "old\n")

    def broken():
        yield "new line 1\n"
        raise RuntimeError("database went away")

    with pytest.raises(RuntimeError):
        storage.save_lines("sessions/a.jsonl", broken())
    assert (tmp_path / "sessions" / "a.jsonl").read_text() == "old\n"
    assert [p.name for p in (tmp_path / "sessions").iterdir()] == ["a.jsonl"]


def test_storage_refuses_names_outside_its_root(tmp_path):
    storage = LocalExportStorage(tmp_path)
    for name in ("../x", "/etc/passwd", "a/../../b"):
        with pytest.raises(UnsafeName):
            storage.save_text(name, "x")


def test_memory_export_follows_edits_and_deletions(world, export_root, django_capture_on_commit_callbacks):
    base = export_root / "acme" / "helper"
    with django_capture_on_commit_callbacks(execute=True):
        document = factories.make_document(world.assistant, "memory/2026-02-16.md", "first")
        factories.make_document(world.assistant, "MEMORY.md", "# Memory\n")
    assert (base / "memory" / "2026-02-16.md").read_text() == "first"
    assert (base / "MEMORY.md").read_text() == "# Memory\n"
    with django_capture_on_commit_callbacks(execute=True):
        write_document(
            assistant=world.assistant,
            path="memory/2026-02-16.md",
            content="second",
            provenance=Provenance(author="user"),
        )
    assert (base / "memory" / "2026-02-16.md").read_text() == "second"
    with django_capture_on_commit_callbacks(execute=True):
        delete_document(document=document, provenance=Provenance(author="user"))
    assert not (base / "memory" / "2026-02-16.md").exists()
    assert (base / "MEMORY.md").exists()


def test_deleting_a_nested_document_removes_its_empty_folder(world, export_root):
    document = factories.make_document(world.assistant, "memory/projects/x/plan.md", "plan")
    exports.export_assistant(world.assistant.pk)
    delete_document(document=document, provenance=Provenance(author="user"))
    exports.export_memory_document(world.assistant.pk, "memory/projects/x/plan.md")
    base = export_root / "acme" / "helper"
    assert not (base / "memory" / "projects").exists()


def test_appends_and_session_deletion_reach_the_mirror(
    world, export_root, django_capture_on_commit_callbacks
):
    base = export_root / "acme" / "helper" / "sessions"
    with django_capture_on_commit_callbacks(execute=True):
        session = factories.make_session(world.assistant, "chat")
        factories.add_messages(session, {"role": "user", "content": "one"})
    assert len(lines_of((base / "chat.jsonl").read_text())) == 2
    with django_capture_on_commit_callbacks(execute=True):
        factories.add_messages(session, {"role": "user", "content": "two"})
    assert len(lines_of((base / "chat.jsonl").read_text())) == 3
    with django_capture_on_commit_callbacks(execute=True):
        session.delete()
    assert not (base / "chat.jsonl").exists()
    assert json.loads((base / "sessions.json").read_text()) == {}


def test_a_renamed_session_key_leaves_no_stale_file(world, export_root, django_capture_on_commit_callbacks):
    session = factories.make_session(world.assistant, "old-key")
    exports.export_session(session.pk)
    session.key = "new-key"
    session.save()
    with django_capture_on_commit_callbacks(execute=True):  # the sessions.json job removes the old file
        exports.export_session(session.pk)
    names = sorted(p.name for p in (export_root / "acme" / "helper" / "sessions").iterdir())
    assert names == ["new-key.jsonl", "sessions.json"]


def test_a_fresh_mirror_gets_the_whole_workspace_on_first_change(world, export_root):
    factories.make_document(world.assistant, "MEMORY.md", "remembered")
    session = factories.make_session(world.assistant, "chat")
    exports.export_session(session.pk)  # EXPORT_ROOT was empty: memory comes along
    assert (export_root / "acme" / "helper" / "MEMORY.md").read_text() == "remembered"


def test_full_export_removes_files_of_deleted_documents(world, export_root):
    factories.make_document(world.assistant, "MEMORY.md", "keep")
    stale = export_root / "acme" / "helper" / "memory" / "gone.md"
    stale.parent.mkdir(parents=True)
    stale.write_text("deleted long ago")
    (stale.parent / ".gone.md.x1y2.tmp").write_text("crashed writer")
    exports.export_assistant(world.assistant.pk)
    assert not stale.exists() and not (stale.parent / ".gone.md.x1y2.tmp").exists()
    assert (export_root / "acme" / "helper" / "MEMORY.md").read_text() == "keep"


def test_teams_export_to_their_own_folders(world, export_root):
    mine = factories.make_session(world.assistant, "same-key")
    theirs = factories.make_session(world.other_assistant, "same-key")
    exports.export_session(mine.pk)
    exports.export_session(theirs.pk)
    assert (export_root / "acme" / "helper" / "sessions" / "same-key.jsonl").exists()
    assert (export_root / "globex" / "rival" / "sessions" / "same-key.jsonl").exists()


# --- GET /api/v1/sessions/{id}/export.jsonl --------------------------------------------------------


def url(session) -> str:
    return f"/api/v1/sessions/{session.pk}/export.jsonl"


def test_streaming_endpoint_returns_the_same_jsonl(world, api, export_root):
    session = conversation(world)
    response = api.get(url(session), HTTP_ACCEPT="application/x-ndjson")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    assert response.streaming
    body = b"".join(response.streaming_content).decode()
    exports.export_session(session.pk)
    assert body == (export_root / "acme" / "helper" / "sessions" / "agent:main:main.jsonl").read_text()
    assert 'filename="agent:main:main.jsonl"' in response["Content-Disposition"]


def test_streaming_endpoint_hides_other_teams_sessions(world, api, other_api):
    session = conversation(world)
    response = other_api.get(url(session))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert api.get("/api/v1/sessions/999999/export.jsonl").status_code == 404


def test_streaming_endpoint_needs_sessions_read(world, scoped_api):
    session = conversation(world)
    response = scoped_api("memory:read").get(url(session), HTTP_ACCEPT="application/x-ndjson")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "insufficient_scope"
    assert scoped_api("sessions:read").get(url(session)).status_code == 200


def test_streaming_endpoint_needs_authentication(world, client):
    session = conversation(world)
    response = client.get(url(session))
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_streaming_endpoint_for_a_signed_in_member(world, client):
    session = conversation(world)
    client.force_login(world.vera)  # a viewer may read sessions
    response = client.get(url(session))
    assert response.status_code == 200
    assert json.loads(b"".join(response.streaming_content).splitlines()[0])["type"] == "session"
