"""Assistants over the API: creation with validated settings, PATCH merges, deletes."""

from __future__ import annotations

import pytest

from openclaw_site.models import Assistant
from openclaw_site.teams.assistant_settings import default_settings
from sessions_app.models import Session
from tests import factories
from tests.api_support import API, assert_error, snapshot

pytestmark = pytest.mark.django_db


def test_create_fills_settings_defaults(api, world):
    body = {
        "slug": "writer",
        "name": "Writer",
        "context_window": 128000,
        "timezone": "Europe/Berlin",
        "settings": {"compaction": {"reserveTokens": 30000, "memoryFlush": {"softThresholdTokens": 6000}}},
    }
    response = api.post(f"{API}/assistants/", body, format="json")
    assert response.status_code == 201
    settings = response.json()["settings"]
    expected = default_settings()
    expected["compaction"]["reserveTokens"] = 30000
    expected["compaction"]["memoryFlush"]["softThresholdTokens"] = 6000
    assert settings == expected
    stored = Assistant.objects.get(team=world.acme, slug="writer")
    assert (
        stored.settings == expected and stored.context_window == 128000 and stored.timezone == "Europe/Berlin"
    )


def test_get_and_list_show_full_settings(api, world):
    detail = api.get(f"{API}/assistants/helper/").json()
    assert detail["settings"] == default_settings() and detail["team"] == "acme"
    assert [a["slug"] for a in api.get(f"{API}/assistants/").json()["assistants"]] == ["helper"]


@pytest.mark.parametrize(
    "settings, path",
    [
        ({"compaction": {"bogus": 1}}, "settings.compaction.bogus"),
        ({"compaction": {"reserveTokens": "many"}}, "settings.compaction.reserveTokens"),
        ({"compaction": {"reserveTokens": True}}, "settings.compaction.reserveTokens"),
        ({"compaction": {"memoryFlush": {"enabled": "yes"}}}, "settings.compaction.memoryFlush.enabled"),
        ({"memorySearch": {"query": {"minScore": 1.5}}}, "settings.memorySearch.query.minScore"),
        ({"memorySearch": {"sources": ["memory", "web"]}}, "settings.memorySearch.sources[1]"),
        (
            {"memorySearch": {"chunking": {"tokens": 100, "overlap": 100}}},
            "settings.memorySearch.chunking.overlap",
        ),
        ({"contextPruning": {"mode": "sometimes"}}, "settings.contextPruning.mode"),
        ({"contextPruning": []}, "settings.contextPruning"),
        ([], "settings"),
    ],
)
def test_bad_settings_are_rejected_with_their_path(api, settings, path):
    before = snapshot()
    error = assert_error(
        api.post(f"{API}/assistants/", {"slug": "x", "name": "X", "settings": settings}, format="json"),
        400,
        "invalid_settings",
    )
    assert error["details"]["path"] == path and path in error["message"]
    assert snapshot() == before
    error = assert_error(
        api.patch(f"{API}/assistants/helper/", {"settings": settings}, format="json"), 400, "invalid_settings"
    )
    assert error["details"]["path"] == path
    assert snapshot() == before


def test_patch_merges_settings_onto_the_current_ones(api, world):
    api.patch(
        f"{API}/assistants/helper/", {"settings": {"compaction": {"reserveTokens": 30000}}}, format="json"
    )
    response = api.patch(
        f"{API}/assistants/helper/",
        {"name": "Helper 2", "settings": {"compaction": {"memoryFlush": {"enabled": False}}}},
        format="json",
    )
    assert response.status_code == 200
    settings = Assistant.objects.get(pk=world.assistant.pk).settings
    assert settings["compaction"]["reserveTokens"] == 30000
    assert settings["compaction"]["memoryFlush"]["enabled"] is False
    assert settings["compaction"]["keepRecentTokens"] == 20000
    assert response.json()["name"] == "Helper 2"


def test_patch_fills_defaults_missing_from_an_old_settings_document(api, world):
    Assistant.objects.filter(pk=world.assistant.pk).update(settings={"compaction": {"reserveTokens": 1}})
    api.patch(f"{API}/assistants/helper/", {"settings": {"contextPruning": {"mode": "off"}}}, format="json")
    settings = Assistant.objects.get(pk=world.assistant.pk).settings
    expected = default_settings()
    expected["compaction"]["reserveTokens"] = 1
    expected["contextPruning"]["mode"] = "off"
    assert settings == expected


@pytest.mark.parametrize(
    "body, field",
    [
        ({"slug": "Bad Slug!", "name": "x"}, "slug"),
        ({"slug": "ok"}, "name"),
        ({"slug": "ok", "name": "x", "context_window": 1000}, "context_window"),
        ({"slug": "ok", "name": "x", "timezone": "Mars/Olympus"}, "timezone"),
        ({"slug": "ok", "name": "x", "workspace_access": "root"}, "workspace_access"),
        ({"slug": "ok", "name": "x", "team": "globex"}, "team"),
        ({"slug": "ok", "name": 7}, "name"),
    ],
)
def test_invalid_assistant_fields_are_a_400(api, body, field):
    before = snapshot()
    error = assert_error(api.post(f"{API}/assistants/", body, format="json"), 400, "validation_error")
    assert error["details"]["field"] == field
    assert snapshot() == before


def test_a_taken_slug_is_a_409_but_other_teams_may_use_it(api, other_api):
    assert_error(
        api.post(f"{API}/assistants/", {"slug": "helper", "name": "Again"}, format="json"),
        409,
        "assistant_exists",
    )
    assert (
        other_api.post(f"{API}/assistants/", {"slug": "helper", "name": "Theirs"}, format="json").status_code
        == 201
    )


def test_the_slug_cannot_be_patched(api, world):
    assert_error(
        api.patch(f"{API}/assistants/helper/", {"slug": "renamed"}, format="json"), 400, "validation_error"
    )
    assert Assistant.objects.filter(pk=world.assistant.pk, slug="helper").exists()


def test_delete_removes_the_assistant_and_its_sessions(api, world):
    factories.make_session(world.assistant)
    assert api.delete(f"{API}/assistants/helper/").status_code == 204
    assert not Assistant.objects.filter(pk=world.assistant.pk).exists()
    assert not Session.objects.filter(assistant_id=world.assistant.pk).exists()
    assert Assistant.objects.filter(pk=world.other_assistant.pk).exists()
    assert_error(api.get(f"{API}/assistants/helper/"), 404, "not_found")


@pytest.mark.parametrize(
    "body, path",
    [
        ({"settings": {"compaction": {"reserveTokens": 10**30}}}, "settings.compaction.reserveTokens"),
        ({"context_window": 20000}, "settings.compaction.reserveTokensFloor"),
        ({"settings": {"compaction": {"keepRecentTokens": 199999}}}, "settings.compaction.keepRecentTokens"),
    ],
)
def test_token_settings_that_leave_no_room_in_the_window_are_refused(api, world, body, path):
    before = snapshot()
    error = assert_error(api.patch(f"{API}/assistants/helper/", body, format="json"), 400, "invalid_settings")
    assert error["details"]["path"] == path
    assert snapshot() == before


def test_a_new_assistant_with_a_small_window_needs_a_small_reserve(api, world):
    body = {"slug": "tiny", "name": "Tiny", "context_window": 16000}
    assert_error(api.post(f"{API}/assistants/", body, format="json"), 400, "invalid_settings")
    small = {"compaction": {"reserveTokens": 2000, "reserveTokensFloor": 2000, "keepRecentTokens": 4000}}
    response = api.post(f"{API}/assistants/", {**body, "settings": small}, format="json")
    assert response.status_code == 201
