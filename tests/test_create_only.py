"""Create means create: concurrent creates of one memory path, on real threads and real Postgres.

One create wins (201, or the MCP tool's answer); every other is a 409 conflict naming the
revision that won, and nothing it sent replaces the winner's text (docs/design.md, REST API).
"""

from __future__ import annotations

import pytest

from memory_app.models import MemoryDocument, MemoryRevision
from tests import factories
from tests.api_support import API
from tests.conftest import ALL_SCOPES, bearer_client
from tests.mcp_client import call_tool, mcp_url, tool_error, tool_json
from tests.test_api_concurrency import run_in_threads

WRITERS = 8
MEMORY = f"{API}/assistants/helper/memory/"


def the_only_revision(world) -> MemoryRevision:
    document = MemoryDocument.objects.get(assistant=world.assistant, path="memory/plan.md")
    revisions = list(MemoryRevision.objects.filter(document=document))
    assert len(revisions) == 1, [r.content for r in revisions]
    assert revisions[0].content == document.content
    return revisions[0]


@pytest.mark.django_db(transaction=True)
def test_concurrent_rest_creates_of_one_path_give_one_201_and_conflicts(world):
    _, secret = factories.make_api_key(world.acme, ALL_SCOPES)

    def create(index: int) -> tuple[int, dict]:
        body = {"path": "memory/plan.md", "content": f"plan by writer {index}"}
        response = bearer_client(secret).post(MEMORY, body, format="json")
        return response.status_code, response.json()

    answers = run_in_threads(WRITERS, create)

    assert sorted(status for status, _ in answers) == [201] + [409] * (WRITERS - 1)
    revision = the_only_revision(world)
    winner = next(body for status, body in answers if status == 201)
    assert winner["revision"] == revision.pk
    for status, body in answers:
        if status == 409:
            assert body["error"]["code"] == "document_exists"
            assert body["error"]["details"]["current_revision"] == revision.pk


@pytest.mark.django_db(transaction=True)
def test_concurrent_rest_puts_that_must_create_give_one_201_and_conflicts(world):
    _, secret = factories.make_api_key(world.acme, ALL_SCOPES)

    def create(index: int) -> tuple[int, dict]:
        body = {"content": f"plan by writer {index}", "expected_hash": ""}
        response = bearer_client(secret).put(MEMORY + "memory/plan.md", body, format="json")
        return response.status_code, response.json()

    answers = run_in_threads(WRITERS, create)

    assert sorted(status for status, _ in answers) == [201] + [409] * (WRITERS - 1)
    revision = the_only_revision(world)
    for status, body in answers:
        if status == 409:
            assert body["error"]["code"] == "stale_write"
            assert body["error"]["details"]["current_revision"] == revision.pk


def test_concurrent_mcp_replaces_without_a_base_revision_create_once(asgi_live_server, world, acme_secret):
    def create(index: int) -> object:
        arguments = {"mode": "replace", "path": "memory/plan.md", "content": f"plan by agent {index}"}
        return call_tool(mcp_url(asgi_live_server.url), acme_secret, "memory_write", arguments)

    results = run_in_threads(WRITERS, create)

    revision = the_only_revision(world)
    won = [tool_json(result) for result in results if not result.is_error]
    lost = [tool_error(result) for result in results if result.is_error]
    assert len(won) == 1 and won[0]["revision"] == revision.pk
    assert len(lost) == WRITERS - 1
    assert all(error["code"] == "stale_write" for error in lost)
    assert all(error["details"]["current_revision"] == revision.pk for error in lost)


def test_an_mcp_replace_without_a_base_revision_never_replaces_a_document(
    asgi_live_server, world, acme_secret
):
    document = factories.make_document(world.assistant, "memory/plan.md", "the first plan")
    revision = MemoryRevision.objects.get(document=document)
    arguments = {"mode": "replace", "path": "memory/plan.md", "content": "a blind overwrite"}

    error = tool_error(call_tool(mcp_url(asgi_live_server.url), acme_secret, "memory_write", arguments))

    assert error["code"] == "stale_write"
    assert error["details"]["current_revision"] == revision.pk
    document.refresh_from_db()
    assert document.content == "the first plan"
