"""Paths the export mirror can hold (docs/design.md, Limits and refusals; Exports).

A path that cannot live on the mirror's file system is refused when it is written, on every
surface, with the reason; one document the file system refuses anyway (written before the rule)
never stops the rest of the mirror and fails its job with a message; appends keep the size limit.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from memory_app.documents import Provenance, append_to_document
from memory_app.models import Author, MemoryDocument, MemoryRevision
from memory_app.paths import MAX_SEGMENT_BYTES, InvalidPath, mirror_clash, validate_memory_path
from openclaw_site.errors import DomainError
from openclaw_site.jobs.tasks import TaskOwner, enqueue
from openclaw_site.models import TaskRecord
from sessions_app.workspace import exports
from sessions_app.workspace.archives import workspace_zip
from sessions_app.workspace.storage import LocalExportStorage
from tests import factories
from tests.api_support import API, assert_error
from tests.mcp_client import call_tool, mcp_url, tool_error

# --- the rule (pure) --------------------------------------------------------------------------


def test_a_segment_may_have_at_most_240_bytes():
    fits = "memory/" + "é" * ((MAX_SEGMENT_BYTES - 3) // 2) + ".md"
    assert validate_memory_path(fits) == fits
    with pytest.raises(InvalidPath, match="bytes in UTF-8; a file or folder name may have at most 240"):
        validate_memory_path("memory/" + "é" * 120 + ".md")  # 243 bytes


@pytest.mark.parametrize(
    ("path", "others", "why"),
    [
        ("memory/x.md/y.md", ["memory/x.md"], "is a document, so it cannot also be a folder"),
        ("memory/x.md", ["memory/x.md/y.md"], "is inside a folder named"),
        ("memory/Notes.md", ["memory/notes.md"], "differs only in case"),
        ("memory/A/b.md", ["memory/a.md/c.md", "memory/a/c.md"], None),
        ("memory/x.md", ["memory/x.md", "memory/x.mdx/y.md"], None),
    ],
)
def test_mirror_clashes_say_why(path, others, why):
    reason = mirror_clash(path, others)
    assert (reason is None) if why is None else (why in (reason or ""))


# --- refused when written, on every surface -----------------------------------------------------


@pytest.mark.django_db
def test_rest_refuses_a_file_where_a_folder_must_be_and_case_twins(world, api):
    factories.make_document(world.assistant, "memory/x.md", "x\n")
    factories.make_document(world.assistant, "memory/plans.md", "p\n")

    under_a_file = api.post(
        f"{API}/assistants/helper/memory/", {"path": "memory/x.md/y.md", "content": "y\n"}, format="json"
    )
    twin = api.put(f"{API}/assistants/helper/memory/memory/Plans.md", {"content": "P\n"}, format="json")

    error = assert_error(under_a_file, 400, "invalid_path")
    assert "'memory/x.md' is a document" in error["message"] and error["details"]["field"] == "path"
    assert "differs only in case" in assert_error(twin, 400, "invalid_path")["details"]["reason"]
    assert sorted(MemoryDocument.objects.values_list("path", flat=True)) == ["memory/plans.md", "memory/x.md"]


@pytest.mark.django_db(transaction=True)
def test_mcp_refuses_paths_the_mirror_cannot_hold(asgi_live_server, world, acme_secret):
    factories.make_document(world.assistant, "memory/x.md/y.md", "y\n")
    long_name = "memory/" + "é" * 125 + ".md"  # 135 characters, a 253-byte file name

    clash = tool_error(
        call_tool(
            mcp_url(asgi_live_server.url),
            acme_secret,
            "memory_write",
            {"mode": "replace", "path": "memory/x.md", "content": "x\n"},
        )
    )
    too_long = tool_error(
        call_tool(
            mcp_url(asgi_live_server.url),
            acme_secret,
            "memory_write",
            {"mode": "replace", "path": long_name, "content": "x\n"},
        )
    )

    assert clash["code"] == "invalid_path" and "is inside a folder named 'memory/x.md'" in clash["message"]
    assert too_long["code"] == "invalid_path" and "at most 240" in too_long["message"]
    assert list(MemoryDocument.objects.values_list("path", flat=True)) == ["memory/x.md/y.md"]


@pytest.mark.django_db(transaction=True)
def test_mcp_append_stops_at_the_document_limit(asgi_live_server, world, acme_secret, settings):
    settings.MAX_MEMORY_DOCUMENT_BYTES = 1000
    url = mcp_url(asgi_live_server.url)
    first = call_tool(url, acme_secret, "memory_write", {"mode": "append", "content": "a" * 600})
    assert not first.is_error

    error = tool_error(call_tool(url, acme_secret, "memory_write", {"mode": "append", "content": "b" * 600}))

    assert error["code"] == "payload_too_large" and error["details"]["limit"] == 1000
    assert "Nothing was written" in error["message"]
    (document,) = MemoryDocument.objects.all()
    assert document.content == "a" * 600
    assert all(len(row.content) <= 1000 for row in MemoryRevision.objects.all())


@pytest.mark.django_db
def test_append_of_the_model_or_a_flush_keeps_the_limit_too(world, settings):
    settings.MAX_MEMORY_DOCUMENT_BYTES = 100
    provenance = Provenance(author=Author.FLUSH)
    append_to_document(
        assistant=world.assistant, path="memory/n.md", addition="x" * 90, provenance=provenance
    )
    with pytest.raises(DomainError) as refused:
        append_to_document(
            assistant=world.assistant, path="memory/n.md", addition="y" * 20, provenance=provenance
        )
    assert (refused.value.code, refused.value.status) == ("payload_too_large", 413)
    assert MemoryDocument.objects.get().content == "x" * 90


# --- one document the file system refuses never stops the rest ---------------------------------


def clashing_documents(world) -> None:
    """Documents written before the rule: stored rows, no write path ran (no check, no export)."""
    for path in ("memory/ok.md", "memory/x.md", "memory/x.md/y.md"):
        MemoryDocument.objects.create(assistant=world.assistant, path=path, content=f"{path}\n")


@pytest.mark.django_db
def test_the_mirror_writes_everything_else_and_says_what_it_could_not(world, tmp_path):
    clashing_documents(world)
    session = factories.make_session(world.assistant, "main")
    factories.add_messages(session, {"role": "user", "content": "hello"})
    storage = LocalExportStorage(tmp_path)

    with pytest.raises(exports.MirrorIncomplete) as incomplete:
        exports.export_assistant(world.assistant.pk, storage=storage)

    assert "memory/x.md/y.md: another document is a file where this path needs a folder" in str(
        incomplete.value
    )
    base = tmp_path / "acme" / "helper"
    assert (base / "memory" / "ok.md").read_text() == "memory/ok.md\n"
    assert (base / "sessions" / "sessions.json").exists() and (base / "sessions" / "main.jsonl").exists()
    assert (base / "assistant.json").exists()


@pytest.mark.django_db
def test_the_failure_shows_on_the_jobs_page_and_the_zip_still_downloads(
    world, export_root, django_capture_on_commit_callbacks
):
    clashing_documents(world)

    with django_capture_on_commit_callbacks(execute=True):
        record = enqueue(
            "sessions_app.tasks.export_assistant",
            world.assistant.pk,
            owner=TaskOwner.for_assistant(world.assistant),
        )
    record = TaskRecord.objects.get(pk=record.pk)
    assert record.state == "failed" and "memory/x.md/y.md" in record.error and "Rename them" in record.error

    with zipfile.ZipFile(workspace_zip(world.assistant)) as archive:
        names = archive.namelist()
    assert "memory/ok.md" in names and "memory/x.md" in names and "memory/x.md/y.md" not in names


@pytest.fixture
def export_root(settings, tmp_path) -> Path:
    settings.EXPORT_ROOT = tmp_path / "exports"
    return settings.EXPORT_ROOT
