"""Enqueue background work after the current transaction commits (django-q2), and track it.

Tasks take ids, never model instances, and call one domain function (style.md). With
OPENCLAW_TASKS_SYNC=1 django-q2 runs them inline, which the test suite uses.

Tasks a team may ask about (``GET /api/v1/tasks/{id}/``) are *tracked*: a `TaskRecord` names their
team, so another team's task id is a 404. `enqueue_tracked` creates the record in the caller's
transaction (its id can go into the response at once) and wraps the function in `run_tracked`,
which records running/succeeded/failed; inside it, `report_progress(done, total)` updates the
record that the dashboard and the API show.
"""

from __future__ import annotations

import json
import logging
import uuid
from contextvars import ContextVar
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from openclaw_site.models import TaskRecord, TaskState, Team

logger = logging.getLogger(__name__)

# The TaskRecord id of the tracked task running in this context (set by run_tracked).
_current_task: ContextVar[str | None] = ContextVar("openclaw_current_task", default=None)


def enqueue(func: str, *args: Any, task_name: str | None = None, group: str | None = None) -> None:
    """Run ``func(*args)`` in a worker once the surrounding transaction has committed."""

    def _send() -> None:
        from django_q.tasks import async_task

        try:
            async_task(func, *args, task_name=task_name, group=group)
        except Exception:  # a broken broker must not turn a committed write into a 500
            logger.exception("Could not enqueue %s%r", func, args)

    transaction.on_commit(_send)


def record_task(
    *, task_id: str, team: Team | int, kind: str, object_ids: dict[str, Any] | None = None
) -> TaskRecord:
    """Record the team of a task already handed to django-q2 (``task_id`` is django-q2's id)."""
    team_field = {"team": team} if isinstance(team, Team) else {"team_id": team}
    return TaskRecord.objects.create(
        task_id=task_id, q_task_id=task_id, kind=kind, object_ids=object_ids or {}, **team_field
    )


def enqueue_tracked(
    func: str,
    *args: Any,
    team: Team | int,
    kind: str,
    object_ids: dict[str, Any] | None = None,
    group: str | None = None,
) -> TaskRecord:
    """Create a TaskRecord now and run ``func(*args)`` through `run_tracked` after the commit."""
    team_field = {"team": team} if isinstance(team, Team) else {"team_id": team}
    record = TaskRecord.objects.create(
        task_id=uuid.uuid4().hex, kind=kind, object_ids=object_ids or {}, **team_field
    )

    def _send() -> None:
        from django_q.tasks import async_task

        try:
            q_id = async_task(
                "openclaw_site.tasks.run_tracked",
                record.task_id,
                func,
                *args,
                task_name=f"{kind}-{record.task_id}"[:100],
                group=group,
            )
        except Exception as error:  # the write that asked for the task has committed: report, don't raise
            logger.exception("Could not enqueue tracked %s%r", func, args)
            _finish(record.task_id, state=TaskState.FAILED, error=f"could not enqueue: {error}")
            return
        TaskRecord.objects.filter(pk=record.pk).update(q_task_id=q_id or "")

    transaction.on_commit(_send)
    return record


def run_tracked(task_id: str, func: str, *args: Any) -> Any:
    """Worker entry point: run ``func(*args)`` and record its state and result on the TaskRecord."""
    TaskRecord.objects.filter(task_id=task_id).update(state=TaskState.RUNNING, updated_at=timezone.now())
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
    """Return the id of the tracked task running in this context, if any."""
    return _current_task.get()


def report_progress(done: int, total: int | None, message: str = "") -> None:
    """Update the progress of the tracked task running now; a no-op outside one."""
    task_id = _current_task.get()
    if task_id is not None:
        update_progress(task_id, done, total, message)


def task_status(record: TaskRecord) -> dict[str, Any]:
    """Return a task's state for the API: our record, completed by django-q2's own outcome."""
    from django_q.models import Task

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
        "started_at": queued.started if queued is not None else None,
        "finished_at": record.finished_at or (queued.stopped if queued is not None else None),
    }
