"""Vectors for stored text-only rows, by any number of workers at once (docs/design.md,
"Embeddings that scale out").

A burst writes its chunks text first (full-text search finds them at once) and the vectors
follow. Each worker that runs `fill_waiting` claims a batch of waiting rows with
``FOR UPDATE SKIP LOCKED``: a row another worker holds is not waited for and not taken, so no
two workers embed the same chunk, and each batch is embedded and written in the transaction that
claimed it. A worker that dies mid-batch rolls back and its rows are free again. More workers
(or an embedding service with more capacity behind `EMBEDDING_BASE_URL`) fill more batches at a
time; `backlog` says how many rows still wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection, transaction

from memory_app.index.embedding import embed_with_cache
from memory_app.models import FTS_ONLY_MODEL, MemoryChunk
from providers.embeddings import Embedder, get_embedder

# Rows one claim takes: the locks are held while the batch is embedded (with the local e5 about
# 2-4 s of one core), so small enough that a writer replacing one of them waits little.
CLAIM_BATCH = 32
TABLE = MemoryChunk._meta.db_table


@dataclass(frozen=True)
class FillOutcome:
    """What one `fill_waiting` call did: rows given a vector, batches claimed, rows left."""

    filled: int
    batches: int
    more: bool
    error: str | None = None


def fill_waiting(
    *,
    assistant_id: int | None = None,
    budget_seconds: float | None = None,
    batch: int = CLAIM_BATCH,
    progress: Callable[[int], None] | None = None,
) -> FillOutcome:
    """Claim and fill batches of waiting rows (one assistant's, or anyone's) until none is left
    or ``budget_seconds`` have passed; safe to run in any number of processes at once.
    ``progress`` hears the rows filled so far after each batch."""
    embedder = get_embedder()
    if embedder is None:
        return FillOutcome(0, 0, more=False)
    started, filled, batches = time.monotonic(), 0, 0
    while True:
        done, error = claim_and_fill(embedder, assistant_id=assistant_id, batch=batch)
        filled, batches = filled + done, batches + (1 if done else 0)
        if progress is not None and done:
            progress(filled)
        if error is not None or done < batch:
            return FillOutcome(filled, batches, more=error is None and done == batch, error=error)
        if budget_seconds is not None and time.monotonic() - started >= budget_seconds:
            return FillOutcome(filled, batches, more=True)


def claim_and_fill(embedder: Embedder, *, assistant_id: int | None, batch: int) -> tuple[int, str | None]:
    """Claim up to ``batch`` waiting rows, embed their texts and store the vectors; return how many.

    The newest rows first: they are what a person asks about next. Claimed rows stay locked
    until the vectors are written, so a second worker skips them and claims the next ones.
    """
    who = "" if assistant_id is None else "AND assistant_id = %s "
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, hash, text FROM {TABLE} WHERE model = %s {who}"
            "ORDER BY id DESC LIMIT %s FOR UPDATE SKIP LOCKED",
            [FTS_ONLY_MODEL, *([assistant_id] if assistant_id is not None else []), batch],
        )
        rows = cursor.fetchall()
        if not rows:
            return 0, None
        vectors = embed_with_cache(embedder, {h: text for _, h, text in rows})
        filled = [(row_id, vectors.by_hash[h]) for row_id, h, _ in rows if h in vectors.by_hash]
        if filled:
            field = MemoryChunk._meta.get_field("embedding")
            cursor.execute(
                f"UPDATE {TABLE} AS chunk SET embedding = new.embedding::vector, model = %s, dims = %s "
                "FROM unnest(%s::bigint[], %s::text[]) AS new(id, embedding) WHERE chunk.id = new.id",
                [
                    embedder.model,
                    len(filled[0][1]),
                    [row_id for row_id, _ in filled],
                    [field.get_db_prep_value(vector, connection) for _, vector in filled],
                ],
            )
    return len(filled), vectors.error


def backlog(assistant_id: int | None = None) -> int:
    """Return how many rows wait for a vector (one assistant's through its partial index)."""
    rows = MemoryChunk.objects.filter(model=FTS_ONLY_MODEL)
    if assistant_id is not None:
        rows = rows.filter(assistant_id=assistant_id)
    return rows.count()
