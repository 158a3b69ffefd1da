"""Dashboard memory pages: tree, document, edit with revisions, revert, create, delete."""

from __future__ import annotations

import re

import pytest

from memory_app.models import MemoryDocument, MemoryRevision
from tests import factories
from tests.views_support import HX, is_full_page, signed_in

pytestmark = pytest.mark.django_db


def test_tree_groups_memory_daily_notes_newest_first_and_folders(world):
    for path in [
        "memory/2026-01-02.md",
        "MEMORY.md",
        "memory/2026-03-04.md",
        "memory/projects/launch.md",
        "memory/people.md",
    ]:
        factories.make_document(world.assistant, path, f"text of {path}")
    factories.make_document(world.other_assistant, "memory/secret-plans.md", "theirs")
    response = signed_in(world.vera).get("/assistants/helper/memory/")
    assert response.status_code == 200 and is_full_page(response)
    content = response.content.decode()
    assert content.index("2026-03-04.md") < content.index("2026-01-02.md")
    assert "projects/" in content and "launch.md" in content and "people.md" in content
    assert "secret-plans" not in content
    assert "New document" not in content  # viewers read only
    partial = signed_in(world.vera).get("/assistants/helper/memory/", **HX)
    assert not is_full_page(partial) and b'id="memory-tree"' in partial.content


def test_document_page_numbers_lines_and_highlights_a_cited_range(world):
    factories.make_document(world.assistant, "MEMORY.md", "one\ntwo\nthree\nfour")
    response = signed_in(world.vera).get("/assistants/helper/memory/doc/MEMORY.md?from=2&lines=2")
    assert response.status_code == 200
    content = response.content.decode()
    marked = re.findall(r'<li id="L(\d+)" class="marked">', content)
    assert marked == ["2", "3"]
    assert "/memory/edit/" not in content and "/memory/delete/" not in content  # viewers read only
    partial = signed_in(world.vera).get("/assistants/helper/memory/doc/MEMORY.md", **HX)
    assert not is_full_page(partial) and b'id="document-body"' in partial.content


def test_another_teams_document_is_404(world):
    factories.make_document(world.other_assistant, "MEMORY.md", "theirs")
    client = signed_in(world.bob)
    assert client.get("/assistants/rival/memory/doc/MEMORY.md").status_code == 404
    assert client.get("/assistants/helper/memory/doc/MEMORY.md").status_code == 404  # ours does not exist
    revision = MemoryRevision.objects.get(assistant=world.other_assistant)
    assert client.get(f"/assistants/helper/memory/revisions/{revision.pk}/").status_code == 404
    assert client.post(f"/assistants/helper/memory/revisions/{revision.pk}/revert/").status_code == 404


def test_member_edits_a_document_and_a_revision_names_them(world):
    document = factories.make_document(world.assistant, "MEMORY.md", "old text")
    client = signed_in(world.bob)
    form = client.get("/assistants/helper/memory/edit/MEMORY.md")
    assert form.status_code == 200 and b'<label for="id_content"' in form.content
    assert f'value="{document.content_hash}"' in form.content.decode()
    response = client.post(
        "/assistants/helper/memory/edit/MEMORY.md",
        {"content": "new text\n", "expected_hash": document.content_hash},
        **HX,
    )
    assert (
        response.status_code == 200 and response["HX-Redirect"] == "/assistants/helper/memory/doc/MEMORY.md"
    )
    document.refresh_from_db()
    assert document.content == "new text\n"
    latest = MemoryRevision.objects.filter(document=document).first()
    assert latest.action == "update" and latest.author == "user" and latest.user == world.bob
    page = client.get("/assistants/helper/memory/doc/MEMORY.md").content.decode()
    assert "Saved MEMORY.md." in page and "bob" in page


def test_stale_edit_is_refused_and_keeps_the_users_text(world):
    document = factories.make_document(world.assistant, "MEMORY.md", "v1")
    old_hash = document.content_hash
    factories.make_document(world.assistant, "MEMORY.md", "v2 by someone else")
    response = signed_in(world.bob).post(
        "/assistants/helper/memory/edit/MEMORY.md", {"content": "my edit", "expected_hash": old_hash}, **HX
    )
    assert response.status_code == 422
    content = response.content.decode()
    assert "Someone saved this document after you opened it" in content and "my edit" in content
    document.refresh_from_db()
    assert document.content == "v2 by someone else"


def test_viewer_cannot_edit_create_delete_or_revert(world):
    document = factories.make_document(world.assistant, "MEMORY.md", "keep")
    revision = MemoryRevision.objects.get(document=document)
    client = signed_in(world.vera)
    assert client.get("/assistants/helper/memory/edit/MEMORY.md").status_code == 403
    assert client.post("/assistants/helper/memory/edit/MEMORY.md", {"content": "x"}).status_code == 403
    assert (
        client.post("/assistants/helper/memory/new/", {"path": "memory/x.md", "content": "x"}).status_code
        == 403
    )
    assert client.post("/assistants/helper/memory/delete/MEMORY.md").status_code == 403
    assert client.post(f"/assistants/helper/memory/revisions/{revision.pk}/revert/").status_code == 403
    document.refresh_from_db()
    assert document.content == "keep" and MemoryDocument.objects.count() == 1


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("notes.md", "only MEMORY.md, memory.md and files under memory/"),
        ("memory/../etc/passwd.md", "&#x27;..&#x27; and &#x27;.&#x27; segments are not allowed"),
        ("/abs/MEMORY.md", "absolute paths are not allowed"),
        ("memory/todo.txt", "memory documents must end in .md"),
        ("", "This field is required."),
    ],
)
def test_create_rejects_bad_paths_with_the_reason(world, path, message):
    response = signed_in(world.bob).post(
        "/assistants/helper/memory/new/", {"path": path, "content": "x"}, **HX
    )
    assert response.status_code == 422 and not is_full_page(response)
    error = re.search(r'id="id_path_error">(.*?)</p>', response.content.decode(), re.S).group(1)
    assert message in error
    assert not MemoryDocument.objects.exists()


