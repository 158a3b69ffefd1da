"""One result per region of a document (pure: no Django, no database).

Overlapping chunks (80 tokens of overlap by default; a transcript chunk repeats the previous
one's last message; the pieces of one long line share its number) are the same region of their
document: hit together, they would fill the top results with one document and make the model
read the same lines twice out of its budget. A candidate whose chunk lines overlap those of a
better-ranked result of the same path is left out, so the next region moves up; regions of the
same document that do not overlap are separate results.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ShownRegions:
    """The line ranges already shown, per path."""

    by_path: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def overlaps(self, path: str, start_line: int, end_line: int) -> bool:
        """Tell whether lines ``start_line..end_line`` of ``path`` meet a region already shown."""
        return any(start <= end_line and start_line <= end for start, end in self.by_path.get(path, ()))

    def add(self, path: str, start_line: int, end_line: int) -> None:
        self.by_path.setdefault(path, []).append((start_line, end_line))
