"""A second connection to the test database, as another process's transaction would use; and the
web process's connection pool (settings.DB_POOL_SIZE) switched on for the test database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection


def other_connection() -> psycopg.Connection:
    """Open a connection of its own to the test database, in autocommit (close it with ``with``)."""
    params = {k: v for k, v in connection.get_connection_params().items() if k != "context"}
    return psycopg.connect(**params, autocommit=True)


@contextmanager
def connection_pool(size: int, *, min_size: int = 0, timeout: float = 2) -> Iterator[Any]:
    """Lend the test database's connections from a psycopg pool of ``size``, as `runall` has the web
    server do (no connection kept past a request: CONN_MAX_AGE 0); yield the pool.

    With ``min_size`` the pool is opened with that many connections ready, as config/settings.py
    opens the web server's (two): a connection given back goes behind the idle ones.
    """
    settings_dict = connection.settings_dict
    saved = settings_dict["CONN_MAX_AGE"], dict(settings_dict["OPTIONS"])
    connection.close()
    settings_dict["CONN_MAX_AGE"] = 0
    settings_dict["OPTIONS"]["pool"] = {"min_size": min_size, "max_size": size, "timeout": timeout}
    try:
        if min_size:
            connection.pool.open(wait=True, timeout=30)
        yield connection.pool
    finally:
        connection.close()
        connection.close_pool()
        settings_dict["CONN_MAX_AGE"], settings_dict["OPTIONS"] = saved
