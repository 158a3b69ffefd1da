"""One pending job per object: newer changes fold into it (openclaw_site.jobs.tasks, coalescing enqueue).

Here tasks go through a broker instead of running inline, so they wait in the queue as they do in
production, and a worker runs them (tests/task_brokers.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_q.models import Task

from memory_app.models import Source
from openclaw_site.jobs import retention, runs, tasks
from openclaw_site.jobs.retention import purge_task_records
from openclaw_site.jobs.runs import run_tracked
from openclaw_site.jobs.tasks import TaskOwner, TaskQueue, enqueue
from openclaw_site.models import TaskRecord
from sessions_app.indexing import schedule_session_index
from tests import factories
from tests.task_brokers import TaskBroker, drain, tracked_func
from tests.views_support import signed_in

DEFAULT = TaskQueue.DEFAULT.cluster
APPENDS = 10


def pending(kind: str, **object_ids: int) -> list[TaskRecord]:
    records = TaskRecord.objects.filter(kind=kind, state="queued")
    return [r for r in records if all(r.object_ids.get(k) == v for k, v in object_ids.items())]


def noted(marker: str) -> str:
    """A task that returns what the database holds when it runs (the team's name)."""
    from openclaw_site.models import Team

    return Team.objects.get(slug=marker).name


@pytest.fixture
def export_root(settings: Any, tmp_path: Path) -> Path:
    settings.EXPORT_ROOT = tmp_path / "exports"
    return settings.EXPORT_ROOT


@pytest.mark.django_db(transaction=True)
def test_many_appends_leave_one_pending_export_and_one_pending_check_per_session(
    world, task_broker: TaskBroker, export_root: Path
):
    sessions = [factories.make_session(world.assistant, key) for key in ("north", "south")]
    drain(DEFAULT)  # the exports the session creations queued
    for n in range(APPENDS):
        for session in sessions:
            factories.add_messages(session, {"role": "user", "content": f"{session.key} {n}"})  # commits

    for session in sessions:
        [export] = pending("export_session", session=session.pk)
        [check] = pending("transcript_changed", session=session.pk)
        # The first append queued each job; the other nine folded into it.
        assert (export.coalesced, check.coalesced) == (APPENDS - 1, APPENDS - 1)
        assert export.coalesce_key == f"export-session:{session.pk}"
    assert task_broker.queue_size(DEFAULT) == 4  # one task per pending job, not one per change
    jobs = signed_in(world.bob).get("/jobs/").content.decode()
    assert jobs.count(f"folded {APPENDS - 1} changes") == 4

    done = drain(DEFAULT)
    assert sorted(tracked_func(task) for task in done) == sorted(
        ["sessions_app.tasks.export_session", "sessions_app.tasks.transcript_changed"] * 2
        # sessions.json, once for both exports (one pending per assistant)
        + ["sessions_app.tasks.export_sessions_index"]
    )
    assert all(task["success"] for task in done), [task["result"] for task in done]
    for session in sessions:
        path = export_root / "acme" / "helper" / "sessions" / f"{session.key}.jsonl"
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        # One run exported all ten appends, those folded in included.
        assert [line["message"]["content"] for line in lines[1:]] == [
            f"{session.key} {n}" for n in range(APPENDS)
        ]
    assert not TaskRecord.objects.filter(state="queued").exists()


def test_many_memory_writes_and_index_requests_leave_one_pending_job_each(
    world, django_capture_on_commit_callbacks, monkeypatch
):
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)  # into the ORM broker's queue, not run inline
    session = factories.make_session(world.assistant)
    for n in range(5):
        with django_capture_on_commit_callbacks(execute=True):  # each write commits
            document = factories.make_document(world.assistant, "MEMORY.md", f"version {n}")
    for _ in range(3):
        with django_capture_on_commit_callbacks(execute=True):
            assert schedule_session_index(session.pk)

    [reindex] = pending("reindex_document", document=document.pk)
    [export] = pending("export_memory", document=document.pk)
    [index] = pending("index_session_transcript", session=session.pk)
    assert (reindex.coalesced, export.coalesced, index.coalesced) == (4, 4, 2)
    assert reindex.coalesce_key == f"reindex-document:{document.pk}"


