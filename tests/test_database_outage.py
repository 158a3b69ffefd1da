"""A database outage answers 503 `database_unavailable` with Retry-After, never a generic 500."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.test import Client

from tests.api_support import API, assert_error


@pytest.fixture
def database_down(transactional_db) -> Iterator[None]:
    """Point the connection at a socket directory where no server listens, as if Postgres stopped."""
    original = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="/nonexistent-postgres-socket", PORT="5432")
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(original)


@pytest.fixture
def key_secret(world) -> str:
    from tests import factories
    from tests.conftest import ALL_SCOPES

    return factories.make_api_key(world.acme, ALL_SCOPES)[1]


def test_the_api_answers_503_with_retry_after(key_secret, database_down):
    from tests.conftest import bearer_client

    api = bearer_client(key_secret)
    for response in (
        api.get(f"{API}/assistants/"),
        api.post(f"{API}/assistants/", {"slug": "x", "name": "x"}, format="json"),
    ):
        error = assert_error(response, 503, "database_unavailable")
        assert response["Retry-After"] == "10" and "nothing was changed" in error["message"]


@pytest.fixture
def signed_in(world) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(world.alice)
    return client


def test_the_dashboard_answers_503_with_retry_after(signed_in, database_down):
    response = signed_in.get("/")
    assert response.status_code == 503 and response["Retry-After"] == "10"
    assert b"database is unavailable" in response.content
