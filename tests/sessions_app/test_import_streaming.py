"""A workspace upload is read with bounded memory (docs/design.md, Limits and refusals): the zip
member by member in bounded chunks, never a whole member at once, each document and transcript
read just before it is written; a member whose header understates its data is refused at its
declared size; a member declaring more than any workspace file may hold is refused unpacked.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from typing import Any

import pytest

from memory_app.models import MemoryDocument
from openclaw_site.models import Assistant
from sessions_app.models import Message
from sessions_app.workspace import archives, imports
from tests.sessions_app.test_import_refusals import assert_nothing_imported, upload, zip_of
from tests.views_support import signed_in

pytestmark = pytest.mark.django_db

DOCUMENT_BYTES = 1_500_000  # within OPENCLAW_MAX_MEMORY_DOCUMENT_BYTES (2,000,000), over one chunk
MESSAGE_CHARS = 700_000  # within OPENCLAW_MAX_MESSAGE_BYTES (1,000,000)


def large_document(word: str) -> str:
    line = f"{word} " * 19 + "\n"
    return line * (DOCUMENT_BYTES // len(line))


def transcript(session_id: str, words: str) -> str:
    lines: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": session_id, "timestamp": "2026-01-01T00:00:00.000Z"}
    ]
    for n in range(2):
        lines.append(
            {
                "type": "message",
                "id": f"{session_id}-m{n}",
                "parentId": lines[-1].get("id") if n else None,
                "timestamp": f"2026-01-01T00:00:0{n + 1}.000Z",
                "message": {"role": "user", "content": words * (MESSAGE_CHARS // len(words))},
            }
        )
    return "\n".join(json.dumps(line) for line in lines)


def spy(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, record: Callable[..., Any]) -> None:
    """Record each call of ``owner.name`` (what ``record`` makes of its arguments), then make it."""
    real = getattr(owner, name)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        record(*args, **kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, recorded)


def test_a_large_workspace_is_unpacked_in_chunks_and_imported_one_file_at_a_time(
    world, monkeypatch, no_embeddings
):
    files = {
        "MEMORY.md": large_document("harbour"),
        "memory/ferries.md": large_document("ferry"),
        "sessions/one.jsonl": transcript("one", "tide "),
        "sessions/two.jsonl": transcript("two", "gull "),
    }
    archive = zip_of_deflated(files)
    reads: list[int] = []
    spy(monkeypatch, zipfile.ZipExtFile, "read", lambda self, n=-1: reads.append(n))
    monkeypatch.setattr(zipfile.ZipFile, "read", forbidden)  # a whole member at once
    events: list[str] = []
    spy(monkeypatch, imports, "_read_text", lambda d, f, name, **_: events.append(f"read {name}"))
    spy(monkeypatch, imports, "write_document", lambda **kw: events.append(f"write {kw['path']}"))
    spy(monkeypatch, imports, "_import_session", lambda a, f, *_: events.append(f"write {f.filename}"))

    response = signed_in(world.alice).post("/workspace/import/", {"assistant": "big", "archive": archive})

    assert response.status_code == 302, response.content.decode()[:500]
    assert reads and all(0 < n <= archives._COPY_CHUNK for n in reads)  # bounded, never read(-1)
    assert len(reads) > len(files)  # a member over one chunk took several reads
    assert events == [
        "read MEMORY.md",
        "write MEMORY.md",
        "read memory/ferries.md",
        "write memory/ferries.md",
        "read sessions/one.jsonl",
        "write one.jsonl",
        "read sessions/two.jsonl",
        "write two.jsonl",
    ]
    assistant = Assistant.objects.get(team=world.acme, slug="big")
    stored = dict(MemoryDocument.objects.filter(assistant=assistant).values_list("path", "content"))
    assert stored == {"MEMORY.md": files["MEMORY.md"], "memory/ferries.md": files["memory/ferries.md"]}
    messages = Message.objects.filter(session__assistant=assistant)
    assert messages.count() == 4
    assert {len(m.content) for m in messages} == {MESSAGE_CHARS}  # a string content stays one


def forbidden(*args: Any, **kwargs: Any) -> bytes:
    raise AssertionError("a whole zip member was read into memory")


def zip_of_deflated(files: dict[str, str]) -> Any:
    archive = zip_of({})
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as writer:
        for name, text in files.items():
            writer.writestr(name, text)
    archive.seek(0)
    return archive


def understated(name: str, data: bytes, declared: int) -> Any:
    """A zip whose one member's headers (local and central) declare ``declared`` bytes of ``data``."""
    archive = zip_of_deflated({name: data.decode()})
    raw = bytearray(archive.getvalue())
    local, central = raw.find(b"PK\x03\x04"), raw.find(b"PK\x01\x02")
    raw[local + 22 : local + 26] = declared.to_bytes(4, "little")  # uncompressed size
    raw[central + 24 : central + 28] = declared.to_bytes(4, "little")
    forged = zip_of({})
    forged.seek(0)
    forged.truncate()
    forged.write(bytes(raw))
    forged.seek(0)
    return forged


def test_a_member_whose_header_understates_its_data_is_refused_at_its_declared_size(world, monkeypatch):
    bomb = understated("memory/bomb.md", b"a" * 20_000_000, declared=1000)  # 20 MB in a 20 KB zip
    unpacked: list[int] = []
    real_copy = archives._copy

    def counted(archive: Any, member: zipfile.ZipInfo, destination: Any, budget: int) -> int:
        try:
            return real_copy(archive, member, destination, budget)
        finally:
            unpacked.append(destination.stat().st_size)

    monkeypatch.setattr(archives, "_copy", counted)

    page = upload(world, bomb)

    assert_nothing_imported(
        page, "memory/bomb.md: its data is not what the zip's header declares (1000 bytes)"
    )
    assert unpacked and max(unpacked) <= 1000  # it never wrote past what the header declared


def test_a_member_declaring_more_than_any_workspace_file_may_hold_is_refused_unpacked(
    world, monkeypatch, settings
):
    settings.MAX_MEMORY_DOCUMENT_BYTES, settings.MAX_IMPORT_FILE_BYTES = 1024, 2048
    unpacked: list[str] = []
    monkeypatch.setattr(archives, "_copy", lambda *args: unpacked.append("x") or 0)

    page = upload(world, zip_of({"MEMORY.md": "small", "sessions/huge.jsonl": "x" * 3000}))

    assert_nothing_imported(
        page, "sessions/huge.jsonl unpacks to 3000 bytes; no workspace file may be larger than 2048"
    )
    assert unpacked == []
