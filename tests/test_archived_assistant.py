"""An archived assistant is read-only (docs/design.md, Limits and refusals): reads keep working,
every write or turn is refused with 409 `assistant_archived` and nothing is written; restoring it
makes it writable again. REST and the OpenAI-compatible /v1 both go through the same check.
"""

from __future__ import annotations

import pytest

from openclaw_site.teams import services
from tests import factories
from tests.api_support import API, assert_error, snapshot
from tests.fake_openai import text_reply
from tests.views_support import HX, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived(world):
    session = factories.make_session(world.assistant, "main")
    factories.add_messages(session, {"role": "user", "content": "the launch is on 2026-12-15"})
    factories.make_document(world.assistant, "MEMORY.md", "- launch 2026-12-15\n")
    services.assistant_archive(assistant=world.assistant, archived=True)
    return session


def assert_archived(response) -> None:
    error = assert_error(response, 409, "assistant_archived")
    assert "archived" in error["message"] and "Restore" in error["message"]
    assert error["details"] == {"assistant": "helper"}


WRITES = [
    ("post", "sessions/{session}/messages/", {"role": "user", "content": "more"}),
    ("post", "sessions/{session}/messages/", {"role": "user", "content": "answer me", "respond": True}),
    ("post", "sessions/{session}/compact/", {}),
    ("patch", "sessions/{session}/", {"title": "Renamed"}),
    ("delete", "sessions/{session}/", None),
    ("post", "assistants/helper/sessions/", {"key": "new-one"}),
    ("put", "assistants/helper/memory/MEMORY.md", {"content": "- overwritten\n"}),
    ("post", "assistants/helper/memory/", {"path": "memory/new.md", "content": "new\n"}),
    ("delete", "assistants/helper/memory/MEMORY.md", None),
    ("patch", "assistants/helper/", {"name": "Renamed"}),
    ("patch", "assistants/helper/", {"settings": {"memorySearch": {"query": {"maxResults": 3}}}}),
]


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_every_write_to_an_archived_assistant_is_refused_and_writes_nothing(
    api, archived, llm, method, path, body
):
    before = snapshot()
    response = getattr(api, method)(f"{API}/{path.format(session=archived.pk)}", body, format="json")
    assert_archived(response)
    assert snapshot() == before
    assert llm.chat_requests == []  # no turn ran


READS = [
    "sessions/{session}/",
    "sessions/{session}/messages/",
    "sessions/{session}/context/",
    "sessions/{session}/export.jsonl",
    "assistants/helper/memory/MEMORY.md",
    "assistants/helper/search/?q=launch",
]


@pytest.mark.parametrize("path", READS)
def test_reads_of_an_archived_assistant_keep_working(api, archived, path):
    response = api.get(f"{API}/{path.format(session=archived.pk)}")
    assert response.status_code == 200, response.content[:300]


def test_the_assistant_record_says_it_is_archived(api, archived, world):
    shown = api.get(f"{API}/assistants/helper/").json()
    listed = api.get(f"{API}/assistants/").json()["assistants"]

    assert shown["archived"] is True and shown["archived_at"] is not None
    assert [a["archived"] for a in listed if a["slug"] == "helper"] == [True]
    services.assistant_archive(assistant=world.assistant, archived=False)
    assert api.get(f"{API}/assistants/helper/").json()["archived"] is False


def test_restoring_makes_it_writable_again(api, archived, world):
    services.assistant_archive(assistant=world.assistant, archived=False)
    response = api.post(
        f"{API}/sessions/{archived.pk}/messages/", {"role": "user", "content": "more"}, format="json"
    )
    assert response.status_code == 201


def test_the_openai_compatible_endpoint_refuses_a_turn_of_an_archived_assistant(
    api, acme_secret, archived, llm
):
    llm.queue(text_reply("should not be asked"))
    before = snapshot()
    response = api.post(
        "/v1/chat/completions",
        {"model": "helper", "messages": [{"role": "user", "content": "hi"}]},
        format="json",
        HTTP_X_SESSION_KEY="main",
    )
    assert response.status_code == 409, response.content[:300]
    assert response.json()["error"]["code"] == "assistant_archived"
    assert snapshot() == before
    assert llm.chat_requests == []


@pytest.mark.parametrize("htmx", [False, True])
def test_the_dashboard_says_it_is_archived_and_refuses_its_writes_with_that_message(world, archived, htmx):
    client = signed_in(world.bob)
    page = client.get(f"/sessions/{archived.pk}/").content.decode()
    assert "Archived: read-only." in page
    assert 'id="composer"' not in page and "can be read, not continued" in page
    assert "Start a session" not in client.get(f"/assistants/{world.assistant.slug}/").content.decode()
    before = snapshot()
    headers = {**(HX if htmx else {}), "HTTP_REFERER": f"http://testserver/sessions/{archived.pk}/"}
    response = client.post(f"/sessions/{archived.pk}/rename/", {"title": "New"}, **headers)
    assert snapshot() == before
    if htmx:
        assert response["HX-Redirect"] == f"http://testserver/sessions/{archived.pk}/"
    else:
        assert response.status_code == 302 and response["Location"].endswith(f"/sessions/{archived.pk}/")
    shown = client.get(f"/sessions/{archived.pk}/").content.decode()
    assert "is archived, so it is read-only" in shown
