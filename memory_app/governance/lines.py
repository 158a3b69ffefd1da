"""Lines of a memory document: where each came from, and when two say the same thing (pure).

Each revision stores, for every line of its text, the revision that line first appeared in
(docs/design.md, Provenance, consolidation and forgetting). The origins are computed at write time
from the previous revision's: a line the write kept keeps its origin, a new or changed line gets
the new revision. They are stored run-length encoded, ``[[revision, count], ...]``, where
revision ``0`` stands for the revision that holds the list (its id is not known before the row
is inserted).

A line's *normal form* (`normalise_line`) is what duplicate checks compare: case folded,
whitespace collapsed, a Markdown bullet, number or checkbox removed, trailing punctuation
dropped. Only *entries* are compared (`is_entry`): blank lines, headings and comments are
structure, and may repeat.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence

SELF = 0  # in stored origins: the revision that holds the list

_MARKER = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?(?:\[[ xX]\]\s+)?")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w")
_LABEL = re.compile(r"^_\(.*\)_$")  # a label line such as the offline flush's "_(offline memory flush: ...)_"


def split_lines(content: str) -> list[str]:
    """Split a document into the lines memory_get numbers (a final newline ends in an empty line)."""
    return content.split("\n")


def normalise_line(text: str) -> str:
    """Return the form duplicate checks compare: no bullet, one space, case folded, no end punctuation."""
    stripped = _MARKER.sub("", text.strip(), count=1)
    return _SPACE.sub(" ", stripped).strip().rstrip(" .;,!").casefold()


def is_entry(text: str) -> bool:
    """A line that states something: not blank, a heading, an HTML comment or a label; has a word."""
    stripped = text.strip()
    if not stripped or stripped.startswith(("#", "<!--")) or _LABEL.match(stripped):
        return False
    return bool(_WORD.search(normalise_line(stripped)))


def carry_origins(
    old_lines: Sequence[str], old_origins: Sequence[int], new_lines: Sequence[str], revision: int = SELF
) -> list[int]:
    """Return the origin of each of ``new_lines``: kept lines keep theirs, the rest get ``revision``."""
    if len(old_origins) != len(old_lines):
        old_origins = [revision] * len(old_lines)
    origins = [revision] * len(new_lines)
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            origins[block.b + offset] = old_origins[block.a + offset]
    return origins


def encode_runs(origins: Iterable[int]) -> list[list[int]]:
    """Run-length encode origins: ``[7, 7, 9]`` becomes ``[[7, 2], [9, 1]]``."""
    runs: list[list[int]] = []
    for origin in origins:
        if runs and runs[-1][0] == origin:
            runs[-1][1] += 1
        else:
            runs.append([origin, 1])
    return runs


def decode_runs(runs: Iterable[Sequence[int]], *, own: int) -> list[int]:
    """Expand stored runs into one origin per line, ``SELF`` replaced by ``own`` (the holder's id)."""
    origins: list[int] = []
    for origin, count in runs:
        origins.extend([own if origin == SELF else int(origin)] * int(count))
    return origins


def resolve_self(origins: Iterable[int], *, own: int) -> list[int]:
    """Replace ``SELF`` by the holder's id (before carrying origins into the next revision)."""
    return [own if origin == SELF else origin for origin in origins]


def similarity(a: str, b: str) -> float:
    """How alike two lines are once normalised (difflib's ratio, 0 to 1)."""
    return difflib.SequenceMatcher(None, normalise_line(a), normalise_line(b), autojunk=False).ratio()


def first_appended_line(existing: str) -> int:
    """The line number the first line of an append gets (`memory_app.documents.appended_text`)."""
    if not existing:
        return 1
    count = len(split_lines(existing))
    return count if existing.endswith("\n") else count + 1


def drop_duplicates(
    addition: Sequence[str], existing: Mapping[str, Sequence[str]], *, target: str, first_line: int
) -> tuple[list[str], list[tuple[int, str, int]]]:
    """Split an append's lines into those to store and the entries memory already holds.

    ``existing`` maps paths to their lines (the target document first). Returns the kept lines and,
    for each dropped one, ``(index in addition, path, line)`` of the copy it repeats; an entry
    repeated within the addition is kept once, the repeat pointing at where the first will be.
    """
    seen: dict[str, tuple[str, int]] = {}
    for path, lines in existing.items():
        for number, text in enumerate(lines, start=1):
            if is_entry(text):
                seen.setdefault(normalise_line(text), (path, number))
    kept: list[str] = []
    dropped: list[tuple[int, str, int]] = []
    for index, text in enumerate(addition):
        key = normalise_line(text) if is_entry(text) else None
        if key is not None and key in seen:
            dropped.append((index, *seen[key]))
            continue
        if key is not None:
            seen[key] = (target, first_line + len(kept))
        kept.append(text)
    return kept, dropped
