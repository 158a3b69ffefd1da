"""Text preparation for Postgres full-text search (docs/design.md §D6), without a database.

The real parser is exercised by the database tests; here `_simple_lexemes` stands in for
`to_tsvector('simple', ...)` roughly: lowercase, split on anything that is not a letter or digit.
"""

from __future__ import annotations

import re

import pytest

from memory_app.search.textsearch import cjk_term_share, index_text, query_terms, to_tsquery_text

SAMPLES = [
    "我们讨论了向量搜索和全文检索的结合。",
    "Fixed in commit 3F9A2C1D4E5F (see src/app/main.py).",
    "用Python写的脚本在 ./scripts/run.sh 里, deadline 2026-02-16, owner alice@example.com",
    "The deploy plan: migrate the DB to Postgres after the v1.2.3 release; foo_bar-baz!",
    'データベースを移行する。데이터베이스를 옮기다. &amp; <div class="x">hi</div>',
]


def _simple_lexemes(text: str) -> set[str]:
    return set(re.findall(r"[^\W_]+", text.lower()))


def test_chinese_phrase_is_indexed_and_queried_as_bigrams() -> None:
    assert query_terms("向量搜索") == ["向量", "量搜", "搜索"]
    assert index_text("向量搜索") == "向量搜索\n向量 量搜 搜索"


def test_one_char_cjk_run_is_kept_as_the_char() -> None:
    assert index_text("选 A 方案") == "选 A 方案\n选 方案"
    assert query_terms("猫") == ["猫"]


def test_cjk_mixed_with_latin_is_split_on_both_sides() -> None:
    # Postgres keeps `用Python写` as one word, so "python" alone must be added.
    assert index_text("用Python写") == "用Python写\n用 python 写"
    assert set(query_terms("Python")) <= _simple_lexemes(index_text("用Python写"))


def test_commit_hash_is_kept_whole_and_matches_by_prefix() -> None:
    terms = query_terms("which commit was 3F9A2C1?")

    assert terms == ["3f9a2c1", "commit"]
    assert to_tsquery_text(terms) == "'3f9a2c1':* | 'commit'"


def test_full_hash_in_text_is_one_lexeme() -> None:
    assert "3f9a2c1d4e5f" in _simple_lexemes(index_text("Fixed in 3F9A2C1D4E5F."))


def test_path_is_kept_whole_and_as_its_parts() -> None:
    assert query_terms("src/app/main.py") == [
        "src/app/main.py",
        "main.py",
        "main",
        "src",
        "app",
        "py",
    ]
    assert index_text("see src/app/main.py.") == "see src/app/main.py.\nsrc app main.py main py"


def test_leading_dot_of_a_relative_path_is_cut() -> None:
    # Postgres parses "./x/y.sh" differently at the start of a string than after a space.
    assert query_terms("./scripts/run.sh")[0] == "/scripts/run.sh"


def test_stop_words_are_dropped_unless_nothing_else_is_left() -> None:
    assert query_terms("what is the deploy plan for the database") == [
        "database",
        "deploy",
        "plan",
    ]
    assert query_terms("the a of") == ["the", "of", "a"]
    assert query_terms("我们的向量") == ["们的", "的向", "向量"]


def test_terms_are_lowercased_and_deduplicated() -> None:
    assert query_terms("Postgres postgres POSTGRES") == ["postgres"]


def test_terms_are_capped_keeping_identifiers_and_long_words() -> None:
    query = "ab cd ef " + " ".join(f"word{index}" for index in range(30)) + " x/y.md extraordinary"

    terms = query_terms(query, max_terms=4)

    assert terms == ["x/y.md", "extraordinary", "word10", "word11"]
    assert len(query_terms(query)) == 24


@pytest.mark.parametrize("text", SAMPLES)
def test_every_query_term_is_found_in_the_index_text(text: str) -> None:
    indexed = _simple_lexemes(index_text(text))

    for term in query_terms(text, max_terms=1000):
        assert _simple_lexemes(term) <= indexed, term


def test_tsquery_text_quotes_and_ors_terms() -> None:
    assert to_tsquery_text(["向量", "main.py"]) == "'向量' | 'main.py'"
    assert to_tsquery_text([]) == ""
    assert to_tsquery_text(["", "  "]) == ""


def test_tsquery_text_escapes_quotes_and_backslashes() -> None:
    assert to_tsquery_text(["it's"]) == "'it''s'"
    assert to_tsquery_text(["a\\b"]) == "'a\\\\b'"
    assert to_tsquery_text(["'\\'"]) == "'''\\\\'''"


def test_tsquery_operators_stay_inside_the_quotes() -> None:
    hostile = ["a&b", "c|d", "!e", "(f)", "g:*", "h:A", "<->", "x' | 'y", "nul\x00l"]

    text = to_tsquery_text(hostile)

    assert text == ("'a&b' | 'c|d' | '!e' | '(f)' | 'g:*' | 'h:A' | '<->' | 'x'' | ''y' | 'null'")
    # Outside the quoted operands only the OR separators remain.
    assert re.sub(r"'(?:[^'\\]|''|\\.)*'", "", text).replace(" ", "") == "|" * (len(hostile) - 1)


def test_nul_characters_are_removed() -> None:
    assert index_text("a\x00b") == "ab"
    assert query_terms("fo\x00o") == ["foo"]


def test_cjk_term_share_counts_the_bigrams_among_the_query_terms() -> None:
    assert cjk_term_share(query_terms("什么是医疗保险？")) == 1.0
    assert cjk_term_share(query_terms("which database did we pick")) == 0.0
    assert cjk_term_share(query_terms("部署 Postgres")) == pytest.approx(1 / 2)
    assert cjk_term_share([]) == 0.0
