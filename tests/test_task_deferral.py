"""A job started before it is due waits in the queue, not in a worker (openclaw_site.jobs.runs.Deferred).

Tasks go through the ORM broker and a real Redis (tests/task_brokers.py); `clock` moves time
forward instead of waiting.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.signing import SignedPackage

from memory_app.models import MemoryChunk
from openclaw_site.jobs.runs import defer_until
from openclaw_site.jobs.status import task_status
from openclaw_site.jobs.tasks import TaskOwner, TaskQueue, enqueue
from openclaw_site.models import TaskRecord
from tests import factories
from tests.messages import user
from tests.task_brokers import Clock, TaskBroker, drain, tracked_func, work_one

DEFAULT, URGENT = TaskQueue.DEFAULT.cluster, TaskQueue.URGENT.cluster
WAIT = 60.0


@pytest.fixture
def slow_memory_index(settings: Any) -> None:
    """A memory document's index falls due a minute after its save."""
    settings.MEMORY_INDEX_DEBOUNCE_SECONDS = WAIT
    settings.MEMORY_INDEX_MAX_WAIT_SECONDS = WAIT


def index_after_every_message(assistant: Any) -> None:
    """Let each append ask for a transcript index (`deltaMessages` 1)."""
    assistant.settings["memorySearch"]["sync"]["sessions"] = {
        "deltaBytes": 100000,
        "deltaMessages": 1,
        "postCompactionForce": True,
    }
    assistant.save()


def index_record() -> TaskRecord:
    [record] = TaskRecord.objects.filter(kind="reindex_document")
    return record


@pytest.mark.django_db(transaction=True)
def test_a_job_started_before_due_goes_back_to_queued_takes_changes_and_runs_once_due(
    world, task_broker: TaskBroker, clock: Clock, slow_memory_index
):
    factories.make_document(world.assistant, "MEMORY.md", "otters hold hands")
    # A person's memory write is indexed on the urgent queue, ahead of transcripts and exports.
    assert task_broker.queue_size(URGENT) == 1

    started = work_one(URGENT)  # a worker takes it at once: not due for a minute
    assert started is not None and started["success"], started
    assert tracked_func(started) == "memory_app.tasks.reindex_document"
    assert set(started["result"]) == {"deferred_until"}
    record = index_record()
    assert (record.state, record.started_at, record.coalesced) == ("queued", None, 0)
    assert task_status(record)["state"] == "queued"  # the Jobs page and the API
    assert MemoryChunk.objects.count() == 0

    # A save while it waits folds into the same record (it read nothing yet).
    factories.make_document(world.assistant, "MEMORY.md", "otters sleep afloat")
    record = index_record()
    assert (record.state, record.coalesced) == ("queued", 1)

    clock.advance(2 * WAIT)
    while (task := work_one(URGENT)) is not None and "deferred_until" in task["result"]:
        pass  # Redis holds nothing back: the worker handed it back until due
    assert task is not None and task["success"], task
    assert tracked_func(task) == "memory_app.tasks.reindex_document"
    record = index_record()
    assert record.state == "succeeded" and (record.result or {}).get("entries") == 1
    assert task_status(record)["state"] == "succeeded"
    [chunk] = MemoryChunk.objects.filter(assistant=world.assistant, path="MEMORY.md")
    assert "afloat" in chunk.text
    assert work_one(URGENT) is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("task_broker", ["orm"], indirect=True)  # Redis cannot hold a task back