def test_jobs_asked_for_together_fold_in_one_statement(
    world, django_capture_on_commit_callbacks, monkeypatch
):
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    owner = TaskOwner(team_id=world.acme.pk)
    jobs = [
        tasks.coalesced("tests.test_task_coalescing.noted", "acme", owner=owner, coalesce_key=key)
        for key in ("together:b", "together:a", "together:b")  # a key twice counts once
    ]
    for _ in range(2):
        with django_capture_on_commit_callbacks() as callbacks:
            tasks.enqueue_coalesced(*jobs)
        with CaptureQueriesContext(connection) as folds:
            callbacks[0]()
        assert sum("ON CONFLICT (coalesce_key)" in query["sql"] for query in folds.captured_queries) == 1

    records = TaskRecord.objects.filter(coalesce_key__startswith="together:").order_by("coalesce_key")
    assert [(r.coalesce_key, r.state, r.coalesced) for r in records] == [
        ("together:a", "queued", 1),
        ("together:b", "queued", 1),
    ]
    assert all(r.q_task_id for r in records)  # each new record sent one task


@pytest.mark.django_db(transaction=True)
def test_a_fold_after_a_commit_is_one_statement_and_leaves_the_connection_as_it_was(world, monkeypatch):
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    owner = TaskOwner(team_id=world.acme.pk)
    job = tasks.coalesced("tests.test_task_coalescing.noted", "acme", owner=owner, coalesce_key="alone:a")
    for _ in range(2):  # a new record, then a fold into it
        with CaptureQueriesContext(connection) as captured:
            tasks.enqueue_coalesced(job)  # no transaction is open: it folds at once, in autocommit
        sql = [query["sql"] for query in captured.captured_queries]
        assert sum("ON CONFLICT (coalesce_key)" in statement for statement in sql) == 1
        assert not any(statement.lstrip().upper().startswith("SET") for statement in sql)
    # synchronous_commit was off for the fold's own transaction only
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"
        with transaction.atomic():  # seen from inside a transaction, the fold did turn it off
            tasks._fold([job])
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone()[0] == "off"
    record = TaskRecord.objects.get(coalesce_key="alone:a")
    assert (record.state, record.coalesced, record.assistant_id) == ("queued", 2, None)  # two folds


def test_the_index_job_waits_for_the_latest_request_not_the_one_that_queued_it(world, frozen_clock):
    from memory_app.index import debounce
    from memory_app.tasks import reindex_document

    document = factories.make_document(world.assistant, "MEMORY.md", "otters")
    key = {"assistant_id": world.assistant.pk, "source": Source.MEMORY, "key": "MEMORY.md"}
    for _ in range(3):  # three writes folded into one job, the last one just now
        frozen_clock.advance(1)
        latest = debounce.request(**key, delay_seconds=1.5, max_delay_seconds=5)
    # Started now, the one pending job is not due: it hands its wait back to the queue until
    # 1.5 s after the latest save.
    with pytest.raises(runs.Deferred) as deferred:
        reindex_document(document.pk)
    assert deferred.value.until == latest == timezone.now() + timedelta(seconds=1.5)
    frozen_clock.advance(1.5)
    assert reindex_document(document.pk)["entries"] == 1


