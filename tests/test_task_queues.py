"""Flush and compaction run on a cluster of their own, ahead of any backlog of exports and indexing.

Each test that asks for `task_broker` runs on the ORM broker and on a real Redis
(tests/task_brokers.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from openclaw_site.jobs.tasks import TaskQueue
from openclaw_site.models import TaskRecord
from openclaw_site.teams.assistant_settings import validate_settings
from sessions_app.models import CompactionEntry, Session
from sessions_app.turn.maintenance import schedule_maintenance
from tests import factories
from tests.messages import assistant, chatter, usage, user
from tests.task_brokers import TaskBroker, tracked_func, work_one

DEFAULT, URGENT = TaskQueue.DEFAULT.cluster, TaskQueue.URGENT.cluster
BACKLOG_SESSIONS = 12


def due_for_compaction(world) -> Session:
    """A session whose last reply reported usage above the 180000 threshold of a 200000 window."""
    world.assistant.settings = validate_settings({"compaction": {"keepRecentTokens": 300}})
    world.assistant.save()
    session = factories.make_session(world.assistant, "due")
    factories.add_messages(session, *chatter(8))
    factories.add_messages(session, user("and?"), assistant("so.", usage=usage(185000, 500)))
    return session


def test_the_urgent_queue_is_a_cluster_and_broker_queue_of_its_own():
    assert (DEFAULT, URGENT) == ("openclaw", "openclaw-urgent")
    assert settings.Q_CLUSTER["ALT_CLUSTERS"] == {URGENT: {"workers": settings.Q_URGENT_WORKERS}}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("task_broker", ["orm", "redis"], indirect=True)
def test_a_queue_hands_out_its_tasks_in_the_order_they_fell_due(task_broker: TaskBroker):
    from django_q.brokers import get_broker
    from django_q.models import OrmQ

    broker = get_broker(DEFAULT)
    first, *_ = [broker.enqueue(name) for name in ("first", "second", "third")]
    if task_broker.kind == "orm":
        # A new version of the first row, stored after the others (as a dequeue's lock update
        # or a held-back task's hand-back stores it); PostgreSQL would read it last.
        OrmQ.objects.filter(pk=first).update(payload="first")

    taken = [broker.dequeue()[0] for _ in range(3)]

    payloads = [payload.decode() if isinstance(payload, bytes) else payload for _, payload in taken]
    assert payloads == ["first", "second", "third"]


@pytest.mark.django_db(transaction=True)
def test_a_due_compaction_is_taken_by_the_urgent_cluster_ahead_of_an_export_backlog(
    world, task_broker: TaskBroker, settings, tmp_path
):
    settings.EXPORT_ROOT = tmp_path / "exports"
    session = due_for_compaction(world)
    for n in range(BACKLOG_SESSIONS):  # other clients keep appending meanwhile
        other = factories.make_session(world.assistant, f"busy-{n}")
        factories.add_messages(other, {"role": "user", "content": f"message {n}"})
    backlog = task_broker.queue_size(DEFAULT)
    assert backlog >= 2 * BACKLOG_SESSIONS

    assert schedule_maintenance(session.pk)["compaction"] is True
    assert (task_broker.queue_size(URGENT), task_broker.queue_size(DEFAULT)) == (1, backlog)

    # A worker of the urgent cluster takes the compaction, though every export was queued before it.
    task = work_one(URGENT)
    assert task is not None and task["success"], task
    assert tracked_func(task) == "sessions_app.tasks.compact_session_task"
    [record] = TaskRecord.objects.filter(kind="compact_session_task")
    assert record.state == "succeeded" and isinstance(record.result, dict)
    assert record.result["status"] == "committed"
    assert CompactionEntry.objects.filter(session=session).count() == 1
    # The exports are still waiting for the default cluster (the compaction's own export folded in).
    assert task_broker.queue_size(DEFAULT) >= backlog and task_broker.queue_size(URGENT) == 0
    assert work_one(URGENT) is None


def test_a_cluster_process_takes_its_queue_from_q_cluster_name(tmp_path):
    def conf_of(cluster: str | None) -> list[str]:
        env = {key: value for key, value in os.environ.items() if key != "Q_CLUSTER_NAME"}
        env.update(DJANGO_SETTINGS_MODULE="config.settings", Q_URGENT_WORKERS="3", Q_WORKERS="2")
        env["DATABASE_URL"] = "postgres://no-database-needed@127.0.0.1:1/none"
        if cluster is not None:
            env["Q_CLUSTER_NAME"] = cluster
        code = "from django_q.conf import Conf; print(Conf.CLUSTER_NAME, Conf.WORKERS, Conf.PREFIX)"
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.split()

    assert conf_of(None) == ["openclaw", "2", "openclaw"]
    # Same prefix (the signing salt): both clusters read what the other side signed.
    assert conf_of(URGENT) == ["openclaw-urgent", "3", "openclaw"]


def _cluster(name: str | None, *, redis_url: str, export_root: Path, log: Path) -> subprocess.Popen:
    db = connection.settings_dict
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENCLAW_", "PYTEST"))}
    env.pop("Q_CLUSTER_NAME", None)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=f"postgresql://{db['USER']}@{quote(db['HOST'], safe='')}/{db['NAME']}",
        REDIS_URL=redis_url,
        EXPORT_ROOT=str(export_root),
        Q_WORKERS="1",
        LOG_LEVEL="INFO",
        **({"Q_CLUSTER_NAME": name} if name else {}),
    )
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(cluster: subprocess.Popen) -> None:
    # The main process only: it stops its sentinel and workers (see tests/sessions_app/test_export_tasks.py).
    cluster.send_signal(signal.SIGTERM)
    try:
        cluster.wait(timeout=60)
    finally:
        if cluster.poll() is None:
            os.killpg(cluster.pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_both_qcluster_processes_run_their_own_queues_on_redis(world, redis_server, tmp_path, monkeypatch):
    import redis
    from django_q.conf import Conf
    from django_q.models import Task

    redis.Redis.from_url(redis_server).flushdb()
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "ORM", None)
    monkeypatch.setattr(Conf, "BROKER_CLASS", None)
    monkeypatch.setattr(Conf, "REDIS", redis_server)
    export_root = tmp_path / "exports"
    session = due_for_compaction(world)
    assert schedule_maintenance(session.pk)["compaction"] is True
    clusters = [
        _cluster(None, redis_url=redis_server, export_root=export_root, log=tmp_path / "default.log"),
        _cluster(URGENT, redis_url=redis_server, export_root=export_root, log=tmp_path / "urgent.log"),
    ]
    try:
        end = time.monotonic() + 120  # bounds a hang, times nothing
        while time.monotonic() < end and all(c.poll() is None for c in clusters):
            ran = dict(Task.objects.filter(success=True).values_list("name", "cluster"))
            if any(name.startswith("compact-") for name in ran) and (export_root / "acme").exists():
                break
            time.sleep(0.3)
        ran = dict(Task.objects.values_list("name", "cluster"))
        logs = "\n".join(p.read_text() for p in tmp_path.glob("*.log"))
        [compaction] = [cluster for name, cluster in ran.items() if name.startswith("compact-")]
        assert compaction == URGENT, logs
        exports = {cluster for name, cluster in ran.items() if name.startswith("export-")}
        assert exports == {DEFAULT}, logs
        assert TaskRecord.objects.get(kind="compact_session_task").state == "succeeded"
    finally:
        for cluster in clusters:
            _stop(cluster)
