"""Dashboard pages of the site: sign-in, team switcher, assistants, settings, API keys, jobs."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from openclaw_site.errors import ApiError
from openclaw_site.guards.auth import TEAM_SESSION_KEY, authenticate_api_key
from openclaw_site.jobs.tasks import enqueue
from openclaw_site.models import ApiKey, Assistant, Membership, TaskRecord
from sessions_app.selectors import session_owner
from tests import factories
from tests.views_support import HX, is_full_page, signed_in

pytestmark = pytest.mark.django_db


# --- sign-in and teams -------------------------------------------------------------------------


def test_pages_need_sign_in(client, world):
    for url in ["/", "/keys/", "/jobs/", "/assistants/helper/", "/assistants/helper/settings/"]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")


def test_sign_in_with_password_lands_on_the_assistants(client, world):
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    assert b'<label for="id_username"' in page.content and b'<label for="id_password"' in page.content
    wrong = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert wrong.status_code == 200 and b"didn't match" in wrong.content
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "pw-secret-123"}, follow=True
    )
    assert response.redirect_chain[-1][0] == "/"
    assert b"Helper" in response.content


def test_sign_out_is_a_post(world):
    client = signed_in(world.alice)
    response = client.post("/accounts/logout/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    assert client.get("/").status_code == 302


def test_user_without_team_gets_a_clear_page(world):
    lonely = factories.make_user("lonely")
    response = signed_in(lonely).get("/")
    assert response.status_code == 403
    assert b"not in a team yet" in response.content


def test_home_lists_only_the_teams_assistants_with_counts(world):
    session = factories.make_session(world.assistant)
    factories.add_messages(session, {"role": "user", "content": "hi"})
    factories.make_document(world.assistant, "MEMORY.md", "x")
    response = signed_in(world.bob).get("/")
    assert response.status_code == 200 and is_full_page(response)
    content = response.content.decode()
    assert "Helper" in content and "Rival" not in content
    card = re.search(r'<li class="card assistant-card">(.*?)</li>', content, re.S).group(1)
    assert re.search(r"<dt>Sessions</dt><dd>1</dd>", card) and re.search(
        r"<dt>Memory docs</dt><dd>1</dd>", card
    )
    assert "just now" in card


def test_home_htmx_renders_only_the_list(world):
    response = signed_in(world.bob).get("/", **HX)
    assert response.status_code == 200 and not is_full_page(response)
    assert b'id="assistant-list"' in response.content


def test_team_switcher_changes_the_active_team(world):
    Membership.objects.create(user=world.alice, team=world.globex, role="viewer")
    client = signed_in(world.alice)
    home = client.get("/").content.decode()
    assert 'name="team"' in home and "Helper" in home and "Rival" not in home
    response = client.post("/team/", {"team": "globex"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.session[TEAM_SESSION_KEY] == world.globex.pk
    home = client.get("/").content.decode()
    assert "Rival" in home and "Helper" not in home
    # The REST API reads the same session key: the browser session now acts for globex.
    assert client.get("/assistants/helper/").status_code == 404
    assert client.get("/assistants/rival/").status_code == 200


def test_team_switcher_htmx_redirects_on_the_client(world):
    Membership.objects.create(user=world.alice, team=world.globex, role="viewer")
    response = signed_in(world.alice).post("/team/", {"team": "globex"}, **HX)
    assert response.status_code == 200 and response["HX-Redirect"] == "/"


def test_cannot_switch_to_a_team_you_are_not_in(world):
    client = signed_in(world.bob)
    assert client.post("/team/", {"team": "globex"}).status_code == 404
    assert TEAM_SESSION_KEY not in client.session


def test_csrf_token_travels_in_hx_headers(world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.alice)
    page = client.get("/keys/").content.decode()
    token = re.search(r"hx-headers='\{\"X-CSRFToken\": \"([^\"]+)\"\}'", page).group(1)
    refused = client.post("/keys/", {"name": "no token", "scopes": ["memory:read"]}, **HX)
    assert refused.status_code == 403
    accepted = client.post(
        "/keys/", {"name": "with token", "scopes": ["memory:read"]}, HTTP_X_CSRFTOKEN=token, **HX
    )
    assert accepted.status_code == 200
    assert (
        ApiKey.objects.filter(name="with token").exists()
        and not ApiKey.objects.filter(name="no token").exists()
    )


# --- assistants --------------------------------------------------------------------------------


def test_admin_creates_an_assistant(world):
    client = signed_in(world.alice)
    form = client.get("/assistants/new/")
    assert form.status_code == 200 and b'<label for="id_slug"' in form.content
    response = client.post(
        "/assistants/new/",
        {
            "slug": "writer",
            "name": "Writer",
            "model": "",
            "context_window": 128000,
            "system_prompt": "Write.",
            "timezone": "Europe/Paris",
            "workspace_access": "rw",
        },
    )
    assert response.status_code == 302 and response["Location"] == "/assistants/writer/"
    assistant = Assistant.objects.get(team=world.acme, slug="writer")
    assert (
        assistant.context_window == 128000 and assistant.settings["compaction"]["reserveTokensFloor"] == 20000
    )


def test_create_assistant_shows_errors_next_to_fields(world):
    client = signed_in(world.alice)
    response = client.post(
        "/assistants/new/",
        {
            "slug": "helper",
            "name": "",
            "context_window": 1000,
            "timezone": "Mars/Olympus",
            "workspace_access": "rw",
        },
        **HX,
    )
    assert response.status_code == 422 and not is_full_page(response)
    content = response.content.decode()
    assert re.search(r'id="id_slug_error">Your team already has an assistant called', content)
    assert 'id="id_name_error"' in content
    assert re.search(r'id="id_context_window_error">[^<]*at least', content)
    assert re.search(r'id="id_timezone_error">[^<]*not an IANA time zone', content)
    assert Assistant.objects.filter(team=world.acme).count() == 1


@pytest.mark.parametrize("htmx", [False, True])
def test_a_window_too_small_for_the_default_settings_is_refused_on_its_field_in_words(world, htmx):
    client = signed_in(world.alice)
    form = client.get("/assistants/new/").content.decode()
    assert "With the default compaction settings at least 40,001" in form
    response = client.post(
        "/assistants/new/",
        {
            "slug": "small",
            "name": "Small",
            "context_window": 16000,
            "timezone": "UTC",
            "workspace_access": "rw",
        },
        **(HX if htmx else {}),
    )
    content = response.content.decode()
    assert response.status_code == 422 and is_full_page(response) is not htmx
    assert re.search(r'id="id_context_window_error">With the default compaction settings the window', content)
    assert "settings.compaction" not in content  # no setting paths thrown at the user
    assert not Assistant.objects.filter(slug="small").exists()
    created = client.post(
        "/assistants/new/",
        {
            "slug": "small",
            "name": "Small",
            "context_window": 40001,
            "timezone": "UTC",
            "workspace_access": "rw",
        },
    )
    assert created.status_code == 302


def test_slug_may_repeat_across_teams(world):
    response = signed_in(world.alice).post(
        "/assistants/new/",
        {
            "slug": "rival",
            "name": "Our rival",
            "context_window": 200000,
            "timezone": "UTC",
            "workspace_access": "rw",
        },
        **HX,
    )
    assert response.status_code == 200 and response["HX-Redirect"] == "/assistants/rival/"
    assert Assistant.objects.filter(slug="rival").count() == 2


@pytest.mark.parametrize("persona", ["bob", "vera"])
def test_only_admins_create_assistants(world, persona):
    client = signed_in(getattr(world, persona))
    assert client.get("/assistants/new/").status_code == 403
    response = client.post(
        "/assistants/new/",
        {"slug": "x", "name": "X", "context_window": 200000, "timezone": "UTC", "workspace_access": "rw"},
    )
    assert response.status_code == 403
    assert not Assistant.objects.filter(slug="x").exists()
    assert b"New assistant" not in client.get("/").content


def test_assistant_page_and_another_teams_is_404(world):
    client = signed_in(world.vera)
    response = client.get("/assistants/helper/")
    assert response.status_code == 200 and b"Helper" in response.content
    assert client.get("/assistants/rival/").status_code == 404
    assert client.get("/assistants/rival/settings/").status_code == 404
    assert signed_in(world.charlie).get("/assistants/helper/").status_code == 404


# --- settings ----------------------------------------------------------------------------------


def _settings_post(assistant, **changes):
    """The form as the browser would send it, from the assistant's current values, with changes."""
    from openclaw_site.web.forms import AssistantForm, SettingsForm

    data = {}
    for form in (AssistantForm(instance=assistant), SettingsForm(current=assistant.settings)):
        for name, _field in form.fields.items():
            value = form[name].value()
            if isinstance(value, bool):
                if value:
                    data[name] = "on"
            elif value is not None:
                data[name] = value
    for name, value in changes.items():
        if value is False:
            data.pop(name, None)
        else:
            data[name] = value
    return data


