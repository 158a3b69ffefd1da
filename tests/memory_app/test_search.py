"""Hybrid search end to end on real Postgres with pgvector (docs/design.md §D6-D7)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from memory_app.documents import Provenance, write_document
from memory_app.index.rows import index_document
from memory_app.models import MemoryChunk
from memory_app.search.hybrid import SearchOptionError, hybrid_search
from memory_app.search.service import search_memory
from tests.fake_openai import FakeOpenAI, error_reply, fake_embedding

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 11, 12, 0, tzinfo=UTC)


def index(assistant, documents: dict[str, str]) -> None:
    """Write documents and index them (what the debounced task does after each save)."""
    for path, content in documents.items():
        document, _ = write_document(
            assistant=assistant, path=path, content=content, provenance=Provenance(author="user")
        )
        index_document(document.pk)


def test_a_commit_hash_is_found_by_its_short_prefix(world, fake_embeddings) -> None:
    index(
        world.assistant,
        {
            "memory/2026-03-01.md": "Rolled back the release to commit 9f3c2ab41d7e after the outage.",
            "MEMORY.md": "We release every Tuesday. Rollbacks need two approvals.",
        },
    )
    response = hybrid_search(assistant=world.assistant, query="what happened with 9f3c2ab")
    assert response.mode == "hybrid"
    assert response.results[0].path == "memory/2026-03-01.md"
    assert response.results[0].citation == "memory/2026-03-01.md#L1"


def test_a_chinese_phrase_is_found(world, fake_embeddings) -> None:
    index(
        world.assistant,
        {
            "MEMORY.md": "# 决定\n\n我们决定使用向量数据库来存储记忆。\n\n下周一开会讨论预算。",
            "memory/other.md": "The budget meeting moved to Monday.",
        },
    )
    response = hybrid_search(assistant=world.assistant, query="向量数据库", explain=True)
    top = response.results[0]
    assert top.path == "MEMORY.md" and "向量数据库" in top.snippet
    assert {"向量", "数据", "据库"} <= set(top.explain["matched_terms"])


def test_fusion_is_the_weighted_sum_of_both_sides(world, fake_embeddings) -> None:
    index(
        world.assistant,
        {
            "memory/a.md": "Maria owns the billing service and its invoices.",
            "memory/b.md": "Tom owns the search service.",
            "memory/c.md": "The billing service sends invoices nightly.",
        },
    )
    response = hybrid_search(assistant=world.assistant, query="billing invoices", explain=True, min_score=0)
    assert len(response.results) >= 2
    for result in response.results:
        e = result.explain
        assert result.score == pytest.approx(0.7 * e["vector_score"] + 0.3 * e["text_score"], abs=1e-5)
    # Weights are normalised to sum 1: 2/2 behaves like 0.5/0.5.
    halves = hybrid_search(
        assistant=world.assistant,
        query="billing invoices",
        explain=True,
        min_score=0,
        vector_weight=2 / 2,
        text_weight=2 / 2,
    )
    for result in halves.results:
        e = result.explain
        assert result.score == pytest.approx(0.5 * e["vector_score"] + 0.5 * e["text_score"], abs=1e-5)


def test_a_chinese_query_shifts_the_weights_toward_vectors_unless_set_to_one(world, fake_embeddings) -> None:
    index(
        world.assistant,
        {"MEMORY.md": "部署窗口是每周二晚上十点。", "memory/en.md": "The deploy window is Tuesday."},
    )

    def fused(query: str) -> list[tuple[float, dict]]:
        response = hybrid_search(assistant=world.assistant, query=query, explain=True, min_score=0)
        return [(r.score, r.explain) for r in response.results]

    # The default cjkTextWeightScale 0.15: text 0.3 * 0.15 against vector 0.7, normalised.
    chinese = fused("部署窗口")
    assert chinese and all(e["weights"] == {"vector": 0.939597, "text": 0.060403} for _, e in chinese)
    for score, e in chinese:
        assert score == pytest.approx(0.939597 * e["vector_score"] + 0.060403 * e["text_score"], abs=1e-5)
    # A Latin-script query keeps the configured weights.
    assert all(e["weights"] == {"vector": 0.7, "text": 0.3} for _, e in fused("deploy window"))
    # An explicit scale of 1 gives every script the configured weights.
    world.assistant.settings["memorySearch"]["query"]["hybrid"]["cjkTextWeightScale"] = 1
    world.assistant.save()
    assert all(e["weights"] == {"vector": 0.7, "text": 0.3} for _, e in fused("部署窗口"))


def test_a_keyword_only_hit_is_rescued_from_min_score(world, fake_embeddings: FakeOpenAI) -> None:
    index(
        world.assistant, {"memory/ids.md": "Ticket ZX-99172 tracks the flaky login test on the CI runners."}
    )
    # A query vector unlike the note's: only the ticket id connects them.
    unrelated = fake_embedding("gardening tomatoes sunshine")
    response = hybrid_search(
        assistant=world.assistant, query="ZX-99172", explain=True, query_vector=unrelated
    )
    assert [r.path for r in response.results] == ["memory/ids.md"]
    result = response.results[0]
    assert result.explain["vector_score"] < 0.05 and result.explain["text_score"] == 1.0
    assert result.score < 0.35  # below minScore ...
    # ... but kept: a keyword hit fills the slots the strict results left (all of them, here)
    # Vectors alone have no rescue.
    assert (
        hybrid_search(
            assistant=world.assistant, query="ZX-99172", mode="vector", query_vector=unrelated
        ).results
        == []
    )


def test_text_only_fallback_when_the_embedder_fails(world, fake_embeddings: FakeOpenAI) -> None:
    index(world.assistant, {"MEMORY.md": "The on-call rotation starts with Priya on Mondays."})
    fake_embeddings.embedding_errors.append(error_reply(400, "This model is currently unavailable"))
    response = hybrid_search(assistant=world.assistant, query="who is on-call on Mondays", explain=True)
    assert response.mode == "text" and response.fallback.startswith("embedding_failed")
    assert "currently unavailable" in response.fallback
    [result] = response.results
    assert result.path == "MEMORY.md"
    # OpenClaw's FTS-only boost: text score plus coverage, density and length boosts.
    assert result.score > result.explain["text_score"] * 0.3


def test_text_only_when_no_embedder_is_configured(world, no_embeddings) -> None:
    index(world.assistant, {"MEMORY.md": "Parking is behind building C."})
    assert MemoryChunk.objects.get().model == "fts-only"
    response = hybrid_search(assistant=world.assistant, query="where is parking")
    assert response.mode == "text" and response.fallback == "no_embedder"
    assert [r.path for r in response.results] == ["MEMORY.md"]


def test_vector_only_when_full_text_fails(world, fake_embeddings, monkeypatch) -> None:
    from django.db import DatabaseError

    from memory_app.search import hybrid as search

    index(world.assistant, {"MEMORY.md": "Parking is behind building C."})

    real = search.fetch_candidates

    def broken(scope, *, query_vector, terms, limit):
        if terms is not None:
            raise DatabaseError("text search configuration missing")
        return real(scope, query_vector=query_vector, terms=terms, limit=limit)

    monkeypatch.setattr(search, "fetch_candidates", broken)
    response = hybrid_search(assistant=world.assistant, query="parking building", min_score=0)
    assert response.mode == "vector" and "fulltext_failed" in response.fallback
    assert [r.path for r in response.results] == ["MEMORY.md"]


def test_requested_modes_run_one_side(world, fake_embeddings) -> None:
    index(world.assistant, {"MEMORY.md": "Parking is behind building C."})
    vector = hybrid_search(
        assistant=world.assistant, query="parking building", mode="vector", explain=True, min_score=0
    )
    text = hybrid_search(assistant=world.assistant, query="parking building", mode="text", explain=True)
    assert (
        vector.mode == "vector" and vector.fallback is None and vector.results[0].explain["text_score"] == 0
    )
    assert text.mode == "text" and text.fallback is None and text.results[0].explain["vector_score"] == 0


def test_decay_by_daily_note_date_and_evergreen_files(world, fake_embeddings) -> None:
    index(
        world.assistant,
        {
            "memory/2026-03-01.md": "Lunch at the ramen place.",
            "MEMORY.md": "Lunch preference: ramen.",
            "memory/2026-04-01.md": "Lunch ramen again (future note).",
        },
    )
    response = hybrid_search(
        assistant=world.assistant, query="ramen lunch", decay=True, now=NOW, explain=True, min_score=0
    )
    multipliers = {r.path: r.explain["decay_multiplier"] for r in response.results}
    # 10.5 days old at noon on the 11th (the note counts from UTC midnight of its date).
    assert multipliers["memory/2026-03-01.md"] == pytest.approx(math.exp(-math.log(2) / 30 * 10.5))
    assert multipliers["MEMORY.md"] == 1.0
    assert multipliers["memory/2026-04-01.md"] == 1.0
    off = hybrid_search(assistant=world.assistant, query="ramen lunch", now=NOW, explain=True, min_score=0)
    assert all(r.explain["decay_multiplier"] == 1.0 for r in off.results)


def test_decay_ten_days_at_half_life_thirty(world, fake_embeddings) -> None:
    index(world.assistant, {"memory/2026-03-01.md": "Lunch at the ramen place."})
    now = datetime(2026, 3, 11, tzinfo=UTC)
    [result] = hybrid_search(
        assistant=world.assistant, query="ramen", decay=True, now=now, explain=True, min_score=0
    ).results
    assert result.explain["decay_multiplier"] == pytest.approx(math.exp(-math.log(2) / 30 * 10), abs=1e-6)
    assert round(result.explain["decay_multiplier"], 4) == 0.7937


def test_decay_can_be_switched_on_per_assistant(world, fake_embeddings) -> None:
    world.assistant.settings["memorySearch"]["query"]["hybrid"]["temporalDecay"] = {
        "enabled": True,
        "halfLifeDays": 10,
    }
    world.assistant.save()
    index(world.assistant, {"memory/2026-03-01.md": "Lunch at the ramen place."})
    now = datetime(2026, 3, 11, tzinfo=UTC)
    [result] = hybrid_search(
        assistant=world.assistant, query="ramen", now=now, explain=True, min_score=0
    ).results
    assert result.explain["decay_multiplier"] == pytest.approx(0.5)
    [undecayed] = hybrid_search(
        assistant=world.assistant, query="ramen", now=now, explain=True, min_score=0, decay=False
    ).results
    assert undecayed.explain["decay_multiplier"] == 1.0


def test_mmr_reorders_near_duplicates_and_reports_positions(world, fake_embeddings) -> None:
    index(
        world.assistant,
        {
            "memory/a.md": "deploy pipeline uses blue green switching on kubernetes",
            "memory/b.md": "deploy pipeline uses blue green switching on kubernetes clusters",
            "memory/c.md": "deploy approvals come from the release manager",
        },
    )
    plain = hybrid_search(
        assistant=world.assistant, query="deploy pipeline kubernetes", explain=True, min_score=0
    )
    diverse = hybrid_search(
        assistant=world.assistant,
        query="deploy pipeline kubernetes",
        explain=True,
        min_score=0,
        mmr=True,
        mmr_lambda=0.3,
    )
    assert [r.path for r in plain.results][:2] in (
        ["memory/a.md", "memory/b.md"],
        ["memory/b.md", "memory/a.md"],
    )
    assert [r.path for r in diverse.results][1] == "memory/c.md"
    assert [r.explain["mmr_position"] for r in diverse.results] == [1, 2, 3]
    assert all(r.explain["mmr_position"] is None for r in plain.results)


def test_max_results_min_score_and_snippets(world, fake_embeddings) -> None:
    index(world.assistant, {f"memory/n{i}.md": f"note {i} about the heron project" for i in range(10)})
    index(world.assistant, {"memory/long.md": "heron " + "x" * 2000})
    response = hybrid_search(assistant=world.assistant, query="heron project")
    assert len(response.results) == 6  # maxResults default
    assert all(r.score >= 0.35 or r.score >= 0.3 for r in response.results)
    long = hybrid_search(assistant=world.assistant, query="heron", max_results=20, min_score=0)
    snippet = next(r.snippet for r in long.results if r.path == "memory/long.md")
    assert len(snippet) == 700
    assert hybrid_search(assistant=world.assistant, query="heron project", max_results=2).results[:2]
    assert len(hybrid_search(assistant=world.assistant, query="heron project", max_results=2).results) == 2
    # Nothing reaches the floor: the nearest come back, marked low-confidence.
    floored = hybrid_search(assistant=world.assistant, query="heron project", min_score=1.0, mode="vector")
    assert floored.low_confidence is True and floored.results and all(r.score < 1.0 for r in floored.results)
    assert hybrid_search(assistant=world.assistant, query="heron project").low_confidence is False


def test_best_snippet_policy_cites_the_matching_lines(world, fake_embeddings) -> None:
    lines = [f"filler line {i} " + "z" * 60 for i in range(1, 21)]
    lines[16] = "The escrow account number is kept in the finance vault."
    index(world.assistant, {"MEMORY.md": "\n".join(lines)})
    [result] = hybrid_search(
        assistant=world.assistant, query="escrow finance vault", snippet_mode="best", snippet_max_chars=200
    ).results
    assert "escrow account" in result.snippet and len(result.snippet) <= 200
    assert result.start_line <= 17 <= result.end_line and result.end_line - result.start_line <= 2
    assert result.citation == f"MEMORY.md#L{result.start_line}-L{result.end_line}"


def test_search_is_scoped_to_the_assistant(world, fake_embeddings) -> None:
    index(world.assistant, {"MEMORY.md": "Acme's launch code name is BLUEBIRD."})
    index(world.other_assistant, {"MEMORY.md": "Globex's launch code name is REDFOX."})
    acme = hybrid_search(assistant=world.assistant, query="launch code name", min_score=0)
    globex = hybrid_search(assistant=world.other_assistant, query="BLUEBIRD launch code", min_score=0)
    assert all("BLUEBIRD" in r.snippet for r in acme.results) and acme.results
    assert all("REDFOX" in r.snippet for r in globex.results)
    assert hybrid_search(assistant=world.other_assistant, query="BLUEBIRD", mode="text").results == []


def test_sources_filter(world, fake_embeddings) -> None:
    index(world.assistant, {"MEMORY.md": "pelican facts"})
    assert hybrid_search(assistant=world.assistant, query="pelican", sources=["sessions"]).results == []
    assert hybrid_search(assistant=world.assistant, query="pelican", sources=["memory"]).results


def test_bad_options_are_refused(world, fake_embeddings) -> None:
    with pytest.raises(SearchOptionError):
        hybrid_search(assistant=world.assistant, query="x", mode="fuzzy")
    with pytest.raises(SearchOptionError):
        hybrid_search(assistant=world.assistant, query="x", sources=["wiki"])
    with pytest.raises(SearchOptionError):
        hybrid_search(assistant=world.assistant, query="x", snippet_mode="middle")


def test_an_empty_query_returns_nothing(world, fake_embeddings) -> None:
    response = hybrid_search(assistant=world.assistant, query="   ")
    assert response.results == [] and response.fallback == "empty_query"


def test_the_first_search_of_a_never_indexed_assistant_queues_its_index_and_answers_at_once(
    world, fake_embeddings, django_capture_on_commit_callbacks
) -> None:
    from memory_app.models import IndexState, MemoryDocument

    # Written without the write receivers running (as if indexed by nobody yet).
    MemoryDocument.objects.create(
        assistant=world.assistant, path="MEMORY.md", content="orphan walrus note", content_hash="x"
    )
    # OpenClaw syncs before the first search of an empty index answers (docs/openclaw-behaviour.md
    # §4.6); here the search answers from what is indexed and says so (docs/design.md §D15).
    # A few notes get their text rows in the request, never their vectors.
    with django_capture_on_commit_callbacks(execute=False) as queued:
        first = search_memory(assistant=world.assistant, query="walrus")
    assert [r.path for r in first.results] == ["MEMORY.md"]
    assert first.index is not None
    assert (first.index.state, first.index.chunks_without_vector) == ("indexing", 1)
    assert list(MemoryChunk.objects.values_list("model", flat=True)) == ["fts-only"]
    assert IndexState.objects.filter(assistant=world.assistant).exists()
    assert len(queued) == 1
    queued[0]()  # the queued reindex, run by a worker
    after = search_memory(assistant=world.assistant, query="walrus")
    assert [r.path for r in after.results] == ["MEMORY.md"]
    assert after.index is not None
    assert (after.index.state, after.index.chunks_without_vector) == ("current", 0)
    assert list(MemoryChunk.objects.values_list("model", flat=True)) == ["fake-embedding"]


def test_the_queued_first_index_leaves_transcripts_to_their_own_index_jobs(
    world, fake_embeddings, django_capture_on_commit_callbacks
) -> None:
    """A whole pass over transcripts would embed a busy session's every message in one job."""
    from memory_app.models import MemoryDocument
    from tests import factories
    from tests.messages import chatter

    session = factories.make_session(world.assistant, key="first-search")
    factories.add_messages(session, *chatter(6))
    MemoryDocument.objects.create(
        assistant=world.assistant, path="MEMORY.md", content="orphan walrus note", content_hash="x"
    )
    transcript = MemoryChunk.objects.filter(session_pk=session.pk)

    with django_capture_on_commit_callbacks(execute=False) as queued:
        first = search_memory(assistant=world.assistant, query="walrus")
    assert [r.path for r in first.results] == ["MEMORY.md"] and not transcript.exists()
    with django_capture_on_commit_callbacks(execute=False) as handed_over:
        for callback in queued:  # the reindex, among the append's jobs
            callback()
    assert not transcript.exists()
    for callback in handed_over:  # the session's own index job
        callback()
    assert transcript.exists()


