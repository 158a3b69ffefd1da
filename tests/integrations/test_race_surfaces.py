"""A race the database ends answers 409 `conflict_retry` on MCP and `/v1` too (docs/design.md,
Limits and refusals), in each protocol's own error shape, and changes nothing.

A real deadlock on real Postgres: another transaction holds the assistant's row and then creates
the very session the request is creating, so each waits for the other and PostgreSQL ends the
request's transaction (SQLSTATE 40P01), as it would for two agents writing at one moment.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
import pytest
from django.db import connection, transaction

from openclaw_site.models import Assistant
from sessions_app.models import Session
from tests import messages as m
from tests.fake_openai import text_reply
from tests.mcp_client import call_tool, mcp_url, tool_error, tool_json
from tests.test_race_conflicts import WAIT_SECONDS, in_thread, wait_until_waiting_on_a_lock

KEY = "raced"


@contextmanager
def deadlocked_session_create(assistant: Assistant, key: str) -> Iterator[None]:
    """Deadlock the request the block starts, which creates session ``key`` of ``assistant``.

    The other transaction locks the assistant's row, so the request's new session waits for it
    (the foreign key); then it creates the same session, so it waits for the request's unique
    key. Its own deadlock check waits longer than the request's, so the request is the victim.
    The other transaction rolls back once the block has checked the answer.
    """
    holding, release = threading.Event(), threading.Event()

    def other_transaction() -> None:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL deadlock_timeout = '10min'")
            Assistant.objects.select_for_update().get(pk=assistant.pk)
            holding.set()
            wait_until_waiting_on_a_lock()  # the request's insert waits for the assistant's row
            Session.objects.create(assistant=assistant, key=key)  # waits for the request: a cycle
            release.wait(WAIT_SECONDS)
            transaction.set_rollback(True)

    thread, outcome = in_thread(other_transaction)
    assert holding.wait(WAIT_SECONDS)
    try:
        yield
    finally:
        release.set()
        thread.join(WAIT_SECONDS)
    assert outcome == [None], outcome


@pytest.mark.django_db(transaction=True)
def test_a_deadlocked_mcp_call_is_a_conflict_retry_tool_error_and_a_retry_works(
    asgi_live_server, world, acme_secret
):
    url = mcp_url(asgi_live_server.url)
    arguments = {"session_key": KEY, "messages": [m.user("hello")]}
    with deadlocked_session_create(world.assistant, KEY):
        error = tool_error(call_tool(url, acme_secret, "session_append", arguments))

    assert error["code"] == "conflict_retry"
    assert "nothing was changed" in error["message"] and "Send it again" in error["message"]
    assert error["details"] == {"retry_after": 1}
    assert not Session.objects.filter(key=KEY).exists()  # the refused call stored nothing
    again = tool_json(call_tool(url, acme_secret, "session_append", arguments))
    assert again["session"]["created"] is True and len(again["messages"]) == 1


@pytest.mark.django_db(transaction=True)
def test_a_deadlocked_v1_request_is_openais_409_conflict_and_a_retry_works(
    asgi_live_server, world, acme_secret, llm
):
    client = openai.OpenAI(base_url=f"{asgi_live_server.url}/v1", api_key=acme_secret, max_retries=0)
    request: dict[str, Any] = {
        "model": "helper",
        "messages": [{"role": "user", "content": "hello"}],
        "extra_headers": {"X-Session-Key": KEY},
    }
    with deadlocked_session_create(world.assistant, KEY), pytest.raises(openai.ConflictError) as raced:
        client.chat.completions.create(**request)

    assert raced.value.status_code == 409 and raced.value.code == "conflict_retry"
    assert "Send it again" in raced.value.message
    assert raced.value.response.headers["Retry-After"] == "1"
    assert raced.value.body["type"] == "conflict_error"  # type: ignore[index]
    assert not Session.objects.filter(key=KEY).exists()
    llm.queue(text_reply("Hello again"))
    completion = client.chat.completions.create(**request)
    assert completion.choices[0].message.content == "Hello again"
