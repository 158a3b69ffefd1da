"""What the index holds: source entries (memory documents, and the transcripts sessions_app registers) and their chunks, cited by line (docs/openclaw-behaviour.md §4.4, docs/design.md §D10)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypedDict

from memory_app.index import config
from memory_app.index.chunking import Chunk, chunk_lines, chunk_markdown
from memory_app.models import (
    MemoryDocument,
    Source,
)
from memory_app.search.snippets import chunk_line_numbers

logger = logging.getLogger(__name__)


class IndexProgressReport(TypedDict, total=False):
    """A reindex's progress as the IndexState and the tracked task record it; embedding reports
    only ``embedded`` and ``to_embed``."""

    phase: str
    done: int
    total: int
    generation: int
    removed: int
    embedded: int
    to_embed: int


ProgressCallback = Callable[[IndexProgressReport], None]


@dataclass(frozen=True)
class SourceEntry:
    """One thing to index: a document, or a transcript rendered as lines."""

    source: str
    path: str
    content: str
    source_hash: str
    document_id: int | None = None
    session_pk: int | None = None
    # Content line i (0-based) cites line_map[i] (a message seq); None: lines cite themselves.
    line_map: tuple[int, ...] | None = None
    # Content line i happened at line_times[i] (a message time); None: ``timestamp`` for all.
    line_times: tuple[datetime | None, ...] | None = None
    timestamp: datetime | None = None
    # How far the source goes (last message seq), recorded on its IndexedSource row.
    upto: int = 0


class ExternalSource(Protocol):
    """A source of entries that memory_app cannot import (sessions_app transcripts).

    Keys are the ids stored in `MemoryChunk.session_pk`. ``changed_only`` asks for the entries
    that may differ from what was indexed (a cheap pre-check, so a periodic refresh does not
    render every transcript to find out).
    """

    def keys(self, assistant_id: int, *, changed_only: bool = False) -> list[str]: ...

    def load(self, assistant_id: int, key: str) -> SourceEntry | None: ...

    def is_current(self, entry: SourceEntry) -> bool: ...

    def schedule(self, assistant_id: int, keys: Sequence[str]) -> None:
        """Queue the source's own index job for each of these entries (the periodic refresh)."""
        ...


external_sources: dict[str, ExternalSource] = {}


def register_source(source: str, provider: ExternalSource) -> None:
    """Let another app feed entries of ``source`` to full reindexes (called from AppConfig.ready)."""
    external_sources[source] = provider


def document_entry(document: MemoryDocument) -> SourceEntry:
    return SourceEntry(
        source=Source.MEMORY,
        path=document.path,
        content=document.content,
        source_hash=document.content_hash,
        document_id=document.pk,
        timestamp=document.updated_at,
    )


def is_current(entry: SourceEntry) -> bool:
    """Tell whether the entry still matches its source (a newer write makes it stale)."""
    if entry.source == Source.MEMORY:
        if entry.document_id is None:  # an entry without its document's id matches no document
            return False
        return MemoryDocument.objects.filter(pk=entry.document_id, content_hash=entry.source_hash).exists()
    provider = external_sources.get(entry.source)
    return provider.is_current(entry) if provider is not None else True


@dataclass(frozen=True)
class Piece:
    chunk: Chunk
    line_numbers: list[int]
    timestamp: datetime | None
    row_id: int | None = None  # a stored row's piece (`_unembedded_before`)


def prepare_chunks(entry: SourceEntry, chunking: config.Chunking) -> list[Piece]:
    """Cut an entry into chunks, each with its per-line citations and its timestamp."""
    if chunking.max_line_tokens is not None:
        chunks = chunk_lines(
            entry.content,
            tokens=chunking.tokens,
            overlap=chunking.overlap,
            max_line_tokens=chunking.max_line_tokens,
        )
    else:
        chunks = chunk_markdown(entry.content, tokens=chunking.tokens, overlap=chunking.overlap)
    lines = entry.content.split("\n")
    pieces = []
    for chunk in chunks:
        content_lines = chunk_line_numbers(chunk.text, start_line=chunk.start_line, source_lines=lines)
        pieces.append(
            Piece(
                _cite(chunk, content_lines, entry),
                _map(content_lines, entry.line_map),
                _newest(content_lines, entry),
            )
        )
    return pieces


def _map(numbers: Sequence[int], line_map: Sequence[int] | None) -> list[int]:
    if not line_map:
        return list(numbers)
    return [line_map[n - 1] if 1 <= n <= len(line_map) else n for n in numbers]


def _cite(chunk: Chunk, content_lines: Sequence[int], entry: SourceEntry) -> Chunk:
    mapped = _map([content_lines[0], content_lines[-1]], entry.line_map)
    return Chunk(mapped[0], mapped[1], chunk.text, chunk.hash)


def _newest(content_lines: Sequence[int], entry: SourceEntry) -> datetime | None:
    """Return the newest message time among a chunk's lines (docs/design.md §D10)."""
    if not entry.line_times:
        return entry.timestamp
    times = [entry.line_times[n - 1] for n in set(content_lines) if 1 <= n <= len(entry.line_times)]
    known = [t for t in times if t is not None]
    return max(known) if known else entry.timestamp


@dataclass(frozen=True)
class Growth:
    """Where a growing source's rows can be extended: its last chunk's first line, and how far
    the rows go (``IndexedSource.indexed_upto``) when that was read."""

    line: int
    upto: int
    # Some rows are stored with their text alone and still wait for a vector.
    pending: bool = False
    # The generation the rows are in (the active one).
    generation: int = 0
