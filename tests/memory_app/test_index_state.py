"""The index's state over the API (`GET /assistants/{slug}/index/`) and in every search answer, on
real Postgres, with the index jobs waiting in the ORM broker as behind a busy worker
(docs/design.md §D15)."""

from __future__ import annotations

import pytest

from memory_app.documents import Provenance, write_document
from memory_app.models import MemoryChunk
from openclaw_site.jobs.tasks import TaskQueue
from tests.embedding_fixtures import embedded_texts
from tests.task_brokers import drain

API = "/api/v1/assistants/helper"
# More than a search writes itself (memory_app.search.service.INLINE_TEXT_DOCUMENTS): an import.
IMPORTED = 40


@pytest.fixture
def queued_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send tasks to the ORM broker instead of running them inline; `run_queued` runs them."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)


def run_queued() -> int:
    """Run every queued task of both clusters, as their workers would; return how many ran."""
    ran = 0
    while batch := drain(TaskQueue.URGENT.cluster) + drain(TaskQueue.DEFAULT.cluster):
        ran += len(batch)
    return ran


def import_notes(assistant, count: int) -> None:
    for number in range(count):
        write_document(
            assistant=assistant,
            path=f"memory/imported-{number:03}.md",
            content=f"# Note {number}\n\nThe albatross survey counted {number} nests on the island.",
            provenance=Provenance(author="import"),
        )


@pytest.mark.django_db(transaction=True)
def test_an_import_is_indexing_until_its_jobs_ran_then_current(world, api, fake_embeddings, queued_tasks):
    import_notes(world.assistant, IMPORTED)

    before = api.get(f"{API}/index/")
    assert before.status_code == 200
    body = before.json()
    assert body["state"] == "indexing" and body["note"]
    assert (body["documents"], body["documents_not_indexed"], body["chunks"]) == (IMPORTED, IMPORTED, 0)
    assert body["jobs"]["queued"] >= 1 and body["jobs"]["running"] == 0
    assert body["embedder"]["model"] == "fake-embedding" and len(body["embedder"]["fingerprint"]) == 64

    # Right after the import the search answers from the normal path: nothing is indexed or
    # embedded in the request but the query, and it says the index is still being built.
    searched = api.get(f"{API}/search/", {"q": "albatross nests"})
    assert searched.status_code == 200
    answer = searched.json()
    assert answer["results"] == [] and answer["index"]["state"] == "indexing"
    assert "may be incomplete" in answer["index"]["note"]
    assert not MemoryChunk.objects.filter(assistant=world.assistant).exists()
    assert embedded_texts(fake_embeddings) == ["albatross nests"]

    assert run_queued() >= 1
    after = api.get(f"{API}/index/").json()
    assert (after["state"], after["note"], after["jobs"]) == ("current", None, {"queued": 0, "running": 0})
    assert (after["documents_not_indexed"], after["chunks_without_vector"]) == (0, 0)
    assert after["chunks"] == IMPORTED and after["generation"] == 1
    found = api.get(f"{API}/search/", {"q": "albatross nests"}).json()
    assert found["results"] and found["index"] == {
        "state": "current",
        "chunks_without_vector": 0,
        "note": None,
    }


@pytest.mark.django_db(transaction=True)
def test_chunks_waiting_for_vectors_are_counted_and_found_by_keywords(
    world, api, fake_embeddings, queued_tasks
):
    from memory_app.index.rows import index_text_now

    import_notes(world.assistant, 3)
    assert index_text_now(world.assistant, limit=3) == 3  # text rows first, vectors to come

    body = api.get(f"{API}/index/").json()
    assert (body["chunks"], body["chunks_without_vector"], body["documents_not_indexed"]) == (3, 3, 0)
    assert body["state"] == "indexing"  # the documents' own index jobs are queued

    searched = api.get(f"{API}/search/", {"q": "albatross", "explain": "true"}).json()
    assert len(searched["results"]) == 3
    assert all(r["explain"]["cosine"] is None for r in searched["results"])  # by keywords alone
    assert searched["index"]["state"] == "indexing" and searched["index"]["chunks_without_vector"] == 3
    assert "3 chunks still wait for their vectors" in searched["index"]["note"]

    run_queued()
    assert api.get(f"{API}/index/").json()["chunks_without_vector"] == 0
    searched = api.get(f"{API}/search/", {"q": "albatross", "explain": "true"}).json()
    assert searched["index"]["state"] == "current"
    assert all(r["explain"]["cosine"] is not None for r in searched["results"])


