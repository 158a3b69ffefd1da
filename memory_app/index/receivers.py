"""Keep the search index in step with memory writes, whoever made them (docs/design.md, How a message flows).

`memory_app.documents` sends `memory_document_changed` after every write commits (API, admin,
dashboard, flush, import all go through it), so this one receiver covers every writer. And each
task worker loads the embedder as it starts (`preload_worker_embedder`), before its first
index job or memory search.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django_q.signals import post_spawn

from memory_app.index import debounce
from memory_app.index.rows import remove_entry_rows
from memory_app.index.vectors import drop_assistant_indexes
from memory_app.models import Source
from memory_app.signals import memory_document_changed
from openclaw_site.jobs.tasks import TaskOwner, TaskQueue, enqueue
from openclaw_site.models import Assistant
from providers.embeddings import preload_embedder


@receiver(post_spawn, dispatch_uid="memory_app.preload_worker_embedder")
def preload_worker_embedder(sender: Any, **kwargs: Any) -> None:
    """Load the embedder in the background when django-q2 starts a worker process."""
    preload_embedder()


@receiver(memory_document_changed, dispatch_uid="memory_app.schedule_document_index")
def schedule_document_index(
    sender: Any, *, team_id: int, assistant_id: int, path: str, document_id: int | None, **kwargs: Any
) -> None:
    """Queue a debounced reindex of the changed document, or drop a deleted one's chunks.

    Trailing: each save pushes the index out by the debounce, up to the cap (memory_app.index.debounce).
    """
    if document_id is None:
        remove_entry_rows(assistant_id=assistant_id, source=Source.MEMORY, path=path)
        return
    debounce.request(
        assistant_id=assistant_id,
        source=Source.MEMORY,
        key=path,
        delay_seconds=settings.MEMORY_INDEX_DEBOUNCE_SECONDS,
        max_delay_seconds=settings.MEMORY_INDEX_MAX_WAIT_SECONDS,
    )
    enqueue(
        "memory_app.tasks.reindex_document",
        document_id,
        owner=TaskOwner(team_id=team_id, assistant_id=assistant_id, document_id=document_id),
        task_name=f"index-doc-{document_id}",
        coalesce_key=f"reindex-document:{document_id}",
        # A person waits for the write to be searchable: ahead of transcript indexing and exports
        # (docs/design.md, Background work).
        queue=TaskQueue.URGENT,
    )


@receiver(post_delete, sender=Assistant, dispatch_uid="memory_app.drop_assistant_vector_indexes")
def drop_vector_indexes(sender: Any, instance: Assistant, **kwargs: Any) -> None:
    """Drop a deleted assistant's own HNSW indexes once the deletion commits.

    Nothing else is rebuilt: every other assistant's graph is its own (docs/design.md, "Search
    at a million chunks"). After the commit the drop runs CONCURRENTLY, so it waits for no one.
    """
    assistant_id = instance.pk
    transaction.on_commit(lambda: drop_assistant_indexes(assistant_id))