def test_a_search_after_a_settings_change_queues_the_rebuild(
    world, fake_embeddings, django_capture_on_commit_callbacks
) -> None:
    from memory_app.models import IndexState

    index(world.assistant, {"MEMORY.md": "heron notes " * 10})
    world.assistant.settings["memorySearch"]["chunking"] = {"tokens": 64, "overlap": 8}
    world.assistant.save()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        during = search_memory(assistant=world.assistant, query="heron")
    state = IndexState.objects.get(assistant=world.assistant)
    assert state.building_generation == 2 and during.results  # the old generation answered
    assert during.index is not None and during.index.state == "indexing"
    assert len(callbacks) == 1
    callbacks[0]()  # the queued reindex
    state.refresh_from_db()
    assert state.active_generation == 2 and state.fingerprint["chunking"]["memory"]["tokens"] == 64


def test_chunks_with_only_the_common_terms_are_scored_below_the_rare_match(
    world, fake_embeddings, monkeypatch
) -> None:
    from memory_app.search import candidates

    index(world.assistant, {f"memory/p{i}.md": f"project status update number {i}" for i in range(8)})
    index(world.assistant, {"memory/rare.md": "project status: the quokka migration is blocked"})
    # As ANALYZE would report them: "project" and "status" are in every chunk.
    monkeypatch.setattr(
        candidates,
        "lexeme_stats",
        lambda: candidates.LexemeStats(rows=9, shares={"project": 1.0, "status": 1.0, "update": 0.9}),
    )
    response = hybrid_search(
        assistant=world.assistant, query="quokka project status", mode="text", explain=True, max_results=10
    )
    first, *rest = response.results
    assert first.path == "memory/rare.md"  # the rare term ranks first ...
    assert set(first.explain["matched_terms"]) == {"quokka", "project", "status"}
    # ... and, as in BM25, the chunks holding only both common terms are scored too, below it.
    assert {r.path for r in rest} == {f"memory/p{i}.md" for i in range(8)}
    assert all(r.score < first.score for r in rest)
    # Only common terms: chunks holding all of them are selected and ranked.
    common = hybrid_search(assistant=world.assistant, query="project status", mode="text", max_results=20)
    assert len(common.results) == 9
    # In hybrid mode the vector side's candidates are ranked by text too.
    hybrid = hybrid_search(
        assistant=world.assistant, query="quokka project status", explain=True, min_score=0, max_results=20
    )
    assert any(r.path != "memory/rare.md" and r.explain["text_score"] > 0 for r in hybrid.results)


