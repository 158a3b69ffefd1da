"""Background tasks of memory_app: thin wrappers that take ids and call one domain function.

How each is queued is defined once, beside the index (`memory_app.index.jobs`).
"""

from __future__ import annotations

import logging
from typing import Any, TypedDict

from django.utils import timezone

from memory_app.governance.model_consolidation import consolidate, due_for_consolidation
from memory_app.index import debounce, rebuild, rows, vector_fill
from memory_app.index.entries import IndexProgressReport
from memory_app.index.jobs import enqueue_fill, schedule_vector_fill
from memory_app.index.rows import IndexOutcomeReport
from memory_app.models import MemoryDocument, Source
from openclaw_site.jobs.runs import Skipped, WorkGone, defer_until, report_progress
from openclaw_site.jobs.tasks import TaskOwner, enqueue
from openclaw_site.models import Assistant

logger = logging.getLogger(__name__)


class Queued(TypedDict):
    queued: list[int]


class VectorFillReport(TypedDict):
    filled: int
    batches: int
    more: bool
    error: str | None


def reindex_document(document_id: int) -> IndexOutcomeReport | Skipped:
    """Index one memory document once its debounce has passed (memory_app.index.debounce).

    The one pending job of the document stands for every change folded into it: started before
    the request is due, it goes back to the queue until then (`defer_until`), reading nothing.
    """
    document = MemoryDocument.objects.filter(pk=document_id).values("assistant_id", "path").first()
    if document is None:
        return {"skipped": "document deleted"}
    assistant_id, path = document["assistant_id"], document["path"]
    due = debounce.take_turn(assistant_id=assistant_id, source=Source.MEMORY, key=path)
    if due is not None:
        defer_until(due)
    return rows.index_document(document_id).as_dict()


def reindex_assistant(assistant_id: int, full: bool = False) -> IndexOutcomeReport:
    """Bring an assistant's index up to date (``full``: rebuild a new generation, then swap).

    An incremental run indexes the memory documents and hands each lagging transcript to its own
    sliced index job, as the periodic refresh does, so no job reads a long transcript whole.
    """
    return rebuild.reindex_assistant(
        assistant_id, full=full, progress=_report_task_progress, queue_external=not full
    ).as_dict()


def consolidate_assistant(assistant_id: int) -> dict[str, Any] | Skipped:
    """Run the consolidation job of an assistant (memory_app.governance.model_consolidation.consolidate)."""
    from openclaw_site.models import Assistant

    assistant = Assistant.objects.filter(pk=assistant_id).first()
    if assistant is None:
        return {"skipped": "assistant deleted"}
    return consolidate(assistant)


def nightly_consolidation() -> Queued:
    """Queue the consolidation job of each assistant whose local hour is its ``memoryConsolidation.hour``.

    Scheduled every hour (migration 0018), so each assistant with ``schedule: nightly`` is
    consolidated once a day; archived assistants are left alone.
    """
    queued = due_for_consolidation(timezone.now())
    for assistant in queued:
        enqueue(
            "memory_app.tasks.consolidate_assistant",
            assistant.pk,
            owner=TaskOwner.for_assistant(assistant),
            kind="consolidate",
        )
    return {"queued": [assistant.pk for assistant in queued]}


def _report_task_progress(data: IndexProgressReport) -> None:
    """Mirror reindex progress onto the tracked task (`GET /tasks/{id}/`), when run as one."""
    report_progress(int(data.get("done", 0)), data.get("total"), str(data.get("phase", "")))


def refresh_indexes() -> IndexOutcomeReport:
    """Catch up every assistant's index (scheduled every few minutes, migration 0005).

    Picks up what the write-triggered tasks left behind: transcripts below the delta
    thresholds, chunks stored without vectors while the embedder was down or after a lost job, a
    changed fingerprint. Documents are indexed here; a lagging transcript gets its own sliced
    index job (`reindex_assistant(queue_external=True)`), so a long one is not read whole.
    """
    from openclaw_site.models import Assistant

    totals = rows.IndexOutcome()
    for assistant_id in Assistant.objects.order_by("pk").values_list("pk", flat=True):
        try:
            totals.add(rebuild.reindex_assistant(assistant_id, queue_external=True))
            if vector_fill.backlog(assistant_id):
                schedule_vector_fill(assistant_id)
        except WorkGone:  # deleted while the refresh was at it: nothing left to catch up
            continue
        except Exception:  # one broken assistant must not stop the others
            logger.exception("index refresh of assistant %s failed", assistant_id)
    return totals.as_dict()


# How long one vector-fill job embeds before it hands over to a fresh job (others may wait).
FILL_BUDGET_SECONDS = 60.0


def fill_vectors(assistant_id: int, slot: int = 0) -> VectorFillReport:
    """Give the assistant's waiting rows their vectors, batch by batch, for `FILL_BUDGET_SECONDS`.

    The jobs page shows the rows filled against those that waited when the job started; with
    rows still waiting, the slot's next job is queued.
    """
    waiting = vector_fill.backlog(assistant_id)
    report_progress(0, waiting, "vectors")
    outcome = vector_fill.fill_waiting(
        assistant_id=assistant_id,
        budget_seconds=FILL_BUDGET_SECONDS,
        progress=lambda filled: report_progress(filled, max(waiting, filled), "vectors"),
    )
    if outcome.more:
        assistant = Assistant.objects.filter(pk=assistant_id).first()
        if assistant is not None:
            enqueue_fill(TaskOwner.for_assistant(assistant), assistant_id, slot)
    return {
        "filled": outcome.filled,
        "batches": outcome.batches,
        "more": outcome.more,
        "error": outcome.error,
    }
