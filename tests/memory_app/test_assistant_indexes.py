"""One HNSW graph per assistant: filtered search stays right as assistants come and go, and
workers fill vectors without embedding a chunk twice (real Postgres; docs/design.md, "Search at
a million chunks" and "Embeddings that scale out")."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from memory_app.documents import Provenance, write_document
from memory_app.index import vectors
from memory_app.index.vector_fill import backlog, claim_and_fill, fill_waiting
from memory_app.models import FTS_ONLY_MODEL, MemoryChunk
from memory_app.search.hybrid import hybrid_search
from openclaw_site.teams.services import assistant_delete
from providers.embeddings import get_embedder
from tests import factories

pytestmark = pytest.mark.django_db

TOPICS = [
    "The staging database is called heron-db and runs Postgres 16.",
    "Deploys go out on Tuesdays after the standup.",
    "Maria owns the billing service and its invoices.",
    "The office plants are watered on Fridays by Tom.",
    "Our search cluster uses pgvector with HNSW graphs.",
    "Lunch orders close at eleven thirty sharp.",
]


@pytest.fixture
def own_index_from_one_row(monkeypatch) -> None:
    monkeypatch.setattr(vectors, "OWN_INDEX_MIN_ROWS", 1)
    monkeypatch.setattr(vectors, "BELOW_THRESHOLD_SECONDS", 0.0)


def write_notes(assistant, capture, prefix: str) -> None:
    """One document per topic, each indexed by the on-commit job as a real write is."""
    for n, topic in enumerate(TOPICS):
        with capture(execute=True):
            write_document(
                assistant=assistant,
                path=f"memory/{prefix}-{n}.md",
                content=f"{prefix}: {topic}",
                provenance=Provenance(author="user"),
            )


def index_oid(name: str) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)::oid", [name])
        value = cursor.fetchone()[0]
    return None if value is None else int(value)


def paths(assistant, query: str, mode: str = "hybrid") -> list[str]:
    return [r.path for r in hybrid_search(assistant=assistant, query=query, mode=mode, min_score=0.0).results]


def test_each_assistant_searches_only_its_own_chunks_with_or_without_its_own_index(
    world, fake_embeddings, django_capture_on_commit_callbacks, own_index_from_one_row, monkeypatch
) -> None:
    write_notes(world.assistant, django_capture_on_commit_callbacks, "acme")
    assert vectors.ensure_vector_index(384, world.assistant.pk)
    # The other team's assistant stays below the threshold: searched exactly, no graph.
    monkeypatch.setattr(vectors, "OWN_INDEX_MIN_ROWS", 10_000)
    write_notes(world.other_assistant, django_capture_on_commit_callbacks, "globex")
    assert index_oid(vectors.index_name(384, world.assistant.pk)) is not None
    assert index_oid(vectors.index_name(384, world.other_assistant.pk)) is None

    for assistant, prefix in ((world.assistant, "acme"), (world.other_assistant, "globex")):
        for mode in ("hybrid", "vector"):
            found = paths(assistant, "which database does staging use heron", mode)
            assert found and all(p.startswith(f"memory/{prefix}-") for p in found), (mode, found)
            assert found[0] == f"memory/{prefix}-0.md", (mode, found)


def test_a_new_assistant_gets_its_own_graph_and_leaves_the_others_alone(
    world, fake_embeddings, django_capture_on_commit_callbacks, own_index_from_one_row
) -> None:
    write_notes(world.assistant, django_capture_on_commit_callbacks, "acme")
    assert vectors.ensure_vector_index(384, world.assistant.pk)
    before = index_oid(vectors.index_name(384, world.assistant.pk))

    newcomer = factories.make_assistant(world.globex, "newcomer")
    write_notes(newcomer, django_capture_on_commit_callbacks, "new")

    assert index_oid(vectors.index_name(384, newcomer.pk)) is not None
    assert index_oid(vectors.index_name(384, world.assistant.pk)) == before  # not rebuilt
    assert paths(newcomer, "who owns billing invoices")[0] == "memory/new-2.md"
    assert paths(world.assistant, "who owns billing invoices")[0] == "memory/acme-2.md"


def test_deleting_an_assistant_drops_only_its_graph(
    world, fake_embeddings, django_capture_on_commit_callbacks, own_index_from_one_row
) -> None:
    for assistant, prefix in ((world.assistant, "acme"), (world.other_assistant, "globex")):
        write_notes(assistant, django_capture_on_commit_callbacks, prefix)
        assert vectors.ensure_vector_index(384, assistant.pk)
    kept = index_oid(vectors.index_name(384, world.assistant.pk))
    gone = world.other_assistant.pk

    with django_capture_on_commit_callbacks(execute=True):
        assistant_delete(assistant=world.other_assistant)

    assert index_oid(vectors.index_name(384, gone)) is None
    assert index_oid(vectors.index_name(384, world.assistant.pk)) == kept
    assert not MemoryChunk.objects.filter(assistant_id=gone).exists()
    assert paths(world.assistant, "plants watered fridays", "vector")[0] == "memory/acme-3.md"


def _text_only(assistant, count: int) -> list[int]:
    rows = [
        MemoryChunk(
            assistant=assistant,
            source="memory",
            path=f"memory/burst-{n}.md",
            start_line=1,
            end_line=1,
            line_numbers=[1],
            text=f"burst note {n}: {TOPICS[n % len(TOPICS)]}",
            hash=f"{assistant.pk}-{n}",
            source_hash=f"{assistant.pk}-{n}",
            model=FTS_ONLY_MODEL,
        )
        for n in range(count)
    ]
    return [row.pk for row in MemoryChunk.objects.bulk_create(rows)]


def test_fill_waiting_gives_every_waiting_row_its_vector(world, fake_embeddings) -> None:
    _text_only(world.assistant, 70)
    assert backlog(world.assistant.pk) == 70

    outcome = fill_waiting(batch=32)

    assert (outcome.filled, outcome.batches, outcome.more, outcome.error) == (70, 3, False, None)
    assert backlog() == 0
    assert set(MemoryChunk.objects.values_list("model", "dims")) == {("fake-embedding", 384)}


@pytest.mark.django_db(transaction=True)
def test_a_second_worker_skips_the_rows_another_has_claimed(world, fake_embeddings) -> None:
    ids = _text_only(world.assistant, 10)
    claimed: list[int] = []
    held, release = threading.Event(), threading.Event()

    def first_worker() -> None:
        # Another process's claim: the newest five rows, locked until its transaction ends.
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute(
                    "SELECT id FROM memory_app_memorychunk WHERE model = %s ORDER BY id DESC "
                    "LIMIT 5 FOR UPDATE SKIP LOCKED",
                    [FTS_ONLY_MODEL],
                )
                claimed.extend(row[0] for row in cursor.fetchall())
                held.set()
                release.wait(30)
                cursor.execute("ROLLBACK")
        finally:
            other.close()

    thread = threading.Thread(target=first_worker)
    thread.start()
    try:
        assert held.wait(30)
        filled, error = claim_and_fill(get_embedder(), assistant_id=world.assistant.pk, batch=10)
    finally:
        release.set()
        thread.join()

    assert error is None and filled == 5
    embedded = set(MemoryChunk.objects.exclude(model=FTS_ONLY_MODEL).values_list("pk", flat=True))
    assert embedded == set(ids) - set(claimed)
    assert set(MemoryChunk.objects.filter(model=FTS_ONLY_MODEL).values_list("pk", flat=True)) == set(claimed)


def test_the_fill_job_reports_its_progress_and_fills_every_row(world, fake_embeddings) -> None:
    from memory_app.tasks import fill_vectors

    _text_only(world.assistant, 40)
    _text_only(world.other_assistant, 3)

    assert fill_vectors(world.assistant.pk) == {"filled": 40, "batches": 2, "more": False, "error": None}
    assert backlog(world.assistant.pk) == 0
    assert backlog(world.other_assistant.pk) == 3  # another team's rows are its own job's


@pytest.mark.django_db(transaction=True)
def test_queued_fill_jobs_make_the_index_state_indexing_until_they_ran(
    world, api, fake_embeddings, monkeypatch
):
    from django_q.conf import Conf
    from django_q.models import OrmQ

    from memory_app.index.jobs import schedule_vector_fill
    from memory_app.index.rows import index_text_now
    from openclaw_site.jobs.tasks import TaskQueue
    from openclaw_site.models import TaskRecord
    from tests.task_brokers import drain

    monkeypatch.setattr(Conf, "SYNC", False)  # to the ORM broker, run below as a worker would
    for n in range(3):
        write_document(
            assistant=world.assistant,
            path=f"memory/burst-{n}.md",
            content=f"burst note {n}: {TOPICS[n]}",
            provenance=Provenance(author="import"),
        )
    assert index_text_now(world.assistant, limit=3) == 3  # text rows first, vectors to come
    OrmQ.objects.all().delete()  # the documents' own jobs: gone, so only the fill jobs are at it
    TaskRecord.objects.all().delete()
    index = f"/api/v1/assistants/{world.assistant.slug}/index/"
    assert api.get(index).json()["state"] == "stale"

    schedule_vector_fill(world.assistant.pk)

    body = api.get(index).json()
    assert (body["state"], body["chunks_without_vector"]) == ("indexing", 3)
    while drain(TaskQueue.DEFAULT.cluster):
        pass
    body = api.get(index).json()
    assert (body["state"], body["chunks_without_vector"]) == ("current", 0)


def test_a_large_assistant_gets_its_own_text_index_and_finds_the_same(
    world, fake_embeddings, django_capture_on_commit_callbacks, own_index_from_one_row, monkeypatch
) -> None:
    from memory_app.index import text_index
    from memory_app.search import candidates

    for assistant, prefix in ((world.assistant, "acme"), (world.other_assistant, "globex")):
        write_notes(assistant, django_capture_on_commit_callbacks, prefix)
    assert index_oid(text_index.text_index_name(world.assistant.pk)) is not None  # built by the index run
    query = "who waters the office plants on Fridays"
    listed = {world.assistant.pk: 0.5, world.other_assistant.pk: 0.5}

    def text_paths(held: dict[int, float]) -> list[str]:
        stats = candidates.LexemeStats(rows=1e6, shares={"the": 0.5}, assistant_shares=held)
        monkeypatch.setattr(candidates, "lexeme_stats", lambda: stats)
        terms = candidates.terms_for(
            candidates.Scope(world.assistant.pk, 1, ("memory",)), ["plants", "fridays"]
        )
        assert terms is not None and terms.own_index == bool(held)
        return paths(world.assistant, query, mode="text")

    # Through its own index or the table's, the same chunks, and never the other team's.
    through_own = text_paths(listed)
    assert through_own == text_paths({})
    assert through_own[0] == "memory/acme-3.md"
    assert all(p.startswith("memory/acme-") for p in through_own)

    gone = world.other_assistant.pk
    with django_capture_on_commit_callbacks(execute=True):
        assistant_delete(assistant=world.other_assistant)
    assert index_oid(text_index.text_index_name(gone)) is None
    assert index_oid(text_index.text_index_name(world.assistant.pk)) is not None
