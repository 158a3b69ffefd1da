"""Incremental transcript exports: appends are byte-identical to a full rewrite, crashes are repaired."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from openclaw_site.teams.assistant_settings import validate_settings
from sessions_app.compaction.compact import compact_session
from sessions_app.compaction.errors import CompactionRefused
from sessions_app.messages import MessageInput
from sessions_app.models import Session, SessionExport
from sessions_app.turn.model_output import store_messages
from sessions_app.workspace import exports
from sessions_app.workspace.imports import import_workspace
from sessions_app.workspace.storage import LocalExportStorage
from tests import factories
from tests.db_support import other_connection
from tests.messages import assistant, chatter, tool_call, tool_result, user


@pytest.fixture
def export_root(settings, tmp_path) -> Path:
    settings.EXPORT_ROOT = tmp_path / "exports"
    return settings.EXPORT_ROOT


class RecordingStorage(LocalExportStorage):
    """The local storage, noting the bytes it writes and reads per file."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.written: dict[str, int] = {}
        self.read: dict[str, int] = {}

    def _note(self, name: str, chunks: Iterable[str]) -> list[str]:
        chunks = list(chunks)
        self.written[name] = self.written.get(name, 0) + sum(len(c.encode()) for c in chunks)
        return chunks

    def save_lines(self, name: str, chunks: Iterable[str]) -> None:
        super().save_lines(name, self._note(name, chunks))

    def append_lines(self, name: str, chunks: Iterable[str]) -> int:
        return super().append_lines(name, self._note(name, chunks))

    def read_head(self, name: str, length: int) -> bytes:
        head = super().read_head(name, length)
        self.read[name] = self.read.get(name, 0) + len(head)
        return head


def mirror_file(root: Path, session: Session) -> Path:
    return root / "acme" / "helper" / "sessions" / exports.session_file_name(session.key)


def full_export(session: Session, directory: Path) -> tuple[bytes, bytes]:
    """Return the transcript and sessions.json a from-scratch export of the assistant writes."""
    exports.export_assistant(session.assistant_id, storage=LocalExportStorage(directory), base="")
    sessions = directory / "sessions"
    return (sessions / exports.session_file_name(session.key)).read_bytes(), (
        sessions / "sessions.json"
    ).read_bytes()


def assert_mirror_is_a_full_rewrite(root: Path, session: Session, scratch: Path) -> None:
    session = Session.objects.select_related("assistant__team").get(pk=session.pk)
    exports.export_sessions_index(session.assistant_id)  # the sessions.json job an export queues
    mirrored = mirror_file(root, session).read_bytes()
    transcript, store = full_export(session, scratch)
    assert mirrored == "".join(exports.session_jsonl_lines(session)).encode()
    assert mirrored == transcript
    assert (root / "acme" / "helper" / "sessions" / "sessions.json").read_bytes() == store
    state = SessionExport.objects.get(session=session)
    assert (state.seq, state.size) == (session.last_seq, len(mirrored))


# --- Byte-identity under any mix of changes --------------------------------------------------------


def random_messages(rng: random.Random, count: int, step: int) -> list[dict]:
    messages: list[dict] = []
    for index in range(count):
        kind = rng.choice(["user", "assistant", "tool", "silent", "system"])
        text = f"step {step}.{index} " + rng.choice(["plain", "ünïcode 部署", 'quotes "and" \\ slashes', ""])
        if kind == "user":
            messages.append(user(text or "hi"))
        elif kind == "assistant":
            messages.append(assistant(text, usage={"input": rng.randint(1, 9000), "output": 12}))
        elif kind == "tool":
            call = f"call_{step}_{index}"
            messages.append(assistant(calls=[tool_call(call, "read", {"path": "a.md"})]))
            messages.append(tool_result(call, text or "ok", name="read", details={"bytes": 2}))
        elif kind == "silent":
            messages.append(assistant("NO_REPLY", silent=True))
        else:
            messages.append({"role": "system", "content": text or "Be brief."})
    return messages


def flush_turn(session: Session) -> None:
    inputs = [
        MessageInput(role="user", content="Pre-compaction memory flush. Store durable memories now."),
        MessageInput(role="assistant", content=[{"type": "text", "text": "NO_REPLY"}]),
    ]
    store_messages(session.pk, inputs, flush_turn=True)


def compact(session: Session) -> None:
    with suppress(CompactionRefused):  # nothing new to compact since the last one: a no-op step
        compact_session(session_id=session.pk, trigger="manual")


