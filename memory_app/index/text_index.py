"""One assistant's own full-text index: a partial GIN over its chunks' ``tsv``.

The table's GIN index (`memchunk_tsv_gin`) holds every assistant's postings, so the keyword
side of a small assistant's search in a large shared table reads other teams' postings and then
either ANDs them with the assistant's b-tree index (an entry per chunk of the assistant: about
1 ms at 20,000 chunks) or checks each match's row. An assistant with enough chunks
(`memory_app.index.vectors.OWN_INDEX_MIN_ROWS`) gets a GIN of its own, as it gets its own HNSW
graph, and its search reads only its own postings (docs/design.md, "Search at a million chunks").

The predicate is written ``(assistant_id)::integer = <id>`` and the search writes the same
(`own_index_predicate`): the planner uses a partial index only when the query implies its
predicate, and it cannot AND a cast with the assistant's b-tree index, which it otherwise does
(it does not know how few rows a tsquery from a CTE matches), paying the b-tree's cost back.
"""

from __future__ import annotations

import threading
import time

from django.db import connection

from memory_app.index import vectors
from memory_app.index.vectors import TABLE, build_index

_below: dict[int, float] = {}
_below_lock = threading.Lock()


def text_index_name(assistant_id: int) -> str:
    return f"memchunk_tsv_a{int(assistant_id)}"


def own_index_predicate(assistant_id: int, alias: str = "") -> str:
    """Return the predicate of the assistant's own GIN index (an int: nothing can be injected)."""
    column = f"{alias}.assistant_id" if alias else "assistant_id"
    return f"({column})::integer = {int(assistant_id)}"


def create_text_index_sql(assistant_id: int, *, concurrently: bool = False) -> str:
    """Return the CREATE INDEX statement of one assistant's full-text index (idempotent)."""
    return (
        f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}IF NOT EXISTS "
        f"{text_index_name(assistant_id)} ON {TABLE} USING gin (tsv) WHERE {own_index_predicate(assistant_id)}"
    )


def ensure_text_index(assistant_id: int) -> bool:
    """Give the assistant its own full-text index once it has enough chunks; True if it has one.

    The threshold is the HNSW graph's (`memory_app.index.vectors.OWN_INDEX_MIN_ROWS`). Cheap when
    the index exists (one catalogue lookup) and below the threshold (once a minute per process);
    built like the graph (`memory_app.index.vectors.build_index`).
    """
    key = int(assistant_id)
    if time.monotonic() - _below.get(key, float("-inf")) < vectors.BELOW_THRESHOLD_SECONDS:
        return False
    name = text_index_name(assistant_id)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = %s",
            [name],
        )
        row = cursor.fetchone()
        if row is not None and row[0]:
            return True
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {TABLE} WHERE assistant_id = %s OFFSET %s LIMIT 1)",
            [assistant_id, vectors.OWN_INDEX_MIN_ROWS - 1],
        )
        if not cursor.fetchone()[0]:
            with _below_lock:
                _below[key] = time.monotonic()
            return False
        return build_index(
            cursor,
            name,
            lambda concurrently: create_text_index_sql(assistant_id, concurrently=concurrently),
            rebuild=row is not None,
        )