def test_settings_page_shows_every_openclaw_key(world):
    content = signed_in(world.vera).get("/assistants/helper/settings/").content.decode()
    for key in [
        "compaction.reserveTokens",
        "compaction.memoryFlush.softThresholdTokens",
        "contextPruning.softTrim.maxChars",
        "memorySearch.query.hybrid.mmr.lambda",
    ]:
        assert f'name="{key}"' in content
    assert "only admins" in content and "disabled" in content and "Save settings" not in content


def test_admin_saves_settings(world):
    client = signed_in(world.alice)
    data = _settings_post(
        world.assistant,
        **{
            "compaction.reserveTokens": "30000",
            "contextPruning.mode": "always",
            "memorySearch.query.hybrid.mmr.enabled": "on",
            "contextPruning.tools.deny": "exec, browser*",
            "compaction.memoryFlush.forceFlushTranscriptBytes": "3mb",
            "name": "Helper two",
        },
    )
    response = client.post("/assistants/helper/settings/", data, **HX)
    assert response.status_code == 200 and not is_full_page(response)
    assert b"Settings saved." in response.content
    world.assistant.refresh_from_db()
    settings = world.assistant.settings
    assert settings["compaction"]["reserveTokens"] == 30000
    assert settings["contextPruning"]["mode"] == "always"
    assert settings["memorySearch"]["query"]["hybrid"]["mmr"]["enabled"] is True
    assert settings["contextPruning"]["tools"]["deny"] == ["exec", "browser*"]
    assert settings["compaction"]["memoryFlush"]["forceFlushTranscriptBytes"] == "3mb"
    assert world.assistant.name == "Helper two"


