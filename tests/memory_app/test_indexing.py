"""Indexing memory documents: on every write, through the cache, in generations (real Postgres)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memory_app.documents import Provenance, delete_document, write_document
from memory_app.index import debounce
from memory_app.index.rebuild import reindex_assistant
from memory_app.models import EmbeddingCache, IndexedSource, IndexState, MemoryChunk, Source
from memory_app.search.hybrid import hybrid_search
from tests import factories
from tests.embedding_fixtures import embedded_texts
from tests.fake_openai import FakeOpenAI, error_reply

pytestmark = pytest.mark.django_db

NOTES = "\n".join(
    [
        "# Project notes",
        "",
        "The staging database is called heron-db and runs Postgres 16.",
        "Deploys go out on Tuesdays after the standup.",
        "",
        "## People",
        "Maria owns the billing service; Tom owns search.",
    ]
)


def write(assistant, path: str, content: str, *, author: str = "user", capture=None):
    """Write through the service layer and run the on-commit reindex like a real request."""
    with capture(execute=True):
        document, _ = write_document(
            assistant=assistant, path=path, content=content, provenance=Provenance(author=author)
        )
    return document


def test_a_write_indexes_the_document_with_vectors_and_full_text(
    world, fake_embeddings, django_capture_on_commit_callbacks
) -> None:
    document = write(world.assistant, "MEMORY.md", NOTES, capture=django_capture_on_commit_callbacks)

    [chunk] = MemoryChunk.objects.filter(assistant=world.assistant)
    assert (chunk.source, chunk.path, chunk.document_id) == (Source.MEMORY, "MEMORY.md", document.pk)
    assert (chunk.start_line, chunk.end_line) == (1, 7)
    assert chunk.line_numbers == [1, 2, 3, 4, 5, 6, 7]
    assert chunk.model == "fake-embedding" and chunk.dims == 384 and len(chunk.embedding) == 384
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tsv @@ to_tsquery('openclaw_search', 'heron') FROM memory_app_memorychunk WHERE id = %s",
            [chunk.pk],
        )
        assert cursor.fetchone()[0] is True
    state = IndexState.objects.get(assistant=world.assistant)
    assert state.fingerprint["model"] == "fake-embedding"
    assert state.fingerprint["chunking"]["memory"] == {"tokens": 400, "overlap": 80}


def test_a_chunk_keeps_its_vector_in_its_row(
    world, fake_embeddings, django_capture_on_commit_callbacks
) -> None:
    """A 384-dimension chunk row is over PostgreSQL's 2 KB toasting threshold; its vector stays
    in the row, so an exact scan reads no TOAST (docs/design.md, Where a vector is stored)."""
    write(world.assistant, "MEMORY.md", NOTES, capture=django_capture_on_commit_callbacks)
    [chunk] = MemoryChunk.objects.filter(assistant=world.assistant)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_size(m.*) FROM memory_app_memorychunk m WHERE id = %s", [chunk.pk])
        assert cursor.fetchone()[0] > 2032  # what the default layout would toast
        cursor.execute(
            "SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'memory_app_memorychunk'"
        )
        (toast,) = cursor.fetchone()
        cursor.execute(f"SELECT count(*) FROM {toast}")
        assert cursor.fetchone()[0] == 0


def test_unchanged_documents_embed_nothing_on_reindex(
    world, fake_embeddings: FakeOpenAI, django_capture_on_commit_callbacks
) -> None:
    write(world.assistant, "MEMORY.md", NOTES, capture=django_capture_on_commit_callbacks)
    write(
        world.assistant,
        "memory/2026-03-01.md",
        "Met the auditors.",
        capture=django_capture_on_commit_callbacks,
    )
    calls = len(fake_embeddings.embedding_requests)

    outcome = reindex_assistant(world.assistant.pk)

    assert len(fake_embeddings.embedding_requests) == calls
    assert outcome.embedded == 0 and outcome.skipped == 2


def test_an_edit_embeds_only_the_chunks_whose_text_changed(
    world, fake_embeddings: FakeOpenAI, settings, django_capture_on_commit_callbacks
) -> None:
    factories.make_assistant(
        world.acme, "small", settings={"memorySearch": {"chunking": {"tokens": 20, "overlap": 0}}}
    )
    assistant = world.acme.assistants.get(slug="small")
    paragraphs = [f"Paragraph {i} talks about topic number {i} at some length here." for i in range(6)]
    write(assistant, "MEMORY.md", "\n".join(paragraphs), capture=django_capture_on_commit_callbacks)
    chunks_before = MemoryChunk.objects.filter(assistant=assistant).count()
    assert chunks_before == 6
    before = len(embedded_texts(fake_embeddings))

    paragraphs[3] = "Paragraph 3 now says something completely different."
    write(assistant, "MEMORY.md", "\n".join(paragraphs), capture=django_capture_on_commit_callbacks)

    assert embedded_texts(fake_embeddings)[before:] == [paragraphs[3]]
    assert MemoryChunk.objects.filter(assistant=assistant, text=paragraphs[3]).exists()
    assert not MemoryChunk.objects.filter(assistant=assistant, text__contains="topic number 3").exists()


def test_an_admin_edit_is_reindexed_and_found(
    world, fake_embeddings, django_capture_on_commit_callbacks
) -> None:
    write(
        world.assistant,
        "memory/infra.md",
        "The VPN gateway lives at vpn-old.example.com.",
        capture=django_capture_on_commit_callbacks,
    )
    write(
        world.assistant,
        "memory/infra.md",
        "The VPN gateway moved to vpn-frankfurt.example.com.",
        author="admin",
        capture=django_capture_on_commit_callbacks,
    )

    response = hybrid_search(assistant=world.assistant, query="vpn-frankfurt.example.com")

    assert [r.path for r in response.results] == ["memory/infra.md"]
    assert "vpn-frankfurt" in response.results[0].snippet
    assert not MemoryChunk.objects.filter(text__contains="vpn-old").exists()


def test_a_flush_append_is_indexed(world, fake_embeddings, django_capture_on_commit_callbacks) -> None:
    from memory_app.documents import append_to_document

    with django_capture_on_commit_callbacks(execute=True):
        append_to_document(
            assistant=world.assistant,
            path="memory/2026-03-01.md",
            addition="- Decided: rotate the deploy key every 90 days.",
            provenance=Provenance(author="flush"),
        )
    response = hybrid_search(assistant=world.assistant, query="deploy key rotation")
    assert [r.citation for r in response.results] == ["memory/2026-03-01.md#L1"]


def test_deleting_a_document_removes_its_chunks(
    world, fake_embeddings, django_capture_on_commit_callbacks
) -> None:
    document = write(
        world.assistant, "memory/tmp.md", "ephemeral zebra facts", capture=django_capture_on_commit_callbacks
    )
    assert MemoryChunk.objects.filter(path="memory/tmp.md").exists()
    with django_capture_on_commit_callbacks(execute=True):
        delete_document(document=document, provenance=Provenance(author="user"))
    assert not MemoryChunk.objects.filter(path="memory/tmp.md").exists()
    assert hybrid_search(assistant=world.assistant, query="zebra").results == []


def test_a_failing_embedder_still_indexes_text_and_embeds_later(
    world, fake_embeddings: FakeOpenAI, django_capture_on_commit_callbacks
) -> None:
    fake_embeddings.embedding_errors.append(error_reply(400, "model overloaded, bad request"))
    write(
        world.assistant,
        "MEMORY.md",
        "The wifi password rotates monthly.",
        capture=django_capture_on_commit_callbacks,
    )

    [chunk] = MemoryChunk.objects.filter(assistant=world.assistant)
    assert chunk.embedding is None and chunk.model == "fts-only"
    assert "embedding failed" in IndexState.objects.get(assistant=world.assistant).last_error
    assert [r.path for r in hybrid_search(assistant=world.assistant, query="wifi").results] == ["MEMORY.md"]

    outcome = reindex_assistant(world.assistant.pk)

    chunk = MemoryChunk.objects.get(assistant=world.assistant)
    assert outcome.embedded == 1 and chunk.model == "fake-embedding" and len(chunk.embedding) == 384


def test_a_changed_fingerprint_rebuilds_while_the_old_rows_answer(
    world, fake_embeddings: FakeOpenAI, django_capture_on_commit_callbacks
) -> None:
    assistant = world.assistant
    for i in range(3):
        write(
            assistant,
            f"memory/topic-{i}.md",
            f"Topic {i}: the heron migration plan, part {i}.",
            capture=django_capture_on_commit_callbacks,
        )
    old_generation = IndexState.objects.get(assistant=assistant).active_generation
    embedded_before = len(embedded_texts(fake_embeddings))

    assistant.settings["memorySearch"]["chunking"] = {"tokens": 300, "overlap": 30}
    assistant.save()
    seen_during_build: list[tuple[int, list[str]]] = []

    def probe(progress: dict) -> None:
        # Called after each group while the new generation is being built.
        if progress.get("phase") == "building":
            response = hybrid_search(assistant=assistant, query="heron migration")
            generations = set(
                MemoryChunk.objects.filter(pk__in=[r.chunk_id for r in response.results]).values_list(
                    "generation", flat=True
                )
            )
            seen_during_build.append((len(response.results), sorted(map(str, generations))))

    outcome = reindex_assistant(assistant.pk, progress=probe)

    assert seen_during_build and all(
        count == 3 and gens == [str(old_generation)] for count, gens in seen_during_build
    )
    state = IndexState.objects.get(assistant=assistant)
    assert state.active_generation == old_generation + 1 and state.building_generation is None
    assert state.fingerprint["chunking"]["memory"] == {"tokens": 300, "overlap": 30}
    assert set(MemoryChunk.objects.filter(assistant=assistant).values_list("generation", flat=True)) == {
        old_generation + 1
    }
    # Same text, same hashes: the cache answered, nothing but the probe queries was embedded.
    assert set(embedded_texts(fake_embeddings)[embedded_before:]) == {"heron migration"}
    assert outcome.cache_hits == 3 and outcome.embedded == 0
    assert len(hybrid_search(assistant=assistant, query="heron migration").results) == 3


def test_a_write_during_a_rebuild_lands_in_the_new_generation(
    world, fake_embeddings, django_capture_on_commit_callbacks, settings
) -> None:
    settings.OPENCLAW_TASKS_SYNC = True
    assistant = world.assistant
    write(assistant, "MEMORY.md", "first fact about otters", capture=django_capture_on_commit_callbacks)
    assistant.settings["memorySearch"]["chunking"] = {"tokens": 200, "overlap": 20}
    assistant.save()

    # The next write notices the new fingerprint: it opens the new generation, writes itself
    # there and queues the full reindex (run inline here), which swaps it in.
    write(assistant, "memory/b.md", "second fact about beavers", capture=django_capture_on_commit_callbacks)

    state = IndexState.objects.get(assistant=assistant)
    assert state.building_generation is None and state.active_generation == 2
    assert sorted(MemoryChunk.objects.filter(assistant=assistant).values_list("path", "generation")) == [
        ("MEMORY.md", 2),
        ("memory/b.md", 2),
    ]


def test_the_embedding_cache_is_keyed_by_provider_model_and_hash(
    world, fake_embeddings, django_capture_on_commit_callbacks
) -> None:
    write(world.assistant, "MEMORY.md", "cached sentence", capture=django_capture_on_commit_callbacks)
    row = EmbeddingCache.objects.get()
    chunk = MemoryChunk.objects.get()
    assert (row.model, row.hash, row.dims) == ("fake-embedding", chunk.hash, 384)
    # Another assistant writing the same text reuses the vector.
    calls = len(fake_embeddings.embedding_requests)
    write(world.other_assistant, "MEMORY.md", "cached sentence", capture=django_capture_on_commit_callbacks)
    assert len(fake_embeddings.embedding_requests) == calls
    assert MemoryChunk.objects.filter(assistant=world.other_assistant).get().embedding is not None


def test_session_requests_keep_the_first_due_time_until_the_job_takes_it(world, frozen_clock) -> None:
    # OpenClaw's session watcher: a 5 s timer from the first change; later changes join the batch.
    key = {"assistant_id": world.assistant.pk, "source": Source.SESSIONS, "key": "12"}
    first = debounce.request(**key, delay_seconds=5, max_delay_seconds=5)
    assert first == timezone.now() + timedelta(seconds=5)
    for _ in range(3):
        frozen_clock.advance(2)  # a change every 2 s, past the first due time
        assert debounce.request(**key, delay_seconds=5, max_delay_seconds=5) == first
    assert debounce.take_turn(**key) is None  # due: taken
    assert IndexedSource.objects.get(**key).due_at is None
    # The next change starts the next batch.
    assert debounce.request(**key, delay_seconds=5, max_delay_seconds=5) == timezone.now() + timedelta(
        seconds=5
    )


def test_memory_requests_push_their_due_time_out_up_to_the_cap(world, frozen_clock) -> None:
    key = {"assistant_id": world.assistant.pk, "source": Source.MEMORY, "key": "MEMORY.md"}
    start = timezone.now()
    assert debounce.request(**key, delay_seconds=1.5, max_delay_seconds=5) == start + timedelta(seconds=1.5)
    frozen_clock.advance(1)
    assert debounce.request(**key, delay_seconds=1.5, max_delay_seconds=5) == start + timedelta(seconds=2.5)
    assert debounce.take_turn(**key) == start + timedelta(seconds=2.5)  # not due: the job defers
    frozen_clock.advance(3)  # saved again and again: never later than 5 s after the first save
    assert debounce.request(**key, delay_seconds=1.5, max_delay_seconds=5) == start + timedelta(seconds=5)
    frozen_clock.advance(1)
    assert debounce.take_turn(**key) is None


def test_a_job_with_nothing_pending_runs(world) -> None:
    key = {"assistant_id": world.assistant.pk, "source": Source.SESSIONS, "key": "12"}
    assert debounce.take_turn(**key) is None  # no row: a forced index, or the request was taken


def test_the_vector_query_uses_the_assistants_own_hnsw_index(
    world, fake_embeddings, django_capture_on_commit_callbacks, monkeypatch
) -> None:
    from memory_app.index import vectors
    from memory_app.index.vectors import assistant_literal, distance_sql

    monkeypatch.setattr(vectors, "OWN_INDEX_MIN_ROWS", 1)
    monkeypatch.setattr(vectors, "BELOW_THRESHOLD_SECONDS", 0.0)
    write(world.assistant, "MEMORY.md", NOTES, capture=django_capture_on_commit_callbacks)
    assert vectors.ensure_vector_index(384, world.assistant.pk) is True
    literal = "[" + ",".join(["0.05"] * 384) + "]"
    with connection.cursor() as cursor:
        # On a table this small the planner prefers any scan plus a sort; with both priced out,
        # the plan shows whether the assistant's partial HNSW index can serve the query at all.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(
            f"EXPLAIN SELECT id FROM memory_app_memorychunk m WHERE m.dims = 384 "
            f"AND m.assistant_id = {assistant_literal(world.assistant.pk)} "
            f"AND m.generation = 1 ORDER BY {distance_sql(384)} LIMIT 24",
            [literal],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert f"Index Scan using memchunk_hnsw_384_a{world.assistant.pk}" in plan


def test_a_new_dimension_gets_its_own_index(
    world, fake_embeddings, settings, django_capture_on_commit_callbacks, monkeypatch
) -> None:
    from memory_app.index import vectors
    from providers.embeddings import reset_embedders

    monkeypatch.setattr(vectors, "OWN_INDEX_MIN_ROWS", 1)
    monkeypatch.setattr(vectors, "BELOW_THRESHOLD_SECONDS", 0.0)
    settings.EMBEDDING_DIMENSIONS = 64
    reset_embedders()
    write(world.assistant, "MEMORY.md", "small vectors", capture=django_capture_on_commit_callbacks)
    reindex_assistant(world.assistant.pk)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
            [f"memchunk_hnsw_64_a{world.assistant.pk}"],
        )
        (definition,) = cursor.fetchone()
    assert "vector(64)" in definition
    assert f"WHERE ((assistant_id = {world.assistant.pk}) AND (dims = 64))" in definition
    assert MemoryChunk.objects.get(assistant=world.assistant).dims == 64
    assert [r.path for r in hybrid_search(assistant=world.assistant, query="small vectors").results] == [
        "MEMORY.md"
    ]


def test_one_reindex_per_assistant_at_a_time(world, fake_embeddings) -> None:
    from openclaw_site.platform.locks import session_lock

    with session_lock(f"memory-reindex:{world.assistant.pk}"):
        outcome = reindex_assistant(world.assistant.pk)
    assert outcome.note == "another reindex of this assistant is running"
    assert reindex_assistant(world.assistant.pk).note == ""
