"""Writing one entry's rows into a generation of the index, and the index's state (docs/design.md §D8-D10)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from django.contrib.postgres.search import SearchVectorField
from django.db import connection, transaction
from django.db.models import Count, Exists, Func, OuterRef, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.utils import timezone

from memory_app.index import config
from memory_app.index.embedding import embed_with_cache, note_embedding_error, record_embedding_usage
from memory_app.index.entries import (
    Growth,
    Piece,
    ProgressCallback,
    SourceEntry,
    document_entry,
    is_current,
    prepare_chunks,
)
from memory_app.index.jobs import queue_reindex
from memory_app.index.text_index import ensure_text_index
from memory_app.index.vectors import ensure_vector_index
from memory_app.models import (
    FTS_ONLY_MODEL,
    IndexedSource,
    IndexState,
    MemoryChunk,
    MemoryDocument,
    Source,
)
from memory_app.search.textsearch import TS_CONFIG, index_text
from openclaw_site.models import Assistant
from openclaw_site.platform.row_sql import partial_index_condition
from providers.embeddings import Embedder, get_embedder

logger = logging.getLogger(__name__)


class IndexOutcomeReport(TypedDict):
    """`IndexOutcome` as a task's result."""

    entries: int
    skipped: int
    chunks_written: int
    embedded: int
    cache_hits: int
    embedding_error: str | None
    generations: list[int]
    full_reindex_scheduled: bool
    note: str
    more: bool
    queued: int
    lines: int | None
    lines_with_vectors: int | None


