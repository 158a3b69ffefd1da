"""Results do not repeat lines a better result shows (`memory_app.dedup`); pure, no database."""

from __future__ import annotations

from memory_app.dedup import Lines, shown_pieces, unseen_lines


def test_a_chunk_keeps_its_first_run_of_new_lines() -> None:
    text = "User: a\nAssistant: b\nUser: c"
    seen = shown_pieces("Assistant: z\nUser: a", [6, 7], 6, 7)
    assert unseen_lines(text, [7, 8, 9], seen) == Lines("Assistant: b\nUser: c", [8, 9])


def test_a_chunk_with_nothing_new_is_dropped() -> None:
    seen = shown_pieces("x\ny\nz", [1, 2, 3], 1, 3)
    assert unseen_lines("y\nz", [2, 3], seen) is None


def test_only_the_lines_the_snippet_showed_count_as_seen() -> None:
    seen = shown_pieces("x\ny\nz", [1, 2, 3], 1, 2)  # a head snippet that stopped at line 2
    assert unseen_lines("y\nz", [2, 3], seen) == Lines("z", [3])


def test_the_cut_pieces_of_one_long_line_are_different_lines() -> None:
    seen = shown_pieces("aaaa", [4], 4, 4)
    assert unseen_lines("bbbb", [4], seen) == Lines("bbbb", [4])


def test_a_run_stops_at_the_first_line_already_shown() -> None:
    seen = shown_pieces("b", [2], 2, 2)
    assert unseen_lines("a\nb\nc", [1, 2, 3], seen) == Lines("a", [1])


def test_without_per_line_numbers_nothing_is_dropped() -> None:
    assert unseen_lines("a\nb", [5], {(5, "a")}) == Lines("a\nb", [5])
