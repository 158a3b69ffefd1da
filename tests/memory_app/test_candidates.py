"""Which query terms select the chunks the keyword query ranks (pure: no database)."""

from __future__ import annotations

from memory_app.search.candidates import (
    COMMON_SCAN_MAX_POSTINGS,
    TEXT_POOL_ROWS,
    _common_query,
    _selecting_query,
)


def test_the_rarest_terms_select_while_their_chunks_fit_the_pool() -> None:
    rows = 100_000
    # 100 + 150 chunks fit the pool of 300; the third term (2000 chunks) would not.
    shares = [0.02, 0.0015, 0.001]
    assert TEXT_POOL_ROWS == 300
    assert _selecting_query(["'fruit'", "'mango'", "'kiwi'"], shares, rows) == "('kiwi') | ('mango')"


def test_a_term_never_in_the_statistics_is_rare() -> None:
    assert _selecting_query(["'her'", "'zx99172'"], [0.3, 0.0], 100_000) == "('zx99172')"


def test_when_even_the_rarest_term_is_too_common_the_two_rarest_select_together() -> None:
    assert (
        _selecting_query(["'meeting'", "'budget'", "'team'"], [0.02, 0.01, 0.04], 100_000)
        == "('budget') & ('meeting')"
    )


def test_common_terms_select_only_all_together() -> None:
    assert (
        _selecting_query(["'what'", "'she'", "'said'"], [0.3, 0.2, 0.1], 100_000)
        == "('what') & ('she') & ('said')"
    )
    assert _selecting_query(["'her'"], [0.3], 100_000) == "('her')"


def test_common_terms_select_together_unless_their_postings_are_too_many_to_read() -> None:
    queries, shares = ["'quokka'", "'what'", "'she'"], [0.0, 0.1, 0.1]
    # 0.2 x 100,000 = 20,000 postings: read.
    assert _common_query(queries, shares, "('quokka')", 100_000) == "('what') & ('she')"
    # At a million chunks the same shares are 200,000 postings: the rare term selects alone.
    assert COMMON_SCAN_MAX_POSTINGS < 0.2 * 1_000_000
    assert _common_query(queries, shares, "('quokka')", 1_000_000) == ""
