"""What the task records say: whether other work waits or runs, whether a task is queued, a helper whose worker died, and a task's status as the API shows it, with the scopes that may read it."""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django_q.models import Task

from openclaw_site.jobs.runs import current_task, jsonable, live_records
from openclaw_site.models import Scope, TaskRecord, TaskState
from openclaw_site.platform import locks

logger = logging.getLogger(__name__)


def others_waiting(*, except_key: str | Collection[str]) -> bool:
    """Tell whether a job other than those of ``except_key`` is queued (any team, queue or due time).

    A long job that works in slices asks this between them: it goes on while nobody waits, and
    gives its worker up once someone does. Counting held-back and urgent jobs too errs towards
    giving the worker up.
    """
    keys = [except_key] if isinstance(except_key, str) else list(except_key)
    return live_records().filter(state=TaskState.QUEUED).exclude(coalesce_key__in=keys).exists()


def others_running() -> bool:
    """Tell whether a task other than the one running here is running (any team, queue or host).

    A record a dead worker left running counts until the task timeout has passed since it
    started (no task runs longer), which errs towards leaving the other workers alone.
    """
    since = timezone.now() - timedelta(seconds=int(settings.Q_CLUSTER["timeout"]))
    return (
        live_records()
        .filter(state=TaskState.RUNNING, started_at__gte=since)
        .exclude(task_id=current_task.get() or "")
        .exists()
    )


def fail_if_lock_gone(key: str, *, lock: str, grace_seconds: float) -> int:
    """Fail the running record of ``key`` whose task no longer holds ``lock``: its worker died.

    For a task that takes ``lock`` as it starts and holds it while it runs. Postgres ends a dead
    process's connection and its locks with it, so a record running for more than
    ``grace_seconds`` (the time from turning running to taking the lock) without the lock held
    lost its worker; failing it frees its key for a new job and tells the truth on the Jobs page.
    A task that lets go of the lock just as it ends is failed for that moment, and its own finish
    records what it did. Return how many records were failed.
    """
    now = timezone.now()
    running = live_records().filter(
        state=TaskState.RUNNING, coalesce_key=key, started_at__lt=now - timedelta(seconds=grace_seconds)
    )
    if not running.exists() or locks.held(lock):
        return 0
    return running.update(
        state=TaskState.FAILED,
        error="its worker stopped while it ran: the task no longer held its lock",
        finished_at=now,
        updated_at=now,
    )


# Who may read a task's record over the API: the read scope of what the task works on. A kind not
# listed (a new task nobody classified yet) needs `admin` until it is.
TASK_KIND_SCOPES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        (
            "reindex",
            "reindex_document",
            "reindex_assistant",
            "refresh_indexes",
            "export_memory",
            "consolidate",
        ),
        (Scope.MEMORY_READ,),
    ),
    **dict.fromkeys(
        (
            "assistant_turn",
            "export_session",
            "export_sessions_index",
            "transcript_changed",
            "index_session_transcript",
            "fill_session_vectors",
            "memory_flush_task",
            "compact_session_task",
        ),
        (Scope.SESSIONS_READ,),
    ),
    **dict.fromkeys(
        ("export_assistant", "export_assistant_metadata"), (Scope.SESSIONS_READ, Scope.MEMORY_READ)
    ),
}


def task_read_scopes(kind: str) -> tuple[str, ...]:
    """Return the scopes of which a caller needs one to read a task of this kind."""
    return TASK_KIND_SCOPES.get(kind, (Scope.ADMIN,))


def task_status(record: TaskRecord) -> dict[str, Any]:
    """Return a task's state for the API: our record, completed by django-q2's own outcome."""
    queued = Task.objects.filter(id=record.q_task_id).first() if record.q_task_id else None
    state, result, error = record.state, record.result, record.error
    # A task recorded with record_task (not run through run_tracked), or one whose worker died,
    # only has its outcome in django-q2's table.
    if queued is not None and state in (TaskState.QUEUED, TaskState.RUNNING):
        state = TaskState.SUCCEEDED if queued.success else TaskState.FAILED
        if queued.success:
            result = jsonable(queued.result)
        else:
            error = str(queued.result)[:10000]
    return {
        "id": record.task_id,
        "kind": record.kind,
        "state": state,
        "objects": record.object_ids,
        "progress": record.progress,
        "result": result,
        "error": error,
        "attempts": queued.attempt_count if queued is not None else None,
        "created_at": record.created_at,
        "started_at": record.started_at or (queued.started if queued is not None else None),
        "finished_at": record.finished_at or (queued.stopped if queued is not None else None),
    }
