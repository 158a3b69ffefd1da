"""Enqueue background work after the current transaction commits (django-q2), and track it.

Tasks take ids, never model instances, and call one domain function (docs/architecture.md). With
OPENCLAW_TASKS_SYNC=1 django-q2 runs them inline, which the test suite uses.

Every task is recorded as a `TaskRecord` naming its owner (`TaskOwner`: the team, and the
assistant, session or document it works on). The jobs page and ``GET /api/v1/tasks/{id}/`` read
these records, so another team's task is never shown and is a 404. django-q2 runs the function
through `run_tracked`, which keeps running/succeeded/failed, the times and the error on the record;
inside it, `report_progress(done, total)` updates the progress both show.

Two kinds of enqueue (docs/design.md, Background work):

- **Tracked** (the default): the record is written in the caller's transaction, so it exists exactly
  when the change that asked for it commits and its id can go into a response at once (a reindex).
- **Coalescing** (``coalesce_key="export-session:12"``): for work that every change asks for again
  (exports, index checks, indexing, flush, compaction). At most one job per key is pending, i.e.
  queued and not started; a newer change folds into it. The record is written after the commit, in
  one statement (`_FOLD_SQL`): insert a queued record, or, when one with the key is queued already,
  add one to its ``coalesced`` count. Only a new record sends a django-q2 task, so the broker holds
  at most one task per key and the queue stays as long as the number of objects being changed, not
  the number of changes. The key must determine the function and its arguments: a folded change
  is carried out by the arguments of the job it folds into.

Why this loses no change, when a job starts while a change commits: `run_tracked` moves the record
from queued to running in a statement of its own, committed before the function runs, and a running
record is outside the partial unique index the fold conflicts on. The fold and that move take the
same row lock, so one of them goes first:

- the fold first: the change committed before its fold did, so the job, which reads the database
  only after its move to running, sees it;
- the move first: the fold finds no queued record and inserts a new one, whose job runs after.

Writing the record after the commit (not in the caller's transaction) is what makes the first case
hold: a fold inside a still-open transaction could be counted by a job that starts before that
transaction commits and then never sees its change. The cost: a process that dies between its
commit and the fold leaves that change without a job until the next change of the same object
(the periodic index refresh catches indexing up regardless). The fold commits without waiting for
the disk (`synchronous_commit` off for its transaction only), which widens that window to a crash
of the database host within a fraction of a second of the fold, and spares every change a second
flush of the write-ahead log. A pending record whose task was lost
(a broker restart, a crash between the fold and the send) would swallow every later change, so
`purge_task_records` fails pending records that have not started within django-q2's retry time;
the next change then queues a new job.

A coalescing job may ask for a delay (`coalesced(..., delay_seconds=1)`): its new record's task is
held back that long (as a deferred job's is, below), so a burst of changes to one object shares
one run a second instead of one run per change. Changes that fold into it meanwhile do not push
it out: the wait runs from the first change.

Flush, compaction and a memory document's index go to the urgent queue (`TaskQueue.URGENT`): a
cluster of their own with its own workers (settings.Q_CLUSTER's ALT_CLUSTERS), so no backlog of
exports and transcript indexing delays them.

**A job that is not due yet waits in the queue, not in a worker** (docs/design.md, Background
work). Its function raises `Deferred` (`defer_until(when)`) before it reads what it works on;
`run_tracked` then puts the same record back to queued, so changes that come meanwhile fold into
it again, and sends its task once more, held back until ``when``: on the ORM broker the queue row's
``lock`` is set to ``when`` (django-q2 dequeues only rows with ``lock < now``); a broker that cannot
hold a task back (Redis) gets it again after the worker paused at most `UNDELAYED_PAUSE_SECONDS`.
Should a change have queued a new record with the same key while this job ran (the partial unique
index admits one queued record a key), the newer job carries the change and this one succeeds
without a second send. Run inline (OPENCLAW_TASKS_SYNC), a deferred job runs once it is due after
the outermost inline task, as a queue would run it (`_run_inline`).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Collection
from contextlib import nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any, NoReturn, overload

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.module_loading import import_string
from django_q.brokers import get_broker
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import Task
from django_q.tasks import async_task

from openclaw_site.models import Assistant, Scope, TaskRecord, TaskState, Team
from openclaw_site.platform import locks
from openclaw_site.platform.row_sql import partial_index_condition

logger = logging.getLogger(__name__)
# A task that succeeds after this long is logged (docs/design.md, The log).
SLOW_TASK_SECONDS = 30.0

# The TaskRecord id of the task running in this context (set by run_tracked).
_current_task: ContextVar[str | None] = ContextVar("openclaw_current_task", default=None)

FINISHED_STATES = (TaskState.SUCCEEDED, TaskState.FAILED)
# The retention purge deletes at most this many records a run (every 10 minutes), so one run never
# holds locks on a large table for long.
PURGE_BATCH = 10_000
# A running record past the task timeout by this much lost its worker (`_fail_overdue_running`).
OVERDUE_MARGIN_SECONDS = 60
# A deferred job on a broker that cannot hold a task back (Redis) pauses its worker at most this
# long before it goes back to the end of the queue: a bounded share of the slot, and no spinning.
UNDELAYED_PAUSE_SECONDS = 0.5


class TaskQueue(StrEnum):
    """Which cluster runs a task: the default one, or the urgent one that no backlog delays."""

    DEFAULT = "default"
    URGENT = "urgent"

    @property
    def cluster(self) -> str:
        """Return the django-q2 cluster (and broker queue) name of this queue."""
        if self is TaskQueue.URGENT:
            return str(settings.Q_URGENT_CLUSTER)
        return str(settings.Q_CLUSTER["name"])


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


@dataclass(frozen=True)
class _Job:
    """What to send to django-q2 once the record exists."""

    func: str
    args: tuple[Any, ...]
    kind: str
    queue: TaskQueue
    task_name: str | None
    delay_seconds: float = 0.0  # a new record's job runs no earlier than this after the change


@overload
def enqueue(
    func: str,
    *args: Any,
    owner: TaskOwner,
    kind: str | None = None,
    task_name: str | None = None,
    queue: TaskQueue = TaskQueue.DEFAULT,
    coalesce_key: None = None,
) -> TaskRecord: ...


@overload
def enqueue(
    func: str,
    *args: Any,
    owner: TaskOwner,
    kind: str | None = None,
    task_name: str | None = None,
    queue: TaskQueue = TaskQueue.DEFAULT,
    coalesce_key: str,
) -> None: ...


def enqueue(
    func: str,
    *args: Any,
    owner: TaskOwner,
    kind: str | None = None,
    task_name: str | None = None,
    queue: TaskQueue = TaskQueue.DEFAULT,
    coalesce_key: str | None = None,
) -> TaskRecord | None:
    """Run ``func(*args)`` for ``owner`` through `run_tracked` after the commit, on ``queue``.

    ``kind`` names the task on the jobs page and in the API (default: the function's name). Without
    ``coalesce_key`` the record is written now and returned; with it, the record is written (or the
    change folded into the key's pending job) after the commit, and nothing is returned.
    """
    job = _Job(func=func, args=args, kind=kind or func.rsplit(".", 1)[-1], queue=queue, task_name=task_name)
    if coalesce_key is not None:
        enqueue_coalesced(Coalesced(job, owner=owner, coalesce_key=coalesce_key))
        return None
    record = TaskRecord.objects.create(
        task_id=uuid.uuid4().hex,
        team_id=owner.team_id,
        assistant_id=owner.assistant_id,
        kind=job.kind,
        object_ids=owner.object_ids(),
    )
    transaction.on_commit(partial(_send, job, record_pk=record.pk, task_id=record.task_id))
    return record


def enqueue_once(
    func: str,
    *args: Any,
    owner: TaskOwner,
    coalesce_key: str,
    kind: str | None = None,
    task_name: str | None = None,
    queue: TaskQueue = TaskQueue.DEFAULT,
) -> TaskRecord:
    """Return the pending job of ``coalesce_key``, or record and queue a new one (netbox's
    `enqueue_once`): for work asked for by a request that shows the task (a reindex).

    Unlike a coalescing `enqueue`, the fold runs in the caller's transaction, so the record exists
    (and its id can go into a response) before the commit. A job that starts meanwhile waits for
    the row lock the fold holds until the commit, then reads what the caller committed; the key
    must determine the function and its arguments, as for `enqueue`. Like every fold it turns
    `synchronous_commit` off for the transaction it runs in: keep that transaction to the request
    for the job (a lost one is asked for again by the next request, or the periodic refresh).
    """
    job = _Job(func=func, args=args, kind=kind or func.rsplit(".", 1)[-1], queue=queue, task_name=task_name)
    record_pk, task_id, inserted = _fold([Coalesced(job, owner=owner, coalesce_key=coalesce_key)])[
        coalesce_key
    ]
    if inserted:
        transaction.on_commit(partial(_send, job, record_pk=record_pk, task_id=task_id))
    return TaskRecord.objects.get(pk=record_pk)


@dataclass(frozen=True)
class Coalesced:
    """A coalescing job (`enqueue` with a ``coalesce_key``), for `enqueue_coalesced`."""

    job: _Job
    owner: TaskOwner
    coalesce_key: str


def coalesced(
    func: str,
    *args: Any,
    owner: TaskOwner,
    coalesce_key: str,
    task_name: str | None = None,
    queue: TaskQueue = TaskQueue.DEFAULT,
    delay_seconds: float = 0.0,
) -> Coalesced:
    """Describe a coalescing job for `enqueue_coalesced` (the arguments are `enqueue`'s).

    With ``delay_seconds`` a newly recorded job is held back that long, so the changes of that
    time fold into it and share one run; a change that folds into it does not push it further out.
    """
    kind = func.rsplit(".", 1)[-1]
    job = _Job(func=func, args=args, kind=kind, queue=queue, task_name=task_name, delay_seconds=delay_seconds)
    return Coalesced(job, owner=owner, coalesce_key=coalesce_key)


def enqueue_coalesced(*jobs: Coalesced) -> None:
    """Fold several coalescing jobs after the commit in one statement (one commit, not one each).

    A change that asks for more than one job (an append: its export and its transcript index)
    pays for one more commit, not two; each job folds or is sent exactly as with `enqueue`.
    """
    if jobs:
        transaction.on_commit(partial(_fold_or_send, jobs))


# One statement, so a concurrent fold and `run_tracked`'s move to running take turns on the row
# lock (see the module docstring). `xmax = 0` holds for a row this statement inserted, not for one
# it updated. The literal 'queued' lets Postgres match the partial unique index. Rows go in key
# order, so two statements that fold the same keys take their row locks in the same order.
# The statement commits on its own (autocommit) without waiting for the disk: `set_config(…, true)`
# sets synchronous_commit for its own transaction, in an InitPlan run once before the rows (see
# `_fold`). The VALUES rows are typed by their casts, as an INSERT's VALUES would be by the columns.
_FOLD_ROW = (
    "(%s, %s::integer, %s::integer, %s, %s::jsonb, %s, 0, '', "
    f"'{TaskState.QUEUED.value}', '{{}}'::jsonb, '', %s::timestamptz, %s::timestamptz)"
)
_FOLD_SQL = f"""
    INSERT INTO {TaskRecord._meta.db_table} AS record
        (task_id, team_id, assistant_id, kind, object_ids, coalesce_key, coalesced,
         q_task_id, state, progress, error, created_at, updated_at)
    SELECT * FROM (VALUES {{rows}}) AS fold
    WHERE (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
    ON CONFLICT (coalesce_key) WHERE state = '{TaskState.QUEUED.value}'
    DO UPDATE SET coalesced = record.coalesced + 1, updated_at = EXCLUDED.updated_at
    RETURNING id, task_id, coalesce_key, (xmax = 0) AS inserted
"""


def _fold_or_send(jobs: tuple[Coalesced, ...]) -> None:
    """After the commit: fold each job into its key's pending one, or record a new one and send it."""
    by_key = {job.coalesce_key: job for job in jobs}  # a key twice in one statement would clash
    try:
        folded = _fold(sorted(by_key.values(), key=lambda job: job.coalesce_key))
    except Exception:  # the change that asked for the jobs has committed: report, don't raise
        logger.exception("Could not record the jobs %s", sorted(by_key))
        return
    for key, (record_pk, task_id, inserted) in folded.items():
        if inserted:
            job = by_key[key].job
            _send(job, record_pk=record_pk, task_id=task_id, not_before=_held_until(job))


def _held_until(job: _Job) -> datetime | None:
    """When a new record of ``job`` may run; None for at once (no delay, or run inline)."""
    if not job.delay_seconds or Conf.SYNC:
        return None
    return timezone.now() + timedelta(seconds=job.delay_seconds)


def _fold(jobs: list[Coalesced]) -> dict[str, tuple[int, str, bool]]:
    """Run `_FOLD_SQL`: for each key, the pending record's id and task id, and whether it is new."""
    now = timezone.now()
    params: list[Any] = []
    for item in jobs:
        owner = item.owner
        params += [uuid.uuid4().hex, owner.team_id, owner.assistant_id, item.job.kind]
        params += [json.dumps(owner.object_ids()), item.coalesce_key, now, now]
    # One statement, one round trip: after the commit that asked for the jobs the connection is in
    # autocommit, so the statement is its own transaction. The change it is for committed durably
    # already; the fold's own commit need not wait for the disk (docs/design.md, Background work:
    # what a lost fold costs). Run inside a transaction still open (a test's), it gets a savepoint,
    # so a failed fold leaves that transaction usable.
    scope = transaction.atomic() if connection.in_atomic_block else nullcontext()
    with scope, connection.cursor() as cursor:
        cursor.execute(_FOLD_SQL.format(rows=", ".join([_FOLD_ROW] * len(jobs))), params)
        rows = cursor.fetchall()
    folded = {str(key): (int(pk), str(task_id), bool(inserted)) for pk, task_id, key, inserted in rows}
    if len(folded) != len(jobs):  # RETURNING gives a row for an insert and for an update alike
        raise RuntimeError(f"the fold of {[job.coalesce_key for job in jobs]} returned {len(rows)} rows")
    return folded


def _send(job: _Job, *, record_pk: int, task_id: str, not_before: datetime | None = None) -> None:
    """Send the record's task to django-q2, to run no earlier than ``not_before`` if given.

    The ORM broker holds such a task back until then (`_HeldBackORM`); a broker that cannot (Redis)
    hands it out at once and `run_tracked` defers it.
    """
    name = (job.task_name or f"{job.kind}-{task_id}")[:100]
    through: dict[str, Any] = {}
    if not_before is not None:
        if _holds_tasks_back(job.queue):
            through["broker"] = _HeldBackORM(job.queue.cluster, not_before)
        else:
            through["not_before"] = not_before.isoformat()
    try:
        q_id = async_task(
            "openclaw_site.jobs.tasks.run_tracked",
            task_id,
            job.func,
            *job.args,
            queue=job.queue.value,
            task_name=name,
            cluster=job.queue.cluster,
            **through,
        )
    except Exception as error:  # the write that asked for the task has committed: report, don't raise
        # Run inline (OPENCLAW_TASKS_SYNC), a failing task raises here after run_tracked recorded
        # why; only a task that never started failed to be enqueued.
        logger.exception("Could not enqueue or run %s%r", job.func, job.args)
        now = timezone.now()
        TaskRecord.objects.filter(pk=record_pk, state=TaskState.QUEUED).update(
            state=TaskState.FAILED,
            error=f"could not enqueue: {error}"[:10000],
            finished_at=now,
            updated_at=now,
        )
        return
    TaskRecord.objects.filter(pk=record_pk).update(q_task_id=q_id or "")


def _holds_tasks_back(queue: TaskQueue) -> bool:
    """Tell whether the queue's broker can hold a task back until a time (the ORM broker; not Redis)."""
    return isinstance(get_broker(queue.cluster), ORM)


class OrderedORM(ORM):  # type: ignore[misc]  # django-q2 has no type information: ORM is Any
    """django-q2's ORM broker, taking ready tasks in the order they fell due (Q_CLUSTER's broker).

    `ORM.dequeue` reads the ready rows with no ORDER BY, so PostgreSQL hands them out in the
    order they lie in the table: a row written into the space of finished tasks, or moved by an
    update, went ahead of rows that had waited a minute (docs/design.md, "Tasks in the order they
    fell due"). The rows are read by ``lock`` (when a row became due: its enqueue time, or the
    time a held-back task waited for), then id.
    """

    @staticmethod
    def get_connection(list_key: str | None = None) -> Any:
        return ORM.get_connection(list_key).order_by("lock", "id")


class _HeldBackORM(OrderedORM):
    """django-q2's ORM broker, but the task it enqueues is not dequeued before ``until``.

    `ORM.dequeue` takes rows with ``lock < now``; the row is written and its lock set to ``until``
    in one transaction, so no worker sees it in between.
    """

    def __init__(self, list_key: str, until: datetime) -> None:
        super().__init__(list_key=list_key)
        self.until = until

    def enqueue(self, task: str) -> int:
        with transaction.atomic(using=Conf.ORM):
            pk = int(super().enqueue(task))
            self.get_connection().filter(pk=pk).update(lock=self.until)
        return pk


def record_failure(*, owner: TaskOwner, kind: str, error: str) -> TaskRecord:
    """Record work that ran in a request and failed (an assistant turn), so the Jobs page lists it.

    It is no background task: the record is written finished and failed, with the error, beside
    the task records, and the Jobs page's filters and links treat it like one.
    """
    now = timezone.now()
    return TaskRecord.objects.create(
        task_id=uuid.uuid4().hex,
        team_id=owner.team_id,
        assistant_id=owner.assistant_id,
        kind=kind,
        object_ids=owner.object_ids(),
        state=TaskState.FAILED,
        error=error[:10000],
        started_at=now,
        finished_at=now,
    )


def record_task(
    *, task_id: str, team: Team | int, kind: str, object_ids: dict[str, Any] | None = None
) -> TaskRecord:
    """Record the team of a task handed to django-q2 directly (``task_id`` is django-q2's id)."""
    team_field = {"team": team} if isinstance(team, Team) else {"team_id": team}
    return TaskRecord.objects.create(
        task_id=task_id, q_task_id=task_id, kind=kind, object_ids=object_ids or {}, **team_field
    )


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
    token = _current_task.set(task_id)
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
        _current_task.reset(token)
    _finish(task_id, state=TaskState.SUCCEEDED, result=_jsonable(result))
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
    job = _Job(func=func, args=args, kind=record.kind, queue=queue, task_name=None)
    if not _holds_tasks_back(queue):  # no delayed delivery (Redis): a short pause
        time.sleep(min(UNDELAYED_PAUSE_SECONDS, max(0.0, (until - timezone.now()).total_seconds())))
    _send(job, record_pk=record.pk, task_id=task_id, not_before=until)
    return {"deferred_until": until.isoformat()}


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


def _live_records() -> QuerySet[TaskRecord]:
    """The queued and running records, in the terms of their partial index (`taskrecord_active`).

    The index's condition in literals keeps it usable by a prepared statement's generic plan
    (`openclaw_site.platform.row_sql.partial_index_condition`); these reads come between every slice of an
    index run, and the retention keeps every finished record beside the few live ones.
    """
    return TaskRecord.objects.filter(partial_index_condition(TaskRecord, "taskrecord_active"))


def others_waiting(*, except_key: str | Collection[str]) -> bool:
    """Tell whether a job other than those of ``except_key`` is queued (any team, queue or due time).

    A long job that works in slices asks this between them: it goes on while nobody waits, and
    gives its worker up once someone does. Counting held-back and urgent jobs too errs towards
    giving the worker up.
    """
    keys = [except_key] if isinstance(except_key, str) else list(except_key)
    return _live_records().filter(state=TaskState.QUEUED).exclude(coalesce_key__in=keys).exists()


def others_running() -> bool:
    """Tell whether a task other than the one running here is running (any team, queue or host).

    A record a dead worker left running counts until the task timeout has passed since it
    started (no task runs longer), which errs towards leaving the other workers alone.
    """
    since = timezone.now() - timedelta(seconds=int(settings.Q_CLUSTER["timeout"]))
    return (
        _live_records()
        .filter(state=TaskState.RUNNING, started_at__gte=since)
        .exclude(task_id=_current_task.get() or "")
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
    running = _live_records().filter(
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


def queued(key: str) -> bool:
    """Tell whether a job with this coalescing key is queued (held back or not)."""
    return _live_records().filter(state=TaskState.QUEUED, coalesce_key=key).exists()


def queued_or_running(key: str) -> bool:
    """Tell whether a job with this coalescing key is queued or running."""
    return _live_records().filter(coalesce_key=key).exists()


def report_progress(done: int, total: int | None, message: str = "") -> None:
    """Update the progress of the task running now; a no-op outside one."""
    task_id = _current_task.get()
    if task_id is not None:
        update_progress(task_id, done, total, message)


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


def purge_task_records() -> dict[str, int]:
    """Delete finished records past the retention; fail pending ones whose task was lost and
    running ones whose worker was lost.

    Scheduled every 10 minutes (migration openclaw_site/0004). One bounded DELETE of the oldest
    finished records (`PURGE_BATCH`), so the table stays as long as the retention; one of
    django-q2's task outcomes past the same retention.
    """
    now = timezone.now()
    cutoff = now - timedelta(days=settings.TASK_RETENTION_DAYS)
    oldest = (
        TaskRecord.objects.filter(state__in=FINISHED_STATES, finished_at__lt=cutoff)
        .order_by("finished_at")
        .values("pk")[:PURGE_BATCH]
    )
    deleted, _ = TaskRecord.objects.filter(pk__in=oldest).delete()
    # django-q2's own outcomes (settings.Q_CLUSTER's save_limit 0: kept without its prune), likewise.
    results = Task.objects.filter(stopped__lt=cutoff).order_by("stopped").values("pk")[:PURGE_BATCH]
    deleted_results, _ = Task.objects.filter(pk__in=results).delete()
    return {
        "deleted": deleted,
        "released": _fail_lost_pending(now),
        "stopped": _fail_overdue_running(now),
        "deleted_results": deleted_results,
    }


def _fail_lost_pending(now: Any) -> int:
    """Fail pending coalescing records not started within django-q2's retry time.

    django-q2 delivers a task again after ``retry`` seconds when its worker died; a record still
    queued after that has most likely lost its task, and every later change would fold into it.
    Failing it frees its key. Should its task run after all, `run_tracked` records that run.
    """
    lost_after = timedelta(seconds=int(settings.Q_CLUSTER["retry"]))
    return TaskRecord.objects.filter(
        state=TaskState.QUEUED, coalesce_key__isnull=False, created_at__lt=now - lost_after
    ).update(
        state=TaskState.FAILED,
        error=f"not started within {int(lost_after.total_seconds())} s: its task was lost; "
        "the next change queues a new one",
        finished_at=now,
        updated_at=now,
    )


def _fail_overdue_running(now: Any) -> int:
    """Fail running records that started longer ago than django-q2's task timeout.

    No task runs past the timeout: django-q2 stops the worker of one that does. A record still
    running after that lost its worker (stopped at the timeout, killed, its host gone). With the
    Redis broker nothing delivers its task again, so without this the Jobs page would show it
    running for good; should the ORM broker deliver it again, `run_tracked` records that run.
    """
    timeout = int(settings.Q_CLUSTER["timeout"])
    overdue = now - timedelta(seconds=timeout + OVERDUE_MARGIN_SECONDS)
    return (
        _live_records()
        .filter(state=TaskState.RUNNING, started_at__lt=overdue)
        .update(
            state=TaskState.FAILED,
            error=f"running longer than the task timeout ({timeout} s): its worker stopped or was stopped",
            finished_at=now,
            updated_at=now,
        )
    )
