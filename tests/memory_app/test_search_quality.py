"""What a new user asks finds what answers it (real Postgres): stems, exact tokens, one result per
region, exact citations, calibrated scores, and the default embedder on natural questions."""

from __future__ import annotations

import pytest

from memory_app.index.config import Chunking, chunking_for
from memory_app.models import MemoryChunk, Source
from memory_app.search.calibration import PROFILES, RAW_COSINE, UNMEASURED, profile_for, scale_for
from memory_app.search.hybrid import hybrid_search
from openclaw_site.teams.assistant_settings import parse_settings
from sessions_app.indexing import index_session_transcript
from tests import factories
from tests.embedding_fixtures import RecordingE5Embedder, RecordingE5Model
from tests.memory_app.test_search import index

pytestmark = pytest.mark.django_db

DECISION = "Team decided on PostgreSQL + pgvector for the memory store."


def test_words_match_their_stems_and_identifiers_stay_exact(world, no_embeddings) -> None:
    index(
        world.assistant,
        {
            "memory/2026-03-02.md": f"# Notes\n\n{DECISION}\nWe picked the blue logo.",
            "memory/config.md": "Set memorySearch.query.hybrid to true; commit 9f3c2ab41d7e shipped it.",
            "memory/other.md": "The query planner picks hybrid joins for memory searches.",
        },
    )
    decided = hybrid_search(assistant=world.assistant, query="what did we decide", explain=True)
    assert decided.results[0].path == "memory/2026-03-02.md"  # "decide" finds "decided"
    assert "decide" in decided.results[0].explain["matched_terms"]
    picked = {r.path for r in hybrid_search(assistant=world.assistant, query="pick").results}
    assert picked == {"memory/2026-03-02.md", "memory/other.md"}  # "picked" and "picks"
    exact = hybrid_search(assistant=world.assistant, query="memorySearch.query.hybrid")
    assert exact.results[0].path == "memory/config.md"
    assert hybrid_search(assistant=world.assistant, query="9f3c2ab").results[0].path == "memory/config.md"


def test_a_chinese_exact_phrase_comes_first(world, no_embeddings) -> None:
    index(
        world.assistant,
        {
            "memory/deploy.md": "部署窗口是每周二晚上十点。",
            "memory/other.md": "部门会议改到周三，窗口旁边的桌子归设计组。",
        },
    )
    assert hybrid_search(assistant=world.assistant, query="部署窗口").results[0].path == "memory/deploy.md"


def test_ties_are_broken_by_the_better_match_not_the_path(world, no_embeddings) -> None:
    index(
        world.assistant,
        {
            "memory/a.md": "heron " + "filler words about many unrelated things " * 8,
            "memory/b.md": "heron notes",
        },
    )
    response = hybrid_search(assistant=world.assistant, query="heron", mode="text", max_results=5)
    assert [r.path for r in response.results] == ["memory/b.md", "memory/a.md"]


def test_one_result_per_document_region_and_no_empty_snippet(world, fake_embeddings) -> None:
    world.assistant.settings = {"memorySearch": {"chunking": {"tokens": 16, "overlap": 8}}}
    world.assistant.save()
    lines = [f"The heron runbook step {i} moves the heron cluster." for i in range(1, 9)]
    index(world.assistant, {"memory/runbook.md": "\n".join(lines) + "\n\n\n"})
    chunks = list(MemoryChunk.objects.filter(assistant=world.assistant).order_by("start_line"))
    assert len(chunks) > 2
    response = hybrid_search(assistant=world.assistant, query="heron runbook", min_score=0, max_results=10)
    ranges = [(r.start_line, r.end_line) for r in response.results]
    for i, (start, end) in enumerate(ranges):  # no two results share a line of the file
        assert all(end < other_start or other_end < start for other_start, other_end in ranges[i + 1 :])
    assert all(r.snippet.strip() for r in response.results)


def test_citations_are_exact_at_both_ends(world, fake_embeddings) -> None:
    index(world.assistant, {"MEMORY.md": "one\ntwo\nthree heron\nfour\nfive\n"})
    [result] = hybrid_search(assistant=world.assistant, query="heron", min_score=0).results
    assert result.citation == "MEMORY.md#L1-L5" and result.snippet == "one\ntwo\nthree heron\nfour\nfive"
    index(world.assistant, {"memory/gap.md": "\n\nheron alone\n\n"})
    gap = hybrid_search(assistant=world.assistant, query="heron alone", min_score=0).results[0]
    assert (gap.citation, gap.snippet) == ("memory/gap.md#L3", "heron alone")