def test_create_refuses_an_existing_path(world):
    factories.make_document(world.assistant, "MEMORY.md", "there")
    response = signed_in(world.bob).post(
        "/assistants/helper/memory/new/", {"path": "MEMORY.md", "content": "x"}
    )
    assert response.status_code == 422 and is_full_page(response)
    assert b"MEMORY.md already exists" in response.content
    assert MemoryDocument.objects.get(assistant=world.assistant).content == "there"


def test_create_a_document(world):
    client = signed_in(world.bob)
    assert b'value="MEMORY.md"' in client.get("/assistants/helper/memory/new/?path=MEMORY.md").content
    response = client.post(
        "/assistants/helper/memory/new/", {"path": "memory/projects/launch.md", "content": "# Launch"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/assistants/helper/memory/doc/memory/projects/launch.md"
    document = MemoryDocument.objects.get(assistant=world.assistant, path="memory/projects/launch.md")
    assert document.content == "# Launch" and document.revisions.get().action == "create"


def test_delete_keeps_revisions_and_the_document_can_be_restored(world):
    factories.make_document(world.assistant, "memory/old.md", "remember me")
    client = signed_in(world.bob)
    response = client.post("/assistants/helper/memory/delete/memory/old.md", **HX)
    assert response.status_code == 200 and response["HX-Redirect"] == "/assistants/helper/memory/"
    assert not MemoryDocument.objects.filter(path="memory/old.md").exists()
    deleted = client.get("/assistants/helper/memory/deleted/").content.decode()
    assert "memory/old.md" in deleted
    delete_revision = MemoryRevision.objects.get(path="memory/old.md", action="delete")
    page = client.get(f"/assistants/helper/memory/revisions/{delete_revision.pk}/").content.decode()
    assert "Restore this document" in page
    client.post(f"/assistants/helper/memory/revisions/{delete_revision.pk}/revert/")
    assert MemoryDocument.objects.get(path="memory/old.md").content == "remember me"


def test_revision_page_shows_the_diff_and_revert_restores_it(world):
    document = factories.make_document(world.assistant, "MEMORY.md", "alpha\nbeta\n")
    first = MemoryRevision.objects.get(document=document)
    factories.make_document(world.assistant, "MEMORY.md", "alpha\ngamma\n")
    second = MemoryRevision.objects.filter(document=document).first()
    client = signed_in(world.bob)
    page = client.get(f"/assistants/helper/memory/revisions/{second.pk}/")
    assert page.status_code == 200
    content = page.content.decode()
    assert '<span class="d-del">-beta</span>' in content and '<span class="d-add">+gamma</span>' in content
    assert "current text" in content  # the latest revision is what the document holds
    partial = client.get(f"/assistants/helper/memory/revisions/{first.pk}/", **HX)
    assert not is_full_page(partial) and b"Revert to this revision" in partial.content
    response = client.post(f"/assistants/helper/memory/revisions/{first.pk}/revert/", **HX)
    assert response["HX-Redirect"] == "/assistants/helper/memory/doc/MEMORY.md"
    document.refresh_from_db()
    assert document.content == "alpha\nbeta\n"
    revert = MemoryRevision.objects.filter(document=document).first()
    assert (
        revert.action == "revert"
        and revert.note == f"reverted to revision {first.pk}"
        and revert.user == world.bob
    )


def test_flush_revision_links_to_the_message_that_wrote_it(world):
    from memory_app.documents import Provenance, append_to_document

    session = factories.make_session(world.assistant)
    message = factories.add_messages(session, {"role": "user", "content": "remember the launch date"})[0]
    append_to_document(
        assistant=world.assistant,
        path="memory/2026-11-30.md",
        addition="- launch 12-15",
        provenance=Provenance(author="flush", session_pk=session.pk, message_pk=message.pk),
    )
    content = signed_in(world.vera).get("/assistants/helper/memory/doc/memory/2026-11-30.md").content.decode()
    assert "badge-author-flush" in content
    assert f'href="/sessions/{session.pk}/messages/{message.seq}/">the message that wrote it' in content


def test_member_queues_a_reindex_the_jobs_page_follows(world):
    from openclaw_site.models import TaskRecord

    client = signed_in(world.bob)
    response = client.post("/assistants/helper/memory/reindex/", {"full": "on"})
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    record = TaskRecord.objects.get(team=world.acme, kind="reindex")
    assert record.kind == "reindex" and record.object_ids == {"assistant": world.assistant.pk}
    jobs = client.get("/jobs/").content.decode()
    assert "Full reindex of Helper queued." in jobs and "Reindex" in jobs
    assert signed_in(world.vera).post("/assistants/helper/memory/reindex/").status_code == 403
    assert signed_in(world.charlie).post("/assistants/helper/memory/reindex/").status_code == 404
    assert TaskRecord.objects.filter(kind="reindex").count() == 1