def test_settings_that_do_not_fit_the_window_are_refused_on_the_page(world):
    before = dict(world.assistant.settings)
    data = _settings_post(world.assistant, **{"compaction.reserveTokens": "190000"})
    response = signed_in(world.alice).post("/assistants/helper/settings/", data, **HX)
    assert response.status_code == 422
    assert "must be less than the context window (200000)" in response.content.decode()
    world.assistant.refresh_from_db()
    assert world.assistant.settings == before


def test_unchanged_form_keeps_the_settings(world):
    before = dict(world.assistant.settings)
    response = signed_in(world.alice).post("/assistants/helper/settings/", _settings_post(world.assistant))
    assert response.status_code == 200
    world.assistant.refresh_from_db()
    assert world.assistant.settings == before


def test_bad_settings_show_the_message_next_to_each_field_and_save_nothing(world):
    before = dict(world.assistant.settings)
    data = _settings_post(
        world.assistant,
        **{
            "compaction.maxHistoryShare": "2",
            "contextPruning.softTrimRatio": "-1",
            "compaction.keepRecentTokens": "",
            "compaction.memoryFlush.forceFlushTranscriptBytes": "lots",
            "context_window": "100",
        },
    )
    response = signed_in(world.alice).post("/assistants/helper/settings/", data, **HX)
    assert response.status_code == 422
    content = response.content.decode()
    assert re.search(r'id="id_compaction.maxHistoryShare_error">must be at most 0.9<', content)
    assert re.search(r'id="id_contextPruning.softTrimRatio_error">must be at least 0<', content)
    assert re.search(r'id="id_compaction.keepRecentTokens_error">This setting needs a value.<', content)
    assert re.search(r'id="id_context_window_error">', content)
    assert 'aria-invalid="true"' in content and "nothing was saved" in content
    world.assistant.refresh_from_db()
    assert world.assistant.settings == before and world.assistant.context_window == 200000


def test_cross_field_rule_lands_on_its_field(world):
    data = _settings_post(world.assistant, **{"memorySearch.chunking.overlap": "400"})
    response = signed_in(world.alice).post("/assistants/helper/settings/", data)
    assert response.status_code == 422 and is_full_page(response)
    assert re.search(
        r'id="id_memorySearch.chunking.overlap_error">must be less than chunking.tokens<',
        response.content.decode(),
    )


@pytest.mark.parametrize("persona", ["bob", "vera"])
def test_only_admins_change_settings(world, persona):
    data = _settings_post(world.assistant, **{"compaction.reserveTokens": "30000"})
    response = signed_in(getattr(world, persona)).post("/assistants/helper/settings/", data)
    assert response.status_code == 403
    world.assistant.refresh_from_db()
    assert world.assistant.settings["compaction"]["reserveTokens"] == 16384


# --- API keys ----------------------------------------------------------------------------------


def test_admin_creates_a_key_and_sees_the_secret_once(world):
    client = signed_in(world.alice)
    response = client.post(
        "/keys/",
        {"name": "CI ingest", "scopes": ["sessions:write", "sessions:read"], "expires_in_days": "30"},
        **HX,
    )
    assert response.status_code == 200 and not is_full_page(response)
    assert response["Cache-Control"] == "no-store"
    secret = re.search(
        r'id="new-secret" class="mono" readonly value="(ocs_[^"]+)"', response.content.decode()
    ).group(1)
    key = authenticate_api_key(secret)
    assert (
        key.team == world.acme
        and key.name == "CI ingest"
        and sorted(key.scopes) == ["sessions:read", "sessions:write"]
    )
    assert key.expires_at is not None and key.created_by == world.alice
    assert secret not in client.get("/keys/").content.decode()


