"""Building and updating an assistant's search index (docs/openclaw-behaviour.md §4.4-4.6, docs/design.md §D8-D10).

* A source entry (a memory document, or a session transcript registered by sessions_app) is cut
  with `chunk_markdown` at the size the embedder reads, only chunks whose text hash is missing
  from the `EmbeddingCache` are embedded, and the entry's rows are replaced in one transaction.
* Rows belong to a generation. A changed fingerprint (provider, model, dims, chunking) starts a
  new generation that is built beside the active one, which keeps answering searches until the
  new one is complete; then `IndexState` switches to it in one transaction and the old rows go.
  An interrupted build resumes: entries already written to the new generation are skipped.
* If the embedder fails, rows are stored without vectors (full-text still finds them) and the
  next index run of that entry embeds them; a transcript's extending run stores its new rows'
  text first and adds their vectors in slices (`extend_entry`).

memory_app knows nothing about sessions: sessions_app registers its transcripts as an
`ExternalSource` (`register_source`) so a full reindex covers them too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.core.exceptions import ObjectDoesNotExist
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Exists, Func, OuterRef, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.utils import timezone

from memory_app import config
from memory_app.chunking import Chunk, chunk_lines, chunk_markdown
from memory_app.models import (
    FTS_ONLY_MODEL,
    EmbeddingCache,
    IndexedSource,
    IndexState,
    MemoryChunk,
    MemoryDocument,
    Source,
)
from memory_app.snippets import chunk_line_numbers
from memory_app.textsearch import TS_CONFIG, index_text
from memory_app.tokens import estimate_text_tokens
from memory_app.vectors import ensure_vector_index
from openclaw_site.jobs.tasks import WorkGone
from openclaw_site.models import Assistant, UsagePurpose
from openclaw_site.platform.locks import LockTimeout, session_lock
from openclaw_site.platform.row_sql import partial_index_condition
from openclaw_site.usage.ledger import record_usage
from providers.chat import Usage
from providers.embeddings import Embedder, embed_documents_counted, get_embedder
from providers.errors import ProviderError

logger = logging.getLogger(__name__)

# docs/openclaw-behaviour.md §4.4: the cache is read in batches of 400 hashes.
CACHE_LOOKUP_BATCH = 400
# Entries chunked and embedded together during a full reindex (one embed pass per group).
REINDEX_GROUP_SIZE = 64
ProgressCallback = Callable[[dict[str, Any]], None]


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


_external_sources: dict[str, ExternalSource] = {}


def register_source(source: str, provider: ExternalSource) -> None:
    """Let another app feed entries of ``source`` to full reindexes (called from AppConfig.ready)."""
    _external_sources[source] = provider


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

    def as_dict(self) -> dict[str, Any]:
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


# --- entries ---------------------------------------------------------------------------------


def document_entry(document: MemoryDocument) -> SourceEntry:
    return SourceEntry(
        source=Source.MEMORY,
        path=document.path,
        content=document.content,
        source_hash=document.content_hash,
        document_id=document.pk,
        timestamp=document.updated_at,
    )


def _is_current(entry: SourceEntry) -> bool:
    """Tell whether the entry still matches its source (a newer write makes it stale)."""
    if entry.source == Source.MEMORY:
        if entry.document_id is None:  # an entry without its document's id matches no document
            return False
        return MemoryDocument.objects.filter(pk=entry.document_id, content_hash=entry.source_hash).exists()
    provider = _external_sources.get(entry.source)
    return provider.is_current(entry) if provider is not None else True


# --- chunk rows ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Piece:
    chunk: Chunk
    line_numbers: list[int]
    timestamp: datetime | None
    row_id: int | None = None  # a stored row's piece (`_unembedded_before`)


def prepare_chunks(entry: SourceEntry, chunking: config.Chunking) -> list[_Piece]:
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
            _Piece(
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


# --- embeddings through the cache ------------------------------------------------------------


@dataclass
class _Vectors:
    by_hash: dict[str, list[float]]
    embedded: int = 0
    cache_hits: int = 0
    error: str | None = None
    tokens: int = 0  # the embedder's count of its input, else the estimate

    def add(self, other: _Vectors) -> None:
        """Take in another call's vectors and counts (its error too)."""
        self.by_hash.update(other.by_hash)
        self.embedded += other.embedded
        self.cache_hits += other.cache_hits
        self.tokens += other.tokens
        self.error = self.error or other.error


