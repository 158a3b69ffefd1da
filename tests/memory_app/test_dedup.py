"""One result per document region (`memory_app.dedup`); pure, no database."""

from __future__ import annotations

from memory_app.dedup import ShownRegions


def test_overlapping_lines_of_the_same_path_are_one_region() -> None:
    shown = ShownRegions()
    shown.add("memory/a.md", 1, 20)
    assert shown.overlaps("memory/a.md", 17, 40)
    assert shown.overlaps("memory/a.md", 20, 20)
    assert shown.overlaps("memory/a.md", 3, 5)


def test_other_lines_or_another_path_are_another_region() -> None:
    shown = ShownRegions()
    shown.add("memory/a.md", 1, 20)
    assert not shown.overlaps("memory/a.md", 21, 30)
    assert not shown.overlaps("memory/b.md", 1, 20)


def test_the_pieces_of_one_long_line_are_one_region() -> None:
    shown = ShownRegions()
    shown.add("memory/answers/1.md", 1, 1)
    assert shown.overlaps("memory/answers/1.md", 1, 1)
