"""The web process's connection pool (settings.DB_POOL_SIZE): connections go back after every use.

The pool is switched on for the test database's settings here, as `runall` does for the web
server; a connection that never went back would leave the small pool empty and the next request
waiting for its timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import pytest
from django.db import connection

from openclaw_site.platform.locks import session_lock
from tests import messages as m
from tests.db_support import connection_pool, other_connection

POOL_SIZE = 3


@pytest.fixture
def pool(transactional_db: None) -> Iterator[Any]:
    with connection_pool(POOL_SIZE) as lent:
        yield lent


def lock_is_free(name: str) -> bool:
    with other_connection() as other:
        row = other.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [name]).fetchone()
        return bool(row[0])  # the lock dies with `other`


def test_a_lock_connection_goes_back_to_the_pool_unlocked(pool):
    for _ in range(POOL_SIZE * 3):
        with session_lock("turn:42"):
            assert not lock_is_free("turn:42")
        assert lock_is_free("turn:42")

    stats = pool.get_stats()
    assert stats["pool_size"] <= POOL_SIZE
    assert stats.get("requests_errors", 0) == 0


def test_every_request_gives_its_connections_back(pool, asgi_live_server, world, acme_secret):
    url = f"{asgi_live_server.url}/api/v1/assistants/helper/sessions/"
    headers = {"Authorization": f"Bearer {acme_secret}"}
    session = httpx2.post(url, json={"key": "pooled"}, headers=headers, timeout=10).json()
    messages_url = f"{asgi_live_server.url}/api/v1/sessions/{session['id']}/messages/"

    def post(n: int) -> int:
        body = {"messages": [m.user(f"message {n}")]}
        keyed = {**headers, "Idempotency-Key": f"k-{n}"}  # an idempotent request also takes a lock
        return httpx2.post(messages_url, json=body, headers=keyed, timeout=30).status_code

    with ThreadPoolExecutor(max_workers=POOL_SIZE * 2) as clients:
        statuses = list(clients.map(post, range(POOL_SIZE * 10)))

    assert statuses == [201] * (POOL_SIZE * 10)
    stats = pool.get_stats()
    assert stats["pool_size"] <= POOL_SIZE and stats.get("requests_errors", 0) == 0


def test_a_request_that_finds_no_free_connection_says_so(pool, asgi_live_server, world, acme_secret):
    connection.close()  # this thread's, lent to the fixtures
    held = [pool.getconn() for _ in range(POOL_SIZE)]
    try:
        response = httpx2.get(
            f"{asgi_live_server.url}/api/v1/assistants/",
            headers={"Authorization": f"Bearer {acme_secret}"},
            timeout=30,
        )
    finally:
        for lent in held:
            pool.putconn(lent)

    assert response.status_code == 503 and response.headers["Retry-After"] == "10"
    error = response.json()["error"]
    assert error["code"] == "database_unavailable"
    assert "Every database connection of this server process is in use" in error["message"]


def database_settings(**env: str) -> dict[str, Any]:
    script = (
        "import django, json; django.setup(); from django.conf import settings; "
        "d = settings.DATABASES['default']; "
        "print(json.dumps({k: d[k] for k in ('CONN_MAX_AGE', 'CONN_HEALTH_CHECKS', 'OPTIONS')}))"
    )
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **env}
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

    return json.loads(done.stdout.strip().splitlines()[-1])


def test_db_pool_size_switches_persistent_connections_for_a_pool():
    kept = database_settings(DB_POOL_SIZE="0", DB_CONN_MAX_AGE="60")
    pooled = database_settings(DB_POOL_SIZE="7", DB_POOL_TIMEOUT="2.5")

    assert {**kept, "OPTIONS": {}} == {"CONN_MAX_AGE": 60, "CONN_HEALTH_CHECKS": True, "OPTIONS": {}}
    assert "pool" not in kept["OPTIONS"]
    assert pooled["CONN_MAX_AGE"] == 0
    assert pooled["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 7, "timeout": 2.5}


def hnsw_settings() -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')")
        return cursor.fetchone()


def test_every_lent_connection_starts_with_the_hnsw_search_options(pool, settings):
    # They come with the connection's start-up, not from a query each time the pool lends it.
    for _ in range(POOL_SIZE * 2):
        assert hnsw_settings() == (str(settings.MEMORY_HNSW_EF_SEARCH), "relaxed_order")
        connection.close()  # back to the pool
