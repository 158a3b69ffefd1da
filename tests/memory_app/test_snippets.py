"""Per-line citations of chunks and the snippet policies (pure: no database)."""

from __future__ import annotations

from memory_app.index.chunking import chunk_markdown
from memory_app.search.snippets import SnippetPolicy, chunk_line_numbers, make_snippet


def test_line_numbers_follow_plain_lines() -> None:
    content = "alpha\nbeta\n\ngamma"
    [chunk] = chunk_markdown(content, tokens=400, overlap=0)
    assert chunk_line_numbers(chunk.text, start_line=chunk.start_line, source_lines=content.split("\n")) == [
        1,
        2,
        3,
        4,
    ]


def test_long_line_pieces_share_their_line_number() -> None:
    content = "intro\n" + "x" * 100 + "\nend"
    lines = content.split("\n")
    chunks = chunk_markdown(content, tokens=10, overlap=0)  # 40-char chunks: the long line is cut
    numbers = [chunk_line_numbers(c.text, start_line=c.start_line, source_lines=lines) for c in chunks]
    flat = [n for per_chunk in numbers for n in per_chunk]
    assert flat.count(2) == 3  # 100 chars of line 2 in pieces of at most 40
    assert flat[0] == 1 and flat[-1] == 3
    for chunk, per_chunk in zip(chunks, numbers):
        assert per_chunk[0] == chunk.start_line and per_chunk[-1] == chunk.end_line


def test_overlap_that_starts_mid_line_keeps_the_right_numbers() -> None:
    content = "\n".join(f"line {i} " + "w" * 30 for i in range(1, 9))
    lines = content.split("\n")
    for chunk in chunk_markdown(content, tokens=20, overlap=5):
        numbers = chunk_line_numbers(chunk.text, start_line=chunk.start_line, source_lines=lines)
        for piece, number in zip(chunk.text.split("\n"), numbers):
            assert piece in lines[number - 1]


def test_head_policy_is_openclaws_first_700_chars_citing_the_lines_shown() -> None:
    text = "\n".join(f"{i:03d} " + "a" * 95 for i in range(1, 11))  # 10 lines of 99 chars
    snippet = make_snippet(text, list(range(21, 31)), policy=SnippetPolicy())
    assert len(snippet.text) == 700
    assert text.startswith(snippet.text)
    assert (snippet.start_line, snippet.end_line) == (21, 28)  # line 28 is cut, still shown


def test_best_policy_picks_the_lines_holding_the_query_terms() -> None:
    lines = [f"filler line {i} " + "z" * 80 for i in range(20)]
    lines[14] = "The deploy key rotation happens every ninety days."
    snippet = make_snippet(
        "\n".join(lines),
        [100 + i for i in range(20)],
        policy=SnippetPolicy(max_chars=300, mode="best"),
        terms=["rotation", "ninety"],
    )
    assert "rotation happens every ninety days" in snippet.text
    assert len(snippet.text) <= 300
    assert snippet.start_line <= 114 <= snippet.end_line
    assert snippet.end_line - snippet.start_line <= 3


def test_best_policy_without_any_term_hit_falls_back_to_head() -> None:
    text = "one\ntwo\nthree"
    snippet = make_snippet(text, [1, 2, 3], policy=SnippetPolicy(max_chars=5, mode="best"), terms=["zzz"])
    assert snippet.text == "one\nt"
    assert (snippet.start_line, snippet.end_line) == (1, 2)


def test_zero_max_chars_shows_the_whole_chunk() -> None:
    text = "a" * 2000 + "\nb"
    snippet = make_snippet(text, [5, 6], policy=SnippetPolicy(max_chars=0))
    assert snippet.text == text and (snippet.start_line, snippet.end_line) == (5, 6)
