"""Fusion, temporal decay, MMR, minScore and keyword helpers (docs/openclaw-behaviour.md §4.7-4.9)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, date, datetime

import pytest

from memory_app.search.ranking import (
    Candidate,
    Ranked,
    apply_min_score,
    apply_temporal_decay,
    date_from_memory_path,
    decay_multiplier,
    fts_only_boost,
    fuse_scores,
    is_evergreen,
    jaccard,
    mmr_rerank,
    mmr_tokens,
    normalize_weights,
    query_weights,
    truncate_snippet,
)

NOW_MS = int(datetime(2026, 3, 18, tzinfo=UTC).timestamp() * 1000)
DAY_MS = 86_400_000


def _candidate(
    chunk_id: str,
    *,
    path: str = "memory/notes.md",
    source: str = "memory",
    snippet: str = "",
    vector_score: float | None = None,
    text_score: float | None = None,
    timestamp_ms: int | None = None,
) -> Candidate:
    return Candidate(
        id=chunk_id,
        path=path,
        source=source,
        start_line=1,
        end_line=2,
        text=snippet,
        snippet=snippet,
        vector_score=vector_score,
        text_score=text_score,
        timestamp_ms=timestamp_ms,
    )


def _ranked(chunk_id: str, score: float, **kwargs: object) -> Ranked:
    return Ranked(_candidate(chunk_id, **kwargs), score, score, 0.0)  # type: ignore[arg-type]


def _ids(results: list[Ranked]) -> list[str]:
    return [ranked.candidate.id for ranked in results]


# --- weights and fusion ---------------------------------------------------------------------


def test_normalize_weights() -> None:
    assert normalize_weights(0.7, 0.3) == pytest.approx((0.7, 0.3))
    assert normalize_weights(0.35, 0.15) == pytest.approx((0.7, 0.3))
    assert normalize_weights(2.0, 0.5) == pytest.approx((2 / 3, 1 / 3))  # 2.0 clamps to 1
    assert normalize_weights(-1.0, 0.4) == pytest.approx((0.0, 1.0))
    assert normalize_weights(0.0, 0.0) == (0.7, 0.3)
    assert normalize_weights(math.nan, 0.0) == (0.7, 0.3)


def test_fuse_scores_weighs_both_sides_with_normalised_weights() -> None:
    candidates = [
        _candidate("a", vector_score=0.8),
        _candidate("b", vector_score=0.6, text_score=0.5),
        _candidate("c", text_score=1.0),
    ]

    fused = fuse_scores(candidates, vector_weight=0.35, text_weight=0.15)  # -> 0.7 / 0.3

    assert _ids(fused) == ["a", "b", "c"]
    scores = {ranked.candidate.id: ranked for ranked in fused}
    assert scores["a"].score == pytest.approx(0.7 * 0.8)
    assert (scores["a"].vector_score, scores["a"].text_score) == (0.8, 0.0)
    assert scores["b"].score == pytest.approx(0.7 * 0.6 + 0.3 * 0.5)
    assert (scores["b"].vector_score, scores["b"].text_score) == (0.6, 0.5)
    assert scores["c"].score == pytest.approx(0.3)
    assert (scores["c"].vector_score, scores["c"].text_score) == (0.0, 1.0)


def test_a_latin_query_keeps_the_configured_weights() -> None:
    weights = query_weights(0.7, 0.3, cjk_share=0.0, cjk_text_weight_scale=0.5)

    assert weights == pytest.approx((0.7, 0.3))


def test_a_cjk_query_scales_the_text_weight_then_normalises() -> None:
    weights = query_weights(0.7, 0.3, cjk_share=1.0, cjk_text_weight_scale=0.5)

    assert weights == pytest.approx((0.7 / 0.85, 0.15 / 0.85))


def test_a_mixed_query_scales_the_text_weight_by_its_share_of_cjk_terms() -> None:
    # Half the terms CJK: the text weight is scaled halfway, 0.3 * 0.75.
    weights = query_weights(0.7, 0.3, cjk_share=0.5, cjk_text_weight_scale=0.5)

    assert weights == pytest.approx((0.7 / 0.925, 0.225 / 0.925))


def test_explicit_weights_are_scaled_the_same_way_and_scale_one_turns_it_off() -> None:
    assert query_weights(0.5, 0.5, cjk_share=1.0, cjk_text_weight_scale=0.5) == pytest.approx((2 / 3, 1 / 3))
    assert query_weights(0.5, 0.5, cjk_share=1.0, cjk_text_weight_scale=1.0) == pytest.approx((0.5, 0.5))
    assert query_weights(0.0, 1.0, cjk_share=1.0, cjk_text_weight_scale=0.5) == pytest.approx((0.0, 1.0))


# --- temporal decay -------------------------------------------------------------------------


def test_decay_multiplier_values() -> None:
    assert round(decay_multiplier(10, 30), 4) == 0.7937
    assert decay_multiplier(30, 30) == pytest.approx(0.5)
    assert decay_multiplier(60, 30) == pytest.approx(0.25)
    assert decay_multiplier(0, 30) == 1.0
    assert decay_multiplier(-5, 30) == 1.0  # future dates
    assert decay_multiplier(10, 0) == 1.0


def test_date_from_memory_path() -> None:
    assert date_from_memory_path("memory/2026-02-16.md") == date(2026, 2, 16)
    assert date_from_memory_path("./memory/2026-02-16.md") == date(2026, 2, 16)
    assert date_from_memory_path("memory\\2026-02-16.md") == date(2026, 2, 16)
    assert date_from_memory_path("extra/memory/2024-02-29.md") == date(2024, 2, 29)
    assert date_from_memory_path("memory/2026-02-30.md") is None
    assert date_from_memory_path("memory/2026-13-01.md") is None
    assert date_from_memory_path("memory/0099-01-01.md") is None
    assert date_from_memory_path("memory/2026-02-16-notes.md") is None
    assert date_from_memory_path("xmemory/2026-02-16.md") is None
    assert date_from_memory_path("MEMORY.md") is None


def test_is_evergreen() -> None:
    assert is_evergreen("MEMORY.md", "memory")
    assert is_evergreen("memory.md", "memory")
    assert is_evergreen("memory/projects/alpha.md", "memory")
    assert is_evergreen("memory/2026-02-16-notes.md", "memory")
    assert not is_evergreen("memory/2026-02-16.md", "memory")
    assert not is_evergreen("notes/ideas.md", "memory")
    assert not is_evergreen("MEMORY.md", "sessions")


def test_apply_temporal_decay() -> None:
    results = [
        _ranked("evergreen", 0.5, path="MEMORY.md"),
        _ranked("topic", 0.5, path="memory/2026-02-16-notes.md"),
        _ranked("ten-days", 0.9, path="memory/2026-03-08.md"),
        _ranked("thirty-days", 0.8, path="memory/2026-02-16.md"),
        _ranked("future", 0.45, path="memory/2026-04-01.md"),
        _ranked("session-old", 0.6, path="sessions/s1", source="sessions", timestamp_ms=NOW_MS - 30 * DAY_MS),
        _ranked("session-untimed", 0.2, path="sessions/s2", source="sessions"),
    ]

    decayed = apply_temporal_decay(results, half_life_days=30, now_ms=NOW_MS)

    by_id = {ranked.candidate.id: ranked for ranked in decayed}
    assert round(by_id["ten-days"].decay_multiplier, 4) == 0.7937
    assert by_id["ten-days"].score == pytest.approx(0.9 * 0.5 ** (10 / 30))
    assert by_id["thirty-days"].score == pytest.approx(0.4)
    assert by_id["session-old"].score == pytest.approx(0.3)
    for unchanged in ("evergreen", "topic", "future", "session-untimed"):
        assert by_id[unchanged].score == results[_ids(results).index(unchanged)].score
        assert by_id[unchanged].decay_multiplier == 1.0
    # Sorted by decayed score, the tie of evergreen and topic kept in input order.
    assert _ids(decayed) == [
        "ten-days",
        "evergreen",
        "topic",
        "future",
        "thirty-days",
        "session-old",
        "session-untimed",
    ]
    # The side scores are diagnostics and are not decayed.
    assert by_id["thirty-days"].vector_score == 0.8


# --- MMR ------------------------------------------------------------------------------------


def test_mmr_tokens() -> None:
    assert mmr_tokens("Hello World_1, hello!") == frozenset({"hello", "world_1"})
    assert mmr_tokens("向量搜索") == frozenset({"向", "量", "搜", "索", "向量", "量搜", "搜索"})
    # No bigram across the Latin letter between two CJK chars.
    assert mmr_tokens("向a量") == frozenset({"a", "向", "量"})
    assert mmr_tokens("カタ한") == frozenset({"カ", "タ", "한", "カタ", "タ한"})
    assert mmr_tokens("") == frozenset()


def test_jaccard_edge_cases() -> None:
    assert jaccard(frozenset(), frozenset()) == 1.0
    assert jaccard(frozenset({"a"}), frozenset()) == 0.0
    assert jaccard(frozenset(), frozenset({"a"})) == 0.0
    assert jaccard(frozenset({"a", "b"}), frozenset({"b", "c"})) == pytest.approx(1 / 3)
    assert jaccard(frozenset({"a", "b"}), frozenset({"a", "b"})) == 1.0


def _mmr_set() -> list[Ranked]:
    return [
        _ranked("a", 0.9, snippet="alpha beta gamma delta"),
        _ranked("a-copy", 0.85, snippet="alpha beta gamma delta"),
        _ranked("b", 0.8, snippet="epsilon zeta eta theta"),
        _ranked("c", 0.5, snippet="iota kappa"),
    ]


def test_mmr_pushes_near_duplicates_down() -> None:
    # rel = a 1, a-copy 0.875, b 0.75, c 0. Round 2: a-copy 0.7*0.875 - 0.3*1 = 0.3125 loses
    # to b 0.7*0.75 = 0.525.
    reranked = mmr_rerank(_mmr_set(), lambda_=0.7)

    assert _ids(reranked) == ["a", "b", "a-copy", "c"]
    assert [ranked.mmr_position for ranked in reranked] == [1, 2, 3, 4]
    assert [ranked.score for ranked in reranked] == [0.9, 0.8, 0.85, 0.5]


def test_mmr_lambda_zero_breaks_ties_by_raw_score() -> None:
    assert _ids(mmr_rerank(_mmr_set(), lambda_=0.0)) == ["a", "b", "c", "a-copy"]
    assert _ids(mmr_rerank(_mmr_set(), lambda_=-3.0)) == ["a", "b", "c", "a-copy"]


def test_mmr_lambda_one_is_a_plain_score_sort() -> None:
    shuffled = list(reversed(_mmr_set()))

    assert _ids(mmr_rerank(shuffled, lambda_=1.0)) == ["a", "a-copy", "b", "c"]
    assert _ids(mmr_rerank(shuffled, lambda_=7.0)) == ["a", "a-copy", "b", "c"]


def test_mmr_with_equal_scores_prefers_diverse_items() -> None:
    items = [
        _ranked("x1", 0.5, snippet="deploy plan staging"),
        _ranked("x2", 0.5, snippet="deploy plan staging"),
        _ranked("y", 0.5, snippet="向量搜索"),
    ]

    assert _ids(mmr_rerank(items, lambda_=0.5)) == ["x1", "y", "x2"]


def test_mmr_returns_everything_for_short_inputs() -> None:
    assert mmr_rerank([], lambda_=0.7) == []
    single = mmr_rerank([_ranked("a", 0.1)], lambda_=0.7)
    assert _ids(single) == ["a"] and single[0].mmr_position == 1


# --- minScore -------------------------------------------------------------------------------


def test_keyword_only_hit_is_rescued_when_nothing_passes() -> None:
    merged = fuse_scores(
        [_candidate("weak-vector", vector_score=0.3), _candidate("keyword-only", text_score=1.0)],
        vector_weight=0.7,
        text_weight=0.3,
    )
    assert [round(ranked.score, 2) for ranked in merged] == [0.21, 0.3]

    kept = apply_min_score(merged, min_score=0.35, keyword_ids={"keyword-only"}, max_results=6)

    assert _ids(kept) == ["keyword-only"]


def test_keyword_backed_results_fill_the_slots_left_after_the_strict_ones() -> None:
    results = [_ranked("strong", 0.6), _ranked("weak", 0.34), _ranked("k1", 0.3), _ranked("k2", 0.05)]

    kept = apply_min_score(results, min_score=0.35, keyword_ids={"strong", "k1", "k2"}, max_results=6)

    assert _ids(kept) == ["strong", "k1", "k2"]
    # Strict results come first even when a filler was ranked above one (after MMR, say).
    reordered = [_ranked("k1", 0.3), _ranked("strong", 0.6)]
    assert _ids(apply_min_score(reordered, min_score=0.35, keyword_ids={"k1"}, max_results=6)) == [
        "strong",
        "k1",
    ]
    assert _ids(apply_min_score(results, min_score=0.35, keyword_ids={"k1", "k2"}, max_results=2)) == [
        "strong",
        "k1",
    ]


def test_without_keyword_hits_min_score_is_strict() -> None:
    results = [_ranked("v1", 0.34), _ranked("v2", 0.1)]

    assert apply_min_score(results, min_score=0.35, keyword_ids=set(), max_results=6) == []
    assert _ids(apply_min_score(results, min_score=0.3, keyword_ids=set(), max_results=6)) == ["v1"]


def test_min_score_slices_to_max_results() -> None:
    results = [_ranked(str(index), 0.9 - index / 100) for index in range(10)]

    kept = apply_min_score(results, min_score=0.35, keyword_ids=set(), max_results=6)

    assert _ids(kept) == ["0", "1", "2", "3", "4", "5"]


# --- FTS-only path --------------------------------------------------------------------------


def test_fts_only_boost_formula() -> None:
    text = "Deploy notes for the Friday window"  # 34 chars, 6 unique tokens
    # query tokens {deploy, staging}: overlap 1 -> coverage 0.5, density 1/6;
    # "deploy" is in the path: +0.18; length boost min(34/160, 0.18) = 0.18.
    score = fts_only_boost(0.05, query="deploy staging DEPLOY", text=text, path="memory/deploy.md")

    assert score == pytest.approx(0.05 + 0.45 * 0.5 + 0.2 / 6 + 0.18 + 0.18)


def test_fts_only_boost_caps_at_one_and_needs_query_tokens() -> None:
    text = "deploy plan for staging " * 10

    assert fts_only_boost(0.5, query="deploy plan", text=text, path="memory/deploy-plan.md") == 1.0
    assert fts_only_boost(0.42, query="?!", text=text, path="x.md") == 0.42


def test_truncate_snippet_is_surrogate_safe() -> None:
    assert truncate_snippet("a" * 800) == "a" * 700
    assert truncate_snippet("short") == "short"
    # 699 units then a pair that would end at unit 701: the pair is dropped whole.
    assert truncate_snippet("a" * 699 + "\U00020000" + "b") == "a" * 699
    assert truncate_snippet("\U00020000" * 3, max_chars=4) == "\U00020000" * 2


def test_ranked_is_immutable() -> None:
    ranked = _ranked("a", 0.5)

    with pytest.raises(AttributeError):
        ranked.score = 1.0  # type: ignore[misc]
    assert replace(ranked, score=1.0).score == 1.0


def test_full_ties_go_to_the_shorter_chunk_then_the_path_whatever_the_input_order():
    from memory_app.search.ranking import sort_by_score

    long_a = _ranked("a", 0.5, path="memory/a.md", snippet="heron " + "filler " * 20)
    short_b = _ranked("b", 0.5, path="memory/b.md", snippet="heron notes")
    same_c = _ranked("c", 0.5, path="memory/c.md", snippet="heron notes")
    for order in ([long_a, short_b, same_c], [same_c, long_a, short_b], [long_a, same_c, short_b]):
        assert _ids(sort_by_score(order)) == ["b", "c", "a"]
