"""How the index's background jobs are queued: the one definition of each, which every caller uses.

The jobs themselves are `memory_app.tasks`, named here by their dotted paths, so the index queues
its own work without importing the task module that imports it (docs/architecture.md, Background
work).
"""

from __future__ import annotations

from django.conf import settings

from openclaw_site.jobs.tasks import TaskOwner, enqueue, enqueue_once
from openclaw_site.models import Assistant, TaskRecord

# The kind every queued reindex of an assistant is recorded as (the jobs page, `GET /tasks/{id}/`).
REINDEX_KIND = "reindex"
# The kinds of memory_app's index jobs; `memory_app.index.status` counts those queued or running.
INDEX_JOB_KINDS = (REINDEX_KIND, "reindex_assistant", "reindex_document", "fill_vectors")


def queue_reindex(assistant: Assistant, *, full: bool) -> TaskRecord:
    """Queue `reindex_assistant` for ``assistant`` unless the same one is queued already; return it.

    The one way a reindex is queued: by the REST and dashboard buttons, by a search that finds the
    index behind (`memory_app.search.service`) and by an index run that finds the settings changed
    (`memory_app.index`). A full and an incremental run are two jobs; a second request for one
    still queued folds into it, and everyone polls the same task.
    """
    return enqueue_once(
        "memory_app.tasks.reindex_assistant",
        assistant.pk,
        full,
        owner=TaskOwner.for_assistant(assistant),
        kind=REINDEX_KIND,
        task_name=f"reindex-{assistant.pk}-{'full' if full else 'incremental'}",
        coalesce_key=f"reindex-assistant:{assistant.pk}:{'full' if full else 'incremental'}",
    )


def schedule_vector_fill(assistant_id: int) -> None:
    """Queue `EMBEDDING_FILL_WORKERS` vector-fill jobs for the assistant (one per slot, coalesced).

    Each claims its own batches (`memory_app.index.vector_fill`), so they run side by side on as many
    workers as are free, against the local embedder or the embedding service.
    """
    assistant = Assistant.objects.filter(pk=assistant_id).first()
    if assistant is None:
        return
    for slot in range(settings.EMBEDDING_FILL_WORKERS):
        enqueue_fill(TaskOwner.for_assistant(assistant), assistant_id, slot)


def enqueue_fill(owner: TaskOwner, assistant_id: int, slot: int) -> None:
    enqueue(
        "memory_app.tasks.fill_vectors",
        assistant_id,
        slot,
        owner=owner,
        task_name=f"vectors-{assistant_id}-{slot}",
        coalesce_key=f"fill-vectors:{assistant_id}:{slot}",
    )
