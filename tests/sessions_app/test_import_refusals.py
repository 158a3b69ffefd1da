"""Every refused workspace upload says "Nothing was imported" and why, never a 500 (docs/design.md,
Limits and refusals): values the API refuses, paths the mirror cannot hold, names a zip mangles or a
file system refuses, and sizes declared over the limit before anything is unpacked.
"""

from __future__ import annotations

import html
import io
import json
import zipfile

import pytest

from memory_app.models import MemoryDocument
from openclaw_site.models import Assistant
from sessions_app.models import Session
from sessions_app.workspace import archives
from tests.views_support import signed_in

pytestmark = pytest.mark.django_db

TRANSCRIPT = "\n".join(
    json.dumps(line)
    for line in (
        {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z"},
        {
            "type": "message",
            "id": "m1",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": "hi", "timestamp": 1767225601000},
        },
    )
)


def zip_of(files: dict[str, str]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    buffer.seek(0)
    buffer.name = "workspace.zip"
    return buffer


def upload(world, archive: io.BytesIO) -> str:
    response = signed_in(world.alice).post(
        "/workspace/import/", {"assistant": "imported", "archive": archive}
    )
    assert response.status_code == 422, response.status_code
    return html.unescape(response.content.decode())


def assert_nothing_imported(page: str, why: str) -> None:
    assert "Nothing was imported" in page and why in page, page[page.find("Nothing") :][:400]
    assert not Assistant.objects.filter(slug="imported").exists()
    assert not Session.objects.filter(assistant__slug="imported").exists()
    assert not MemoryDocument.objects.filter(assistant__slug="imported").exists()


@pytest.mark.parametrize(
    ("files", "why"),
    [
        pytest.param(
            {"sessions/a%00b.jsonl": TRANSCRIPT}, r"session key 'a\x00b'", id="percent-00-file-name"
        ),
        pytest.param(
            {
                "sessions/s1.jsonl": TRANSCRIPT,
                "sessions/sessions.json": json.dumps({"s1": {"sessionId": "s1", "totalTokens": 10**30}}),
            },
            "is out of range",
            id="huge-count-in-sessions-json",
        ),
        pytest.param(
            {
                "sessions/s1.jsonl": TRANSCRIPT,
                "sessions/sessions.json": '{"s1": {"sessionId": "s1", "totalTokens": Infinity}}',
            },
            "is out of range",
            id="infinite-count",
        ),
        pytest.param(
            {"assistant.json": json.dumps({"context_window": 10**30})},
            "context_window must be an integer from 16000",
            id="huge-window",
        ),
        pytest.param(
            {"assistant.json": json.dumps({"timezone": "Mars/Olympus"})},
            "is not an IANA time zone",
            id="time-zone",
        ),
        pytest.param(
            {"sessions/a b.jsonl": TRANSCRIPT}, "session key 'a b'", id="session-key-the-api-refuses"
        ),
        pytest.param(
            {"memory/Plans.md": "a", "memory/plans.md": "b"}, "differ only in case", id="case-twins"
        ),
        pytest.param(
            {"memory/" + "é" * 125 + ".md": "a"}, "a file or folder name may have at most 240", id="long-name"
        ),
    ],
)
def test_a_refused_value_imports_nothing_and_says_why(world, files, why):
    assert_nothing_imported(upload(world, zip_of(files)), why)


def test_a_file_and_a_folder_of_one_name_import_nothing(world):
    archive = zip_of({"memory/x.md": "x", "memory/x.md/y.md": "y"})
    assert_nothing_imported(upload(world, archive), "memory/x.md/y.md: cannot be unpacked")


def test_a_name_too_long_for_the_file_system_imports_nothing(world):
    archive = zip_of({"memory/" + "n" * 300 + ".md": "x"})
    assert_nothing_imported(upload(world, archive), "cannot be unpacked (File name too long)")


def test_a_name_the_zip_does_not_mark_as_utf8_imports_nothing(world):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("memory/caf\u00e9.md")
        archive.writestr(info, "x")
    raw = buffer.getvalue()
    # Clear the UTF-8 flag (bit 11) the writer set for the non-ASCII name, as old zip tools do.
    patched = bytearray(raw)
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = raw.find(signature)
        patched[at + offset + 1] &= ~0x08
    archive_file = io.BytesIO(bytes(patched))
    archive_file.name = "workspace.zip"

    assert_nothing_imported(upload(world, archive_file), "does not mark this name as UTF-8")


def test_a_zip_declaring_more_than_the_limit_is_refused_before_unpacking(world, monkeypatch, tmp_path):
    monkeypatch.setattr(archives, "MAX_UNPACKED_BYTES", 1000)
    unpacked: list[str] = []
    monkeypatch.setattr(archives, "_copy", lambda *args: unpacked.append("x") or 0)

    page = upload(world, zip_of({"MEMORY.md": "a" * 600, "memory/b.md": "b" * 600}))

    assert_nothing_imported(page, "the zip unpacks to 1200 bytes; at most 1000")
    assert unpacked == []  # nothing was written before the refusal
