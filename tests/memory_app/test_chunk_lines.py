"""Transcript chunks of whole messages (`chunking.chunk_lines`); pure, no database."""

from __future__ import annotations

import itertools

from memory_app.index.chunking import chunk_lines, chunk_markdown


def lines(*sizes: int) -> str:
    return "\n".join(chr(ord("a") + i) * (size - 1) + "." for i, size in enumerate(sizes))


def spans(chunks) -> list[tuple[int, int]]:
    return [(c.start_line, c.end_line) for c in chunks]


def test_lines_are_grouped_whole_up_to_the_chunk_size() -> None:
    # 25 tokens = 100 chars; each line counts its length + 1 for the newline.
    chunks = chunk_lines(lines(40, 40, 40, 30, 30), tokens=25, overlap=0)
    assert spans(chunks) == [(1, 2), (3, 4), (5, 5)]
    assert chunks[0].text == lines(40, 40)


def test_a_line_longer_than_the_chunk_stays_whole_up_to_the_line_limit() -> None:
    content = lines(30, 250, 30)
    chunks = chunk_lines(content, tokens=25, overlap=0, max_line_tokens=100)
    assert spans(chunks) == [(1, 1), (2, 2), (3, 3)]
    assert chunks[1].text == content.split("\n")[1]
    # chunk_markdown cuts the same line, and no chunk holds it whole.
    cut = chunk_markdown(content, tokens=25, overlap=0)
    assert spans(cut) == [(1, 1), (2, 2), (2, 2), (2, 3)]
    assert all(content.split("\n")[1] not in c.text for c in cut)


def test_a_line_past_the_line_limit_is_cut() -> None:
    chunks = chunk_lines(lines(450), tokens=25, overlap=0, max_line_tokens=100)
    assert [len(c.text) for c in chunks] == [400, 50]
    assert spans(chunks) == [(1, 1), (1, 1)]


def test_overlap_repeats_whole_trailing_lines() -> None:
    chunks = chunk_lines(lines(30, 30, 30, 30, 30), tokens=25, overlap=5)
    # 20 overlap chars: the last line of a chunk (31 with its newline) starts the next one.
    assert spans(chunks) == [(1, 3), (3, 5)]


def test_repeated_lines_that_leave_no_room_are_dropped_not_emitted_alone() -> None:
    # 40 overlap chars: line 2 would be repeated, but beside line 3 it does not fit; line 3
    # would be repeated, but not beside line 4. Neither becomes a chunk of its own again.
    chunks = chunk_lines(lines(30, 60, 90, 20), tokens=25, overlap=10)
    assert spans(chunks) == [(1, 2), (3, 3), (4, 4)]
    # No chunk holds only lines the previous chunk already had.
    for before, after in itertools.pairwise(chunks):
        assert after.end_line > before.end_line


def test_blank_content_gives_no_chunks() -> None:
    assert chunk_lines("", tokens=25, overlap=5) == []
    assert chunk_lines("\n\n", tokens=25, overlap=0) == []
