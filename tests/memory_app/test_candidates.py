"""Which query terms select the chunks the keyword query ranks (pure: no database)."""

from __future__ import annotations

from memory_app.search.candidates import TEXT_POOL_ROWS, _selecting_query


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
