"""Running a recorded task: `run_tracked` keeps its record's state, times, progress and error; a job not due yet goes back to the queue (`Deferred`), and tasks run inline in the order a queue would run them (docs/design.md, Background work)."""

from __future__ import annotations

import json
import logging
import time
from contextvars import ContextVar
from datetime import datetime
from typing import Any, NoReturn, TypedDict

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.module_loading import import_string
from django_q.conf import Conf

from openclaw_site.jobs.tasks import Job, TaskQueue, holds_tasks_back, send
from openclaw_site.models import TaskRecord, TaskState
from openclaw_site.platform.row_sql import partial_index_condition

logger = logging.getLogger(__name__)

# A task that succeeds after this long is logged (docs/design.md, The log).
SLOW_TASK_SECONDS = 30.0


# The TaskRecord id of the task running in this context (set by run_tracked).
current_task: ContextVar[str | None] = ContextVar("openclaw_current_task", default=None)


# A deferred job on a broker that cannot hold a task back (Redis) pauses its worker at most this
# long before it goes back to the end of the queue: a bounded share of the slot, and no spinning.
UNDELAYED_PAUSE_SECONDS = 0.5


class Deferred(Exception):
    """Raised by a task function that is not due yet: run it again, no earlier than ``until``.

    Raise it before reading what the job works on: the job goes back to queued (`run_tracked`), so
    the changes that fold into it meanwhile are seen by its next run.
    """

    def __init__(self, until: datetime) -> None:
        super().__init__(f"deferred until {until.isoformat()}")
        self.until = until


class WorkGone(Exception):
    """What a running task works on was deleted meanwhile (an assistant, a session): it stops.

    `run_tracked` ends the record failed with this message alone, no exception name and no
    traceback, so the Jobs page says in words why the job stopped (docs/design.md, Background work).
    """


class Skipped(TypedDict):
    """A task's result when what it was for is gone (a deleted document, session or assistant)."""

    skipped: str


def defer_until(when: datetime) -> NoReturn:
    """Hand the running job's wait back to the queue: it runs again once ``when`` has passed."""
    raise Deferred(when)


def run_tracked(
    task_id: str, func: str, *args: Any, queue: str = TaskQueue.DEFAULT.value, not_before: str | None = None
) -> Any:
    """Worker entry point: run ``func(*args)`` and record its state and result on the TaskRecord.

    The move to running is its own statement, committed (the worker runs in autocommit) before the
    function reads anything: from then on a change folds into a new job, and every change that
    folded into this one committed before it (module docstring). A task handed out before
    ``not_before`` (ISO time; a broker that cannot hold it back), or whose function raises
    `Deferred`, is queued again on ``queue`` (`_defer`).
    """
    now = timezone.now()
    if not_before is not None and now < (until := datetime.fromisoformat(not_before)):
        return _defer(task_id, func, args, queue=TaskQueue(queue), until=until)
    if Conf.SYNC and _inline_later.get() is None:  # the outermost task run inline
        return _run_inline(task_id, func, args, queue=queue)
    TaskRecord.objects.filter(task_id=task_id).update(state=TaskState.RUNNING, started_at=now, updated_at=now)
    started = time.monotonic()
    token = current_task.set(task_id)
    try:
        result = import_string(func)(*args)
    except Deferred as deferred:
        if Conf.SYNC:  # no queue: the outermost inline task runs it after itself
            return _defer_inline(task_id, func, args, queue=queue, until=deferred.until)
        return _defer(task_id, func, args, queue=TaskQueue(queue), until=deferred.until)
    except WorkGone as gone:
        logger.info("Task %s (%s) stopped: %s", func, task_id, gone)
        stopped = {"stopped": str(gone)}
        _finish(task_id, state=TaskState.FAILED, result=stopped, error=f"Stopped: {gone}")
        return stopped
    except Exception as error:
        _finish(task_id, state=TaskState.FAILED, error=f"{type(error).__name__}: {error}")
        raise  # django-q2 records the failure too
    finally:
        current_task.reset(token)
    _finish(task_id, state=TaskState.SUCCEEDED, result=jsonable(result))
    if (seconds := time.monotonic() - started) >= SLOW_TASK_SECONDS:
        # django-q2 logs a failure itself, a success only below the default level (settings.LOGGING).
        logger.warning("Task %s (%s) took %.0f s", func, task_id, seconds)
    return result


# Run inline (OPENCLAW_TASKS_SYNC): the jobs deferred while the outermost inline task ran (itself
# and the tasks it queued, run inside it), as (task id, function, arguments, queue, due time).
_InlineJob = tuple[str, str, tuple[Any, ...], str, datetime]


