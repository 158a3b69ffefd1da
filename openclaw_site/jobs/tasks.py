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
import uuid
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any, overload

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.tasks import async_task

from openclaw_site.models import Assistant, TaskRecord, TaskState, Team

logger = logging.getLogger(__name__)


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
class Job:
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
    job = Job(func=func, args=args, kind=kind or func.rsplit(".", 1)[-1], queue=queue, task_name=task_name)
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
    transaction.on_commit(partial(send, job, record_pk=record.pk, task_id=record.task_id))
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
    job = Job(func=func, args=args, kind=kind or func.rsplit(".", 1)[-1], queue=queue, task_name=task_name)
    record_pk, task_id, inserted = _fold([Coalesced(job, owner=owner, coalesce_key=coalesce_key)])[
        coalesce_key
    ]
    if inserted:
        transaction.on_commit(partial(send, job, record_pk=record_pk, task_id=task_id))
    return TaskRecord.objects.get(pk=record_pk)


@dataclass(frozen=True)
class Coalesced:
    """A coalescing job (`enqueue` with a ``coalesce_key``), for `enqueue_coalesced`."""

    job: Job
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
    job = Job(func=func, args=args, kind=kind, queue=queue, task_name=task_name, delay_seconds=delay_seconds)
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
            send(job, record_pk=record_pk, task_id=task_id, not_before=_held_until(job))


def _held_until(job: Job) -> datetime | None:
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


def send(job: Job, *, record_pk: int, task_id: str, not_before: datetime | None = None) -> None:
    """Send the record's task to django-q2, to run no earlier than ``not_before`` if given.

    The ORM broker holds such a task back until then (`_HeldBackORM`); a broker that cannot (Redis)
    hands it out at once and `run_tracked` defers it.
    """
    name = (job.task_name or f"{job.kind}-{task_id}")[:100]
    through: dict[str, Any] = {}
    if not_before is not None:
        if holds_tasks_back(job.queue):
            through["broker"] = _HeldBackORM(job.queue.cluster, not_before)
        else:
            through["not_before"] = not_before.isoformat()
    try:
        q_id = async_task(
            "openclaw_site.jobs.runs.run_tracked",
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


def holds_tasks_back(queue: TaskQueue) -> bool:
    """Tell whether the queue's broker can hold a task back until a time (the ORM broker; not Redis)."""
    return isinstance(get_broker(queue.cluster), ORM)


class OrderedORM(ORM):  # type: ignore[misc]  # django-q2 has no type information: ORM is Any
    """django-q2's ORM broker, taking ready tasks in the order they fell due (Q_CLUSTER's broker),
    and queueing a task on the caller's connection as it is.

    `ORM.dequeue` reads the ready rows with no ORDER BY, so PostgreSQL hands them out in the
    order they lie in the table: a row written into the space of finished tasks, or moved by an
    update, went ahead of rows that had waited a minute (docs/design.md, "Tasks in the order they
    fell due"). The rows are read by ``lock`` (when a row became due: its enqueue time, or the
    time a held-back task waited for), then id.

    `ORM.get_connection` closes the thread's old connections first (outside a transaction), which
    the cluster's pusher and monitor need before each poll (a connection past its age or broken).
    Building the broker and `enqueue` skip that: they run in whoever queues a task, a request
    among them, where under the web server's pool (CONN_MAX_AGE 0) it handed the request's own
    connection back to the pool midway, with what the request kept on its session (docs/design.md,
    Background work). django-q2's worker closes old connections before each task on its own.
    """

    def __init__(self, list_key: str | None = None) -> None:
        # `Broker.__init__` minus its `get_connection` call, whose only effect here is the closing.
        self.list_key = list_key or Conf.CLUSTER_NAME
        self.connection = self.rows()
        self.cache = self.get_cache()
        self._info = None

    @staticmethod
    def get_connection(list_key: str | None = None) -> Any:
        return ORM.get_connection(list_key).order_by("lock", "id")

    @staticmethod
    def rows() -> Any:
        """The queue's rows, on the caller's connection as it is (nothing closed)."""
        return OrmQ.objects.using(Conf.ORM).order_by("lock", "id")

    def enqueue(self, task: str) -> int:
        return self._write(task, due=timezone.now())

    def _write(self, task: str, *, due: datetime) -> int:
        """Write ``task``'s queue row, dequeued once ``due`` has passed (`ORM.enqueue`'s row)."""
        return int(self.rows().create(key=self.list_key, payload=task, lock=due).pk)


class _HeldBackORM(OrderedORM):
    """django-q2's ORM broker, but the task it enqueues is not dequeued before ``until``.

    `ORM.dequeue` takes rows with ``lock < now``; the row is written with its lock at ``until``,
    in one statement, so no worker sees it before.
    """

    def __init__(self, list_key: str, until: datetime) -> None:
        super().__init__(list_key=list_key)
        self.until = until

    def enqueue(self, task: str) -> int:
        return self._write(task, due=self.until)


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