def test_the_orm_broker_does_not_hand_out_a_deferred_task_before_it_is_due(
    world, task_broker: TaskBroker, clock: Clock, slow_memory_index
):
    factories.make_document(world.assistant, "MEMORY.md", "otters")
    work_one(URGENT)  # deferred
    broker = get_broker(URGENT)
    assert (broker.queue_size(), broker.lock_size()) == (0, 1)
    assert not broker.dequeue()

    clock.advance(2 * WAIT)
    [(_, payload)] = broker.dequeue()
    assert SignedPackage.loads(payload)["args"][0] == index_record().task_id


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("task_broker", ["orm"], indirect=True)  # drain: deferred rows stay out
def test_a_transcript_appended_to_without_pause_is_indexed_once_its_first_request_is_due(
    world, task_broker: TaskBroker, clock: Clock, settings: Any, tmp_path
):
    settings.SESSION_INDEX_DEBOUNCE_SECONDS = WAIT
    settings.EXPORT_ROOT = tmp_path / "exports"
    index_after_every_message(world.assistant)
    session = factories.make_session(world.assistant, "steady")
    for n in range(4):  # a message every 15 s: each would push a trailing 60 s debounce out
        factories.add_messages(session, user(f"walrus {n}"))
        drain(DEFAULT)  # the check queues the index job, which defers (held back, out of drain)
        clock.advance(WAIT / 4)
    [record] = TaskRecord.objects.filter(kind="index_session_transcript")
    assert (record.state, record.coalesced) == ("queued", 3)

    clock.advance(1)  # 61 s after the first request, 16 s after the last
    drain(DEFAULT)
    record.refresh_from_db()
    assert record.state == "succeeded", record.error
    texts = MemoryChunk.objects.filter(session_pk=session.pk).values_list("text", flat=True)
    assert all(f"walrus {n}" in " ".join(texts) for n in range(4))


def hand_out_early(broker: TaskBroker, cluster: str) -> None:
    """Let a worker take each task of ``cluster`` it can have now, once: each must hand itself back."""
    for _ in range(broker.queue_size(cluster)):  # Redis: a handed-back task goes to the end of the queue
        task = work_one(cluster)
        assert task is not None and task["success"], task
        assert set(task["result"] or ()) == {"deferred_until"}, tracked_func(task)


@pytest.mark.django_db(transaction=True)
def test_a_sessions_export_and_index_check_wait_out_their_delay_and_carry_the_appends_made_meanwhile(
    world, task_broker: TaskBroker, clock: Clock, settings: Any, tmp_path
):
    settings.SESSION_JOB_DELAY_SECONDS = WAIT
    settings.EXPORT_ROOT = tmp_path / "exports"
    session = factories.make_session(world.assistant, "steady")
    drain(DEFAULT)  # a new session is mirrored at once (its header)
    mirror = settings.EXPORT_ROOT / "acme" / "helper" / "sessions" / "steady.jsonl"
    before = mirror.read_text()
    for n in range(3):
        factories.add_messages(session, user(f"walrus {n}"))
        hand_out_early(task_broker, DEFAULT)  # held back (ORM) or handed back (Redis) until the delay is over
        clock.advance(WAIT / 4)  # the appends that come meanwhile do not push it out
    records = TaskRecord.objects.filter(kind__in=["export_session", "transcript_changed"], state="queued")
    assert sorted((r.kind, r.state, r.coalesced) for r in records) == [
        ("export_session", "queued", 2),
        ("transcript_changed", "queued", 2),
    ]
    assert mirror.read_text() == before

    clock.advance(WAIT / 4 + 1)  # the delay has passed since the first append
    ran = [tracked_func(task) for task in drain(DEFAULT)]
    assert ran.count("sessions_app.tasks.export_session") == 1, ran
    assert ran.count("sessions_app.tasks.transcript_changed") == 1, ran
    assert not records.all().exists()  # both ran, and nothing is left waiting
    lines = mirror.read_text().splitlines()
    assert [n for n in range(3) if any(f"walrus {n}" in line for line in lines)] == [0, 1, 2]


def fold_a_change_then_defer(team_id: int) -> None:
    """A job during whose run a change queues the next job of its key, then not due yet."""
    enqueue_deferring(team_id)
    defer_until(timezone.now() + timedelta(seconds=WAIT))


def enqueue_deferring(team_id: int) -> None:
    enqueue(
        "tests.test_task_deferral.fold_a_change_then_defer",
        team_id,
        owner=TaskOwner(team_id=team_id),
        coalesce_key=f"defer:{team_id}",
    )


@pytest.mark.django_db(transaction=True)
def test_a_deferred_job_leaves_the_work_to_a_newer_queued_job_of_its_key(world, task_broker: TaskBroker):
    enqueue_deferring(world.acme.pk)
    [first] = TaskRecord.objects.filter(coalesce_key=f"defer:{world.acme.pk}")

    task = work_one(DEFAULT)
    assert task is not None and task["success"], task  # no IntegrityError
    first.refresh_from_db()
    assert first.state == "succeeded"
    assert first.result == {"skipped": "a newer queued job carries the change"}
    [newer] = TaskRecord.objects.filter(coalesce_key=f"defer:{world.acme.pk}", state="queued")
    assert newer.pk != first.pk
    assert task_broker.queue_size(DEFAULT) == 1  # the newer job's task only