def reimport(session: Session, directory: Path) -> Session:
    """Round-trip the assistant through an exported workspace (--replace): a new session row, same key."""
    exports.export_assistant(session.assistant_id, storage=LocalExportStorage(directory), base="")
    import_workspace(directory=directory, team_slug="acme", assistant_slug="helper", replace=True)
    return Session.objects.get(assistant__slug="helper", key=session.key)


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [7, 2026])
def test_incremental_mirror_is_byte_identical_to_a_full_rewrite(seed, no_llm, world, export_root, tmp_path):
    rng = random.Random(seed)
    world.assistant.settings = validate_settings({"compaction": {"keepRecentTokens": 300}})
    world.assistant.save()
    session = factories.make_session(world.assistant, "agent:main:main", title="Property")
    factories.add_messages(session, *chatter(3))
    exports.export_session(session.pk)
    seen: Counter[str] = Counter()
    for step in range(30):
        inode = mirror_file(export_root, session).stat().st_ino
        # A late task: sometimes two changes reach the mirror in one export.
        changes = rng.choices(
            ["append", "compact", "flush", "reimport"], weights=[6, 2, 2, 1], k=rng.choice([1, 1, 2])
        )
        for change in changes:
            if change == "append":
                factories.add_messages(session, *random_messages(rng, rng.randint(1, 5), step))
            elif change == "compact":
                factories.add_messages(session, *chatter(2, start=step * 10))
                compact(session)
            elif change == "flush":
                flush_turn(session)
            else:
                session = reimport(session, tmp_path / f"import-{step}")
            seen[change] += 1
        assert exports.export_session(session.pk)
        assert_mirror_is_a_full_rewrite(export_root, session, tmp_path / f"full-{step}")
        if "reimport" not in changes:  # appended in place, never replaced
            assert mirror_file(export_root, session).stat().st_ino == inode
    assert set(seen) == {"append", "compact", "flush", "reimport"} and session.compactions.exists()


@pytest.mark.django_db
def test_a_session_exported_empty_gets_its_first_entries_appended(world, export_root, tmp_path):
    session = factories.make_session(world.assistant, "empty")
    exports.export_session(session.pk)
    assert SessionExport.objects.get(session=session).entry_id == ""  # the file holds only the header
    inode = mirror_file(export_root, session).stat().st_ino
    factories.add_messages(session, user("first"), assistant("second"))
    exports.export_session(session.pk)
    assert mirror_file(export_root, session).stat().st_ino == inode
    assert_mirror_is_a_full_rewrite(export_root, session, tmp_path / "full")


# --- Crash repair ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_crash_between_the_append_and_its_record_is_repaired(world, export_root, tmp_path, monkeypatch):
    session = factories.make_session(world.assistant, "chat")
    factories.add_messages(session, *chatter(2))
    exports.export_session(session.pk)
    recorded = SessionExport.objects.get(session=session)
    path = mirror_file(export_root, session)
    inode = path.stat().st_ino

    factories.add_messages(session, user("written, never recorded"), assistant("lost?"))

    def die_after_the_append(*args, **kwargs):
        raise RuntimeError("worker killed before the database update")

    monkeypatch.setattr(exports, "_record_export", die_after_the_append)
    with pytest.raises(RuntimeError):
        exports.export_session(session.pk)
    monkeypatch.undo()
    assert path.stat().st_size > recorded.size  # the lines reached the file ...
    assert b"written, never recorded" in path.read_bytes()
    assert SessionExport.objects.get(session=session).size == recorded.size  # ... the record did not

    factories.add_messages(session, user("after the restart"))
    exports.export_session(session.pk)
    text = path.read_text()
    assert text.count("written, never recorded") == 1 and "after the restart" in text
    assert path.stat().st_ino == inode  # cut back and appended, not rewritten
    assert_mirror_is_a_full_rewrite(export_root, session, tmp_path / "full")


@pytest.mark.django_db
def test_a_torn_last_line_is_cut_off(world, export_root, tmp_path):
    session = factories.make_session(world.assistant, "chat")
    factories.add_messages(session, user("one"))
    exports.export_session(session.pk)
    path = mirror_file(export_root, session)
    with path.open("a") as handle:
        handle.write('{"type":"message","id":"dead')  # a crash in the middle of an append
    exports.export_session(session.pk)  # nothing new: the tail is still cut off
    assert_mirror_is_a_full_rewrite(export_root, session, tmp_path / "a")
    factories.add_messages(session, user("two"))
    exports.export_session(session.pk)
    assert_mirror_is_a_full_rewrite(export_root, session, tmp_path / "b")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda path: path.unlink(), id="missing"),
        pytest.param(lambda path: path.write_bytes(path.read_bytes()[:-10]), id="shorter"),
        pytest.param(
            lambda path: path.write_bytes(path.read_bytes().replace(b"acme", b"ACME", 1)), id="head"
        ),
    ],
)
def test_a_file_unlike_its_record_is_rewritten(damage, world, export_root, tmp_path):
    session = factories.make_session(world.assistant, "chat")
    factories.add_messages(session, *chatter(2))
    exports.export_session(session.pk)
    damage(mirror_file(export_root, session))
    factories.add_messages(session, user("next"))
    exports.export_session(session.pk)
    assert_mirror_is_a_full_rewrite(export_root, session, tmp_path / "full")


@pytest.mark.django_db
def test_a_renamed_key_is_rewritten_under_its_new_name(
    world, export_root, tmp_path, django_capture_on_commit_callbacks
):
    session = factories.make_session(world.assistant, "old-key")
    factories.add_messages(session, user("one"))
    exports.export_session(session.pk)
    Session.objects.filter(pk=session.pk).update(key="new-key")
    session.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):  # the sessions.json job drops the old file
        exports.export_session(session.pk)
    assert not (export_root / "acme" / "helper" / "sessions" / "old-key.jsonl").exists()
    assert SessionExport.objects.get(session=session).file == "acme/helper/sessions/new-key.jsonl"
    assert_mirror_is_a_full_rewrite(export_root, session, tmp_path / "full")


