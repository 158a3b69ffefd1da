"""Concurrent requests on real threads, each with its own database connection."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction

from sessions_app.models import CompactionRun, Message
from sessions_app.transcript import lock_session
from tests import factories
from tests.api_support import API
from tests.conftest import ALL_SCOPES, bearer_client
from tests.db_support import other_connection

THREADS = 6
POSTS_PER_THREAD = 5


def run_in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Start ``count`` threads together (a barrier) and return their results in thread order."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def target(index: int) -> None:
        try:
            barrier.wait()
            results[index] = work(index)
        except BaseException as error:  # surfaced below: a thread's failure must fail the test
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return results


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_keep_seq_gap_free_and_unique(world):
    session = factories.make_session(world.assistant, "busy")
    _, secret = factories.make_api_key(world.acme, ALL_SCOPES)

    def work(index: int) -> list[int]:
        client = bearer_client(secret)
        seqs = []
        for n in range(POSTS_PER_THREAD):
            body = {
                "messages": [
                    {"role": "user", "content": f"t{index} m{n} a"},
                    {"role": "assistant", "content": f"t{index} m{n} b"},
                ]
            }
            response = client.post(f"{API}/sessions/{session.pk}/messages/", body, format="json")
            assert response.status_code == 201, response.content
            pair = [m["seq"] for m in response.json()["messages"]]
            assert pair[1] == pair[0] + 1  # a batch is contiguous
            seqs += pair
        return seqs

    results = run_in_threads(THREADS, work)
    total = THREADS * POSTS_PER_THREAD * 2
    returned = sorted(seq for seqs in results for seq in seqs)
    assert returned == list(range(1, total + 1))
    rows = list(Message.objects.filter(session=session).order_by("seq").values_list("seq", "entry_id"))
    assert [seq for seq, _ in rows] == list(range(1, total + 1))
    assert len({entry_id for _, entry_id in rows}) == total
    session.refresh_from_db()
    assert session.last_seq == total


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_with_one_idempotency_key_append_once(world):
    session = factories.make_session(world.assistant, "retry")
    _, secret = factories.make_api_key(world.acme, ALL_SCOPES)
    body = {"messages": [{"role": "user", "content": "exactly once"}, {"role": "assistant", "content": "ok"}]}

    def work(index: int) -> tuple[int, Any]:
        response = bearer_client(secret).post(
            f"{API}/sessions/{session.pk}/messages/", body, format="json", HTTP_IDEMPOTENCY_KEY="same-key"
        )
        return response.status_code, response.json()

    results = run_in_threads(THREADS, work)
    assert {status for status, _ in results} == {201}
    assert all(payload == results[0][1] for _, payload in results)
    assert list(Message.objects.filter(session=session).values_list("seq", flat=True).order_by("seq")) == [
        1,
        2,
    ]


@pytest.mark.django_db(transaction=True)
def test_a_compaction_run_can_be_recorded_while_an_append_holds_the_session(world):
    """The append's row lock is FOR NO KEY UPDATE: another transaction's foreign-key check passes it."""
    session = factories.make_session(world.assistant, "busy")
    with transaction.atomic():
        lock_session(session.pk)  # an append in progress
        with other_connection() as compaction:
            compaction.execute("SET lock_timeout = '5s'")  # a wait for the append would fail, not hang
            compaction.execute(
                f"INSERT INTO {CompactionRun._meta.db_table} (session_id, trigger, state, reason, instructions,"
                " flush_outcome, flush_details, offline, created_at, updated_at)"
                " VALUES (%s, 'threshold', 'pending', '', '', '', '{}', false, now(), now())",
                [session.pk],
            )
    assert CompactionRun.objects.filter(session=session).count() == 1
