"""How current an assistant's index is: what `GET /assistants/{slug}/index/` answers and every
search carries (docs/design.md, REST API, and §D15).

Keyword search is current seconds after a write; vectors may trail it by minutes after an import
or a burst. ``state`` says which:

- ``current``: every document is indexed, every chunk has its vector, the index was built with the
  current settings and embedder, and no index job is queued or running;
- ``indexing``: an index job is queued or running, or a rebuild for new settings is under way;
  what is indexed answers meanwhile (by keywords where vectors are missing);
- ``stale``: something is behind (a document not indexed, chunks without vectors, settings or
  embedder changed) and no job is at it yet; a search queues what it needs, the periodic refresh
  fills missing vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.db import connection

from memory_app.index import config
from memory_app.index.jobs import INDEX_JOB_KINDS
from memory_app.models import FTS_ONLY_MODEL, IndexState, MemoryChunk, MemoryDocument, Source
from openclaw_site.models import Assistant, TaskRecord, TaskState
from providers.embeddings import Embedder

# The kinds of the index jobs other apps run for their sources (transcripts), added from their
# AppConfig.ready through `register_index_job_kinds`, as `indexing.register_source` adds sources.
_external_job_kinds: set[str] = set()


def register_index_job_kinds(*kinds: str) -> None:
    """Count these task kinds as index jobs of the assistant they work for."""
    _external_job_kinds.update(kinds)


def index_job_kinds() -> list[str]:
    """Return every kind of task that works on an assistant's index."""
    return sorted({*INDEX_JOB_KINDS, *_external_job_kinds})


class IndexCondition(StrEnum):
    CURRENT = "current"
    INDEXING = "indexing"
    STALE = "stale"


# The states as the API lists them (and drf-spectacular names their enum, settings.py).
INDEX_STATES = [condition.value for condition in IndexCondition]


@dataclass(frozen=True)
class IndexProgress:
    """What every search answer says about the index it answered from."""

    state: IndexCondition
    chunks_without_vector: int


@dataclass(frozen=True)
class IndexStatus:
    """The whole account of an assistant's index (`GET /assistants/{slug}/index/`)."""

    progress: IndexProgress
    embedder: dict[str, Any] | None
    documents: int
    documents_not_indexed: int
    chunks: int
    jobs_queued: int
    jobs_running: int
    settings_changed: bool
    rebuilding: bool
    generation: int | None


@dataclass(frozen=True)
class IndexHealth:
    """What a search needs to know of the index, read in time that grows with what is behind
    (documents not indexed, chunks waiting for vectors, jobs), never with what is indexed."""

    progress: IndexProgress
    # Counted up to `NOT_INDEXED_READ` at most: a search writes a few itself and queues the rest.
    documents_not_indexed: int
    jobs_queued: int
    jobs_running: int
    settings_changed: bool
    rebuilding: bool
    # The row read, so the search that follows need not read it again (None: never indexed).
    state: IndexState | None

    @property
    def generation(self) -> int | None:
        """The generation searches read (None: never indexed)."""
        return self.state.active_generation if self.state is not None else None


# A search reads at most this many not-indexed documents (more than it writes itself,
# memory_app.search.service.INLINE_TEXT_DOCUMENTS).
NOT_INDEXED_READ = 100

# The documents whose text has no chunk of the active generation (a document of blank lines has
# none to have).
_NOT_INDEXED_SQL = f"""
    SELECT 1 FROM {MemoryDocument._meta.db_table} d
     WHERE d.assistant_id = %(assistant)s AND d.content ~ '\\S'
       AND NOT EXISTS (
           SELECT 1 FROM {MemoryChunk._meta.db_table} c
            WHERE c.assistant_id = d.assistant_id AND c.generation = %(generation)s
              AND c.source = '{Source.MEMORY.value}' AND c.path = d.path
              AND c.source_hash = d.content_hash)
"""

# One statement, each part read through an index that holds only what is behind: the chunks still
# text-only (`memchunk_text_only`), the index jobs queued or running (the live records' partial
# index keeps that a few rows); the not-indexed documents stop at the bound. Counting the
# assistant's chunks took 10 ms in an assistant of 400,000 (docs/benchmarks.md), on every search.
_HEALTH_SQL = f"""
    SELECT
        EXISTS (SELECT 1 FROM {MemoryDocument._meta.db_table} d WHERE d.assistant_id = %(assistant)s),
        (SELECT count(*) FROM ({_NOT_INDEXED_SQL} LIMIT %(read)s) AS behind),
        (SELECT count(*) FROM {MemoryChunk._meta.db_table} c
          WHERE c.assistant_id = %(assistant)s AND c.generation = %(generation)s
            AND c.source = ANY(%(sources)s) AND c.model = '{FTS_ONLY_MODEL}'),
        (SELECT count(*) FROM {TaskRecord._meta.db_table} t
          WHERE t.assistant_id = %(assistant)s AND t.state = '{TaskState.QUEUED.value}'
            AND t.kind = ANY(%(kinds)s)),
        (SELECT count(*) FROM {TaskRecord._meta.db_table} t
          WHERE t.assistant_id = %(assistant)s AND t.state = '{TaskState.RUNNING.value}'
            AND t.kind = ANY(%(kinds)s))
"""

