"""Advisory locks by name (openclaw_site.platform.locks): who holds one, seen from another connection."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from openclaw_site.platform.locks import held, session_lock
from tests.db_support import other_connection

pytestmark = pytest.mark.django_db(transaction=True)


def _key(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT hashtextextended(%s, 0)", [name])
        return int(cursor.fetchone()[0])


def test_a_lock_is_seen_held_while_its_holder_has_it_and_not_after() -> None:
    # Keys of both signs: pg_locks shows a key as two unsigned halves.
    names = [f"locks-test-probe:{i}" for i in range(40)]
    assert {_key(name) < 0 for name in names} == {True, False}
    for name in names[:8] + [n for n in names if _key(n) < 0][:4]:
        assert not held(name)
        with session_lock(name, timeout_seconds=0):
            assert held(name)
            assert not held(name + "-other")
        assert not held(name)


def test_a_lock_goes_with_the_connection_that_held_it() -> None:
    """A worker that dies ends its connection: Postgres lets go of its locks at once."""
    holder = other_connection()
    holder.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", ["locks-test-probe:dead"])
    assert held("locks-test-probe:dead")

    holder.close()

    # The server ends the session once it sees the connection gone, a moment later.
    deadline = time.monotonic() + 10
    while held("locks-test-probe:dead") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not held("locks-test-probe:dead")
