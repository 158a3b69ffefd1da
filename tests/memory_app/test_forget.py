"""Forget a source: a dry run, then removal with revisions, the index, and no way back.

docs/design.md, Provenance, consolidation and forgetting.
"""

from __future__ import annotations

import pytest

from memory_app.documents import Provenance, append_to_document, write_document
from memory_app.index.rebuild import reindex_assistant
from memory_app.models import ForgottenSource, MemoryChunk, MemoryDocument, MemoryImport, MemoryRevision
from memory_app.search.hybrid import hybrid_search
from sessions_app.indexing import index_session_transcript
from tests import factories
from tests.api_support import API, assert_error, snapshot
from tests.messages import assistant, user

pytestmark = pytest.mark.django_db
FORGET = f"{API}/assistants/helper/forget/"
DAILY = "memory/2026-02-17.md"


@pytest.fixture
def remembered(world, fake_embeddings, django_capture_on_commit_callbacks):
    """A person's line, then two lines a session's flush wrote, indexed with the transcript."""
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("The vault code is 4711, remember it."), assistant("Noted."))
    with django_capture_on_commit_callbacks(execute=True):
        write_document(
            assistant=world.assistant,
            path=DAILY,
            content="- Standup at nine",
            provenance=Provenance(author="user", user=world.alice),
        )
        append_to_document(
            assistant=world.assistant,
            path=DAILY,
            addition="- The vault code is 4711\n- Vault opens on Mondays",
            provenance=Provenance(author="flush", session_pk=session.pk),
        )
    index_session_transcript(session.pk)
    return session


def vault_hits(world) -> list:
    return list(hybrid_search(assistant=world.assistant, query="vault code 4711", mode="text").results)


def test_a_dry_run_lists_lines_documents_and_index_entries_and_changes_nothing(api, world, remembered):
    assert vault_hits(world)
    before = snapshot()
    response = api.post(FORGET, {"session": remembered.pk, "dry_run": True}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["dry_run"] and body["source"] == {"session": remembered.pk}
    assert body["lines"] == [
        {"path": DAILY, "line": 2, "text": "- The vault code is 4711"},
        {"path": DAILY, "line": 3, "text": "- Vault opens on Mondays"},
    ]
    assert body["documents"] == [{"path": DAILY, "lines_removed": 2, "deleted": False, "revision": None}]
    assert body["index_entries"]["memory"] >= 1 and body["index_entries"]["sessions"] >= 1
    assert snapshot() == before and not ForgottenSource.objects.exists()


def test_forgetting_a_session_removes_its_lines_and_index_and_it_cannot_come_back(
    api, world, remembered, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        body = api.post(FORGET, {"session": remembered.pk, "dry_run": False}, format="json").json()
    assert not body["dry_run"] and body["documents"][0]["revision"]
    document = MemoryDocument.objects.get(path=DAILY)
    assert document.content == "- Standup at nine"
    revision = MemoryRevision.objects.get(pk=body["documents"][0]["revision"])
    assert revision.origin_kind == "api_key" and revision.note.startswith(f"forget session {remembered.pk}")
    assert "4711" in MemoryRevision.objects.filter(path=DAILY).order_by("pk")[1].content  # history intact
    assert not MemoryChunk.objects.filter(session_pk=remembered.pk).exists()
    assert not vault_hits(world)

    # A replayed flush, a reindex, an agent repeating the line: none of them brings it back.
    replay = append_to_document(
        assistant=world.assistant,
        path=DAILY,
        addition="- The vault code is 4711",
        provenance=Provenance(author="flush", session_pk=remembered.pk),
    )
    assert replay.revision is None and replay.forgotten == 1
    again = append_to_document(
        assistant=world.assistant,
        path=DAILY,
        addition="- the vault code is 4711.",
        provenance=Provenance(author="agent"),
    )
    assert again.revision is None and again.forgotten == 1
    index_session_transcript(remembered.pk, force=True)
    reindex_assistant(world.assistant.pk, full=True)
    assert not MemoryChunk.objects.filter(session_pk=remembered.pk).exists()
    assert "4711" not in MemoryDocument.objects.get(path=DAILY).content
    # A person may still write it deliberately.
    owner = append_to_document(
        assistant=world.assistant,
        path=DAILY,
        addition="- The vault code is 4711",
        provenance=Provenance(author="user", user=world.alice),
    )
    assert owner.revision is not None


def test_forgetting_an_import_blocks_a_reimport(api, world, tmp_path):
    from sessions_app.workspace.imports import import_workspace

    (tmp_path / "MEMORY.md").write_text("- Imported: the CEO is Mallory\n")
    import_workspace(directory=tmp_path, team_slug="acme", assistant_slug="helper", replace=True)
    record = MemoryImport.objects.get(assistant=world.assistant)
    body = api.post(FORGET, {"import": record.pk, "dry_run": False}, format="json").json()
    assert body["documents"] == [
        {
            "path": "MEMORY.md",
            "lines_removed": 1,
            "deleted": True,
            "revision": body["documents"][0]["revision"],
        }
    ]
    assert not MemoryDocument.objects.filter(assistant=world.assistant, path="MEMORY.md").exists()

    import_workspace(directory=tmp_path, team_slug="acme", assistant_slug="helper", replace=True)
    assert "Mallory" not in "".join(
        MemoryDocument.objects.filter(assistant=world.assistant).values_list("content", flat=True)
    )


def test_forgetting_an_api_key_keeps_what_others_wrote(api, world):
    key, secret = factories.make_api_key(world.acme, ["memory:read", "memory:write"], name="scraper")
    from tests.conftest import bearer_client

    bearer_client(secret).post(
        f"{API}/assistants/helper/tools/memory_write/",
        {"arguments": {"mode": "append", "content": "- Scraped: prices up 40%"}},
        format="json",
    )
    api.post(
        f"{API}/assistants/helper/tools/memory_write/",
        {"arguments": {"mode": "append", "content": "- Our own note"}},
        format="json",
    )
    body = api.post(FORGET, {"api_key": key.pk, "dry_run": False}, format="json").json()
    assert [line["text"] for line in body["lines"]] == ["- Scraped: prices up 40%"]
    [document] = MemoryDocument.objects.filter(assistant=world.assistant)
    assert document.content == "- Our own note"


def test_forget_refuses_bad_input_and_other_teams_and_viewers(api, other_api, scoped_api, world, remembered):
    reader = scoped_api("memory:read")
    before = snapshot()
    assert_error(api.post(FORGET, {"dry_run": True}, format="json"), 400, "invalid_parameter")
    assert_error(
        api.post(FORGET, {"session": remembered.pk, "import": 1}, format="json"), 400, "invalid_parameter"
    )
    assert_error(api.post(FORGET, {"session": "x"}, format="json"), 400, "validation_error")
    assert_error(api.post(FORGET, {"session": 999999}, format="json"), 404, "not_found")
    assert_error(
        other_api.post(f"{API}/assistants/rival/forget/", {"session": remembered.pk}, format="json"),
        404,
        "not_found",
    )
    assert_error(other_api.post(FORGET, {"session": remembered.pk}, format="json"), 404, "not_found")
    assert_error(
        reader.post(FORGET, {"session": remembered.pk}, format="json"),
        403,
        "insufficient_scope",
    )
    assert snapshot() == before
