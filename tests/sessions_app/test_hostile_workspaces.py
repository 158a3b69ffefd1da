"""import_workspace against hostile workspaces: each is refused with a message and nothing is written.

Symlinks out of the workspace (to another team's export, to /etc/passwd, a linked sessions/ or
memory/ folder), things that are not regular files, ``../`` names, huge files, broken and looping
JSONL, and NUL bytes (docs/design.md, Limits and refusals).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sessions_app.workspace.exports import export_assistant
from sessions_app.workspace.imports import WorkspaceImportError, import_workspace
from tests import factories
from tests.sessions_app.test_imports import copy_fixture, counts

pytestmark = pytest.mark.django_db

HEADER = '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00Z"}\n'


def entry(entry_id: str, parent: str | None, content: str = "hi") -> str:
    return (
        json.dumps(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:01Z",
                "message": {"role": "user", "content": content},
            }
        )
        + "\n"
    )


def other_teams_transcript(world) -> Path:
    """globex's exported transcript, the file a hostile acme workspace would link to."""
    session = factories.make_session(world.other_assistant, "secret-plans")
    factories.add_messages(session, {"role": "user", "content": "globex launch codes"})
    export_assistant(world.other_assistant.pk)
    from django.conf import settings

    files = list(Path(settings.EXPORT_ROOT).glob("globex/rival/sessions/secret-plans.jsonl"))
    assert files, "the export mirror holds globex's transcript"
    return files[0]


def assert_refused(workspace: Path, problem: str) -> None:
    before = counts()
    with pytest.raises(WorkspaceImportError, match=problem):
        import_workspace(directory=workspace, team_slug="acme", assistant_slug="imported")
    assert counts() == before


def test_a_symlinked_transcript_of_another_team_is_refused(world, tmp_path):
    workspace = copy_fixture(tmp_path)
    (workspace / "sessions" / "stolen.jsonl").symlink_to(other_teams_transcript(world))
    assert_refused(workspace, "sessions/stolen.jsonl points outside the workspace")


def test_a_symlinked_sessions_folder_is_refused(world, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "MEMORY.md").write_text("# hi\n")
    (workspace / "sessions").symlink_to(other_teams_transcript(world).parent, target_is_directory=True)
    assert_refused(workspace, "sessions/ points outside the workspace")


def test_a_symlinked_memory_folder_is_refused(world, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.md").write_text("private\n")
    workspace = copy_fixture(tmp_path)
    (workspace / "memory" / "2026-02-16.md").unlink()
    (workspace / "memory").rmdir()
    (workspace / "memory").symlink_to(outside, target_is_directory=True)
    assert_refused(workspace, "memory/ points outside the workspace")


@pytest.mark.parametrize("name", ["sessions/passwd.jsonl", "MEMORY.md", "memory/etc.md", "assistant.json"])
def test_a_link_to_etc_passwd_is_refused(world, tmp_path, name):
    workspace = copy_fixture(tmp_path)
    target = workspace / name
    target.unlink(missing_ok=True)
    target.symlink_to("/etc/passwd")
    assert_refused(workspace, f"{name} points outside the workspace")


def test_a_link_inside_the_workspace_is_followed(world, tmp_path):
    workspace = copy_fixture(tmp_path)
    (workspace / "memory" / "alias.md").symlink_to(workspace / "memory" / "2026-02-16.md")
    report = import_workspace(directory=workspace, team_slug="acme", assistant_slug="imported")
    assert report.documents == 3


def test_a_fifo_is_not_a_regular_file(world, tmp_path):
    workspace = copy_fixture(tmp_path)
    os.mkfifo(workspace / "sessions" / "pipe.jsonl")
    assert_refused(workspace, "sessions/pipe.jsonl is not a regular file")


def test_a_directory_named_like_a_transcript_is_refused(world, tmp_path):
    workspace = copy_fixture(tmp_path)
    (workspace / "sessions" / "folder.jsonl").mkdir()
    assert_refused(workspace, "sessions/folder.jsonl is not a regular file")


def test_a_dotdot_memory_name_is_refused(world, tmp_path):
    workspace = copy_fixture(tmp_path)
    (workspace / "memory" / "\u2024\u2024.md").write_text("x\n")
    assert_refused(workspace, "not a valid memory path")


def test_a_session_file_named_with_dotdot_in_sessions_json_stays_inside(world, tmp_path):
    workspace = copy_fixture(tmp_path)
    store = json.loads((workspace / "sessions" / "sessions.json").read_text())
    store["evil"] = {"sessionFile": "../../../../etc/passwd.jsonl"}
    (workspace / "sessions" / "sessions.json").write_text(json.dumps(store))
    report = import_workspace(directory=workspace, team_slug="acme", assistant_slug="imported")
    assert any("'evil' has no transcript file" in note for note in report.notes)


def test_a_huge_transcript_is_refused_before_it_is_read(world, tmp_path, settings):
    settings.MAX_IMPORT_FILE_BYTES = 10_000
    workspace = copy_fixture(tmp_path)
    with (workspace / "sessions" / "huge.jsonl").open("w") as file:
        file.write(
            HEADER + "".join(entry(f"e{i:07d}", None if i == 0 else f"e{i - 1:07d}") for i in range(100))
        )
    assert_refused(workspace, "sessions/huge.jsonl is [0-9]+ bytes; the limit is 10000")


@pytest.mark.parametrize(
    "lines, problem",
    [
        (HEADER + '{"type":"message","id":"a"', "line 2: not valid JSON"),
        (HEADER + entry("aaaa0001", "aaaa0002") + entry("aaaa0002", "aaaa0001"), "the parentId chain loops"),
        (HEADER + entry("aaaa0001", "aaaa0001"), "the parentId chain loops"),
        (HEADER + entry("aaaa0001", None, "nul \u0000 here"), "line 2: .*NUL character"),
        (HEADER + entry("aaaa0001", None, "half \ud800 a pair"), "line 2: .*lone surrogate"),
        (HEADER + "[" * 5000 + "]" * 5000 + "\n", "line 2: JSON nests deeper than 64 levels"),
    ],
    ids=["broken", "loop", "self-loop", "nul-escape", "surrogate", "deep"],
)
def test_broken_and_hostile_jsonl_is_refused(world, tmp_path, lines, problem):
    workspace = copy_fixture(tmp_path)
    (workspace / "sessions" / "bad.jsonl").write_text(lines, errors="surrogatepass")
    assert_refused(workspace, problem)


def test_a_raw_nul_byte_in_a_memory_file_is_refused(world, tmp_path):
    workspace = copy_fixture(tmp_path)
    (workspace / "MEMORY.md").write_bytes(b"# Memory\n\x00\n")
    assert_refused(workspace, "MEMORY.md contains a NUL character")


def test_the_command_turns_a_nul_into_a_clear_error(world, tmp_path):
    workspace = copy_fixture(tmp_path)
    (workspace / "sessions" / "bad.jsonl").write_text(HEADER + entry("aaaa0001", None, "a\u0000b"))
    before = counts()
    with pytest.raises(CommandError, match=r"Nothing was imported: sessions/bad.jsonl line 2: .*NUL"):
        call_command("import_workspace", str(workspace), team="acme", assistant="imported")
    assert counts() == before


def test_settings_that_do_not_fit_the_window_are_refused(world, tmp_path):
    workspace = copy_fixture(tmp_path)
    (workspace / "assistant.json").write_text(
        json.dumps({"context_window": 32000, "settings": {"compaction": {"reserveTokens": 30000}}})
    )
    assert_refused(
        workspace, "assistant.json: settings.compaction.reserveTokens: .*context window \\(32000\\)"
    )