@pytest.mark.django_db(transaction=True)
def test_an_index_behind_with_no_job_at_it_is_stale(world, api, fake_embeddings, queued_tasks):
    from django_q.models import OrmQ

    from openclaw_site.models import TaskRecord

    import_notes(world.assistant, 2)
    # The jobs were lost (a broker restart): nothing is at the index any more.
    OrmQ.objects.all().delete()
    TaskRecord.objects.all().delete()
    assert api.get(f"{API}/index/").json()["state"] == "stale"
    # A search queues the work and says so.
    assert api.get(f"{API}/search/", {"q": "albatross"}).json()["index"]["state"] == "indexing"
    run_queued()
    assert api.get(f"{API}/index/").json()["state"] == "current"


@pytest.mark.django_db(transaction=True)
def test_a_search_reads_what_is_behind_up_to_a_bound_and_the_index_endpoint_counts_it_all(
    world, fake_embeddings, queued_tasks, monkeypatch
):
    from memory_app.index import status
    from providers.embeddings import get_embedder

    monkeypatch.setattr(status, "NOT_INDEXED_READ", 3)
    import_notes(world.assistant, 5)

    health = status.index_health(world.assistant, get_embedder())
    assert health.documents_not_indexed == 3  # enough to know a search has work to queue
    assert health.progress.state == "indexing" and health.jobs_queued >= 1
    account = status.index_status(world.assistant, get_embedder())
    assert (account.documents, account.documents_not_indexed, account.chunks) == (5, 5, 0)
    assert account.progress == health.progress

    run_queued()
    health = status.index_health(world.assistant, get_embedder())
    assert (health.documents_not_indexed, health.jobs_queued, health.progress.state) == (0, 0, "current")
    assert status.index_status(world.assistant, get_embedder()).chunks == 5


def test_the_index_state_of_a_new_assistant_is_current_and_without_an_embedder_has_no_vectors(
    world, api, no_embeddings
):
    body = api.get(f"{API}/index/").json()
    assert body == {
        "state": "current",
        "note": None,
        "embedder": None,
        "documents": 0,
        "documents_not_indexed": 0,
        "chunks": 0,
        "chunks_without_vector": 0,
        "jobs": {"queued": 0, "running": 0},
        "settings_changed": False,
        "rebuilding": False,
        "generation": None,
    }


def test_the_index_of_another_team_is_not_found_and_needs_memory_read(world, other_api, scoped_api):
    assert other_api.get(f"{API}/index/").status_code == 404
    refused = scoped_api("sessions:read").get(f"{API}/index/")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "insufficient_scope"
    assert scoped_api("memory:read").get(f"{API}/index/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_model_tool_reports_the_index_state(world, fake_embeddings, queued_tasks):
    import json

    from memory_app.search.tool import memory_search

    import_notes(world.assistant, IMPORTED)
    payload = json.loads(memory_search({"query": "albatross"}, assistant=world.assistant))
    assert payload["index"]["state"] == "indexing" and "may be incomplete" in payload["index"]["note"]
    run_queued()
    payload = json.loads(memory_search({"query": "albatross"}, assistant=world.assistant))
    assert payload["index"] == {"state": "current", "chunksWithoutVector": 0, "note": None}
    assert payload["results"]
