"""Results do not repeat lines a better result shows (`memory_app.search.dedup`); pure, no database."""

from __future__ import annotations

from memory_app.search.dedup import Lines, ShownLines, shown_lines, unseen_lines


def test_a_chunk_keeps_its_first_run_of_new_lines() -> None:
    assert unseen_lines("User: a\nAssistant: b\nUser: c", [7, 8, 9], shown_lines(6, 7)) == Lines(
        "Assistant: b\nUser: c", [8, 9]
    )


def test_a_chunk_with_nothing_new_is_dropped() -> None:
    assert unseen_lines("y\nz", [2, 3], shown_lines(1, 3)) is None


def test_only_the_lines_the_snippet_showed_count_as_seen() -> None:
    assert unseen_lines("y\nz", [2, 3], shown_lines(1, 2)) == Lines("z", [3])


def test_the_other_pieces_of_a_long_line_already_shown_are_not_shown_again() -> None:
    assert unseen_lines("bbbb", [4], shown_lines(4, 4)) is None


def test_a_run_stops_at_the_first_line_already_shown() -> None:
    assert unseen_lines("a\nb\nc", [1, 2, 3], shown_lines(2, 2)) == Lines("a", [1])


def test_without_per_line_numbers_nothing_is_dropped() -> None:
    assert unseen_lines("a\nb", [5], {5}) == Lines("a\nb", [5])


def test_shown_lines_remember_each_path_apart() -> None:
    shown = ShownLines()
    shown.show("memory/a.md", 1, 1)
    assert shown.unseen("memory/a.md", "second piece of line one", [1]) is None
    assert shown.unseen("memory/b.md", "line one of b", [1]) == Lines("line one of b", [1])
