"""Results that repeat what a better result already shows (pure: no Django, no database).

Overlapping chunks (80 tokens of overlap by default; a transcript chunk repeats the previous
one's last message) make neighbouring hits show the same lines twice, and the model reads them
twice out of its budget. A result keeps only its first run of lines not shown yet by a
better-ranked result of the same file; a result with nothing new is dropped, so the next
candidate moves up. A line is known by its number and text: the pieces of a long line that
`chunk_markdown` cut share a number but are different text.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

Piece = tuple[int, str]


@dataclass(frozen=True)
class Lines:
    """A run of a chunk's lines: the text and the line (or message seq) of each piece."""

    text: str
    numbers: list[int]


def _pieces(text: str, line_numbers: Sequence[int]) -> list[Piece] | None:
    parts = text.split("\n")
    return list(zip(line_numbers, parts)) if len(line_numbers) == len(parts) else None


def unseen_lines(text: str, line_numbers: Sequence[int], seen: Collection[Piece]) -> Lines | None:
    """Return the first run of the chunk's pieces not in ``seen`` (None: all were shown)."""
    pieces = _pieces(text, line_numbers)
    if pieces is None:  # no number per line: nothing to compare
        return Lines(text, list(line_numbers))
    run: list[Piece] = []
    for piece in pieces:
        if piece not in seen:
            run.append(piece)
        elif run:
            break
    if not run:
        return None
    return Lines("\n".join(part for _, part in run), [number for number, _ in run])


def shown_pieces(text: str, line_numbers: Sequence[int], start_line: int, end_line: int) -> set[Piece]:
    """Return the pieces of a chunk (or run) that a snippet citing ``start_line-end_line`` shows."""
    pieces = _pieces(text, line_numbers) or []
    return {piece for piece in pieces if start_line <= piece[0] <= end_line}