def test_scores_are_calibrated_per_embedder() -> None:
    e5 = scale_for("intfloat/multilingual-e5-small")
    # e5's unrelated texts (about 0.72) score 0, identical ones 1; MiniLM keeps its cosine.
    assert e5.normalise(0.72) == 0.0 and e5.normalise(0.60) == 0.0 and e5.normalise(1.0) == 1.0
    assert e5.normalise(0.86) == pytest.approx(0.5) and e5.normalise(0.80) < e5.normalise(0.91)
    assert scale_for("sentence-transformers/all-MiniLM-L6-v2") == RAW_COSINE
    assert scale_for("some-remote-model") == RAW_COSINE
    assert set(PROFILES) >= {"intfloat/multilingual-e5-small", "sentence-transformers/all-MiniLM-L6-v2"}


def test_each_embedder_reads_chunks_as_long_as_its_tokenizer_allows() -> None:
    # e5 reads OpenClaw's 400-token chunks whole; MiniLM and an unmeasured model are cut to fit.
    assert profile_for("intfloat/multilingual-e5-small").pieces_per_token == 1.25
    assert profile_for("sentence-transformers/all-MiniLM-L6-v2").pieces_per_token == 2.0
    assert profile_for("some-remote-model") == profile_for(None) == UNMEASURED
    memory_search = parse_settings(None).memory_search
    e5 = RecordingE5Embedder(model=RecordingE5Model())
    assert chunking_for(memory_search, Source.MEMORY, e5) == Chunking(400, 80)
    assert chunking_for(memory_search, Source.SESSIONS, e5) == Chunking(128, 25, max_line_tokens=400)


def test_search_fuses_the_calibrated_vector_score(world, recording_e5: RecordingE5Model) -> None:
    index(world.assistant, {"memory/a.md": "heron migration runbook"})
    response = hybrid_search(assistant=world.assistant, query="heron migration", explain=True, min_score=0)
    explain = response.results[0].explain
    assert explain["vector_score"] == pytest.approx(
        scale_for("intfloat/multilingual-e5-small").normalise(explain["cosine"]), abs=1e-5
    )


def test_the_e5_prefixes_reach_the_model_when_indexing_and_searching(
    world, recording_e5: RecordingE5Model
) -> None:
    index(world.assistant, {"MEMORY.md": DECISION})
    session = factories.make_session(world.assistant, key="chat")
    factories.add_messages(session, {"role": "user", "content": "we decided to use PostgreSQL"})
    index_session_transcript(session.pk)
    recording_e5.read.clear()
    hybrid_search(assistant=world.assistant, query="which database did we pick")
    assert recording_e5.read == ["query: which database did we pick"]
    stored = set(MemoryChunk.objects.filter(assistant=world.assistant).values_list("text", flat=True))
    assert f"passage: {DECISION}" not in stored  # the prefix is the model's input, not the text


@pytest.mark.slow
@pytest.mark.parametrize("question", ["which database did we pick", "what did we decide about the database"])
def test_natural_questions_on_a_small_memory_find_the_decision(world, local_embeddings, question) -> None:
    index(
        world.assistant,
        {
            "memory/2026-03-02.md": f"# 2026-03-02\n\n- Lunch with the design team.\n- {DECISION}\n"
            "- Alice is on holiday next week.",
            "MEMORY.md": "# Preferences\n\nReplies in English. Standup at 9:30.",
        },
    )
    session = factories.make_session(world.assistant, key="chat")
    factories.add_messages(
        session,
        {"role": "user", "content": "Did we settle the storage question?"},
        {"role": "assistant", "content": "Yes, we decided to use PostgreSQL."},
    )
    index_session_transcript(session.pk)
    response = hybrid_search(assistant=world.assistant, query=question)
    assert response.mode == "hybrid" and response.results
    top = response.results[0]
    assert DECISION in top.snippet or "we decided to use PostgreSQL" in top.snippet


def test_switching_the_embedder_rebuilds_the_index(
    world, fake_embeddings, settings, django_capture_on_commit_callbacks
) -> None:
    from memory_app.models import IndexState
    from memory_app.search.service import search_memory
    from providers.embeddings import reset_embedders

    index(world.assistant, {"MEMORY.md": DECISION})
    RecordingE5Embedder.engine = RecordingE5Model()
    settings.EMBEDDING_BACKEND = "tests.embedding_fixtures.RecordingE5Embedder"  # e5 from now on
    reset_embedders()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:  # the search queues the rebuild
        during = search_memory(assistant=world.assistant, query="PostgreSQL")
    assert during.fallback == "index_rebuilding" and during.results  # the old rows answer by text
    callbacks[0]()  # the queued full reindex
    state = IndexState.objects.get(assistant=world.assistant)
    assert state.fingerprint["model"] == "intfloat/multilingual-e5-small" and state.active_generation == 2
    assert f"passage: {DECISION}" in RecordingE5Embedder.engine.read
    assert hybrid_search(assistant=world.assistant, query="PostgreSQL").mode == "hybrid"
    reset_embedders()