def test_a_change_after_the_job_started_queues_a_new_job(
    world, django_capture_on_commit_callbacks, monkeypatch
):
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    owner = TaskOwner(team_id=world.acme.pk)

    def change(name: str) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            world.acme.name = name
            world.acme.save()
            enqueue("tests.test_task_coalescing.noted", "acme", owner=owner, coalesce_key="note:acme")

    change("Acme 1")
    change("Acme 2")  # folds: the job has not started
    [first] = TaskRecord.objects.filter(coalesce_key="note:acme")
    assert (first.state, first.coalesced) == ("queued", 1)
    # The job runs and sees the folded change (it committed before its fold).
    assert run_tracked(first.task_id, "tests.test_task_coalescing.noted", "acme") == "Acme 2"
    change("Acme 3")  # the job has started: a new one
    first.refresh_from_db()
    [second] = TaskRecord.objects.filter(coalesce_key="note:acme", state="queued")
    assert (first.state, first.result, second.coalesced) == ("succeeded", "Acme 2", 0)


def _hold(statement: Callable[[], Any], *, started: threading.Event, release: threading.Event) -> None:
    """Run ``statement`` in a transaction of this thread's own and keep it open until released."""
    try:
        with transaction.atomic():
            statement()
            started.set()
            release.wait(10)
    finally:
        connection.close()


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            work()
        except BaseException as error:  # surfaced by the test: a thread's failure must fail it
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread, errors


def _fold(owner: TaskOwner) -> None:
    enqueue("tests.test_task_coalescing.noted", "acme", owner=owner, coalesce_key="race:acme")


@pytest.mark.django_db(transaction=True)
def test_a_fold_racing_a_starting_job_waits_for_it_and_then_queues_a_new_job(world, monkeypatch):
    from django_q.conf import Conf
    from django_q.models import OrmQ

    monkeypatch.setattr(Conf, "SYNC", False)
    owner = TaskOwner(team_id=world.acme.pk)
    _fold(owner)  # autocommit: recorded and sent at once
    [job] = TaskRecord.objects.filter(coalesce_key="race:acme")
    started, release = threading.Event(), threading.Event()
    # The worker's move to running, caught between its update and its commit.
    worker, worker_errors = _in_thread(
        lambda: _hold(
            lambda: TaskRecord.objects.filter(pk=job.pk).update(state="running"),
            started=started,
            release=release,
        )
    )
    assert started.wait(10)
    folding, fold_errors = _in_thread(lambda: _fold(owner))  # a change commits just then
    folding.join(timeout=0.5)
    assert folding.is_alive()  # the fold waits on the row the move holds
    release.set()
    worker.join(10)
    folding.join(10)
    assert not worker_errors and not fold_errors, worker_errors + fold_errors
    # The running job may have read the database before the change: the change got a job of its own.
    records = TaskRecord.objects.filter(coalesce_key="race:acme").order_by("pk")
    assert [(r.state, r.coalesced) for r in records] == [("running", 0), ("queued", 0)]
    assert OrmQ.objects.filter(key=DEFAULT).count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_job_starting_while_a_change_folds_waits_and_then_sees_it(world, monkeypatch):
    from django_q.conf import Conf
    from django_q.models import OrmQ

    monkeypatch.setattr(Conf, "SYNC", False)
    owner = TaskOwner(team_id=world.acme.pk)
    _fold(owner)
    [job] = TaskRecord.objects.filter(coalesce_key="race:acme")
    world.acme.name = "Acme renamed"
    world.acme.save()  # the change commits, then its fold...
    fold = tasks.coalesced("tests.test_task_coalescing.noted", "acme", owner=owner, coalesce_key="race:acme")
    started, release = threading.Event(), threading.Event()
    folding, fold_errors = _in_thread(
        lambda: _hold(
            lambda: tasks._fold_or_send((fold,)),
            started=started,
            release=release,
        )
    )
    assert started.wait(10)  # ...is caught between its statement and its commit
    result: list[str] = []
    running, run_errors = _in_thread(
        lambda: result.append(run_tracked(job.task_id, "tests.test_task_coalescing.noted", "acme"))
    )
    running.join(timeout=0.5)
    assert running.is_alive() and not result  # the job's move to running waits on the row
    release.set()
    folding.join(10)
    running.join(10)
    assert not fold_errors and not run_errors, fold_errors + run_errors
    job.refresh_from_db()
    assert (job.state, job.coalesced, result) == ("succeeded", 1, ["Acme renamed"])
    assert TaskRecord.objects.filter(coalesce_key="race:acme").count() == 1
    assert OrmQ.objects.filter(key=DEFAULT).count() == 1  # the fold sent nothing


