"""Postgres advisory locks by name: one helper for every lock that must hold across processes.

Names are hashed to 64-bit lock ids with ``hashtextextended``; a collision only makes two
unrelated holders wait for each other. Used by idempotent requests, the export mirror, the
assistant turn (one turn at a time per session) and a transcript's index run and vector helper.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection


class LockTimeout(Exception):
    """The lock was not free within the time allowed."""


def xact_lock(name: str, *, shared: bool = False) -> None:
    """Take a lock that is released when the current transaction ends.

    ``shared`` holders do not wait for each other, only for (and block) an exclusive holder.
    """
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(hashtextextended(%s, 0))", [name])


@contextmanager
def session_lock(
    name: str, *, timeout_seconds: float | None = None, poll_seconds: float = 0.1
) -> Iterator[None]:
    """Hold a lock across transactions; raise LockTimeout after ``timeout_seconds``.

    The lock lives on a connection of its own (`lock_connection`).
    """
    with lock_connection() as holder:
        _wait_for_lock(holder, name, timeout_seconds=timeout_seconds, poll_seconds=poll_seconds)
        yield


@contextmanager
def lock_connection() -> Iterator[Any]:
    """Lend a connection of its own (psycopg, autocommit) for session-level locks; release them all
    and give it back when the block ends.

    Not Django's connection: Django may give that one back in the middle of the work (django-q2
    closes old connections around the tasks its worker runs inline, and its own ORM broker as it
    queues one, which ours no longer does: docs/design.md, Background work; under the pool that
    hands the connection, a lock held and all, to the next request). A
    connection of its own comes from the pool when there is one (settings.DB_POOL_SIZE). If the
    process dies, Postgres ends that connection and its locks with it.
    """
    holder = connection.get_new_connection(connection.get_connection_params())
    holder.autocommit = True
    try:
        yield holder
    finally:
        _release(holder)


def held(name: str) -> bool:
    """Tell whether any session of this database holds the lock ``name`` (any process or host).

    Reads ``pg_locks`` and takes nothing, so it never stands in a holder's way. A lock on a 64-bit
    key shows there as ``classid`` (its high 32 bits) and ``objid`` (its low 32 bits), with
    ``objsubid`` 1; the shift wraps as the key's sign does.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(%s, 0))",
            [name],
        )
        return bool(cursor.fetchone()[0])


def _release(holder: Any) -> None:
    """End the lock connection's advisory locks, then close it or hand it back to the pool.

    A pooled connection (settings.DB_POOL_SIZE) came from the pool and must go back to it, or the
    pool counts it as lent for good; its session outlives this use, so its locks are released
    first. One that cannot be unlocked is closed before it goes back, and the pool drops it.
    """
    pool = getattr(connection, "pool", None)  # PostgreSQL's wrapper has one (None when not pooling)
    try:
        # Closing the session would release its locks too, but only once the server has seen the
        # connection end, a moment later: another process could still find the lock taken.
        holder.execute("SELECT pg_advisory_unlock_all()")
    except psycopg.Error:
        holder.close()
    if pool is None:
        holder.close()
    else:
        pool.putconn(holder)


def _wait_for_lock(holder: Any, name: str, *, timeout_seconds: float | None, poll_seconds: float) -> None:
    deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
    while True:
        row = holder.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [name]).fetchone()
        if row[0]:
            return
        if deadline is not None and time.monotonic() >= deadline:
            raise LockTimeout(name)
        time.sleep(poll_seconds)