def test_terms_too_common_alone_select_together(world, fake_embeddings, monkeypatch) -> None:
    from memory_app.search import candidates

    index(
        world.assistant,
        {"memory/a.md": "alpha only", "memory/b.md": "beta only", "memory/ab.md": "alpha beta"},
    )
    monkeypatch.setattr(
        candidates,
        "lexeme_stats",
        lambda: candidates.LexemeStats(rows=1e6, shares={"alpha": 0.01, "beta": 0.01, "only": 0.01}),
    )
    response = hybrid_search(assistant=world.assistant, query="alpha beta", mode="text", max_results=10)
    assert [r.path for r in response.results] == ["memory/ab.md"]


def test_a_large_assistants_pool_read_through_its_own_index_keeps_its_results_and_team(
    world, fake_embeddings, monkeypatch
) -> None:
    from memory_app.search import candidates

    docs = {
        "memory/a.md": "the quokka migration is blocked",
        "memory/b.md": "quokka notes",
        "memory/c.md": "x",
    }
    index(world.assistant, docs)
    index(world.other_assistant, {"memory/a.md": "quokka migration for another team"})

    def search(held: dict[int, float]) -> list[tuple[str, float]]:
        stats = candidates.LexemeStats(rows=1e6, shares={"the": 0.5}, assistant_shares=held)
        monkeypatch.setattr(candidates, "lexeme_stats", lambda: stats)
        terms = candidates.terms_for(
            candidates.Scope(world.assistant.pk, 1, ("memory",)), ["quokka", "migration"]
        )
        assert terms is not None and terms.own_index == bool(held)
        response = hybrid_search(assistant=world.assistant, query="quokka migration", mode="text")
        return [(r.path, r.score) for r in response.results]

    # Listed with most of a million chunks: its pool is read by the full-text match alone, and
    # the other team's chunk that holds both terms is still never a candidate.
    alone = search({world.assistant.pk: 0.9, world.other_assistant.pk: 0.1})
    assert alone == search({})  # not listed: a small assistant, ANDed with its own index
    assert [path for path, _ in alone] == ["memory/a.md", "memory/b.md"]


