"""Sessions over the API: create, list, rename, delete, with their token figures."""

from __future__ import annotations

import pytest

from sessions_app.models import Message, Session
from tests import factories
from tests.api_support import API, assert_error, snapshot

pytestmark = pytest.mark.django_db


def test_create_with_and_without_a_key(api, world):
    named = api.post(
        f"{API}/assistants/helper/sessions/", {"key": "agent:main:main", "title": "Main"}, format="json"
    )
    assert named.status_code == 201
    body = named.json()
    assert (body["key"], body["title"], body["assistant"], body["last_seq"], body["message_count"]) == (
        "agent:main:main",
        "Main",
        "helper",
        0,
        0,
    )
    assert body["memory_flush_compaction_count"] is None and body["compaction_count"] == 0
    assert {"total_tokens", "total_tokens_fresh", "memory_flush_at", "session_uuid"} <= set(body)
    random = api.post(f"{API}/assistants/helper/sessions/", {}, format="json").json()
    assert random["key"] and random["key"] != "agent:main:main"
    assert Session.objects.filter(assistant=world.assistant).count() == 2


@pytest.mark.parametrize("key", ["a/b", "../x", ".hidden", "with space", "x" * 129, ""])
def test_bad_keys_are_a_400(api, key):
    before = snapshot()
    assert_error(
        api.post(f"{API}/assistants/helper/sessions/", {"key": key}, format="json"), 400, "validation_error"
    )
    assert snapshot() == before


def test_a_taken_key_is_a_409(api, world):
    factories.make_session(world.assistant, "main")
    assert_error(
        api.post(f"{API}/assistants/helper/sessions/", {"key": "main"}, format="json"), 409, "session_exists"
    )


def test_list_counts_messages_and_pages(api, world):
    first = factories.make_session(world.assistant, "a")
    factories.add_messages(first, {"role": "user", "content": "1"}, {"role": "assistant", "content": "2"})
    factories.make_session(world.assistant, "b")
    factories.make_session(world.other_assistant, "theirs")
    body = api.get(f"{API}/assistants/helper/sessions/").json()
    assert body["count"] == 2 and {s["key"]: s["message_count"] for s in body["sessions"]} == {"a": 2, "b": 0}
    page = api.get(f"{API}/assistants/helper/sessions/?limit=1").json()
    assert len(page["sessions"]) == 1 and page["next_offset"] == 1
    assert_error(api.get(f"{API}/assistants/helper/sessions/?limit=0"), 400, "invalid_parameter")


def test_detail_shows_token_figures(api, world):
    session = factories.make_session(
        world.assistant, "s", total_tokens=1234, compaction_count=2, memory_flush_compaction_count=1
    )
    factories.add_messages(session, {"role": "user", "content": "x"})
    body = api.get(f"{API}/sessions/{session.pk}/").json()
    assert (
        body["total_tokens"],
        body["compaction_count"],
        body["memory_flush_compaction_count"],
        body["last_seq"],
        body["message_count"],
    ) == (1234, 2, 1, 1, 1)


def test_patch_renames_and_rejects_other_fields(api, world):
    session = factories.make_session(world.assistant, "s")
    assert (
        api.patch(f"{API}/sessions/{session.pk}/", {"title": "Renamed"}, format="json").json()["title"]
        == "Renamed"
    )
    assert_error(
        api.patch(f"{API}/sessions/{session.pk}/", {"last_seq": 99}, format="json"), 400, "validation_error"
    )
    session.refresh_from_db()
    assert (session.title, session.last_seq) == ("Renamed", 0)


def test_delete_removes_the_transcript(api, world):
    session = factories.make_session(world.assistant, "s")
    factories.add_messages(session, {"role": "user", "content": "x"})
    assert api.delete(f"{API}/sessions/{session.pk}/").status_code == 204
    assert not Session.objects.filter(pk=session.pk).exists() and not Message.objects.exists()
    assert_error(api.get(f"{API}/sessions/{session.pk}/"), 404, "not_found")
    assert_error(api.get(f"{API}/sessions/999999/"), 404, "not_found")