calls: list[str] = []


def due_on_the_second_call() -> str:
    calls.append("called")
    if len(calls) == 1:
        defer_until(timezone.now())
    return "ran"


@pytest.mark.django_db
def test_run_inline_a_deferred_job_waits_and_runs_again_under_the_same_record(
    world, django_capture_on_commit_callbacks
):
    calls.clear()
    with django_capture_on_commit_callbacks(execute=True):
        enqueue("tests.test_task_deferral.due_on_the_second_call", owner=TaskOwner(team_id=world.acme.pk))
    [record] = TaskRecord.objects.filter(kind="due_on_the_second_call")
    assert (record.state, record.result, len(calls)) == ("succeeded", "ran", 2)


order: list[str] = []


def waits_for_the_job_that_queued_it(team_id: int) -> str:
    """Not due while the job that queued it runs (as a transcript's next index run waits for the lock)."""
    if TaskRecord.objects.get(coalesce_key=f"outer:{team_id}").state == "running":
        order.append("inner deferred")
        defer_until(timezone.now())
    order.append("inner")
    return "ran after the outer job"


def queues_a_job_that_waits_for_it(team_id: int) -> str:
    owner = TaskOwner(team_id=team_id)
    enqueue(
        "tests.test_task_deferral.waits_for_the_job_that_queued_it",
        team_id,
        owner=owner,
        coalesce_key=f"inner:{team_id}",
    )
    order.append("outer")
    return "queued the inner job"


@pytest.mark.django_db(transaction=True)  # autocommit: a job queued inside a job runs inside it
def test_run_inline_a_job_deferred_inside_another_runs_after_it(world):
    order.clear()
    enqueue(
        "tests.test_task_deferral.queues_a_job_that_waits_for_it",
        world.acme.pk,
        owner=TaskOwner(team_id=world.acme.pk),
        coalesce_key=f"outer:{world.acme.pk}",
    )
    assert order == [
        "inner deferred",
        "outer",
        "inner",
    ]  # before, the inner job slept out a wait that never ended
    keys = [f"outer:{world.acme.pk}", f"inner:{world.acme.pk}"]
    states = dict(TaskRecord.objects.filter(coalesce_key__in=keys).values_list("coalesce_key", "state"))
    assert states == dict.fromkeys(keys, "succeeded")
    assert TaskRecord.objects.get(coalesce_key=f"inner:{world.acme.pk}").result == "ran after the outer job"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("task_broker", ["orm", "redis"], indirect=True)
def test_a_long_transcript_index_goes_back_to_the_queue_between_slices(
    world, task_broker: TaskBroker, fake_embeddings: Any, settings: Any, tmp_path
):
    """An index run that used its time leaves the rest to a job behind what is waiting."""
    settings.SESSION_INDEX_DEBOUNCE_SECONDS = settings.SESSION_JOB_DELAY_SECONDS = 0
    settings.SESSION_INDEX_SLICE_SECONDS = 1e-9
    settings.EXPORT_ROOT = tmp_path / "exports"
    index_after_every_message(world.assistant)
    session = factories.make_session(world.assistant, "long")
    factories.add_messages(session, *[user(f"okapi {n} " + "word " * 60) for n in range(3)])
    drain(DEFAULT)
    assert MemoryChunk.objects.filter(session_pk=session.pk).exists()
    # Another job waits all along (a record only, no task): every slice gives its worker up.
    TaskRecord.objects.create(
        task_id=uuid.uuid4().hex, team=world.acme, kind="export_session", coalesce_key="export-session:0"
    )
    factories.add_messages(session, *[user(f"okapi {n} " + "word " * 60) for n in range(3, 40)])

    tasks = drain(DEFAULT)

    runs = [t for t in tasks if tracked_func(t) == "sessions_app.tasks.index_session_transcript"]
    assert len(runs) > 2 and all(t["success"] for t in runs)
    assert [t["result"]["more"] for t in runs] == [True] * (len(runs) - 1) + [False]
    texts = " ".join(MemoryChunk.objects.filter(session_pk=session.pk).values_list("text", flat=True))
    assert all(f"okapi {n} " in texts for n in range(40))
    assert not TaskRecord.objects.filter(kind="index_session_transcript", state="queued").exists()