def embed_with_cache(
    embedder: Embedder | None, texts_by_hash: dict[str, str], *, progress: ProgressCallback | None = None
) -> _Vectors:
    """Return vectors for the texts, embedding only those the cache lacks (docs/openclaw-behaviour.md §4.4)."""
    if embedder is None or not texts_by_hash:
        return _Vectors({})
    found = _cached(embedder, list(texts_by_hash))
    result = _Vectors(dict(found), cache_hits=len(found))
    result.add(
        _embed_uncached(
            embedder, {h: t for h, t in texts_by_hash.items() if h not in found}, progress=progress
        )
    )
    return result


def _embed_uncached(
    embedder: Embedder, texts_by_hash: dict[str, str], *, progress: ProgressCallback | None = None
) -> _Vectors:
    """Embed the texts (known to be missing from the cache) and store their vectors there."""
    result = _Vectors({})
    # By length: a batch of texts of about the same length pads least (what sentence-transformers
    # does within one call, here across calls).
    missing = sorted(texts_by_hash, key=lambda h: len(texts_by_hash[h]))
    # Texts per embed_documents() call (EMBEDDING_BATCH_SIZE): the provider batches further inside.
    size = settings.EMBEDDING_BATCH_SIZE
    for start in range(0, len(missing), size):
        group = missing[start : start + size]
        texts = [texts_by_hash[h] for h in group]
        try:
            counted = embed_documents_counted(embedder, texts)
        except ProviderError as error:
            result.error = error.message
            logger.warning(
                "embedding failed; %d chunks stored for full-text only: %s", len(missing) - start, error
            )
            break
        _store_cache(embedder, group, counted.vectors)
        result.by_hash.update(zip(group, counted.vectors))
        result.embedded += len(group)
        result.tokens += (
            counted.tokens if counted.tokens is not None else sum(estimate_text_tokens(t) for t in texts)
        )
        if progress is not None:
            progress({"embedded": result.embedded, "to_embed": len(missing)})
    return result


def _embed_within(
    embedder: Embedder, pieces: Sequence[_Piece], budget_seconds: float
) -> tuple[_Vectors, int]:
    """Embed ``pieces`` from the first on for about ``budget_seconds``; return the vectors and
    how many pieces they leave without one (none after an embedding error: the rest is stored for
    full text only, as a whole pass does).

    Vectors already in the cache cost no budget (a run re-cuts chunks an earlier one embedded).
    The first call embeds one missing piece; each next call as many as the speed measured so far
    fits in the time left (up to `EMBEDDING_BATCH_SIZE`), so a slow local model overruns the
    budget by about one piece and a fast remote one still sends full batches.
    """
    found = _cached(embedder, [p.chunk.hash for p in pieces])
    result = _Vectors(found, cache_hits=len(found))
    missing = list({p.chunk.hash: p for p in pieces if p.chunk.hash not in found}.values())  # one per text
    started = time.monotonic()
    done, size = 0, 1
    while done < len(missing):
        group = missing[done : done + size]
        part = _embed_uncached(embedder, {p.chunk.hash: p.chunk.text for p in group})
        result.add(part)
        done += len(group)
        if part.error is not None:
            return result, 0
        elapsed = time.monotonic() - started
        if elapsed >= budget_seconds:
            break
        per_piece = elapsed / done
        fits = int((budget_seconds - elapsed) / per_piece) if per_piece > 0 else settings.EMBEDDING_BATCH_SIZE
        size = max(1, min(settings.EMBEDDING_BATCH_SIZE, fits))
    return result, len(missing) - done


def _record_embedding_usage(assistant: Assistant, embedder: Embedder | None, vectors: _Vectors) -> None:
    if embedder is not None and vectors.embedded:
        record_usage(
            assistant=assistant,
            purpose=UsagePurpose.EMBEDDING,
            model=embedder.model,
            usage=Usage(input=vectors.tokens, total=vectors.tokens),
        )


def _note_embedding_error(assistant: Assistant, vectors: _Vectors) -> None:
    if vectors.error:
        IndexState.objects.filter(assistant=assistant).update(last_error=f"embedding failed: {vectors.error}")


