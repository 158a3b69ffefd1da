"""The search every adapter runs: REST, MCP, the model's `memory_search` tool and the dashboard.

It never makes a search wait for an indexing pass (docs/design.md §D15): it queues what the index
lacks (`queue_index_work`: OpenClaw's sync-on-search, docs/openclaw-behaviour.md §4.6, as a queued
job), writes the text rows of a few notes not indexed yet (no embedding), answers from what is indexed (`memory_app.search.hybrid_search`: keywords wherever vectors are
missing) and says how current that was (`memory_app.index.status.index_health`, which reads what
is behind, never counts what is indexed).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from memory_app.index import config
from memory_app.index.jobs import queue_reindex
from memory_app.index.rows import get_state, index_text_now, start_build
from memory_app.index.status import IndexCondition, IndexHealth, IndexProgress, index_health
from memory_app.search.hybrid import SearchResponse, hybrid_search
from openclaw_site.models import Assistant
from providers.embeddings import Embedder, get_embedder

# A search writes the text rows of at most this many unindexed documents itself (a note written a
# moment ago); more (an import) are left to the queued job, and the search answers without them.
INLINE_TEXT_DOCUMENTS = 20


def search_memory(*, assistant: Assistant, query: str, **knobs: Any) -> SearchResponse:
    """Search ``assistant``'s memory and transcripts (knobs: `hybrid_search`'s) and report the index."""
    embedder = get_embedder()
    status = index_health(assistant, embedder)
    queued = queue_index_work(assistant, embedder, status)
    if status.documents_not_indexed and index_text_now(assistant, limit=INLINE_TEXT_DOCUMENTS):
        status = index_health(assistant, embedder)
    # The state the health read answers the search too, unless queueing work just made one.
    state = None if queued else status.state
    response = hybrid_search(assistant=assistant, query=query, embedder=embedder, state=state, **knobs)
    progress = status.progress
    if queued:
        progress = IndexProgress(IndexCondition.INDEXING, progress.chunks_without_vector)
    return replace(response, index=progress)


def queue_index_work(assistant: Assistant, embedder: Embedder | None, status: IndexHealth) -> bool:
    """Queue the reindex the index needs to become current; return whether one was asked for.

    Never indexes here: a never-indexed assistant gets its first generation queued, new settings
    or a new embedder a rebuild (the old rows answer until it is complete), and documents that no
    job is indexing an incremental run. Chunks that only lack vectors are left to the periodic
    refresh (`memory_app.tasks.refresh_indexes`): an embedder that is down would otherwise be asked
    again on every search.
    """
    current = config.fingerprint(assistant, embedder)
    if status.generation is None:
        get_state(assistant, current)  # an empty generation 1, filled by the job
        queue_reindex(assistant, full=False)
        return True
    if status.settings_changed and not status.rebuilding:
        start_build(assistant, current)
        queue_reindex(assistant, full=True)
        return True
    if status.documents_not_indexed and status.progress.state == IndexCondition.STALE:
        queue_reindex(assistant, full=False)
        return True
    return False
