"""Results that repeat what a better result already shows (pure: no Django, no database).

Overlapping chunks (80 tokens of overlap by default; a transcript chunk repeats the previous
one's last message; the pieces of one long line share its number) would fill the top results
with one region of one document, and the model would read the same lines twice out of its
budget. A result keeps only its first run of lines not shown yet by a better-ranked result of
the same file, and a result with nothing new is dropped, so the next candidate moves up: no two
results show the same line. A line is known by its number (a message seq for transcripts), so
the other pieces of a long line already shown are not shown again either. Keeping a
neighbour's new lines, rather than dropping every overlapping chunk whole, reads 8 points more
of LoCoMo's evidence within 4000 characters (README, Evaluation).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Lines:
    """A run of a chunk's lines: the text and the line (or message seq) of each piece."""

    text: str
    numbers: list[int]


def unseen_lines(text: str, line_numbers: Sequence[int], seen: Collection[int]) -> Lines | None:
    """Return the first run of the chunk's pieces whose line is not in ``seen`` (None: none)."""
    parts = text.split("\n")
    if len(line_numbers) != len(parts):  # no number per line: nothing to compare
        return Lines(text, list(line_numbers))
    run: list[tuple[int, str]] = []
    for number, part in zip(line_numbers, parts):
        if number not in seen:
            run.append((number, part))
        elif run:
            break
    if not run:
        return None
    return Lines("\n".join(part for _, part in run), [number for number, _ in run])


def shown_lines(start_line: int, end_line: int) -> set[int]:
    """Return the lines a snippet citing ``start_line-end_line`` shows."""
    return set(range(start_line, end_line + 1))


@dataclass
class ShownLines:
    """The lines shown so far, per path, as results are read in rank order."""

    by_path: dict[str, set[int]] = field(default_factory=dict)

    def unseen(self, path: str, text: str, line_numbers: Sequence[int]) -> Lines | None:
        """Return the chunk's first run of lines not shown yet (None: it repeats what was)."""
        return unseen_lines(text, line_numbers, self.by_path.get(path, set()))

    def show(self, path: str, start_line: int, end_line: int) -> None:
        """Record that a snippet citing ``start_line-end_line`` of ``path`` was shown."""
        self.by_path.setdefault(path, set()).update(shown_lines(start_line, end_line))