def _cached(embedder: Embedder, hashes: list[str]) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for start in range(0, len(hashes), CACHE_LOOKUP_BATCH):
        rows = EmbeddingCache.objects.filter(
            provider_key=embedder.provider_key,
            model=embedder.model,
            dims=embedder.dims,
            hash__in=hashes[start : start + CACHE_LOOKUP_BATCH],
        ).values_list("hash", "embedding")
        found.update((h, list(vector)) for h, vector in rows)
    return found


def _store_cache(embedder: Embedder, hashes: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
    rows = [
        EmbeddingCache(
            provider_key=embedder.provider_key,
            model=embedder.model,
            hash=h,
            dims=len(vector),
            embedding=list(vector),
        )
        for h, vector in zip(hashes, vectors)
    ]
    # Two workers may embed the same text at once; the first row wins, both vectors are equal.
    EmbeddingCache.objects.bulk_create(rows, ignore_conflicts=True)


# --- writing one entry -----------------------------------------------------------------------


def _rows_filter(assistant_id: int, entry: SourceEntry, generation: int) -> Q:
    where = Q(assistant_id=assistant_id, generation=generation, source=entry.source)
    if entry.session_pk is not None:
        return where & Q(session_pk=entry.session_pk)
    return where & Q(path=entry.path)


def is_up_to_date(assistant_id: int, entry: SourceEntry, generation: int, embedder: Embedder | None) -> bool:
    """Tell whether the stored rows already come from this exact source text and embedder."""
    model = embedder.model if embedder is not None else FTS_ONLY_MODEL
    counts = MemoryChunk.objects.filter(_rows_filter(assistant_id, entry, generation)).aggregate(
        total=Count("id"),
        stale=Count("id", filter=~Q(source_hash=entry.source_hash) | ~Q(model=model)),
    )
    return counts["total"] > 0 and counts["stale"] == 0


def _tsvector(text: str) -> Func:
    return Func(
        Value(TS_CONFIG), Value(index_text(text)), function="to_tsvector", output_field=SearchVectorField()
    )


def _build_rows(
    assistant_id: int,
    entry: SourceEntry,
    generation: int,
    pieces: Sequence[_Piece],
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


def _write_entry(
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
        if not _is_current(entry) or (entry.upto and ticket.indexed_upto > entry.upto):
            return False
        if extends is not None and ticket.indexed_upto != extends.upto:
            return False
        for generation in [g for g in generations if g in live]:
            replaced = _rows_filter(assistant_id, entry, generation)
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


# --- the index state and its generations -----------------------------------------------------


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
    return state


# --- public entry points ---------------------------------------------------------------------


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
    _record_embedding_usage(assistant, embedder, vectors)
    outcome.embedded, outcome.cache_hits, outcome.embedding_error = (
        vectors.embedded,
        vectors.cache_hits,
        vectors.error,
    )
    _note_embedding_error(assistant, vectors)
    for entry in todo:
        pieces = prepared[id(entry)]
        rows = {
            g: _build_rows(assistant.pk, entry, g, pieces, vectors.by_hash, embedder) for g in generations
        }
        if _write_entry(assistant.pk, entry, generations, rows):
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
    return index_entries(
        assistant, [entry], embedder=embedder, current=current, generations=generations, force=force
    )


# --- extending a source that only grows (a transcript) --------------------------------------


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


def growth_point(assistant: Assistant, *, source: str, session_pk: int) -> Growth | None:
    """Return where a transcript's index can be extended, or None when only a full index will do.

    Chunks are cut greedily from the first line, so every chunk before the last one stays as it
    is when lines are appended (memory_app.chunking.chunk_lines): re-chunking from the last
    chunk's first line gives the same chunks a full pass would. Extending needs one current
    generation (no build under way); rows still waiting for a vector (written text first, or
    after an embedding failure) are counted in ``pending`` and embedded by the next extends. A
    source never indexed extends from line 0.
    """
    if source not in config.indexed_sources(assistant):
        return None
    embedder = get_embedder()
    current = config.fingerprint(assistant, embedder)
    state = IndexState.objects.filter(assistant=assistant).first()
    if state is None or target_generations(state, current) != [state.active_generation]:
        return None
    if state.building_generation:
        return None
    ticket = (
        IndexedSource.objects.filter(assistant=assistant, source=source, key=str(session_pk))
        .values_list("indexed_upto", flat=True)
        .first()
    )
    rows = MemoryChunk.objects.filter(
        assistant=assistant, generation=state.active_generation, source=source, session_pk=session_pk
    )
    # One probe of the session's line index, not an aggregate over all its rows.
    last_start = rows.order_by("-start_line").values_list("start_line", flat=True).first()
    if last_start is None:
        # Nothing indexed yet: a first index extends an empty index from the first line, so it
        # is cut into slices as every later run is (docs/design.md, "A transcript indexed in
        # slices, text first, vectors after").
        return Growth(line=0, upto=0, generation=state.active_generation) if not ticket else None
    if not ticket:
        return None
    pending = embedder is not None and _first_waiting_line(rows) is not None
    return Growth(line=last_start, upto=ticket, pending=pending, generation=state.active_generation)


def _text_only() -> RawSQL:
    """Filter for the rows still waiting for a vector, stated as their partial indexes' condition.

    `model = 'fts-only'` in literals: a prepared statement's generic plan uses the partial
    indexes only then (`openclaw_site.platform.row_sql.partial_index_condition`).
    """
    return partial_index_condition(MemoryChunk, "memchunk_text_only")


def _first_waiting_line(rows: QuerySet[MemoryChunk]) -> int | None:
    """Return the first line of the oldest of ``rows`` still waiting for a vector, or None.

    One probe of the partial index of a transcript's text-only rows; a count of them would read
    every waiting row from the table, 13 ms per call with 10,000 of them after a burst.
    """
    return rows.filter(_text_only()).order_by("start_line").values_list("start_line", flat=True).first()


def extend_entry(
    assistant: Assistant, tail: SourceEntry, *, growth: Growth, budget_seconds: float | None = None
) -> IndexOutcome | None:
    """Index ``tail`` (the source's lines from ``growth.line`` on) in place of the rows from there.

    Text first, vectors after (docs/design.md, "A transcript indexed in slices, text first,
    vectors after"): every chunk of the tail is written at once, so full-text search finds it,
    and the recorded ``upto`` is the tail's. Vectors are added oldest first, the source's earlier
    rows still without one before the tail's chunks; with ``budget_seconds`` only for about that
    long, the rest keep their text alone and the outcome says ``more`` (the next run goes on with
    them). With time left after the first batch of earlier rows it goes on with the next ones;
    earlier rows get their vectors by row id after the write. Return None when the rows moved since
    ``growth`` was read (another run indexed the source, a build started): the caller then
    indexes the whole source.
    """
    embedder = get_embedder()
    current = config.fingerprint(assistant, embedder)
    state = get_state(assistant, current)
    generations = target_generations(state, current)
    if generations != [state.active_generation] or state.building_generation:
        return None
    started = time.monotonic()
    pieces = prepare_chunks(tail, config.chunking_for(assistant.config.memory_search, tail.source, embedder))
    generation = state.active_generation
    earlier = _unembedded_before(assistant.pk, tail, generation, growth.line) if embedder else []
    todo = [*earlier, *pieces]
    if budget_seconds is None or embedder is None:
        vectors, left = embed_with_cache(embedder, {p.chunk.hash: p.chunk.text for p in todo}), 0
    else:
        vectors, left = _embed_within(embedder, todo, budget_seconds)
    rows = {g: _build_rows(assistant.pk, tail, g, pieces, vectors.by_hash, embedder) for g in generations}
    written = _write_entry(assistant.pk, tail, generations, rows, extends=growth)
    if written and earlier and embedder is not None:
        _fill_vectors(earlier, vectors.by_hash, embedder)
        # The first batch done and time left (a fast embedder): the next earlier rows, while it lasts.
        while budget_seconds and left == 0 and vectors.error is None and len(earlier) == FILL_BATCH:
            remaining = budget_seconds - (time.monotonic() - started)
            if remaining <= 0:
                break
            earlier = _unembedded_before(assistant.pk, tail, generation, growth.line)
            part, left = _embed_within(embedder, earlier, remaining)
            _fill_vectors(earlier, part.by_hash, embedder)
            vectors.add(part)
    _record_embedding_usage(assistant, embedder, vectors)
    _note_embedding_error(assistant, vectors)
    if not written:
        return None
    outcome = IndexOutcome(
        generations=generations,
        embedded=vectors.embedded,
        cache_hits=vectors.cache_hits,
        embedding_error=vectors.error,
        note="extended",
    )
    if embedder is not None:
        first_waiting = _first_waiting_line(
            MemoryChunk.objects.filter(_rows_filter(assistant.pk, tail, generation))
        )
        outcome.lines = tail.upto
        # A line before the oldest waiting chunk's first line is in no waiting chunk.
        outcome.lines_with_vectors = tail.upto if first_waiting is None else max(0, first_waiting - 1)
        # After an embedding error the rows wait for the next change or the periodic refresh.
        outcome.more = vectors.error is None and first_waiting is not None
    outcome.entries = 1
    outcome.chunks_written = len(pieces)
    return outcome


# Earlier rows without a vector that an extend reads at a time (oldest first) to embed; with time
# left in its slice it reads the next ones.
FILL_BATCH = 256


def _unembedded_before(assistant_id: int, entry: SourceEntry, generation: int, line: int) -> list[_Piece]:
    """Return the source's rows before ``line`` that have no vector yet, oldest first."""
    rows = _waiting_before(_rows_filter(assistant_id, entry, generation), line)
    return _stored_pieces(rows.order_by("start_line", "id"))


def _waiting_before(where: Q, line: int) -> QuerySet[MemoryChunk]:
    """Return the rows of ``where`` (one source's) that start before ``line`` and wait for a vector."""
    return MemoryChunk.objects.filter(where, _text_only(), start_line__lt=line)


def _stored_pieces(rows: QuerySet[MemoryChunk]) -> list[_Piece]:
    """Return the first `FILL_BATCH` of ``rows`` as pieces whose vectors go back by row id."""
    values = rows.values_list("id", "start_line", "end_line", "text", "hash")[:FILL_BATCH]
    return [_Piece(Chunk(start, end, text, h), [], None, row_id) for row_id, start, end, text, h in values]


def _fill_vectors(rows: Sequence[_Piece], vectors: dict[str, list[float]], embedder: Embedder) -> None:
    """Give stored text-only rows the vectors embedded for their text, in one UPDATE.

    A row another run replaced meanwhile is gone (rows are replaced, not changed), and one still
    there has the text its vector was embedded from. Only rows still without a vector are
    written, and a row another transaction holds is skipped, not waited for: a transcript's run
    and its helper fill from opposite ends, and where they meet each UPDATE locked the other's
    rows in its own order, which PostgreSQL ended as a deadlock (the helper's task failed). A
    skipped row gets its vector from the holder, or, should that roll back, stays text-only for
    the next slice (the run's ``more`` is read after). The vectors go as two arrays, ids and
    vectors: Django's `bulk_update` builds a CASE of 256 branches, which took as long again as
    PostgreSQL's update itself (0.45 s against 0.25 s for 256 rows).
    """
    field = MemoryChunk._meta.get_field("embedding")
    filled = [(p.row_id, vectors[p.chunk.hash]) for p in rows if p.chunk.hash in vectors]
    if not filled:
        return
    table = MemoryChunk._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH new AS (SELECT * FROM unnest(%s::bigint[], %s::text[]) AS new(id, embedding)),"
            f" free AS (SELECT chunk.id FROM {table} AS chunk JOIN new USING (id)"
            "  WHERE chunk.model = %s FOR UPDATE OF chunk SKIP LOCKED)"
            f" UPDATE {table} AS chunk SET embedding = new.embedding::vector, model = %s, dims = %s"
            " FROM new JOIN free USING (id) WHERE chunk.id = new.id",
            [
                [row_id for row_id, _ in filled],
                [field.get_db_prep_value(vector, connection) for _, vector in filled],
                FTS_ONLY_MODEL,
                embedder.model,
                len(filled[0][1]),
            ],
        )


@dataclass(frozen=True)
class Filled:
    """What one `fill_from_newest` call did: vectors embedded, and whether rows still wait."""

    embedded: int
    more: bool


# Rows waiting before a transcript's last chunk that make a helper worth asking for: with the local
# e5 model about 10 s of one core.
HELPER_MIN_ROWS = 32


def worth_a_helper(assistant: Assistant, *, source: str, session_pk: int, growth: Growth) -> bool:
    """Tell whether `HELPER_MIN_ROWS` of a growing source's rows before its last chunk (``growth``,
    as `growth_point` read it) wait for a vector: enough work to be worth a second worker
    (`fill_from_newest`).

    One probe of the partial index of waiting rows.
    """
    if not growth.pending:
        return False
    return (
        _waiting_rows(assistant, source=source, session_pk=session_pk, growth=growth)
        .order_by("start_line")[HELPER_MIN_ROWS - 1 : HELPER_MIN_ROWS]
        .exists()
    )


def _waiting_rows(
    assistant: Assistant, *, source: str, session_pk: int, growth: Growth
) -> QuerySet[MemoryChunk]:
    """A growing source's rows before its last chunk still waiting for a vector."""
    where = Q(assistant_id=assistant.pk, generation=growth.generation, source=source, session_pk=session_pk)
    return _waiting_before(where, growth.line)


def fill_from_newest(
    assistant: Assistant, *, source: str, session_pk: int, budget_seconds: float
) -> Filled | None:
    """Embed a growing source's waiting rows from the newest back, for about ``budget_seconds``.

    The helper of a busy transcript's index run, on a worker that run leaves idle: the run fills
    oldest first, this from the other end, so the two meet once and seldom embed a row twice
    (when they do, both store the same vector). It only gives vectors to stored rows, by row id,
    and leaves the last chunk alone (the next extend re-cuts it), so it needs no lock of the
    transcript: a row replaced meanwhile is simply not updated (docs/design.md, "A helper for a
    lone transcript's vectors"). None when there is nothing it can do: no embedder, no current
    generation to extend, a build under way.
    """
    embedder = get_embedder()
    growth = growth_point(assistant, source=source, session_pk=session_pk) if embedder else None
    if embedder is None or growth is None:
        return None
    if not growth.pending:
        return Filled(embedded=0, more=False)
    waiting = _waiting_rows(assistant, source=source, session_pk=session_pk, growth=growth)
    pieces = _stored_pieces(waiting.order_by("-start_line"))  # the partial index, read backwards
    if not pieces:
        return Filled(embedded=0, more=False)
    vectors, left = _embed_within(embedder, pieces, budget_seconds)
    _fill_vectors(pieces, vectors.by_hash, embedder)
    _record_embedding_usage(assistant, embedder, vectors)
    _note_embedding_error(assistant, vectors)
    return Filled(
        embedded=vectors.embedded, more=vectors.error is None and (left > 0 or len(pieces) == FILL_BATCH)
    )


def _enqueue_full_reindex(assistant: Assistant) -> None:
    # memory_app.tasks runs this module's functions, so it is imported here, not at the top.
    from memory_app.tasks import queue_reindex

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


# --- whole-assistant reindex -----------------------------------------------------------------


def _entries(assistant: Assistant, sources: Iterable[str], *, changed_only: bool) -> Iterable[SourceEntry]:
    """Yield the entries of the assistant's indexed sources, documents first."""
    for source in sources:
        if source == Source.MEMORY:
            for document in MemoryDocument.objects.filter(assistant=assistant).order_by("path").iterator():
                yield document_entry(document)
        elif source in _external_sources:
            provider = _external_sources[source]
            for key in provider.keys(assistant.pk, changed_only=changed_only):
                entry = provider.load(assistant.pk, key)
                if entry is not None:
                    yield entry


def _count_entries(assistant: Assistant, sources: Iterable[str], *, changed_only: bool) -> int:
    total = 0
    for source in sources:
        if source == Source.MEMORY:
            total += MemoryDocument.objects.filter(assistant=assistant).count()
        elif source in _external_sources:
            total += len(_external_sources[source].keys(assistant.pk, changed_only=changed_only))
    return total


def _groups(entries: Iterable[SourceEntry], size: int) -> Iterable[list[SourceEntry]]:
    group: list[SourceEntry] = []
    for entry in entries:
        group.append(entry)
        if len(group) >= size:
            yield group
            group = []
    if group:
        yield group


def save_progress(assistant_id: int, progress: dict[str, Any]) -> int:
    """Record reindex progress on the IndexState (shown by the task and the dashboard); return
    how many states were updated (none once the assistant is deleted, its state with it)."""
    return IndexState.objects.filter(assistant_id=assistant_id).update(
        progress=progress, updated_at=timezone.now()
    )


ASSISTANT_DELETED = "the assistant was deleted while its index was being built; nothing more was indexed."


@contextmanager
def _stops_when_deleted(assistant_id: int) -> Iterator[None]:
    """Turn the database's refusal to write for a deleted assistant into `WorkGone`.

    A reindex checks that its assistant still exists after every group (`_report`); one deleted
    during a group makes the group's writes fail (a foreign key, a state row gone), and the task
    then stops with a sentence on the Jobs page, not the raw database error (docs/design.md,
    Background work).
    """
    try:
        yield
    except (IntegrityError, ObjectDoesNotExist):
        if Assistant.objects.filter(pk=assistant_id).exists():
            raise
        raise WorkGone(ASSISTANT_DELETED) from None


def reindex_assistant(
    assistant_id: int,
    *,
    full: bool = False,
    progress: ProgressCallback | None = None,
    queue_external: bool = False,
) -> IndexOutcome:
    """Bring an assistant's index up to date; a full run (or a new fingerprint) builds a new
    generation and swaps it in when complete.

    With ``queue_external`` an up-to-date run indexes memory documents itself and hands the
    other sources' entries that lag (new lines, rows still without a vector) to their own index
    jobs, which extend a transcript in slices instead of reading it whole (the periodic refresh).
    """
    assistant = Assistant.objects.filter(pk=assistant_id).first()
    if assistant is None:
        return IndexOutcome(note="the assistant was deleted")
    try:
        # One reindex per assistant at a time, across workers (the second one has nothing to add).
        with (
            session_lock(f"memory-reindex:{assistant_id}", timeout_seconds=0),
            _stops_when_deleted(assistant_id),
        ):
            embedder = get_embedder()
            current = config.fingerprint(assistant, embedder)
            state = get_state(assistant, current)
            if not full and state.fingerprint == current:
                return _incremental(assistant, state, current, embedder, progress, queue_external)
            return _rebuild(assistant, current, embedder, progress)
    except LockTimeout:
        return IndexOutcome(note="another reindex of this assistant is running")


def _report(assistant_id: int, progress: ProgressCallback | None, data: dict[str, Any]) -> None:
    if not save_progress(assistant_id, data) and not Assistant.objects.filter(pk=assistant_id).exists():
        raise WorkGone(ASSISTANT_DELETED)
    if progress is not None:
        progress(data)


def _run(
    assistant: Assistant,
    *,
    generations: list[int],
    current: dict[str, Any],
    embedder: Embedder | None,
    phase: str,
    progress: ProgressCallback | None,
    sources: Sequence[str] | None = None,
) -> IndexOutcome:
    """Index every entry of ``sources`` (default: the fingerprint's) into ``generations`` in
    groups, reporting progress after each group."""
    sources = current["sources"] if sources is None else sources
    # A new generation starts empty: every entry must be written, changed or not.
    changed_only = phase != "building"
    total = _count_entries(assistant, sources, changed_only=changed_only)
    outcome = IndexOutcome(generations=generations)
    done = 0
    _report(
        assistant.pk, progress, {"phase": phase, "done": 0, "total": total, "generation": generations[-1]}
    )
    for group in _groups(_entries(assistant, sources, changed_only=changed_only), REINDEX_GROUP_SIZE):
        outcome.add(
            index_entries(assistant, group, embedder=embedder, current=current, generations=generations)
        )
        done += len(group)
        _report(
            assistant.pk,
            progress,
            {
                "phase": phase,
                "done": done,
                "total": total,
                "generation": generations[-1],
                "embedded": outcome.embedded,
            },
        )
    return outcome


def _incremental(
    assistant: Assistant,
    state: IndexState,
    current: dict[str, Any],
    embedder: Embedder | None,
    progress: ProgressCallback | None,
    queue_external: bool,
) -> IndexOutcome:
    if state.building_generation and state.building_fingerprint != current:
        _abandon_build(assistant)
    state = get_state(assistant, current)
    generations = target_generations(state, current)
    if current.get("dims"):
        ensure_vector_index(int(current["dims"]), assistant.pk)
    handed_over = [s for s in current["sources"] if s in _external_sources] if queue_external else []
    outcome = _run(
        assistant,
        generations=generations,
        current=current,
        embedder=embedder,
        phase="indexing",
        progress=progress,
        sources=[s for s in current["sources"] if s not in handed_over],
    )
    for source in handed_over:
        outcome.queued += _schedule_lagging(assistant, source, state.active_generation, embedder)
    removed = _remove_orphans(assistant, current["sources"])
    _report(
        assistant.pk,
        progress,
        {
            "phase": "done",
            "done": outcome.entries + outcome.skipped,
            "total": outcome.entries + outcome.skipped,
            "removed": removed,
            "generation": generations[0],
            "embedded": outcome.embedded,
        },
    )
    return outcome


def _schedule_lagging(assistant: Assistant, source: str, generation: int, embedder: Embedder | None) -> int:
    """Queue the source's index job for its entries with new lines or rows without a vector.

    A transcript whose vector job was lost (a crashed worker) has every line indexed, so only its
    text-only rows tell that it lags; without an embedder text-only rows are all there is.
    """
    provider = _external_sources[source]
    keys = set(provider.keys(assistant.pk, changed_only=True))
    if embedder is not None:
        waiting = MemoryChunk.objects.filter(
            _text_only(), assistant=assistant, generation=generation, source=source
        )
        keys.update(str(pk) for pk in waiting.values_list("session_pk", flat=True).distinct())
    ordered = sorted(keys, key=int)
    if ordered:
        provider.schedule(assistant.pk, ordered)
    return len(ordered)


def _abandon_build(assistant: Assistant) -> None:
    with transaction.atomic():
        state = IndexState.objects.select_for_update(no_key=True).get(assistant=assistant)
        if state.building_generation:
            MemoryChunk.objects.filter(assistant=assistant, generation=state.building_generation).delete()
        state.building_generation, state.building_fingerprint = None, None
        state.save(update_fields=["building_generation", "building_fingerprint", "updated_at"])


def _rebuild(
    assistant: Assistant,
    current: dict[str, Any],
    embedder: Embedder | None,
    progress: ProgressCallback | None,
) -> IndexOutcome:
    state = start_build(assistant, current)
    generation = state.building_generation
    assert generation is not None
    outcome = _run(
        assistant,
        generations=[generation],
        current=current,
        embedder=embedder,
        phase="building",
        progress=progress,
    )
    if _swap(assistant, generation, current):
        _remove_orphans(assistant, current["sources"])
        _report(
            assistant.pk,
            progress,
            {
                "phase": "done",
                "done": outcome.entries + outcome.skipped,
                "total": outcome.entries + outcome.skipped,
                "generation": generation,
                "embedded": outcome.embedded,
            },
        )
    outcome.generations = [generation]
    return outcome


def _swap(assistant: Assistant, generation: int, current: dict[str, Any]) -> bool:
    """Make the built generation the active one and drop every other generation's rows."""
    with transaction.atomic():
        state = IndexState.objects.select_for_update(no_key=True).get(assistant=assistant)
        if state.building_generation != generation or state.building_fingerprint != current:
            return False  # the settings changed again during the build; that build takes over
        state.active_generation, state.fingerprint = generation, current
        state.building_generation, state.building_fingerprint = None, None
        state.last_error = ""
        state.save()
        MemoryChunk.objects.filter(assistant=assistant).exclude(generation=generation).delete()
    return True


def _remove_orphans(assistant: Assistant, sources: Sequence[str]) -> int:
    """Delete rows whose document or session no longer exists, or whose source is off."""
    rows = MemoryChunk.objects.filter(assistant=assistant)
    removed, _ = rows.exclude(source__in=sources).delete()
    memory_paths = MemoryDocument.objects.filter(assistant=assistant).values("path")
    deleted, _ = rows.filter(source=Source.MEMORY).exclude(path__in=memory_paths).delete()
    removed += deleted
    for source, provider in _external_sources.items():
        keys = provider.keys(assistant.pk, changed_only=False)
        deleted, _ = rows.filter(source=source).exclude(session_pk__in=[int(k) for k in keys]).delete()
        removed += deleted
    return removed