def test_lexeme_stats_come_from_postgres_statistics(world, fake_embeddings, monkeypatch) -> None:
    from django.db import connection

    from memory_app.search import candidates

    index(world.assistant, {f"memory/n{i}.md": f"common words here {i}" for i in range(30)})
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_app_memorychunk")
    candidates.forget_lexeme_stats()
    assert candidates.lexeme_stats() is None  # 30 rows: too few for the statistics to matter
    candidates.forget_lexeme_stats()
    monkeypatch.setattr(candidates, "MIN_ROWS_FOR_SELECTION", 10)
    stats = candidates.lexeme_stats()
    assert stats.rows == 30 and stats.shares["common"] == pytest.approx(1.0)
    assert stats.assistant_shares == {world.assistant.pk: pytest.approx(1.0)}
    candidates.forget_lexeme_stats()


def test_session_and_memory_timestamps_in_explain(world, fake_embeddings) -> None:
    index(world.assistant, {"MEMORY.md": "kiwi"})
    [result] = hybrid_search(assistant=world.assistant, query="kiwi", explain=True, min_score=0).results
    assert result.explain["chunk_lines"] == [1, 1]
    assert result.session_id is None


@pytest.mark.slow
def test_local_minilm_finds_by_meaning_and_by_exact_token(world, minilm_embeddings) -> None:
    index(
        world.assistant,
        {
            "memory/pets.md": "My cat Mochi only eats salmon-flavoured food.",
            "memory/infra.md": "The build server is reachable at build-07.internal.example.",
            "memory/travel.md": "Flight to Lisbon departs on the 14th from gate B22.",
        },
    )
    by_meaning = hybrid_search(assistant=world.assistant, query="what does my kitten like to eat?")
    assert by_meaning.mode == "hybrid" and by_meaning.results[0].path == "memory/pets.md"
    by_token = hybrid_search(assistant=world.assistant, query="build-07.internal.example")
    assert by_token.results[0].path == "memory/infra.md"
    chunk = MemoryChunk.objects.filter(assistant=world.assistant).first()
    assert chunk.dims == 384 and chunk.model == "sentence-transformers/all-MiniLM-L6-v2"
    assert timedelta(0) <= datetime.now(UTC) - chunk.created_at
