"""`manage.py check_mirrors`: the export mirror and the transcript index against the stored sessions."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from memory_app.models import IndexedSource, MemoryChunk, Source
from sessions_app.messages import MessageInput
from sessions_app.mirror_check import PENDING, PROBLEMS
from sessions_app.models import Session
from sessions_app.turn.model_output import store_messages
from sessions_app.workspace import exports
from tests import factories
from tests.messages import assistant, chatter, tool_call, tool_result, user

pytestmark = pytest.mark.django_db


@pytest.fixture
def export_root(settings, tmp_path) -> Path:
    settings.EXPORT_ROOT = tmp_path / "exports"
    return settings.EXPORT_ROOT


@pytest.fixture
def session(world, export_root, django_capture_on_commit_callbacks) -> Session:
    """A session mirrored and indexed through the real append path (tasks inline after each commit).

    Every append is indexed (deltaMessages 1), in chunks of a few messages without overlap; the
    transcript holds what the indexer leaves out on purpose: a tool result and a silent flush turn.
    """
    search = world.assistant.settings["memorySearch"]
    search["chunking"]["sessions"] = {"tokens": 40, "overlap": 0}
    search["sync"]["sessions"]["deltaMessages"] = 1
    world.assistant.save()
    session = factories.make_session(world.assistant, key="chat")
    with django_capture_on_commit_callbacks(execute=True):
        factories.add_messages(session, *chatter(4, words=8))
        factories.add_messages(
            session, assistant(calls=[tool_call("c1")]), tool_result("c1", "TOOL OUTPUT"), user("thanks")
        )
        store_messages(
            session.pk,
            [
                MessageInput(role="user", content="Pre-compaction memory flush. Store durable memories now."),
                MessageInput(role="assistant", content=[{"type": "text", "text": "NO_REPLY"}]),
            ],
            flush_turn=True,
        )
    session.refresh_from_db()
    return session


def check(*args: str) -> tuple[int, dict[str, Any]]:
    """Run the command; return its exit status and its JSON."""
    out = StringIO()
    try:
        call_command("check_mirrors", *args, stdout=out)
        status = 0
    except SystemExit as exit:
        status = int(exit.code or 0)
    return status, json.loads(out.getvalue())


def problems(**counts: int) -> dict[str, int]:
    return {name: counts.get(name, 0) for name in PROBLEMS}


def transcript_file(export_root: Path, session: Session) -> Path:
    return export_root / "acme" / "helper" / "sessions" / exports.session_file_name(session.key)


def test_a_mirrored_and_indexed_session_passes(session) -> None:
    chunks = MemoryChunk.objects.filter(source=Source.SESSIONS, session_pk=session.pk)
    assert chunks.count() > 1  # several chunks, so the ones below can go missing one by one

    status, report = check("--assistant", "acme/helper")

    assert status == 0
    assert report == {
        "sessions_checked": 1,
        "problems": problems(),
        "pending": dict.fromkeys(PENDING, 0),
    }


def test_a_truncated_export_file_is_missing_lines(session, export_root) -> None:
    path = transcript_file(export_root, session)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-3]))

    status, report = check()

    assert status == 1
    assert report["problems"] == problems(sessions_export_differs=1, export_missing_lines=3)


def test_a_torn_last_line_is_an_extra_line_and_a_missing_one(session, export_root) -> None:
    path = transcript_file(export_root, session)
    path.write_bytes(path.read_bytes()[:-20])

    status, report = check()

    assert status == 1
    assert report["problems"] == problems(
        sessions_export_differs=1, export_missing_lines=1, export_extra_lines=1
    )


def test_a_duplicated_export_line_is_reported(session, export_root) -> None:
    path = transcript_file(export_root, session)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:3], lines[2], *lines[3:]]))

    status, report = check()

    assert status == 1
    assert report["problems"] == problems(sessions_export_differs=1, export_duplicated_lines=1)


def test_a_missing_export_file_misses_every_line(session, export_root) -> None:
    path = transcript_file(export_root, session)
    line_count = len(path.read_bytes().splitlines())
    path.unlink()

    status, report = check()

    assert status == 1
    assert report["problems"] == problems(
        sessions_export_differs=1, export_missing_files=1, export_missing_lines=line_count
    )


def test_a_deleted_chunk_loses_the_messages_it_alone_cited(session) -> None:
    chunks = MemoryChunk.objects.filter(source=Source.SESSIONS, session_pk=session.pk).order_by("start_line")
    deleted = chunks.first()
    assert deleted is not None
    others = {seq for chunk in chunks.exclude(pk=deleted.pk) for seq in chunk.line_numbers}
    lost = set(deleted.line_numbers) - others
    assert lost
    deleted.delete()

    status, report = check()

    assert status == 1
    assert report["problems"] == problems(index_messages_lost=len(lost))


def test_a_chunk_stored_twice_is_a_duplicate(session) -> None:
    chunk = MemoryChunk.objects.filter(source=Source.SESSIONS, session_pk=session.pk).first()
    assert chunk is not None
    chunk.pk = None
    chunk.save()

    status, report = check()

    assert status == 1
    assert report["problems"] == problems(sessions_index_duplicated=1, index_duplicated_chunks=1)


def test_an_index_behind_when_it_is_due_is_a_problem(session) -> None:
    # Two messages arrive and are exported, but their index job never runs (a lost task).
    factories.add_messages(session, user("where is the walrus?"), assistant("in the attic"))
    exports.export_session(session.pk)

    status, report = check()

    assert status == 1
    assert report["problems"] == problems(sessions_index_behind=1, index_messages_behind=2)


def test_an_index_below_the_thresholds_is_only_pending(session, world) -> None:
    world.assistant.settings["memorySearch"]["sync"]["sessions"]["deltaMessages"] = 50
    world.assistant.save()
    factories.add_messages(session, user("where is the walrus?"))
    exports.export_session(session.pk)

    status, report = check()

    assert status == 0
    assert report["problems"] == problems()
    assert report["pending"] == {"sessions_index_waiting": 1, "index_messages_waiting": 1}


def test_a_compaction_since_the_last_index_makes_it_due(session, world) -> None:
    world.assistant.settings["memorySearch"]["sync"]["sessions"]["deltaMessages"] = 50
    world.assistant.save()
    [added] = factories.add_messages(session, user("where is the walrus?"))
    factories.add_compaction(session, first_kept=added)
    exports.export_session(session.pk)

    status, report = check()

    assert status == 1
    assert report["problems"] == problems(sessions_index_behind=1, index_messages_behind=1)


def test_every_assistant_is_checked_and_an_unindexed_session_is_behind(
    session, world, django_capture_on_commit_callbacks
) -> None:
    IndexedSource.objects.filter(source=Source.SESSIONS).delete()
    MemoryChunk.objects.filter(source=Source.SESSIONS).delete()
    with django_capture_on_commit_callbacks(execute=True):
        factories.make_session(world.other_assistant, key="elsewhere")  # mirrored: its header alone

    status, report = check()

    assert status == 1
    assert report["sessions_checked"] == 2
    # 8 chatter messages and "thanks": not the tool call without text, its result or the flush turn.
    assert report["problems"] == problems(sessions_index_behind=1, index_messages_behind=9)


def test_an_unknown_assistant_is_refused() -> None:
    with pytest.raises(CommandError, match="No assistant 'nobody' in team 'acme'"):
        call_command("check_mirrors", "--assistant", "acme/nobody")