def test_a_tracked_task_still_gets_its_record_at_once_and_one_per_call(
    world, django_capture_on_commit_callbacks
):
    owner = TaskOwner.for_assistant(world.assistant)
    with django_capture_on_commit_callbacks(execute=False):
        first = enqueue("tests.test_task_coalescing.noted", "acme", owner=owner, kind="reindex")
        second = enqueue("tests.test_task_coalescing.noted", "acme", owner=owner, kind="reindex")
        assert first.pk != second.pk and first.coalesce_key is None
        assert TaskRecord.objects.filter(kind="reindex", state="queued").count() == 2


def test_the_purge_deletes_old_records_in_bounded_statements_and_fails_lost_ones(world, monkeypatch):
    now = timezone.now()
    old = now - timedelta(days=settings.TASK_RETENTION_DAYS, minutes=1)
    lost = now - timedelta(seconds=settings.Q_CLUSTER["retry"] + 60)

    def record(name: str, **fields: Any) -> TaskRecord:
        return TaskRecord.objects.create(task_id=name, team=world.acme, kind="export_session", **fields)

    for n in range(3):
        record(f"old-{n}", state="succeeded", finished_at=old - timedelta(minutes=n))
    record("old-failed", state="failed", finished_at=old - timedelta(minutes=10))
    record("recent", state="succeeded", finished_at=now)
    record("waiting", state="queued")
    record("running", state="running", started_at=old)
    record("at-work", state="running", started_at=now - timedelta(seconds=settings.Q_CLUSTER["timeout"]))
    record("lost", state="queued", coalesce_key="export-session:1")
    record("young", state="queued", coalesce_key="export-session:2")
    TaskRecord.objects.filter(task_id__in=["waiting", "lost"]).update(created_at=lost)
    for n, stopped in enumerate([old, old, now]):  # django-q2's outcomes of three tasks
        Task.objects.create(
            id=f"q-{n}", name=f"q-{n}", func="f", started=stopped, stopped=stopped, success=True
        )
    monkeypatch.setattr(retention, "PURGE_BATCH", 3)

    with CaptureQueriesContext(connection) as queries:
        outcome = purge_task_records()
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("DELETE")]
    assert len(deletes) == 2 and all("LIMIT 3" in delete for delete in deletes)
    assert outcome == {"deleted": 3, "released": 1, "stopped": 1, "deleted_results": 2}
    assert list(Task.objects.values_list("id", flat=True)) == ["q-2"]
    left = set(TaskRecord.objects.values_list("task_id", flat=True))
    # The three oldest finished went; the newest old one waits for the next run.
    assert left == {"old-0", "recent", "waiting", "running", "at-work", "lost", "young"}
    released = TaskRecord.objects.get(task_id="lost")
    assert released.state == "failed" and "the next change queues a new one" in released.error
    assert TaskRecord.objects.get(task_id="young").state == "queued"
    # Running past the task timeout: its worker is gone; within it, the task may still be at work.
    stopped = TaskRecord.objects.get(task_id="running")
    assert stopped.state == "failed" and "longer than the task timeout" in stopped.error
    assert TaskRecord.objects.get(task_id="at-work").state == "running"


@pytest.mark.django_db
def test_the_purge_runs_from_its_own_schedule():
    from django_q.models import Schedule

    schedule = Schedule.objects.get(name="task-records-purge")
    assert (schedule.func, schedule.minutes, schedule.repeats) == (
        "openclaw_site.jobs.retention.purge_task_records",
        10,
        -1,
    )
    assert schedule.cluster is None  # the default cluster runs it
