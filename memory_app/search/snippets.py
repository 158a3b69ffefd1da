"""Which lines of a chunk a search result shows, and the line each of them cites (pure).

Pure module: no Django, no database.

OpenClaw shows the first 700 characters of a chunk and cites the whole chunk (docs/openclaw-behaviour.md §4.7).
With 400-token chunks most of a chunk is then never read by the model (docs/evaluation.md, how
recall is counted), so besides that policy (``head``) there is ``best``: the run of whole lines, within the
same character budget, that holds most of the query's terms, cited by exactly those lines. Both
need the line (memory) or message seq (sessions) of every line of a chunk's text, which
`chunk_line_numbers` recovers from the source text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory_app.search.ranking import SNIPPET_MAX_CHARS, truncate_snippet
from memory_app.utf16 import utf16_len

SNIPPET_MODES = ("head", "best")
_WORD_RE = re.compile(r"\w+")


@dataclass(frozen=True)
class SnippetPolicy:
    """How much of a chunk a result shows: ``max_chars`` (0: the whole chunk) and the mode."""

    max_chars: int = SNIPPET_MAX_CHARS
    mode: str = "head"

    def __post_init__(self) -> None:
        if self.mode not in SNIPPET_MODES:
            raise ValueError(f"snippet mode must be one of {', '.join(SNIPPET_MODES)}")
        if self.max_chars < 0:
            raise ValueError("snippet max_chars must be at least 0")


@dataclass(frozen=True)
class Snippet:
    text: str
    start_line: int
    end_line: int


def chunk_line_numbers(text: str, *, start_line: int, source_lines: Sequence[str]) -> list[int]:
    """Return the 1-based source line of every ``\\n``-separated piece of a chunk's text.

    `chunk_markdown` cuts a long line into several pieces that share its number, and a chunk may
    start in the middle of such a line (overlap), so pieces are matched against the source lines
    instead of being counted.
    """
    pieces = text.split("\n")
    numbers: list[int] = []
    line_no, offset = start_line, None
    for piece in pieces:
        line_no, offset = _place_piece(piece, line_no, offset, source_lines)
        numbers.append(line_no)
    return numbers


def _place_piece(piece: str, line_no: int, offset: int | None, lines: Sequence[str]) -> tuple[int, int]:
    """Return (line, end offset) of the next piece: the rest of this line, or the next line."""
    if offset is None:  # first piece: it may be a later slice of its line
        current = _line(lines, line_no)
        found = current.find(piece) if piece else 0
        return line_no, (found if found >= 0 else 0) + len(piece)
    current = _line(lines, line_no)
    if piece and offset < len(current) and current.startswith(piece, offset):
        return line_no, offset + len(piece)
    return line_no + 1, len(piece)


def _line(lines: Sequence[str], line_no: int) -> str:
    return lines[line_no - 1] if 1 <= line_no <= len(lines) else ""


def make_snippet(
    text: str, line_numbers: Sequence[int], *, policy: SnippetPolicy, terms: Sequence[str] = ()
) -> Snippet:
    """Cut a result's snippet from its chunk text according to ``policy``.

    Blank lines at either end of the chunk (a file's final newline, the gap before a heading)
    are neither shown nor cited: the citation names exactly the lines with text.
    """
    pieces = text.split("\n")
    numbers = list(line_numbers) if len(line_numbers) == len(pieces) else _spread(line_numbers, len(pieces))
    pieces, numbers = _without_blank_ends(pieces, numbers)
    text = "\n".join(pieces)
    if policy.max_chars == 0:
        return Snippet(text, numbers[0], numbers[-1])
    if policy.mode == "best":
        window = _best_window(pieces, terms, policy.max_chars)
        if window is not None:
            first, last = window
            return _window_snippet(pieces, numbers, first, last, policy.max_chars, terms)
    return _head_snippet(text, pieces, numbers, policy.max_chars)


def _without_blank_ends(pieces: list[str], numbers: list[int]) -> tuple[list[str], list[int]]:
    """Drop the blank pieces at both ends (all blank: the first piece, empty)."""
    filled = [index for index, piece in enumerate(pieces) if piece.strip()]
    if not filled:
        return [""], numbers[:1]
    first, last = filled[0], filled[-1]
    return pieces[first : last + 1], numbers[first : last + 1]


def _spread(line_numbers: Sequence[int], count: int) -> list[int]:
    """Fallback when no per-piece numbers were stored: first line, then the last line."""
    if not line_numbers:
        return [1] * count
    return [line_numbers[0]] * max(0, count - 1) + [line_numbers[-1]]


def _head_snippet(text: str, pieces: Sequence[str], numbers: Sequence[int], max_chars: int) -> Snippet:
    """OpenClaw's snippet: the first ``max_chars`` UTF-16 units (docs/openclaw-behaviour.md §4.7 step 3)."""
    cut = truncate_snippet(text, max_chars)
    shown = cut.count("\n") + 1
    return Snippet(cut, numbers[0], numbers[min(shown, len(numbers)) - 1])


def _weights(pieces: Sequence[str], terms: Sequence[str]) -> list[int]:
    """Score each piece by how many distinct query terms it contains (longer terms count more)."""
    lowered = [piece.lower() for piece in pieces]
    unique = [term.lower() for term in dict.fromkeys(terms) if term.strip()]
    return [sum(min(len(term), 8) for term in unique if term in piece) for piece in lowered]


def _best_window(pieces: Sequence[str], terms: Sequence[str], max_chars: int) -> tuple[int, int] | None:
    """Return the first and last piece of the window with most term weight that fits, if any."""
    weights = _weights(pieces, terms)
    if not any(weights):
        return None
    sizes = [utf16_len(piece) + 1 for piece in pieces]
    best: tuple[int, int, int] | None = None  # (weight, first, last)
    first, total, weight = 0, 0, 0
    for last, size in enumerate(sizes):
        total, weight = total + size, weight + weights[last]
        while total - 1 > max_chars and first < last:
            total, weight = total - sizes[first], weight - weights[first]
            first += 1
        if best is None or weight > best[0]:
            best = (weight, first, last)
    assert best is not None
    return _grow(best[1], best[2], sizes, max_chars)


def _grow(first: int, last: int, sizes: Sequence[int], max_chars: int) -> tuple[int, int]:
    """Add neighbouring lines (the following one first) while the window still fits."""
    total = sum(sizes[first : last + 1]) - 1
    grown = True
    while grown:
        grown = False
        if last + 1 < len(sizes) and total + sizes[last + 1] <= max_chars:
            last, total, grown = last + 1, total + sizes[last + 1], True
        if first > 0 and total + sizes[first - 1] <= max_chars:
            first, total, grown = first - 1, total + sizes[first - 1], True
    return first, last


def _window_snippet(
    pieces: Sequence[str], numbers: Sequence[int], first: int, last: int, max_chars: int, terms: Sequence[str]
) -> Snippet:
    text = "\n".join(pieces[first : last + 1])
    if utf16_len(text) > max_chars:  # one line longer than the budget: cut around its first hit
        text = _around_first_hit(text, terms, max_chars)
    return Snippet(text, numbers[first], numbers[last])


def _around_first_hit(text: str, terms: Sequence[str], max_chars: int) -> str:
    lowered = text.lower()
    hits = [lowered.find(term.lower()) for term in terms if term.strip() and term.lower() in lowered]
    start = max(0, min(hits) - max_chars // 4) if hits else 0
    return truncate_snippet(text[start:], max_chars)
