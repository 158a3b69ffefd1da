"""Rate limits: sign-in locks per username and per address (django-axes); API keys per key (429)."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from tests import factories
from tests.api_support import API, assert_error
from tests.conftest import ALL_SCOPES, bearer_client

pytestmark = pytest.mark.django_db

PASSWORD = "pw-secret-123"  # tests/factories.py gives every persona this password


def sign_in(username: str, password: str, *, address: str = "10.0.0.1"):
    return Client().post(
        "/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=address
    )


def fail(username: str, times: int, *, address: str = "10.0.0.1") -> None:
    for _ in range(times):
        assert sign_in(username, "wrong", address=address).status_code == 200


def test_a_username_is_locked_after_the_failure_limit_from_any_address(world, settings):
    fail("alice", settings.AXES_FAILURE_LIMIT - 1, address="10.0.0.1")
    response = sign_in("alice", "wrong", address="10.0.0.2")
    assert response.status_code == 429
    # Even the right password, from a third address, waits for the pause to end.
    locked = sign_in("alice", PASSWORD, address="10.0.0.3")
    assert locked.status_code == 429 and locked["Retry-After"] == str(settings.LOGIN_COOLOFF_MINUTES * 60)
    text = locked.content.decode()
    assert "Too many sign-in attempts" in text and f"{settings.LOGIN_COOLOFF_MINUTES} minutes" in text
    # Another user is not affected.
    assert sign_in("bob", PASSWORD, address="10.0.0.4").status_code == 302


def test_an_address_is_locked_for_every_username(world, settings):
    for index in range(settings.AXES_FAILURE_LIMIT):
        sign_in(f"nobody{index}", "wrong", address="10.9.9.9")
    assert sign_in("bob", PASSWORD, address="10.9.9.9").status_code == 429
    assert sign_in("bob", PASSWORD, address="10.9.9.8").status_code == 302


def test_a_success_clears_the_failures(world, settings):
    fail("vera", settings.AXES_FAILURE_LIMIT - 1)
    assert sign_in("vera", PASSWORD).status_code == 302
    fail("vera", settings.AXES_FAILURE_LIMIT - 1)
    assert sign_in("vera", PASSWORD).status_code == 302


def test_behind_a_trusted_proxy_the_forwarded_address_counts(world, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post(
            "/accounts/login/",
            {"username": "ghost", "password": "x"},
            REMOTE_ADDR="127.0.0.1",
            HTTP_X_FORWARDED_FOR="spoofed, 203.0.113.7",
        )
    assert sign_in("bob", PASSWORD, address="127.0.0.1").status_code == 302  # the proxy itself is not locked


def test_an_api_key_over_its_rate_is_a_429_with_retry_after(world, settings):
    cache.clear()
    settings.API_KEY_RATE_PER_MINUTE = 3
    _, secret = factories.make_api_key(world.acme, ALL_SCOPES)
    _, other_secret = factories.make_api_key(world.acme, ALL_SCOPES)
    api, other = bearer_client(secret), bearer_client(other_secret)
    for _ in range(3):
        assert api.get(f"{API}/assistants/").status_code == 200
    response = api.get(f"{API}/assistants/")
    error = assert_error(response, 429, "rate_limited")
    assert 1 <= int(response["Retry-After"]) <= 60 and "this API key" in error["message"]
    assert other.get(f"{API}/assistants/").status_code == 200  # per key


def test_browser_sessions_are_not_rate_limited_per_key(world, settings):
    cache.clear()
    settings.API_KEY_RATE_PER_MINUTE = 1
    client = Client()
    client.force_login(world.alice)
    assert all(client.get(f"{API}/assistants/").status_code == 200 for _ in range(3))
