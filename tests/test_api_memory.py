"""Memory documents over the API: paths, line ranges, stale writes, revisions with provenance."""

from __future__ import annotations

import pytest

from memory_app.models import MemoryDocument, MemoryRevision, content_hash
from memory_app.signals import memory_document_changed
from tests import factories
from tests.api_support import API, assert_error, login_client, snapshot

pytestmark = pytest.mark.django_db
BASE = f"{API}/assistants/helper/memory/"


def test_create_list_and_read_a_document(api, world):
    response = api.post(
        BASE, {"path": "memory/2026-01-02.md", "content": "# Jan 2\n- a\n- b\n"}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["path"] == "memory/2026-01-02.md" and body["lines"] == 3 and body["size"] == 16
    assert body["content_hash"] == content_hash("# Jan 2\n- a\n- b\n") and isinstance(body["revision"], int)
    factories.make_document(world.assistant, "MEMORY.md", "naïve 記憶")  # multi-byte, no final newline
    listing = api.get(BASE).json()["documents"]
    assert [(d["path"], d["size"], d["lines"]) for d in listing] == [
        ("MEMORY.md", len("naïve 記憶".encode()), 1),
        ("memory/2026-01-02.md", 16, 3),
    ]
    assert set(listing[0]) == {"path", "size", "lines", "updated_at", "created_at", "content_hash"}
    full = api.get(BASE + "memory/2026-01-02.md").json()
    assert full["content"] == "# Jan 2\n- a\n- b\n"


def test_a_line_range_reads_like_memory_get(api, world):
    factories.make_document(world.assistant, "memory/notes.md", "l1\nl2\nl3\nl4\nl5")
    body = api.get(BASE + "memory/notes.md?from=2&lines=3").json()
    assert (body["text"], body["from"], body["lines"], body["total_lines"]) == ("l2\nl3\nl4", 2, 3, 5)
    assert api.get(BASE + "memory/notes.md?from=4").json()["text"] == "l4\nl5"
    assert api.get(BASE + "memory/notes.md?lines=1").json()["text"] == "l1"
    assert api.get(BASE + "memory/notes.md?from=99").json()["text"] == ""
    assert_error(api.get(BASE + "memory/notes.md?from=0"), 400, "invalid_parameter")
    assert_error(api.get(BASE + "memory/notes.md?lines=x"), 400, "invalid_parameter")


def test_creating_an_existing_path_is_a_409(api, world):
    document = factories.make_document(world.assistant, "MEMORY.md", "original")
    current = MemoryRevision.objects.get(document=document).pk
    before = snapshot()
    error = assert_error(
        api.post(BASE, {"path": "MEMORY.md", "content": "other"}, format="json"), 409, "document_exists"
    )
    assert error["message"] == f"MEMORY.md already exists (revision {current}); use PUT to replace it."
    assert error["details"] == {"field": "path", "path": "MEMORY.md", "current_revision": current}
    assert snapshot() == before


def test_put_creates_then_replaces(api):
    created = api.put(BASE + "memory/topic/deep.md", {"content": "v1\n"}, format="json")
    assert created.status_code == 201
    updated = api.put(BASE + "memory/topic/deep.md", {"content": "v2\n"}, format="json")
    assert updated.status_code == 200 and updated.json()["content"] == "v2\n"
    unchanged = api.put(BASE + "memory/topic/deep.md", {"content": "v2\n"}, format="json")
    assert unchanged.status_code == 200 and unchanged.json()["revision"] is None
    assert MemoryRevision.objects.filter(path="memory/topic/deep.md").count() == 2


def test_put_with_a_stale_hash_is_a_409_and_writes_nothing(api, world):
    document = factories.make_document(world.assistant, "MEMORY.md", "v1")
    read_hash = document.content_hash
    assert (
        api.put(BASE + "MEMORY.md", {"content": "v2", "expected_hash": read_hash}, format="json").status_code
        == 200
    )
    before = snapshot()
    error = assert_error(
        api.put(BASE + "MEMORY.md", {"content": "v3", "expected_hash": read_hash}, format="json"),
        409,
        "stale_write",
    )
    assert error["message"] == "MEMORY.md changed since you read it; read it again and retry."
    assert error["details"] == {
        "path": "MEMORY.md",
        "expected_hash": read_hash,
        "current_hash": content_hash("v2"),
        "current_revision": MemoryRevision.objects.filter(path="MEMORY.md").latest("pk").pk,
    }
    assert snapshot() == before
    assert MemoryDocument.objects.get(path="MEMORY.md").content == "v2"
    # An empty expected_hash means "must not exist yet".
    assert_error(
        api.put(BASE + "MEMORY.md", {"content": "v4", "expected_hash": ""}, format="json"), 409, "stale_write"
    )
    assert (
        api.put(BASE + "memory/new.md", {"content": "n", "expected_hash": ""}, format="json").status_code
        == 201
    )


def test_delete_keeps_the_revisions(api, world):
    factories.make_document(world.assistant, "memory/gone.md", "bye")
    assert api.delete(BASE + "memory/gone.md").status_code == 204
    assert not MemoryDocument.objects.filter(path="memory/gone.md").exists()
    assert_error(api.get(BASE + "memory/gone.md"), 404, "not_found")
    revisions = api.get(BASE + "memory/gone.md/revisions/").json()["revisions"]
    assert [r["action"] for r in revisions] == ["delete", "create"]
    assert_error(api.delete(BASE + "memory/gone.md"), 404, "not_found")


def test_revisions_carry_provenance(world, scoped_api):
    bob = login_client(world.bob)
    bob.post(BASE, {"path": "MEMORY.md", "content": "by bob"}, format="json")
    key_client = scoped_api("memory:read", "memory:write")
    key_client.put(BASE + "MEMORY.md", {"content": "by a key"}, format="json")
    body = key_client.get(BASE + "MEMORY.md/revisions/?include_content=1").json()
    newest, oldest = body["revisions"]
    assert (oldest["author"], oldest["user"], oldest["action"], oldest["content"]) == (
        "user",
        "bob",
        "create",
        "by bob",
    )
    assert (newest["author"], newest["user"], newest["action"]) == ("user", None, "update")
    assert newest["note"].startswith("api key test key")
    assert set(newest) >= {"session_pk", "message_pk", "created_at", "content_hash", "size"}
    assert "content" not in key_client.get(BASE + "MEMORY.md/revisions/").json()["revisions"][0]
    assert body["count"] == 2


def test_revisions_show_agent_provenance(api, world):
    from memory_app.documents import Provenance, append_to_document

    append_to_document(
        assistant=world.assistant,
        path="memory/2026-03-04.md",
        addition="- note",
        provenance=Provenance(author="flush", session_pk=7, message_pk=42),
    )
    [revision] = api.get(BASE + "memory/2026-03-04.md/revisions/").json()["revisions"]
    assert (revision["author"], revision["action"], revision["session_pk"], revision["message_pk"]) == (
        "flush",
        "append",
        7,
        42,
    )


def test_revisions_of_an_unknown_path_are_a_404(api):
    assert_error(api.get(BASE + "memory/never.md/revisions/"), 404, "not_found")


BAD_PATHS = [
    "../x.md",
    "/etc/passwd",
    "memory/x.txt",
    "notes.md",
    "memory/../MEMORY.md",
    "memory/.md",
    "C:/memory/x.md",
    "memory\\x.md",
    "",
    # Lookalikes, invisible characters, encodings and device names (docs/design.md, Limits and refusals).
    "memory/\u2024\u2024/MEMORY.md",
    "memory/\uff0e\uff0e/x.md",
    "memory/x\u202egnp.md",
    "memory/zero\u200bwidth.md",
    "memory/CON.md",
    "memory/lpt1.notes.md",
    "memory/%2e%2e/x.md",
    "memory/trailing./x.md",
    "memory/ｆｕｌｌ.md",
]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_bad_paths_in_the_body_are_a_400(api, path):
    before = snapshot()
    error = assert_error(api.post(BASE, {"path": path, "content": "x"}, format="json"), 400, "invalid_path")
    assert error["details"]["reason"] and error["details"]["path"] == path
    assert snapshot() == before


@pytest.mark.parametrize(
    "path",
    [
        "../x.md",
        "/etc/passwd",
        "memory/x.txt",
        "notes.md",
        "memory/./a.md",
        "memory/%252e%252e/x.md",
        "memory/nul.md",
    ],
)
def test_bad_paths_in_the_url_are_a_400(api, path):
    before = snapshot()
    assert_error(api.put(BASE + path, {"content": "x"}, format="json"), 400, "invalid_path")
    assert_error(api.get(BASE + path), 400, "invalid_path")
    assert_error(api.delete(BASE + path), 400, "invalid_path")
    assert snapshot() == before


def test_an_oversized_document_is_a_413(api, settings):
    settings.MAX_MEMORY_DOCUMENT_BYTES = 1024
    assert_error(
        api.post(BASE, {"path": "MEMORY.md", "content": "x" * 2000}, format="json"), 413, "payload_too_large"
    )
    assert_error(
        api.put(BASE + "MEMORY.md", {"content": "x" * 2000}, format="json"), 413, "payload_too_large"
    )
    assert not MemoryDocument.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"content": "x"},
        {"path": "MEMORY.md"},
        {"path": "MEMORY.md", "content": 3},
        {"path": "MEMORY.md", "content": "x", "author": "admin"},
    ],
)
def test_invalid_create_bodies_are_a_400(api, body):
    assert_error(api.post(BASE, body, format="json"), 400, "validation_error")
    assert not MemoryDocument.objects.exists()


def test_api_writes_signal_the_reindex_and_export_after_commit(api, django_capture_on_commit_callbacks):
    seen = []

    def receiver(sender, **kwargs):
        seen.append((kwargs["path"], kwargs["document_id"] is not None))

    memory_document_changed.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            api.post(BASE, {"path": "MEMORY.md", "content": "x"}, format="json")
        with django_capture_on_commit_callbacks(execute=True):
            api.delete(BASE + "MEMORY.md")
    finally:
        memory_document_changed.disconnect(receiver)
    assert seen == [("MEMORY.md", True), ("MEMORY.md", False)]