_inline_later: ContextVar[list[_InlineJob] | None] = ContextVar("openclaw_inline_later", default=None)


def _run_inline(task_id: str, func: str, args: tuple[Any, ...], *, queue: str) -> Any:
    """Run a task inline, then the jobs deferred while it ran, each once it is due.

    With no queue to hand a wait to, a deferred job waits here. Not inside the task that queued
    it, which it may be waiting for (a transcript's next index run for the lock of the run that
    queued it: sleeping that out would never end), but after it, as a queue would run it.
    """
    later: list[_InlineJob] = []
    token = _inline_later.set(later)
    try:
        result = run_tracked(task_id, func, *args, queue=queue)
    finally:
        _inline_later.reset(token)
    for deferred_id, deferred_func, deferred_args, deferred_queue, until in later:
        time.sleep(max(0.0, (until - timezone.now()).total_seconds()))
        if not TaskRecord.objects.filter(task_id=deferred_id, state=TaskState.QUEUED).exists():
            continue  # failed or carried by a newer job meanwhile
        try:
            _run_inline(deferred_id, deferred_func, deferred_args, queue=deferred_queue)
        except Exception:  # recorded on its own record; the jobs after it still run
            logger.exception("Inline task %s failed", deferred_id)
    return result


def _defer_inline(
    task_id: str, func: str, args: tuple[Any, ...], *, queue: str, until: datetime
) -> dict[str, Any]:
    """Put the record back to queued, for the outermost inline task to run after itself."""
    skipped = _requeue(task_id)
    if skipped is not None:
        return skipped
    later = _inline_later.get()
    assert later is not None  # set by `_run_inline` for every task run inline
    later.append((task_id, func, args, queue, until))
    return {"deferred_until": until.isoformat()}


def _requeue(task_id: str) -> dict[str, Any] | None:
    """Put a deferred job's record back to queued; return its outcome if a newer job carries it.

    If a change queued a newer record with the same key while this job ran, that job carries the
    change: this one succeeds.
    """
    try:
        with transaction.atomic():
            TaskRecord.objects.filter(task_id=task_id).update(
                state=TaskState.QUEUED, started_at=None, updated_at=timezone.now()
            )
    except IntegrityError:  # the partial unique index: a record with this key is queued already
        outcome = {"skipped": "a newer queued job carries the change"}
        _finish(task_id, state=TaskState.SUCCEEDED, result=outcome)
        return outcome
    return None


def _defer(
    task_id: str, func: str, args: tuple[Any, ...], *, queue: TaskQueue, until: datetime
) -> dict[str, Any]:
    """Put the record back to queued and send its task again, to run no earlier than ``until``.

    If a newer job carries the change (`_requeue`), this one succeeds and sends nothing.
    """
    skipped = _requeue(task_id)
    if skipped is not None:
        return skipped
    record = TaskRecord.objects.get(task_id=task_id)
    job = Job(func=func, args=args, kind=record.kind, queue=queue, task_name=None)
    if not holds_tasks_back(queue):  # no delayed delivery (Redis): a short pause
        time.sleep(min(UNDELAYED_PAUSE_SECONDS, max(0.0, (until - timezone.now()).total_seconds())))
    send(job, record_pk=record.pk, task_id=task_id, not_before=until)
    return {"deferred_until": until.isoformat()}


def _finish(task_id: str, *, state: str, result: Any = None, error: str = "") -> None:
    now = timezone.now()
    TaskRecord.objects.filter(task_id=task_id).update(
        state=state, result=result, error=error[:10000], finished_at=now, updated_at=now
    )


def jsonable(value: Any) -> Any:
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


def live_records() -> QuerySet[TaskRecord]:
    """The queued and running records, in the terms of their partial index (`taskrecord_active`).

    The index's condition in literals keeps it usable by a prepared statement's generic plan
    (`openclaw_site.platform.row_sql.partial_index_condition`); these reads come between every slice of an
    index run, and the retention keeps every finished record beside the few live ones.
    """
    return TaskRecord.objects.filter(partial_index_condition(TaskRecord, "taskrecord_active"))


def queued(key: str) -> bool:
    """Tell whether a job with this coalescing key is queued (held back or not)."""
    return live_records().filter(state=TaskState.QUEUED, coalesce_key=key).exists()


def queued_or_running(key: str) -> bool:
    """Tell whether a job with this coalescing key is queued or running."""
    return live_records().filter(coalesce_key=key).exists()


def report_progress(done: int, total: int | None, message: str = "") -> None:
    """Update the progress of the task running now; a no-op outside one."""
    task_id = current_task.get()
    if task_id is not None:
        update_progress(task_id, done, total, message)
