"""A transcript's growing tail: its new rows' text stored first, their vectors added in slices, the newest first, with a second worker when enough waits (docs/design.md §D10)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection
from django.db.models import Q, QuerySet

from memory_app.index import config
from memory_app.index.chunking import Chunk
from memory_app.index.embedding import (
    embed_with_cache,
    embed_within,
    note_embedding_error,
    record_embedding_usage,
)
from memory_app.index.entries import Growth, Piece, SourceEntry, prepare_chunks
from memory_app.index.rows import (
    IndexOutcome,
    build_rows,
    get_state,
    rows_filter,
    target_generations,
    text_only,
    write_entry,
)
from memory_app.models import (
    FTS_ONLY_MODEL,
    IndexedSource,
    IndexState,
    MemoryChunk,
)
from openclaw_site.models import Assistant
from providers.embeddings import Embedder, get_embedder

logger = logging.getLogger(__name__)


def growth_point(assistant: Assistant, *, source: str, session_pk: int) -> Growth | None:
    """Return where a transcript's index can be extended, or None when only a full index will do.

    Chunks are cut greedily from the first line, so every chunk before the last one stays as it
    is when lines are appended (memory_app.index.chunking.chunk_lines): re-chunking from the last
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


def _first_waiting_line(rows: QuerySet[MemoryChunk]) -> int | None:
    """Return the first line of the oldest of ``rows`` still waiting for a vector, or None.

    One probe of the partial index of a transcript's text-only rows; a count of them would read
    every waiting row from the table, 13 ms per call with 10,000 of them after a burst.
    """
    return rows.filter(text_only()).order_by("start_line").values_list("start_line", flat=True).first()


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
        vectors, left = embed_within(embedder, todo, budget_seconds)
    rows = {g: build_rows(assistant.pk, tail, g, pieces, vectors.by_hash, embedder) for g in generations}
    written = write_entry(assistant.pk, tail, generations, rows, extends=growth)
    if written and earlier and embedder is not None:
        _fill_vectors(earlier, vectors.by_hash, embedder)
        # The first batch done and time left (a fast embedder): the next earlier rows, while it lasts.
        while budget_seconds and left == 0 and vectors.error is None and len(earlier) == FILL_BATCH:
            remaining = budget_seconds - (time.monotonic() - started)
            if remaining <= 0:
                break
            earlier = _unembedded_before(assistant.pk, tail, generation, growth.line)
            part, left = embed_within(embedder, earlier, remaining)
            _fill_vectors(earlier, part.by_hash, embedder)
            vectors.add(part)
    record_embedding_usage(assistant, embedder, vectors)
    note_embedding_error(assistant, vectors)
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
            MemoryChunk.objects.filter(rows_filter(assistant.pk, tail, generation))
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


def _unembedded_before(assistant_id: int, entry: SourceEntry, generation: int, line: int) -> list[Piece]:
    """Return the source's rows before ``line`` that have no vector yet, oldest first."""
    rows = _waiting_before(rows_filter(assistant_id, entry, generation), line)
    return _stored_pieces(rows.order_by("start_line", "id"))


def _waiting_before(where: Q, line: int) -> QuerySet[MemoryChunk]:
    """Return the rows of ``where`` (one source's) that start before ``line`` and wait for a vector."""
    return MemoryChunk.objects.filter(where, text_only(), start_line__lt=line)


def _stored_pieces(rows: QuerySet[MemoryChunk]) -> list[Piece]:
    """Return the first `FILL_BATCH` of ``rows`` as pieces whose vectors go back by row id."""
    values = rows.values_list("id", "start_line", "end_line", "text", "hash")[:FILL_BATCH]
    return [Piece(Chunk(start, end, text, h), [], None, row_id) for row_id, start, end, text, h in values]


def _fill_vectors(rows: Sequence[Piece], vectors: dict[str, list[float]], embedder: Embedder) -> None:
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
    vectors, left = embed_within(embedder, pieces, budget_seconds)
    _fill_vectors(pieces, vectors.by_hash, embedder)
    record_embedding_usage(assistant, embedder, vectors)
    note_embedding_error(assistant, vectors)
    return Filled(
        embedded=vectors.embedded, more=vectors.error is None and (left > 0 or len(pieces) == FILL_BATCH)
    )
