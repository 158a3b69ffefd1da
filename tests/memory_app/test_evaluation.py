"""The retrieval evaluation (`evaluation.metrics`, `evaluation.locomo`, `eval_locomo`).

The metric tests are pure; the others load a tiny LoCoMo-shaped conversation into real Postgres
through the real append and indexing paths, with FakeOpenAI's bag-of-words embeddings.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluation.locomo import (
    EvalConfig,
    LocomoFormatError,
    load_conversation,
    parse_session_date,
    questions,
    run_evaluation,
)
from evaluation.metrics import (
    EvalQuestion,
    EvidenceTurn,
    Hit,
    found_at_k,
    found_in,
    read_within,
    score_question,
)
from memory_app.models import EmbeddingCache, MemoryChunk
from openclaw_site.models import Team
from sessions_app.models import Message, Session

LIGHTHOUSE = EvidenceTurn(path="sessions/a.jsonl", line=3, text="User: I painted a lighthouse at dawn.")
KAYAK = EvidenceTurn(path="sessions/b.jsonl", line=7, text="Assistant: We rented a red kayak.")


def hit(
    path: str, start: int, end: int, snippet: str, s_start: int | None = None, s_end: int | None = None
) -> Hit:
    return Hit(
        path=path,
        start_line=start,
        end_line=end,
        snippet=snippet,
        snippet_start=start if s_start is None else s_start,
        snippet_end=end if s_end is None else s_end,
    )


# --- metrics (pure) -----------------------------------------------------------------------------


def test_recall_at_k_counts_a_turn_inside_a_top_k_chunk_of_its_own_path() -> None:
    hits = [
        hit("sessions/b.jsonl", 1, 5, "x"),
        hit("sessions/a.jsonl", 2, 4, "y"),
        hit("sessions/b.jsonl", 6, 9, "z"),
    ]
    assert found_at_k(hits, LIGHTHOUSE, 2)
    assert not found_at_k(hits, LIGHTHOUSE, 1)
    assert not found_at_k(hits, KAYAK, 2)  # line 7 of b is only in the third chunk
    assert found_at_k(hits, KAYAK, 3)
    assert not found_at_k(
        [hit("sessions/other.jsonl", 1, 9, "x")], LIGHTHOUSE, 10
    )  # same line, other session


def test_the_budget_cuts_the_snippet_that_crosses_it() -> None:
    hits = [hit("p", 1, 1, "a" * 30), hit("p", 2, 2, "b" * 30), hit("p", 3, 3, "c" * 30)]
    shown = read_within(hits, 50)
    assert [text for _, text in shown] == ["a" * 30, "b" * 20]
    assert sum(len(text) for _, text in shown) == 50


def test_a_turn_counts_within_the_budget_only_when_its_whole_line_is_read() -> None:
    line = LIGHTHOUSE.text
    before = "Assistant: Morning! What did you do?\n"
    whole = [hit("sessions/a.jsonl", 2, 3, before + line)]
    assert found_in(read_within(whole, 4000), LIGHTHOUSE)
    # The budget ends inside the evidence line: the model never read all of it.
    assert not found_in(read_within(whole, len(before) + len(line) - 1), LIGHTHOUSE)
    assert found_in(read_within(whole, len(before) + len(line)), LIGHTHOUSE)
    # A snippet that cites other lines of the chunk (a head snippet cut before line 3) does not count.
    assert not found_in(read_within([hit("sessions/a.jsonl", 2, 3, before + line, 2, 2)], 4000), LIGHTHOUSE)


def test_score_question_gives_each_evidence_turn_an_equal_share() -> None:
    question = EvalQuestion(text="what did we do?", category=1, evidence=(LIGHTHOUSE, KAYAK))
    filler = "Assistant: " + "blah " * 20
    hits = [
        hit("sessions/c.jsonl", 1, 1, filler),
        hit("sessions/a.jsonl", 3, 3, LIGHTHOUSE.text),
        hit("sessions/b.jsonl", 5, 8, "User: and then?\n" + KAYAK.text, 5, 8),
    ]
    score = score_question(question, hits, ks=(1, 2, 3), budget=len(filler) + len(LIGHTHOUSE.text) + 20)
    assert score.at_k == {1: 0.0, 2: 0.5, 3: 1.0}
    assert score.in_budget == 0.5  # the kayak line lies beyond the budget
    assert score.results_read == 3 and score.chars_read == len(filler) + len(LIGHTHOUSE.text) + 20


def test_session_dates_parse_as_utc() -> None:
    assert parse_session_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_date("12:09 am on 13 September, 2023") == datetime(2023, 9, 13, 0, 9, tzinfo=UTC)
    with pytest.raises(LocomoFormatError):
        parse_session_date("yesterday")


# --- through the database -----------------------------------------------------------------------


def sample() -> dict:
    return {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "9:00 am on 2 March, 2024",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo! How was the weekend?"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Great, I finally fixed the old sailboat."},
                {
                    "speaker": "Ann",
                    "dia_id": "D1:3",
                    "text": "Look at my garden.",
                    "img_url": ["http://x/y.jpg"],
                    "blip_caption": "a photo of tulips in a garden",
                },
            ],
            "session_2_date_time": "6:30 pm on 9 March, 2024",
            "session_2": [
                {"speaker": "Bo", "dia_id": "D2:1", "text": "I adopted a greyhound named Pixel."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Pixel is a lovely name for a greyhound!"},
            ],
        },
        "qa": [
            {"question": "Who fixed the old sailboat?", "answer": "Bo", "evidence": ["D1:2"], "category": 4},
            {
                "question": "Which flowers grow in Ann's garden?",
                "answer": "tulips",
                "evidence": ["D1:3"],
                "category": 1,
            },
            {
                "question": "What is the greyhound called?",
                "answer": "Pixel",
                "evidence": ["D2:1; D2:2"],
                "category": 2,
            },
            {"question": "What did Ann sell?", "answer": "nothing", "evidence": [], "category": 5},
            {"question": "Where is the boat?", "answer": "?", "evidence": ["D9:9"], "category": 4},
        ],
    }


@pytest.mark.django_db
def test_a_conversation_loads_as_dated_sessions_and_indexed_transcripts(world, fake_embeddings) -> None:
    loaded = load_conversation(assistant=world.assistant, sample=sample())
    sessions = list(Session.objects.filter(assistant=world.assistant).order_by("pk"))
    assert [s.key for s in sessions] == ["tiny-1-s1", "tiny-1-s2"]
    first = list(Message.objects.filter(session=sessions[0]).order_by("seq"))
    assert [m.role for m in first] == ["user", "assistant", "user"]
    assert first[0].created_at == datetime(2024, 3, 2, 9, 0, tzinfo=UTC)
    assert (first[1].created_at - first[0].created_at).total_seconds() == 5
    assert first[2].content == "Look at my garden. [image: a photo of tulips in a garden]"
    assert loaded.turns["D1:3"] == EvidenceTurn(
        path=f"sessions/{sessions[0].key}.jsonl",
        line=first[2].seq,
        text="User: Look at my garden. [image: a photo of tulips in a garden]",
    )
    assert loaded.end == datetime(2024, 3, 9, 18, 30, 5, tzinfo=UTC)
    # Indexed through the transcript path: every turn is in a chunk, cited by its seq.
    chunks = MemoryChunk.objects.filter(assistant=world.assistant)
    assert {c.path for c in chunks} == {f"sessions/{s.key}.jsonl" for s in sessions}
    assert all(c.embedding is not None for c in chunks)

    asked, skipped = questions(sample(), loaded.turns)
    assert [q.text for q in asked] == [
        "Who fixed the old sailboat?",
        "Which flowers grow in Ann's garden?",
        "What is the greyhound called?",
    ]
    assert [t.line for t in asked[2].evidence] == [1, 2]  # "D2:1; D2:2" holds two ids
    assert skipped == 1  # D9:9 names no turn; category 5 is not asked


@pytest.mark.django_db
def test_run_evaluation_scores_every_method_on_the_same_chunks(fake_embeddings) -> None:
    from providers.embeddings import get_embedder

    config = EvalConfig(
        label="tiny", chunking={"sessions": {"tokens": 16, "overlap": 0}}, query={"minScore": 0}
    )
    run = run_evaluation(
        samples=[sample()], configs=[config], embedder=get_embedder(), max_results=10, budget=4000
    )
    assert run.questions == 3 and run.skipped_questions == 1 and run.messages == 5
    [result] = run.configs
    by_method = {m["method"]: m for m in result["methods"]}
    assert set(by_method) == {
        "vector only",
        "text only",
        "hybrid",
        "hybrid + MMR",
        "hybrid + decay",
        "BM25 (rank_bm25)",
        "exact cosine",
    }
    # 16-token (64-char) chunks: every message is a chunk of its own, kept whole.
    assert result["chunks"] == 5
    for method in ("hybrid", "text only", "BM25 (rank_bm25)"):
        recall = by_method[method]["recall"]
        # Each question names words of its evidence: found first, and read whole within 4000 chars.
        assert recall["all"]["at_5"] == 100.0, method
        assert recall["all"]["in_budget"] == 100.0, method
        assert recall["4"]["questions"] == 1 and recall["2"]["questions"] == 1


@pytest.mark.django_db
def test_a_budget_smaller_than_any_line_finds_nothing(fake_embeddings) -> None:
    from providers.embeddings import get_embedder

    config = EvalConfig(label="tiny", chunking={}, query={"minScore": 0})
    run = run_evaluation(
        samples=[sample()], configs=[config], embedder=get_embedder(), max_results=10, budget=10
    )
    for method in run.configs[0]["methods"]:
        assert method["recall"]["all"]["in_budget"] == 0.0
        assert method["mean_chars_read"] <= 10


@pytest.mark.django_db
def test_the_command_prints_json_and_leaves_only_the_embedding_cache(tmp_path, fake_embeddings) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([sample()]))
    out = io.StringIO()
    call_command(
        "eval_locomo",
        str(path),
        "--embedder",
        "configured",
        "--json",
        "--min-score",
        "0",
        "--session-chunk-tokens",
        "16,64",
        "--session-chunk-overlap",
        "0",
        "--modes",
        "hybrid",
        stdout=out,
        stderr=io.StringIO(),
    )
    report = json.loads(out.getvalue())
    assert report["questions"] == 3
    assert [c["label"].split(",")[0] for c in report["configs"]] == [
        "sessions 16/0 tokens",
        "sessions 64/0 tokens",
    ]
    assert [m["method"] for m in report["configs"][0]["methods"]] == [
        "hybrid",
        "BM25 (rank_bm25)",
        "exact cosine",
    ]
    # Thrown away: no team, session or chunk is left; the vectors stay cached by text hash.
    assert not Team.objects.filter(slug__startswith="locomo-eval").exists()
    assert not Session.objects.exists() and not MemoryChunk.objects.exists()
    assert EmbeddingCache.objects.exists()


@pytest.mark.django_db
def test_the_command_rejects_bad_input(tmp_path, fake_embeddings) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"not": "a list"}))
    with pytest.raises(CommandError, match="not a LoCoMo file"):
        call_command("eval_locomo", str(path), "--embedder", "configured", stdout=io.StringIO())
    path.write_text(json.dumps([sample()]))
    with pytest.raises(CommandError, match="overlap"):
        call_command(
            "eval_locomo",
            str(path),
            "--embedder",
            "configured",
            "--session-chunk-tokens",
            "8",
            "--session-chunk-overlap",
            "8",
            stdout=io.StringIO(),
        )
    with pytest.raises(CommandError, match="unknown mode"):
        call_command(
            "eval_locomo", str(path), "--embedder", "configured", "--modes", "magic", stdout=io.StringIO()
        )
    assert not Team.objects.filter(slug__startswith="locomo-eval").exists()