def test_key_form_errors(world):
    response = signed_in(world.alice).post("/keys/", {"name": "", "expires_in_days": "0"}, **HX)
    assert response.status_code == 422
    content = response.content.decode()
    assert 'id="id_name_error"' in content and "Pick at least one scope." in content
    assert 'id="id_expires_in_days_error"' in content
    assert not ApiKey.objects.exists()


def test_admin_revokes_a_key(world):
    key, secret = factories.make_api_key(world.acme, ["memory:read"], name="old")
    response = signed_in(world.alice).post(f"/keys/{key.pk}/revoke/", **HX)
    assert response.status_code == 200 and b"revoked" in response.content and not is_full_page(response)
    key.refresh_from_db()
    assert key.revoked_at is not None
    with pytest.raises(ApiError) as refused:
        authenticate_api_key(secret)
    assert refused.value.code == "api_key_revoked"


def test_revoke_without_htmx_redirects(world):
    key, _ = factories.make_api_key(world.acme, ["memory:read"])
    response = signed_in(world.alice).post(f"/keys/{key.pk}/revoke/")
    assert response.status_code == 302 and response["Location"] == "/keys/"


def test_another_teams_key_is_404(world):
    key, _ = factories.make_api_key(world.globex, ["memory:read"], name="theirs")
    client = signed_in(world.alice)
    assert client.post(f"/keys/{key.pk}/revoke/").status_code == 404
    key.refresh_from_db()
    assert key.revoked_at is None
    assert "theirs" not in client.get("/keys/").content.decode()


@pytest.mark.parametrize("persona", ["bob", "vera"])
def test_members_and_viewers_read_keys_but_cannot_change_them(world, persona):
    key, _ = factories.make_api_key(world.acme, ["memory:read"], name="ours")
    client = signed_in(getattr(world, persona))
    page = client.get("/keys/").content.decode()
    assert "ours" in page and "Create key" not in page and "Revoke" not in page
    assert client.post("/keys/", {"name": "sneaky", "scopes": ["admin"]}).status_code == 403
    assert client.post(f"/keys/{key.pk}/revoke/").status_code == 403
    key.refresh_from_db()
    assert key.revoked_at is None and not ApiKey.objects.filter(name="sneaky").exists()


# --- jobs --------------------------------------------------------------------------------------


def export_session(session_id: int, fail: bool = False) -> None:
    """Stands in for the export task on the jobs page; ``fail`` makes it fail as a full disk would."""
    if fail:
        raise OSError("disk full")


def transcript_changed(session_id: int) -> None:
    """Stands in for the transcript task on the jobs page."""


def test_jobs_page_lists_only_the_teams_tasks(world, django_capture_on_commit_callbacks):
    ours = factories.make_session(world.assistant)
    theirs = factories.make_session(world.other_assistant)
    TaskRecord.objects.all().delete()  # tasks the factories queued
    with django_capture_on_commit_callbacks(execute=True):
        enqueue("tests.test_views_site.export_session", ours.pk, owner=session_owner(session=ours))
        enqueue("tests.test_views_site.transcript_changed", theirs.pk, owner=session_owner(session=theirs))
        enqueue("tests.test_views_site.export_session", ours.pk, True, owner=session_owner(session=ours))
    response = signed_in(world.vera).get("/jobs/")
    assert response.status_code == 200
    content = response.content.decode()
    assert content.count("<strong>Export session</strong>") == 2 and "Transcript changed" not in content
    assert "OSError: disk full" in content and "badge-failed" in content
    partial = signed_in(world.vera).get("/jobs/", **HX)
    assert not is_full_page(partial) and b'id="job-table"' in partial.content


def test_jobs_page_shows_tracked_tasks_with_progress_and_polls_while_running(world):
    TaskRecord.objects.create(
        task_id="a" * 32,
        team=world.acme,
        kind="reindex",
        state="running",
        progress={"done": 3, "total": 10, "message": "embedding"},
    )
    TaskRecord.objects.create(task_id="b" * 32, team=world.globex, kind="their-reindex", state="running")
    content = signed_in(world.bob).get("/jobs/").content.decode()
    assert 'aria-valuenow="3"' in content and 'aria-valuemax="10"' in content and "width: 30%" in content
    assert "3 / 10 · embedding" in content and "their-reindex" not in content.lower()
    assert 'hx-trigger="every 2s"' in content
