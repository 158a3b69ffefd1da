"""The SQL for vector columns of any size: one partial HNSW index per dimension.

`MemoryChunk.embedding` has no fixed size (models of different sizes live side by side), and
pgvector can only index a column of known size. So each size gets an expression index on
``embedding::vector(<dims>)`` limited to ``WHERE dims = <dims>``, and the search query must use
exactly the same cast and predicate for the planner to pick it (`vector_order_sql`). pgvector's
HNSW takes at most 2000 dimensions for ``vector`` and 4000 for ``halfvec``; larger models are
searched exactly (no index).
"""

from __future__ import annotations

from django.db import connection

TABLE = "memory_app_memorychunk"
HNSW_MAX_VECTOR_DIMS = 2000
HNSW_MAX_HALFVEC_DIMS = 4000
# Created by migration 0003 (rebuilt by 0006): MiniLM (384) and OpenAI text-embedding-3-small /
# ada-002 (1536).
PREBUILT_DIMS = (384, 1536)
# HNSW build options. pgvector's default ef_construction (64) gives recall@10 0.91 at 100k
# MiniLM chunks with ef_search 100; 128 gives 0.94-0.95 for twice the build time, and the default
# ef_search of 200 (settings.MEMORY_HNSW_EF_SEARCH) 0.97 (bench/search.py).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128


def vector_type(dims: int) -> str:
    """Return the SQL type the index and the query cast embeddings of ``dims`` to."""
    if dims <= HNSW_MAX_VECTOR_DIMS:
        return f"vector({int(dims)})"
    return f"halfvec({int(dims)})"


def index_name(dims: int) -> str:
    return f"memchunk_hnsw_{int(dims)}"


def create_index_sql(dims: int) -> str:
    """Return the CREATE INDEX statement for one dimension (idempotent)."""
    kind = vector_type(dims)
    ops = "vector_cosine_ops" if kind.startswith("vector") else "halfvec_cosine_ops"
    return (
        f"CREATE INDEX IF NOT EXISTS {index_name(dims)} ON {TABLE} "
        f"USING hnsw ((embedding::{kind}) {ops}) WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
        f"WHERE dims = {int(dims)}"
    )


def is_indexable(dims: int) -> bool:
    return 0 < dims <= HNSW_MAX_HALFVEC_DIMS


def ensure_vector_index(dims: int) -> None:
    """Create the HNSW index for ``dims`` if this size has none yet (cheap when it exists)."""
    if not is_indexable(dims):
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_indexes WHERE tablename = %s AND indexname = %s", [TABLE, index_name(dims)]
        )
        if cursor.fetchone() is None:
            cursor.execute(create_index_sql(dims))


def distance_sql(dims: int, param: str = "%s") -> str:
    """Return the cosine-distance expression that matches the partial index of ``dims``."""
    kind = vector_type(dims)
    return f"(embedding::{kind}) <=> ({param})::{kind}"
