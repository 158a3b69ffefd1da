"""Enqueue background work after the current transaction commits (django-q2), and track it.

Tasks take ids, never model instances, and call one domain function (docs/architecture.md). With
OPENCLAW_TASKS_SYNC=1 django-q2 runs them inline, which the test suite uses.

Every task is recorded: `enqueue` writes a `TaskRecord` naming its owner (`TaskOwner`: the team,
and the assistant, session or document it works on) in the caller's transaction, so the record
exists exactly when the change that asked for the task commits, and its id can go into a response
at once. The jobs page and ``GET /api/v1/tasks/{id}/`` read these records, so another team's task
is never shown and is a 404. After the commit django-q2 runs the function through `run_tracked`,
which keeps running/succeeded/failed, the times and the error on the record; inside it,
`report_progress(done, total)` updates the progress both show.
"""

from __future__ import annotations

import json
import logging
import uuid
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string
from django_q.models import Task
from django_q.tasks import async_task

from openclaw_site.models import Assistant, TaskRecord, TaskState, Team

logger = logging.getLogger(__name__)

# The TaskRecord id of the task running in this context (set by run_tracked).
_current_task: ContextVar[str | None] = ContextVar("openclaw_current_task", default=None)


@dataclass(frozen=True)
class TaskOwner:
    """Whose a background task is: a team, and the assistant, session or document it works on."""

    team_id: int
    assistant_id: int | None = None
    session_id: int | None = None
    document_id: int | None = None

    @classmethod
    def for_assistant(cls, assistant: Assistant) -> TaskOwner:
        """Return the owner of a task that works on ``assistant`` as a whole."""
        return cls(team_id=assistant.team_id, assistant_id=assistant.pk)

    def object_ids(self) -> dict[str, int]:
        """Return the ids the record names, e.g. ``{"assistant": 3, "session": 12}``."""
        ids = {"assistant": self.assistant_id, "session": self.session_id, "document": self.document_id}
        return {name: pk for name, pk in ids.items() if pk is not None}


def enqueue(
    func: str,
    *args: Any,
    owner: TaskOwner,
    kind: str | None = None,
    task_name: str | None = None,
) -> TaskRecord:
    """Record ``func(*args)`` for ``owner`` now and run it through `run_tracked` after the commit.

    ``kind`` names the task on the jobs page and in the API (default: the function's name).
    """
    record = TaskRecord.objects.create(
        task_id=uuid.uuid4().hex,
        team_id=owner.team_id,
        assistant_id=owner.assistant_id,
        kind=kind or func.rsplit(".", 1)[-1],
        object_ids=owner.object_ids(),
    )
    name = task_name or f"{record.kind}-{record.task_id}"
    transaction.on_commit(partial(_send, record, func, args, task_name=name[:100]))
    return record


def _send(record: TaskRecord, func: str, args: tuple[Any, ...], *, task_name: str) -> None:
    try:
        q_id = async_task("openclaw_site.tasks.run_tracked", record.task_id, func, *args, task_name=task_name)
    except Exception as error:  # the write that asked for the task has committed: report, don't raise
        # Run inline (OPENCLAW_TASKS_SYNC), a failing task raises here after run_tracked recorded
        # why; only a task that never started failed to be enqueued.
        logger.exception("Could not enqueue or run %s%r", func, args)
        now = timezone.now()
        TaskRecord.objects.filter(pk=record.pk, state=TaskState.QUEUED).update(
            state=TaskState.FAILED,
            error=f"could not enqueue: {error}"[:10000],
            finished_at=now,
            updated_at=now,
        )
        return
    TaskRecord.objects.filter(pk=record.pk).update(q_task_id=q_id or "")


def record_task(
    *, task_id: str, team: Team | int, kind: str, object_ids: dict[str, Any] | None = None
) -> TaskRecord:
    """Record the team of a task handed to django-q2 directly (``task_id`` is django-q2's id)."""
    team_field = {"team": team} if isinstance(team, Team) else {"team_id": team}
    return TaskRecord.objects.create(
        task_id=task_id, q_task_id=task_id, kind=kind, object_ids=object_ids or {}, **team_field
    )


def run_tracked(task_id: str, func: str, *args: Any) -> Any:
    """Worker entry point: run ``func(*args)`` and record its state and result on the TaskRecord."""
    now = timezone.now()
    TaskRecord.objects.filter(task_id=task_id).update(state=TaskState.RUNNING, started_at=now, updated_at=now)
    token = _current_task.set(task_id)
    try:
        result = import_string(func)(*args)
    except Exception as error:
        _finish(task_id, state=TaskState.FAILED, error=f"{type(error).__name__}: {error}")
        raise  # django-q2 records the failure too
    finally:
        _current_task.reset(token)
    _finish(task_id, state=TaskState.SUCCEEDED, result=_jsonable(result))
    return result


def _finish(task_id: str, *, state: str, result: Any = None, error: str = "") -> None:
    now = timezone.now()
    TaskRecord.objects.filter(task_id=task_id).update(
        state=state, result=result, error=error[:10000], finished_at=now, updated_at=now
    )


def _jsonable(value: Any) -> Any:
    """Return ``value`` if it can be stored as JSON, else its repr (a result must never fail a task)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)[:10000]
    return value


def update_progress(task_id: str, done: int, total: int | None, message: str = "") -> None:
    """Store a task's progress (``done`` of ``total`` units, and what it is doing now)."""
    progress: dict[str, Any] = {"done": done, "total": total}
    if message:
        progress["message"] = message
    TaskRecord.objects.filter(task_id=task_id).update(progress=progress, updated_at=timezone.now())


def current_task_id() -> str | None:
    """Return the id of the task running in this context, if any."""
    return _current_task.get()


def report_progress(done: int, total: int | None, message: str = "") -> None:
    """Update the progress of the task running now; a no-op outside one."""
    task_id = _current_task.get()
    if task_id is not None:
        update_progress(task_id, done, total, message)


def task_status(record: TaskRecord) -> dict[str, Any]:
    """Return a task's state for the API: our record, completed by django-q2's own outcome."""
    queued = Task.objects.filter(id=record.q_task_id).first() if record.q_task_id else None
    state, result, error = record.state, record.result, record.error
    # A task recorded with record_task (not run through run_tracked), or one whose worker died,
    # only has its outcome in django-q2's table.
    if queued is not None and state in (TaskState.QUEUED, TaskState.RUNNING):
        state = TaskState.SUCCEEDED if queued.success else TaskState.FAILED
        if queued.success:
            result = _jsonable(queued.result)
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
