"""Export tasks: enqueued after commit, idempotent, and run by a real django-q2 cluster (ORM broker)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection, transaction

from openclaw_site.models import TaskRecord
from sessions_app import tasks
from sessions_app.workspace import exports
from tests import factories


@pytest.fixture
def export_root(settings, tmp_path) -> Path:
    settings.EXPORT_ROOT = tmp_path / "exports"
    return settings.EXPORT_ROOT


def transcript_lines(root: Path, key: str) -> list[dict]:
    path = root / "acme" / "helper" / "sessions" / f"{key}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.django_db(transaction=True)
def test_export_runs_after_commit_and_never_for_a_rollback(export_root, world):
    with transaction.atomic():
        session = factories.make_session(world.assistant, "kept")
        factories.add_messages(session, {"role": "user", "content": "hello"})
        assert transcript_lines(export_root, "kept") == []  # not before the commit
    assert [row["type"] for row in transcript_lines(export_root, "kept")] == ["session", "message"]

    with pytest.raises(RuntimeError), transaction.atomic():
        factories.add_messages(session, {"role": "user", "content": "never committed"})
        raise RuntimeError("rolled back")
    assert len(transcript_lines(export_root, "kept")) == 2


@pytest.mark.django_db
def test_export_tasks_are_idempotent_and_recover_from_a_crash(export_root, world, monkeypatch):
    session = factories.make_session(world.assistant, "chat")
    factories.add_messages(session, {"role": "user", "content": "one"}, {"role": "user", "content": "two"})
    tasks.export_session(session.pk)
    path = export_root / "acme" / "helper" / "sessions" / "chat.jsonl"
    first = path.read_bytes()
    tasks.export_session(session.pk)
    assert path.read_bytes() == first

    factories.add_messages(session, {"role": "user", "content": "three"})
    real = exports.session_jsonl_lines

    def crash_half_way(session, **kwargs):
        lines = real(session, **kwargs)
        yield next(lines)
        raise MemoryError("worker killed")

    monkeypatch.setattr(exports, "session_jsonl_lines", crash_half_way)
    with pytest.raises(MemoryError):
        tasks.export_session(session.pk)
    assert path.read_bytes() == first  # the half-written file never replaced the old one
    monkeypatch.setattr(exports, "session_jsonl_lines", real)
    tasks.export_session(session.pk)  # django-q2 retries the task: it rewrites everything from Postgres
    assert [row["message"]["content"] for row in transcript_lines(export_root, "chat")[1:]] == [
        "one",
        "two",
        "three",
    ]
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.django_db
def test_tasks_for_deleted_objects_do_nothing(export_root, world):
    tasks.export_session(987654)
    tasks.export_memory(987654, "MEMORY.md")
    tasks.export_sessions_index(987654)
    tasks.transcript_changed(987654)
    assert not export_root.exists()


def _cluster_env(export_root: Path) -> dict[str, str]:
    db = connection.settings_dict
    url = f"postgresql://{db['USER']}@{quote(db['HOST'], safe='')}/{db['NAME']}"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENCLAW_", "PYTEST"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=url,
        EXPORT_ROOT=str(export_root),
        OPENCLAW_TASKS_SYNC="0",
        Q_WORKERS="1",
        LOG_LEVEL="INFO",
    )
    return env


def _wait_for(predicate, *, what: str, process: subprocess.Popen, log: Path, deadline: float = 90.0) -> None:
    """Poll until ``predicate()``; the deadline only bounds a hang, it is not an assertion on speed."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if predicate():
            return
        if process.poll() is not None:
            break
        time.sleep(0.2)
    pytest.fail(f"{what} did not happen; qcluster log:\n{log.read_text()}")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_qcluster_runs_enqueued_exports_with_the_orm_broker(export_root, world, tmp_path, monkeypatch):
    from django_q.conf import Conf
    from django_q.models import OrmQ, Task

    monkeypatch.setattr(Conf, "SYNC", False)  # tests run tasks inline; here they go through the broker
    log = tmp_path / "qcluster.log"
    with log.open("w") as out:
        cluster = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=settings.BASE_DIR,
            env=_cluster_env(export_root),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        with transaction.atomic():
            session = factories.make_session(world.assistant, "queued")
            factories.add_messages(session, {"role": "user", "content": "through the broker"})
            factories.make_document(world.assistant, "MEMORY.md", "queued memory")
            assert not OrmQ.objects.exists()  # enqueue waits for the commit
        _wait_for(
            lambda: len(transcript_lines(export_root, "queued")) == 2,
            what="the session export",
            process=cluster,
            log=log,
        )
        memory = export_root / "acme" / "helper" / "MEMORY.md"
        _wait_for(
            lambda: memory.exists() and memory.read_text() == "queued memory",
            what="the memory export",
            process=cluster,
            log=log,
        )
        _wait_for(
            lambda: (
                TaskRecord.objects.filter(kind="export_memory", state="succeeded").exists()
                and Task.objects.filter(func="openclaw_site.jobs.runs.run_tracked", success=True).exists()
            ),
            what="the task result",
            process=cluster,
            log=log,
        )
    finally:
        # Only the main process: it stops its sentinel and workers. A SIGTERM to the whole group kills the
        # sentinel mid-wait and leaves the main process blocked on the stop event (django-q2 1.11).
        cluster.send_signal(signal.SIGTERM)
        try:
            assert cluster.wait(timeout=60) == 0
        finally:
            if cluster.poll() is None:
                os.killpg(cluster.pid, signal.SIGKILL)