# --- Concurrency -----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_exports_of_two_sessions_of_one_assistant_run_side_by_side(world, export_root):
    busy, other = (factories.make_session(world.assistant, key) for key in ("busy", "other"))
    exports.export_session(busy.pk)
    factories.add_messages(other, user("not held up"))
    with other_connection() as exporter:  # an export of `busy` in progress
        exporter.execute(
            "SELECT pg_advisory_lock_shared(hashtextextended(%s, 0)), pg_advisory_lock(hashtextextended(%s, 0))",
            [f"export:{world.assistant.pk}", f"export-session:{busy.pk}"],
        )
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '5s'")  # a wait for `busy`'s export would fail, not hang
        try:
            assert exports.export_session(other.pk)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
    assert "not held up" in mirror_file(export_root, other).read_text()


# --- Cost: bounded queries, only the new bytes -----------------------------------------------------


def export_one_more_message(world, export_root: Path, *, history: int) -> tuple[int, RecordingStorage]:
    """Export a session of ``history`` messages, append one, and return the queries of that export."""
    session = factories.make_session(world.assistant, f"long-{history}")
    factories.add_messages(session, *chatter(history // 2))
    exports.export_session(session.pk)
    path = mirror_file(export_root, session)
    before, inode = path.read_bytes(), path.stat().st_ino
    factories.add_messages(session, user(f"one more after {history}"))
    storage = RecordingStorage(export_root)
    with CaptureQueriesContext(connection) as queries:
        exports.export_session(session.pk, storage=storage)
    after = path.read_bytes()
    name = f"acme/helper/sessions/long-{history}.jsonl"
    assert after.startswith(before) and path.stat().st_ino == inode
    assert storage.written[name] == len(after) - len(before)  # only the new line was written
    header = "".join(exports.session_jsonl_lines(session)).splitlines(keepends=True)[0]
    assert storage.read[name] == len(header.encode())  # and of the old bytes only the header was read
    return len(queries), storage


@pytest.mark.django_db
def test_an_append_to_a_long_session_costs_the_same_as_to_a_short_one(world, export_root):
    short, _ = export_one_more_message(world, export_root, history=10)
    long, _ = export_one_more_message(world, export_root, history=1000)
    assert short == long
    assert short <= 12


@pytest.mark.django_db
def test_an_export_with_nothing_new_writes_nothing(world, export_root):
    session = factories.make_session(world.assistant, "chat")
    factories.add_messages(session, user("one"))
    factories.make_document(world.assistant, "MEMORY.md", "remembered")
    exports.export_session(session.pk)
    storage = RecordingStorage(export_root)
    exports.export_session(session.pk, storage=storage)
    exports.export_sessions_index(world.assistant.pk, storage=storage)
    exports.export_assistant_metadata(world.assistant.pk, storage=storage)
    assert storage.written == {}


@pytest.mark.django_db
def test_index_and_metadata_are_rewritten_when_they_change(world, export_root):
    session = factories.make_session(world.assistant, "chat")
    exports.export_session(session.pk)
    base = export_root / "acme" / "helper"
    world.assistant.name = "Renamed"
    world.assistant.save()
    Session.objects.filter(pk=session.pk).update(title="Now titled")
    exports.export_assistant_metadata(world.assistant.pk)
    exports.export_sessions_index(world.assistant.pk)
    assert json.loads((base / "assistant.json").read_text())["name"] == "Renamed"
    assert json.loads((base / "sessions" / "sessions.json").read_text())["chat"]["label"] == "Now titled"


@pytest.mark.django_db
def test_an_export_to_another_directory_records_nothing(world, tmp_path):
    session = factories.make_session(world.assistant, "chat")
    factories.add_messages(session, user("one"))
    exports.export_assistant(world.assistant.pk, storage=LocalExportStorage(tmp_path), base="")
    assert not SessionExport.objects.exists()


# --- Storage ---------------------------------------------------------------------------------------


def test_storage_appends_truncates_and_reads_heads(tmp_path):
    storage = LocalExportStorage(tmp_path)
    assert storage.size("s/a.jsonl") is None and storage.read_head("s/a.jsonl", 4) == b""
    with pytest.raises(FileNotFoundError):  # only an existing file is appended to
        storage.append_lines("s/a.jsonl", ["x\n"])
    storage.save_text("s/a.jsonl", "head\n")
    assert storage.append_lines("s/a.jsonl", ["ü\n", "two\n"]) == 12 == storage.size("s/a.jsonl")
    assert storage.read_head("s/a.jsonl", 5) == b"head\n" and storage.read_head("s/a.jsonl", 99) == (
        "head\nü\ntwo\n".encode()
    )
    storage.truncate("s/a.jsonl", 5)
    assert (tmp_path / "s" / "a.jsonl").read_text() == "head\n"
