"""Run background tasks as django-q2's clusters do, on the ORM broker or on a real Redis server.

`redis_server` starts Debian's redis-server (`make redis-deps`) on a free loopback port, its data
in a temporary folder, once per test run, and stops it at the end. `task_broker` is parametrised
over both brokers: a test that asks for it runs once on each, with tasks going through the broker
instead of running inline (the rest of the suite runs them inline, OPENCLAW_TASKS_SYNC).
`work_one(cluster)` takes the next task of a cluster's queue and runs it through django-q2's own
worker and monitor functions, as one worker of that cluster does. `clock` moves Django's
`timezone.now` forward, as waiting would, for a deferred task (openclaw_site.jobs.runs.Deferred).

A test that runs tasks needs real commits (`django_db(transaction=True)`): django-q2's worker
closes stale connections before each task, which would end a test's wrapping transaction.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing import Value
from pathlib import Path
from typing import Any

import pytest

REDIS_START_SECONDS = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ping(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=0.5).ping())
    except redis.RedisError:
        return False


def _start_redis(binary: str, folder: Path) -> tuple[subprocess.Popen, str]:
    """Start redis-server on a free port; try another port if one was taken meanwhile."""
    log = folder / "redis.log"
    for _ in range(5):
        port = free_port()
        url = f"redis://127.0.0.1:{port}/0"
        command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder)]
        command += ["--save", "", "--appendonly", "no", "--logfile", str(log)]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        end = time.monotonic() + REDIS_START_SECONDS  # bounds a hang, times nothing
        while time.monotonic() < end and process.poll() is None:
            if _ping(url):
                return process, url
            time.sleep(0.05)
        process.kill()
        process.wait()
    pytest.fail(f"redis-server did not start:\n{log.read_text() if log.exists() else ''}")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start a private redis-server for this test run and return its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server not found: run `make redis-deps` (apt-get install redis-server)")
    process, url = _start_redis(binary, tmp_path_factory.mktemp("redis"))
    try:
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass(frozen=True)
class TaskBroker:
    """The broker a test's tasks go through."""

    kind: str  # "orm" | "redis"

    def queue_size(self, cluster: str) -> int:
        """Return how many tasks wait in ``cluster``'s queue."""
        from django_q.brokers import get_broker

        return int(get_broker(cluster).queue_size() or 0)


@pytest.fixture(params=["orm", "redis"])
def task_broker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> TaskBroker:
    """Send tasks through the ORM broker or a real Redis, instead of running them inline."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    if request.param == "redis":
        import redis

        url = request.getfixturevalue("redis_server")
        redis.Redis.from_url(url).flushdb()  # each test starts with empty queues
        monkeypatch.setattr(Conf, "ORM", None)
        monkeypatch.setattr(Conf, "BROKER_CLASS", None)  # settings name the ORM's when not on Redis
        monkeypatch.setattr(Conf, "REDIS", url)
    return TaskBroker(kind=request.param)


class Clock:
    """Django's clock, moved forward by `advance` (every `timezone.now()` call reads it).

    Frozen, it stands still in between; else it runs on, as a broker needs (ORM dequeues rows
    locked before now).
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, frozen: bool) -> None:
        from django.utils import timezone

        self.offset = timedelta()
        real_now, start = timezone.now, timezone.now()
        read = (lambda: start) if frozen else real_now
        monkeypatch.setattr(timezone, "now", lambda: read() + self.offset)

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Move time forward without waiting: `clock.advance(60)`."""
    return Clock(monkeypatch, frozen=False)


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """A clock that only moves by `advance`, for exact due times."""
    return Clock(monkeypatch, frozen=True)


def work_one(cluster: str) -> dict[str, Any] | None:
    """Take the next task of ``cluster``'s queue and run it as one of its workers; None if empty."""
    from django_q.brokers import get_broker
    from django_q.monitor import monitor
    from django_q.queues import Queue
    from django_q.signing import SignedPackage
    from django_q.worker import worker

    broker = get_broker(cluster)
    if not broker.queue_size():  # dequeue would wait for a task (a poll, or Redis's BLPOP)
        return None
    pulled = broker.dequeue()
    if not pulled:
        return None
    ack_id, payload = pulled[0]
    task = SignedPackage.loads(payload)
    task.update(cluster=cluster, ack_id=ack_id)  # what the cluster's pusher adds
    task_queue, result_queue = Queue(), Queue()
    task_queue.put(task)
    task_queue.put("STOP")
    worker(task_queue, result_queue, Value("f", -1))
    finished: dict[str, Any] = result_queue.get()  # the task with its result and success
    result_queue.put(dict(finished))
    result_queue.put("STOP")
    monitor(result_queue, broker)  # saves django-q2's Task row and acknowledges the task
    for queue in (task_queue, result_queue):
        queue.close()
        queue.join_thread()
    return finished


def drain(cluster: str, *, limit: int = 500) -> list[dict[str, Any]]:
    """Run ``cluster``'s tasks until its queue is empty (tasks may queue more); return them in order."""
    done: list[dict[str, Any]] = []
    while (task := work_one(cluster)) is not None:
        done.append(task)
        assert len(done) <= limit, "the queue never emptied"
    return done


def tracked_func(task: dict[str, Any]) -> str:
    """Return the function a `run_tracked` task runs (its second argument)."""
    return str(task["args"][1])