@dataclass
class IndexOutcome:
    """What an index run did, for task results and tests."""

    entries: int = 0
    skipped: int = 0
    chunks_written: int = 0
    embedded: int = 0
    cache_hits: int = 0
    embedding_error: str | None = None
    full_reindex_scheduled: bool = False
    generations: list[int] = field(default_factory=list)
    note: str = ""
    # An extend that left rows without a vector (its time ran out): the source has more to index.
    more: bool = False
    # Entries handed to their source's own index job (`reindex_assistant(queue_external=True)`).
    queued: int = 0
    # After an extend with an embedder: the source's last line, and the lines before its oldest
    # row still without a vector (every chunk holding them has one).
    lines: int | None = None
    lines_with_vectors: int | None = None

    def add(self, other: IndexOutcome) -> None:
        for name in ("entries", "skipped", "chunks_written", "embedded", "cache_hits", "queued"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.embedding_error = self.embedding_error or other.embedding_error

    def as_dict(self) -> IndexOutcomeReport:
        return {
            "entries": self.entries,
            "skipped": self.skipped,
            "chunks_written": self.chunks_written,
            "embedded": self.embedded,
            "cache_hits": self.cache_hits,
            "embedding_error": self.embedding_error,
            "generations": self.generations,
            "full_reindex_scheduled": self.full_reindex_scheduled,
            "note": self.note,
            "more": self.more,
            "queued": self.queued,
            "lines": self.lines,
            "lines_with_vectors": self.lines_with_vectors,
        }


def rows_filter(assistant_id: int, entry: SourceEntry, generation: int) -> Q:
    where = Q(assistant_id=assistant_id, generation=generation, source=entry.source)
    if entry.session_pk is not None:
        return where & Q(session_pk=entry.session_pk)
    return where & Q(path=entry.path)


def is_up_to_date(assistant_id: int, entry: SourceEntry, generation: int, embedder: Embedder | None) -> bool:
    """Tell whether the stored rows already come from this exact source text and embedder."""
    model = embedder.model if embedder is not None else FTS_ONLY_MODEL
    counts = MemoryChunk.objects.filter(rows_filter(assistant_id, entry, generation)).aggregate(
        total=Count("id"),
        stale=Count("id", filter=~Q(source_hash=entry.source_hash) | ~Q(model=model)),
    )
    return counts["total"] > 0 and counts["stale"] == 0


def _tsvector(text: str) -> Func:
    return Func(
        Value(TS_CONFIG), Value(index_text(text)), function="to_tsvector", output_field=SearchVectorField()
    )


def build_rows(
    assistant_id: int,
    entry: SourceEntry,
    generation: int,
    pieces: Sequence[Piece],
    vectors: dict[str, list[float]],
    embedder: Embedder | None,
) -> list[MemoryChunk]:
    rows = []
    for piece in pieces:
        vector = vectors.get(piece.chunk.hash)
        rows.append(
            MemoryChunk(
                assistant_id=assistant_id,
                source=entry.source,
                generation=generation,
                document_id=entry.document_id,
                session_pk=entry.session_pk,
                path=entry.path,
                start_line=piece.chunk.start_line,
                end_line=piece.chunk.end_line,
                line_numbers=piece.line_numbers,
                text=piece.chunk.text,
                hash=piece.chunk.hash,
                source_hash=entry.source_hash,
                model=embedder.model if vector is not None and embedder is not None else FTS_ONLY_MODEL,
                dims=len(vector) if vector is not None else 0,
                embedding=vector,
                tsv=_tsvector(piece.chunk.text),
                timestamp=piece.timestamp,
            )
        )
    return rows


def write_entry(
    assistant_id: int,
    entry: SourceEntry,
    generations: Sequence[int],
    rows_by_generation: dict[int, list[MemoryChunk]],
    *,
    extends: Growth | None = None,
) -> bool:
    """Replace the entry's rows in every target generation at once; False if the entry went stale.

    With ``extends`` only the rows from its line on are replaced, and only if nobody indexed the
    source since ``extends`` was read.
    """
    with transaction.atomic():
        live = _live_generations_shared(assistant_id)
        ticket, _ = IndexedSource.objects.get_or_create(
            assistant_id=assistant_id, source=entry.source, key=_key(entry)
        )
        ticket = IndexedSource.objects.select_for_update(no_key=True).get(pk=ticket.pk)
        # A slower run that read older text must not overwrite a newer run's rows.
        if not is_current(entry) or (entry.upto and ticket.indexed_upto > entry.upto):
            return False
        if extends is not None and ticket.indexed_upto != extends.upto:
            return False
        for generation in [g for g in generations if g in live]:
            replaced = rows_filter(assistant_id, entry, generation)
            if extends is not None:
                replaced &= Q(start_line__gte=extends.line)
            MemoryChunk.objects.filter(replaced).delete()
            MemoryChunk.objects.bulk_create(rows_by_generation[generation], batch_size=500)
        ticket.indexed_upto = max(ticket.indexed_upto, entry.upto)
        ticket.indexed_at = timezone.now()
        ticket.save(update_fields=["indexed_upto", "indexed_at"])
    return True


def _live_generations_shared(assistant_id: int) -> set[int]:
    """Return the active and building generations, holding the state row FOR SHARE.

    The swap to a new generation locks the row FOR UPDATE, so a write never lands in a
    generation that a concurrent swap is retiring (its rows would linger, unsearched).
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT active_generation, building_generation FROM memory_app_indexstate "
            "WHERE assistant_id = %s FOR SHARE",
            [assistant_id],
        )
        row = cursor.fetchone()
    return {g for g in (row or ()) if g}


def _key(entry: SourceEntry) -> str:
    return str(entry.session_pk) if entry.session_pk is not None else entry.path


def get_state(assistant: Assistant, current: dict[str, Any]) -> IndexState:
    """Return the assistant's IndexState, created with the current fingerprint if missing."""
    state, _ = IndexState.objects.get_or_create(assistant=assistant, defaults={"fingerprint": current})
    return state


def target_generations(state: IndexState, current: dict[str, Any]) -> list[int]:
    """Return the generations built with the current fingerprint (active and/or building)."""
    targets = []
    if state.fingerprint == current:
        targets.append(state.active_generation)
    if state.building_generation and state.building_fingerprint == current:
        targets.append(state.building_generation)
    return targets


def start_build(assistant: Assistant, current: dict[str, Any]) -> IndexState:
    """Open a new generation for ``current`` unless one is open already; return the state."""
    with transaction.atomic():
        state = IndexState.objects.select_for_update(no_key=True).get(assistant=assistant)
        if state.building_generation and state.building_fingerprint == current:
            return state
        if state.building_generation:  # an abandoned build for another fingerprint
            MemoryChunk.objects.filter(assistant=assistant, generation=state.building_generation).delete()
        state.building_generation = max(state.active_generation, state.building_generation or 0) + 1
        state.building_fingerprint = current
        state.progress = {"phase": "scheduled", "generation": state.building_generation}
        state.save()
    if current.get("dims"):
        ensure_vector_index(int(current["dims"]), assistant.pk)
    ensure_text_index(assistant.pk)
    return state


def index_entries(
    assistant: Assistant,
    entries: Sequence[SourceEntry],
    *,
    embedder: Embedder | None,
    current: dict[str, Any],
    generations: Sequence[int],
    force: bool = False,
    progress: ProgressCallback | None = None,
) -> IndexOutcome:
    """Index entries into the given generations: chunk, embed what the cache lacks, replace rows."""
    outcome = IndexOutcome(generations=list(generations))
    search = assistant.config.memory_search
    todo = [
        e
        for e in entries
        if force or not all(is_up_to_date(assistant.pk, e, g, embedder) for g in generations)
    ]
    outcome.skipped = len(entries) - len(todo)
    prepared = {id(e): prepare_chunks(e, config.chunking_for(search, e.source, embedder)) for e in todo}
    texts = {p.chunk.hash: p.chunk.text for pieces in prepared.values() for p in pieces}
    vectors = embed_with_cache(embedder, texts, progress=progress)
    record_embedding_usage(assistant, embedder, vectors)
    outcome.embedded, outcome.cache_hits, outcome.embedding_error = (
        vectors.embedded,
        vectors.cache_hits,
        vectors.error,
    )
    note_embedding_error(assistant, vectors)
    for entry in todo:
        pieces = prepared[id(entry)]
        rows = {g: build_rows(assistant.pk, entry, g, pieces, vectors.by_hash, embedder) for g in generations}
        if write_entry(assistant.pk, entry, generations, rows):
            outcome.entries += 1
            outcome.chunks_written += len(pieces) * len(generations)
        else:
            outcome.skipped += 1
    return outcome


def index_entry(assistant: Assistant, entry: SourceEntry, *, force: bool = False) -> IndexOutcome:
    """Index one entry into every generation built with the current fingerprint."""
    if entry.source not in config.indexed_sources(assistant):
        return IndexOutcome(skipped=1)
    embedder = get_embedder()
    current = config.fingerprint(assistant, embedder)
    state = get_state(assistant, current)
    generations = target_generations(state, current)
    if not generations:
        # The settings or the embedder changed: the old rows keep answering while a full
        # reindex builds the new generation; this entry goes straight into it.
        state = start_build(assistant, current)
        _enqueue_full_reindex(assistant)
        generations = target_generations(state, current)
        outcome = index_entries(
            assistant, [entry], embedder=embedder, current=current, generations=generations, force=force
        )
        outcome.full_reindex_scheduled = True
        return outcome
    if current.get("dims"):
        ensure_vector_index(int(current["dims"]), assistant.pk)
    ensure_text_index(assistant.pk)
    return index_entries(
        assistant, [entry], embedder=embedder, current=current, generations=generations, force=force
    )


def text_only() -> RawSQL:
    """Filter for the rows still waiting for a vector, stated as their partial indexes' condition.

    `model = 'fts-only'` in literals: a prepared statement's generic plan uses the partial
    indexes only then (`openclaw_site.platform.row_sql.partial_index_condition`).
    """
    return partial_index_condition(MemoryChunk, "memchunk_text_only")


def _enqueue_full_reindex(assistant: Assistant) -> None:
    queue_reindex(assistant, full=True)


def index_text_now(assistant: Assistant, *, limit: int) -> int:
    """Write the text rows, without vectors, of the memory documents not indexed yet, if at most
    ``limit``; return how many were written (docs/design.md §D15).

    What a search may do in its request: chunks and full text, no embedding, a bounded few, so a
    note written a moment ago is found by its words; the queued reindex adds the vectors.
    """
    embedder = get_embedder()
    current = config.fingerprint(assistant, embedder)
    state = get_state(assistant, current)
    if state.fingerprint != current:
        return 0  # a rebuild for new settings is queued; the old generation answers meanwhile
    pending = list(documents_not_indexed(assistant, state.active_generation)[: limit + 1])
    if not pending or len(pending) > limit:
        return 0
    entries = [document_entry(document) for document in pending]
    return index_entries(
        assistant, entries, embedder=None, current=current, generations=[state.active_generation]
    ).entries


def documents_not_indexed(assistant: Assistant, generation: int) -> QuerySet[MemoryDocument]:
    """Return the documents with text whose current text has no chunk in ``generation``."""
    indexed = MemoryChunk.objects.filter(
        assistant=assistant,
        generation=generation,
        source=Source.MEMORY,
        path=OuterRef("path"),
        source_hash=OuterRef("content_hash"),
    )
    return (
        MemoryDocument.objects.filter(assistant=assistant, content__regex=r"\S")
        .exclude(Exists(indexed))
        .order_by("path")
    )


def index_document(document_id: int) -> IndexOutcome:
    """Index a memory document (its old rows are replaced; an unchanged one is skipped)."""
    document = MemoryDocument.objects.select_related("assistant").filter(pk=document_id).first()
    if document is None:
        return IndexOutcome()
    return index_entry(document.assistant, document_entry(document))


def remove_entry_rows(
    *, assistant_id: int, source: str, path: str | None = None, session_pk: int | None = None
) -> int:
    """Delete every generation's rows of a deleted document or session; return how many."""
    rows = MemoryChunk.objects.filter(assistant_id=assistant_id, source=source)
    rows = rows.filter(session_pk=session_pk) if session_pk is not None else rows.filter(path=path)
    deleted, _ = rows.delete()
    return deleted