# The whole account's totals (`GET /assistants/{slug}/index/` only): these read every document and
# every chunk of the generation.
_TOTALS_SQL = f"""
    SELECT
        (SELECT count(*) FROM {MemoryDocument._meta.db_table} d WHERE d.assistant_id = %(assistant)s),
        (SELECT count(*) FROM ({_NOT_INDEXED_SQL}) AS behind),
        (SELECT count(*) FROM {MemoryChunk._meta.db_table} c
          WHERE c.assistant_id = %(assistant)s AND c.generation = %(generation)s
            AND c.source = ANY(%(sources)s))
"""


@dataclass(frozen=True)
class _Behind:
    has_documents: bool
    documents_not_indexed: int
    chunks_without_vector: int
    jobs_queued: int
    jobs_running: int


def _params(assistant: Assistant, state: IndexState | None) -> dict[str, Any]:
    return {
        "assistant": assistant.pk,
        "generation": state.active_generation if state is not None else 0,
        "sources": list(config.indexed_sources(assistant)),
        "kinds": index_job_kinds(),
        "read": NOT_INDEXED_READ,
    }


def _fetch(sql: str, params: dict[str, Any]) -> tuple[Any, ...]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return tuple(row)


def index_health(assistant: Assistant, embedder: Embedder | None) -> IndexHealth:
    """Describe what ``assistant``'s index lacks as ``embedder`` (the configured one) would search it."""
    return _health(assistant, embedder, IndexState.objects.filter(assistant=assistant).first())


def _health(assistant: Assistant, embedder: Embedder | None, state: IndexState | None) -> IndexHealth:
    has_documents, not_indexed, without_vector, queued, running = _fetch(
        _HEALTH_SQL, _params(assistant, state)
    )
    behind = _Behind(bool(has_documents), int(not_indexed), int(without_vector), int(queued), int(running))
    current = config.fingerprint(assistant, embedder)
    # Never indexed: behind only if there is something to index.
    settings_changed = state.fingerprint != current if state is not None else behind.has_documents
    rebuilding = (
        state is not None and bool(state.building_generation) and state.building_fingerprint == current
    )
    return IndexHealth(
        progress=_progress(behind, embedder, settings_changed=settings_changed, rebuilding=rebuilding),
        documents_not_indexed=behind.documents_not_indexed,
        jobs_queued=behind.jobs_queued,
        jobs_running=behind.jobs_running,
        settings_changed=settings_changed,
        rebuilding=rebuilding,
        state=state,
    )


def index_status(assistant: Assistant, embedder: Embedder | None) -> IndexStatus:
    """Give the whole account of ``assistant``'s index, totals included (the index endpoint)."""
    state = IndexState.objects.filter(assistant=assistant).first()
    health = _health(assistant, embedder, state)
    documents, not_indexed, chunks = _fetch(_TOTALS_SQL, _params(assistant, state))
    return IndexStatus(
        progress=health.progress,
        embedder=_describe(embedder),
        documents=int(documents),
        documents_not_indexed=int(not_indexed),
        chunks=int(chunks),
        jobs_queued=health.jobs_queued,
        jobs_running=health.jobs_running,
        settings_changed=health.settings_changed,
        rebuilding=health.rebuilding,
        generation=health.generation,
    )


def _progress(
    counts: _Behind, embedder: Embedder | None, *, settings_changed: bool, rebuilding: bool
) -> IndexProgress:
    # Without an embedder no chunk waits for a vector: text is all there will be.
    waiting = counts.chunks_without_vector if embedder is not None else 0
    if counts.jobs_queued or counts.jobs_running or rebuilding:
        state = IndexCondition.INDEXING
    elif settings_changed or counts.documents_not_indexed or waiting:
        state = IndexCondition.STALE
    else:
        state = IndexCondition.CURRENT
    return IndexProgress(state=state, chunks_without_vector=waiting)


def _describe(embedder: Embedder | None) -> dict[str, Any] | None:
    if embedder is None:
        return None
    return {
        "provider": embedder.provider,
        "model": embedder.model,
        "dims": embedder.dims,
        "fingerprint": embedder.provider_key,
    }


def incomplete_note(progress: IndexProgress) -> str | None:
    """Say in words why results may be incomplete, or None when the index is current."""
    if progress.state == IndexCondition.CURRENT:
        return None
    waiting = (
        f" {progress.chunks_without_vector} chunks still wait for their vectors and are found by "
        "keywords only."
        if progress.chunks_without_vector
        else ""
    )
    if progress.state == IndexCondition.INDEXING:
        return (
            "Indexing is under way: these results come from what is indexed so far and may be "
            f"incomplete.{waiting} Search again in a little while for complete results."
        )
    return (
        "The index is behind what is stored and its update has not started yet: these results "
        f"may be incomplete.{waiting}"
    )
