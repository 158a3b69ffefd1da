"""Queueing a task keeps the request on its own database session (docs/design.md, Background work).

Served as `runall` serves (ASGI, connections lent by a psycopg pool with several ready, CONN_MAX_AGE
0) with tasks going through django-q2's ORM broker. django-q2's ORM broker closes old connections
before each use, which under the pool handed the request's connection back in the middle of the
request: what the request kept on its session (a `SET`, a session advisory lock) was gone, and its
later statements ran on whichever connection the pool lent next. The views below queue a task each
way `openclaw_site.jobs.tasks.send` does, and say which session they ran on before and after.

This module is also the URLconf of its served test (`pytest.mark.urls`).
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse
from django.urls import path
from django_q.brokers import get_broker

from config.urls import urlpatterns as real_urlpatterns
from openclaw_site.jobs.tasks import TaskOwner, TaskQueue, coalesced, enqueue, enqueue_coalesced
from tests.db_support import connection_pool

DEFAULT = TaskQueue.DEFAULT.cluster
NOOP = "tests.test_task_connection.noop"


def noop() -> None:
    """The task the views queue (nothing runs it here)."""


def session_state() -> dict[str, Any]:
    """Which database session this thread is on, and the mark `mark_session` set on it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid(), current_setting('openclaw.test_mark', true)")
        pid, mark = cursor.fetchone()
    return {"pid": pid, "mark": mark}


def mark_session(mark: str) -> None:
    """Keep ``mark`` on this session (a session-level `SET`, as state a request may keep)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('openclaw.test_mark', %s, false)", [mark])


def queue_a_task(request: HttpRequest, way: str) -> JsonResponse:
    """Mark the session, queue a task ``way``, then report the session before and after."""
    mark_session(way)
    before = session_state()
    owner = TaskOwner(team_id=int(request.GET["team"]))
    if way == "tracked":  # written now, sent once the (autocommit) statement has committed
        enqueue(NOOP, owner=owner)
    elif way == "in-a-transaction":  # sent as the transaction commits
        with transaction.atomic():
            enqueue(NOOP, owner=owner)
    elif way == "held-back":  # folded after the commit, sent held back (`_HeldBackORM`)
        enqueue_coalesced(coalesced(NOOP, owner=owner, coalesce_key=f"noop:{way}", delay_seconds=60))
    else:
        raise ValueError(way)
    return JsonResponse({"before": before, "after": session_state()})


urlpatterns = [path("test/queue-a-task/<str:way>/", queue_a_task), *real_urlpatterns]

WAYS = ["tracked", "in-a-transaction", "held-back"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.urls("tests.test_task_connection")
@pytest.mark.parametrize("task_broker", ["orm"], indirect=True)
def test_a_request_that_queues_a_task_stays_on_its_own_database_session(world, task_broker, asgi_live_server):
    with connection_pool(4, min_size=3):
        seen = {
            way: httpx2.get(
                f"{asgi_live_server.url}/test/queue-a-task/{way}/", params={"team": world.acme.pk}, timeout=30
            ).json()
            for way in WAYS
        }
    assert all(sessions["before"]["mark"] == way for way, sessions in seen.items()), seen
    stayed = {way: sessions["after"] == sessions["before"] for way, sessions in seen.items()}
    assert stayed == dict.fromkeys(WAYS, True), seen
    broker = get_broker(DEFAULT)  # each was queued, the held-back one not due yet
    assert (broker.queue_size(), broker.lock_size()) == (2, 1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("task_broker", ["orm"], indirect=True)
def test_a_cluster_still_gives_back_a_stale_connection_before_it_polls_the_queue(task_broker):
    # A worker's pusher polls the queue for ever: django-q2's broker closes a connection past its
    # age (CONN_MAX_AGE; 0 under the pool) or broken before each poll, which must go on.
    with connection_pool(4, min_size=3):
        broker = get_broker(DEFAULT)
        before = session_state()["pid"]
        broker.dequeue()
        assert session_state()["pid"] != before
