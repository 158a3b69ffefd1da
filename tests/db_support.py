"""A second connection to the test database, as another process's transaction would use."""

from __future__ import annotations

import psycopg
from django.db import connection


def other_connection() -> psycopg.Connection:
    """Open a connection of its own to the test database, in autocommit (close it with ``with``)."""
    params = {k: v for k, v in connection.get_connection_params().items() if k != "context"}
    return psycopg.connect(**params, autocommit=True)
