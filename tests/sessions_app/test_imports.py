"""import_workspace: round trips with export_workspace, OpenClaw's own files, and all-or-nothing failures."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from memory_app.models import MemoryDocument, MemoryRevision
from openclaw_site.models import Assistant
from openclaw_site.teams.assistant_settings import validate_settings
from sessions_app.models import CompactionEntry, Message, Session
from sessions_app.workspace.exports import export_assistant
from sessions_app.workspace.imports import WorkspaceImportError, import_workspace
from sessions_app.workspace.storage import LocalExportStorage
from tests import factories

pytestmark = pytest.mark.django_db

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "openclaw_workspace"


def build_assistant(world):
    """An assistant with memory, two sessions, a compaction, silent and system messages."""
    assistant = factories.make_assistant(
        world.acme,
        "source",
        name="Source",
        model="gpt-x",
        context_window=64000,
        system_prompt="Remember things.",
        settings=validate_settings({"compaction": {"reserveTokens": 9000}}),
    )
    factories.make_document(assistant, "MEMORY.md", "# Memory\n- eu-west-3\n")
    factories.make_document(assistant, "memory/2026-02-16.md", "flushed note\n")
    factories.make_document(assistant, "memory/projects/alpha.md", "Alpha 部署\n")
    main = factories.make_session(assistant, "agent:main:main", title="Main")
    rows = factories.add_messages(
        main,
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": "Where?", "timestamp": "2026-02-16T09:00:05.123456Z"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"p": 1}},
            ],
            "usage": {
                "input": 10,
                "output": 2,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": 12,
                "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.3},
            },
            "stopReason": "toolUse",
            "model": "gpt-x",
            "provider": "openai",
            "api": "openai-completions",
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "content": [{"type": "text", "text": "x"}],
            "isError": True,
            "details": {"why": "missing"},
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "NO_REPLY"}],
            "silent": True,
            "usage": {
                "input": 1,
                "output": 1,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": 2,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
            },
            "stopReason": "stop",
            "model": "gpt-x",
            "provider": "openai",
            "api": "openai-completions",
            "errorMessage": "",
        },
        {"role": "user", "content": "NO_REPLY"},  # a visible message that merely says the token
    )
    factories.add_compaction(main, first_kept=rows[3])
    factories.add_messages(main, {"role": "user", "content": "after the compaction"})
    main.refresh_from_db()  # appends advanced last_seq in the database
    main.total_tokens, main.total_tokens_fresh, main.compaction_count = 5000, True, 1
    main.memory_flush_at = datetime(2026, 2, 16, 9, 30, 0, 123000, tzinfo=UTC)
    main.memory_flush_compaction_count = 0
    main.save()
    factories.make_session(assistant, "empty-one")  # a key the API accepts, as the import requires
    return assistant


def snapshot(assistant: Assistant) -> dict:
    """Everything import(export(x)) must keep, independent of database ids."""

    def message(m: Message) -> tuple:
        return (
            m.seq,
            m.entry_id,
            m.role,
            m.content,
            m.tool_call_id,
            m.tool_name,
            m.is_error,
            m.details,
            m.usage,
            m.stop_reason,
            m.error_message,
            m.model,
            m.provider,
            m.api,
            m.silent,
            m.flush_turn,
            m.created_at,
            m.estimated_tokens,
        )

    def compaction(c: CompactionEntry) -> tuple:
        return (
            c.seq,
            c.entry_id,
            c.summary,
            c.first_kept.entry_id if c.first_kept else None,
            c.first_kept_entry_id,
            c.tokens_before,
            c.tokens_after,
            c.trigger,
            c.details,
            c.from_hook,
            c.offline,
            c.created_at,
        )

    def session(s: Session) -> dict:
        return {
            "uuid": s.session_uuid,
            "title": s.title,
            "last_seq": s.last_seq,
            "total_tokens": s.total_tokens,
            "fresh": s.total_tokens_fresh,
            "compactions": s.compaction_count,
            "created_at": s.created_at,
            "flush_at": s.memory_flush_at,
            "flush_count": s.memory_flush_compaction_count,
            "messages": [message(m) for m in s.messages.order_by("seq")],
            "entries": [compaction(c) for c in s.compactions.order_by("seq")],
        }

    return {
        "assistant": {
            f: getattr(assistant, f)
            for f in (
                "name",
                "model",
                "context_window",
                "system_prompt",
                "timezone",
                "workspace_access",
                "settings",
            )
        },
        "documents": dict(MemoryDocument.objects.filter(assistant=assistant).values_list("path", "content")),
        "sessions": {s.key: session(s) for s in Session.objects.filter(assistant=assistant)},
    }


def export_to(assistant: Assistant, directory: Path) -> Path:
    export_assistant(assistant.pk, storage=LocalExportStorage(directory), base="")
    return directory


def test_round_trip_recreates_the_assistant(world, tmp_path):
    source = build_assistant(world)
    before = snapshot(source)
    workspace = export_to(source, tmp_path / "ws")
    # Into another team, as a new assistant: session ids are taken by the source, so they get new ones.
    report = import_workspace(directory=workspace, team_slug="globex", assistant_slug="copy")
    copy = Assistant.objects.get(team=world.globex, slug="copy")
    after = snapshot(copy)
    for data in (before, after):
        for s in data["sessions"].values():
            s.pop("uuid")
    assert after == before
    assert report.sessions == 2 and report.messages == 7 and report.compactions == 1 and report.documents == 3


def test_round_trip_with_replace_keeps_session_ids(world, tmp_path):
    source = build_assistant(world)
    before = snapshot(source)
    workspace = export_to(source, tmp_path / "ws")
    import_workspace(directory=workspace, team_slug="acme", assistant_slug="source", replace=True)
    source.refresh_from_db()
    assert snapshot(source) == before
    # The memory was rewritten only where it changed: unchanged documents get no import revision.
    assert not MemoryRevision.objects.filter(assistant=source, author="import").exists()


def test_round_trip_of_an_empty_assistant(world, tmp_path):
    before = snapshot(world.assistant)
    workspace = export_to(world.assistant, tmp_path / "ws")
    import_workspace(directory=workspace, team_slug="globex", assistant_slug="empty-copy")
    assert snapshot(Assistant.objects.get(team=world.globex, slug="empty-copy")) == before


def test_export_of_the_import_is_the_same_files(world, tmp_path):
    source = build_assistant(world)
    first = export_to(source, tmp_path / "one")
    import_workspace(directory=first, team_slug="acme", assistant_slug="source", replace=True)
    second = export_to(Assistant.objects.get(team=world.acme, slug="source"), tmp_path / "two")
    files = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second).as_posix() for p in second.rglob("*") if p.is_file())
    for name in files:
        if name != "sessions/sessions.json":  # updatedAt is the time of the last change
            assert (first / name).read_text() == (second / name).read_text(), name


def test_openclaw_workspace_fixture_imports(world):
    report = import_workspace(directory=FIXTURE, team_slug="acme", assistant_slug="imported")
    assistant = Assistant.objects.get(team=world.acme, slug="imported")
    documents = dict(MemoryDocument.objects.filter(assistant=assistant).values_list("path", "content"))
    assert set(documents) == {"MEMORY.md", "memory/2026-02-16.md"}
    assert MemoryRevision.objects.filter(assistant=assistant, author="import").count() == 2
    main = Session.objects.get(assistant=assistant, key="agent:main:main")
    assert str(main.session_uuid) == "5f0c2a9e-8d1b-4c7e-9a3f-2b6d1e4c8a70"
    assert (main.total_tokens, main.compaction_count, main.memory_flush_compaction_count) == (2425, 1, 0)
    assert main.memory_flush_at is not None and main.last_cache_touch_at is not None
    messages = list(main.messages.order_by("seq"))
    assert [m.entry_id for m in messages][:4] == ["b2000001", "b2000002", "b2000003", "b2000004"]
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "user",
        "assistant",
    ]
    assert messages[1].usage["totalTokens"] == 2385 and messages[1].stop_reason == "toolUse"
    assert messages[2].tool_call_id == "toolu_01" and messages[2].details == {
        "path": "deploy/config.yaml",
        "lines": 3,
    }
    assert [m.silent for m in messages if m.silent] == [True, True]
    compaction = main.compactions.get()
    assert compaction.seq == 10 and compaction.first_kept.entry_id == "b2000005" and compaction.from_hook
    assert main.last_seq == 13
    group = Session.objects.get(assistant=assistant, key="agent:main:telegram:group:-1001234567")
    assert group.title == "Ops group" and group.messages.count() == 2
    assert report.skipped["off_branch"] == 1 and report.skipped["mapped:bashExecution->user"] == 1


def test_fixture_export_is_valid_openclaw_jsonl(world, tmp_path):
    import_workspace(directory=FIXTURE, team_slug="acme", assistant_slug="imported")
    out = export_to(Assistant.objects.get(team=world.acme, slug="imported"), tmp_path / "ws")
    rows = [
        json.loads(line) for line in (out / "sessions" / "agent:main:main.jsonl").read_text().splitlines()
    ]
    assert rows[0]["id"] == "5f0c2a9e-8d1b-4c7e-9a3f-2b6d1e4c8a70"
    compaction = next(r for r in rows if r["type"] == "compaction")
    assert compaction["firstKeptEntryId"] in {r["id"] for r in rows[1:] if r["type"] == "message"}
    store = json.loads((out / "sessions" / "sessions.json").read_text())
    assert store["agent:main:main"]["sessionFile"] == "agent:main:main.jsonl"


def copy_fixture(tmp_path: Path) -> Path:
    target = tmp_path / "ws"
    shutil.copytree(FIXTURE, target)
    return target


def counts() -> tuple[int, ...]:
    return (
        Assistant.objects.count(),
        Session.objects.count(),
        Message.objects.count(),
        MemoryDocument.objects.count(),
        MemoryRevision.objects.count(),
    )


@pytest.mark.parametrize(
    "breakage, problem",
    [
        (
            lambda ws: (
                (ws / "sessions" / "9b3c7d21-4e5f-4a6b-8c9d-0e1f2a3b4c5d.jsonl").open("a").write("{oops\n")
            ),
            "line 4: not valid JSON",
        ),
        (lambda ws: (ws / "memory" / "bad.txt.md").write_bytes(b"\xff\xfe"), "not UTF-8"),
        (lambda ws: (ws / "sessions" / "sessions.json").write_text("[1, 2]"), "must map session keys"),
        (
            lambda ws: (ws / "assistant.json").write_text('{"settings": {"compaction": {"nope": 1}}}'),
            "settings",
        ),
        (
            lambda ws: (ws / "sessions" / "extra.jsonl").write_text(
                '{"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00Z"}\n'
                '{"type":"message","id":"aaaa0001","parentId":null,"timestamp":"2026-01-01T00:00:00Z",'
                '"message":{"role":"toolResult","content":"x"}}\n'
            ),
            "needs toolCallId",
        ),
    ],
)
def test_a_broken_workspace_changes_nothing(world, tmp_path, breakage, problem):
    workspace = copy_fixture(tmp_path)
    breakage(workspace)
    before = counts()
    with pytest.raises(WorkspaceImportError, match=problem):
        import_workspace(directory=workspace, team_slug="acme", assistant_slug="imported")
    assert counts() == before


def test_a_failure_while_writing_rolls_everything_back(world, tmp_path, monkeypatch):
    from sessions_app.workspace import imports

    calls = []

    def fail_on_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return original(*args, **kwargs)

    original = imports._import_session
    monkeypatch.setattr(imports, "_import_session", fail_on_second)
    before = counts()
    with pytest.raises(RuntimeError):
        import_workspace(directory=FIXTURE, team_slug="acme", assistant_slug="imported")
    assert counts() == before


def test_refuses_an_existing_assistant_without_replace(world):
    factories.make_document(world.assistant, "MEMORY.md", "precious")
    with pytest.raises(WorkspaceImportError, match="--replace"):
        import_workspace(directory=FIXTURE, team_slug="acme", assistant_slug="helper")
    assert MemoryDocument.objects.get(assistant=world.assistant).content == "precious"


def test_replace_swaps_sessions_and_memory_but_keeps_revisions(world):
    old = factories.make_document(world.assistant, "memory/old.md", "old note")
    factories.make_session(world.assistant, "old-session")
    report = import_workspace(directory=FIXTURE, team_slug="acme", assistant_slug="helper", replace=True)
    assert not report.created and report.deleted_sessions == 1 and report.deleted_documents == 1
    assert set(Session.objects.filter(assistant=world.assistant).values_list("key", flat=True)) == {
        "agent:main:main",
        "agent:main:telegram:group:-1001234567",
    }
    assert not MemoryDocument.objects.filter(pk=old.pk).exists()
    assert MemoryRevision.objects.filter(
        assistant=world.assistant, path="memory/old.md", action="delete"
    ).exists()


def test_unknown_team_and_bad_slug_are_refused(world):
    with pytest.raises(WorkspaceImportError, match="no team"):
        import_workspace(directory=FIXTURE, team_slug="nope", assistant_slug="x")
    with pytest.raises(WorkspaceImportError, match="slug"):
        import_workspace(directory=FIXTURE, team_slug="acme", assistant_slug="bad slug/..")


def test_an_empty_directory_is_not_a_workspace(world, tmp_path):
    with pytest.raises(WorkspaceImportError, match=r"no MEMORY\.md"):
        import_workspace(directory=tmp_path, team_slug="acme", assistant_slug="x")


def test_transcripts_missing_from_sessions_json_are_imported_under_their_file_name(world, tmp_path):
    workspace = copy_fixture(tmp_path)
    (workspace / "sessions" / "sessions.json").unlink()
    import_workspace(directory=workspace, team_slug="acme", assistant_slug="imported")
    keys = set(Session.objects.filter(assistant__slug="imported").values_list("key", flat=True))
    assert keys == {"5f0c2a9e-8d1b-4c7e-9a3f-2b6d1e4c8a70", "9b3c7d21-4e5f-4a6b-8c9d-0e1f2a3b4c5d"}


# --- The commands ----------------------------------------------------------------------------------


def test_commands_round_trip(world, tmp_path):
    source = build_assistant(world)
    out = StringIO()
    call_command(
        "export_workspace",
        "--team",
        "acme",
        "--assistant",
        "source",
        "--out",
        str(tmp_path / "ws"),
        stdout=out,
    )
    assert "3 memory document(s), 2 session(s)" in out.getvalue()
    out = StringIO()
    call_command(
        "import_workspace", str(tmp_path / "ws"), "--team", "globex", "--assistant", "copy", stdout=out
    )
    assert "Created assistant globex/copy" in out.getvalue()
    assert (
        Message.objects.filter(session__assistant__slug="copy").count()
        == Message.objects.filter(session__assistant=source).count()
    )


def test_import_command_reports_failure_and_writes_nothing(world, tmp_path):
    before = counts()
    with pytest.raises(CommandError, match=r"Nothing was imported: .*already exists"):
        call_command("import_workspace", str(FIXTURE), "--team", "acme", "--assistant", "helper")
    assert counts() == before


def test_export_command_refuses_a_non_empty_directory(world, tmp_path):
    (tmp_path / "something").write_text("mine")
    with pytest.raises(CommandError, match="not an empty directory"):
        call_command("export_workspace", "--team", "acme", "--assistant", "helper", "--out", str(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == ["something"]


def test_export_command_defaults_to_the_mirror(world, settings, tmp_path):
    settings.EXPORT_ROOT = tmp_path / "mirror"
    factories.make_document(world.assistant, "MEMORY.md", "m")
    call_command("export_workspace", "--team", "acme", "--assistant", "helper", stdout=StringIO())
    assert (tmp_path / "mirror" / "acme" / "helper" / "MEMORY.md").read_text() == "m"
    with pytest.raises(CommandError, match="No assistant"):
        call_command("export_workspace", "--team", "globex", "--assistant", "helper")
