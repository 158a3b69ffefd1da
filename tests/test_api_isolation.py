"""Every endpoint refuses another team (404) and a missing scope (403), for keys and browser users."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from openclaw_site.jobs.tasks import record_task
from openclaw_site.models import Scope
from tests import factories
from tests.api_support import API, assert_error, login_client, snapshot
from tests.conftest import ALL_SCOPES, bearer_client

ANY_READ = "assistant-read"  # sessions:read or memory:read
MEMBER = "any-member"


@dataclass(frozen=True)
class Endpoint:
    method: str
    url: str  # formatted with the objects of team acme
    scope: str
    body: Any = None
    owned: bool = True  # names an object of acme (so another team gets a 404)

    def __str__(self) -> str:
        return f"{self.method.upper()} {self.url}"


ENDPOINTS = [
    Endpoint("get", "/assistants/", ANY_READ, owned=False),
    Endpoint("post", "/assistants/", Scope.ADMIN, {"slug": "new-one", "name": "New"}, owned=False),
    Endpoint("get", "/assistants/{slug}/", ANY_READ),
    Endpoint("patch", "/assistants/{slug}/", Scope.ADMIN, {"name": "Renamed"}),
    Endpoint("delete", "/assistants/{slug}/", Scope.ADMIN),
    Endpoint("get", "/api-keys/", Scope.ADMIN, owned=False),
    Endpoint("post", "/api-keys/", Scope.ADMIN, {"name": "k", "scopes": ["memory:read"]}, owned=False),
    Endpoint("delete", "/api-keys/{key}/", Scope.ADMIN),
    Endpoint("get", "/tasks/{task}/", MEMBER),
    Endpoint("get", "/assistants/{slug}/sessions/", Scope.SESSIONS_READ),
    Endpoint("post", "/assistants/{slug}/sessions/", Scope.SESSIONS_WRITE, {"key": "fresh"}),
    Endpoint("get", "/sessions/{session}/", Scope.SESSIONS_READ),
    Endpoint("patch", "/sessions/{session}/", Scope.SESSIONS_WRITE, {"title": "New title"}),
    Endpoint("delete", "/sessions/{session}/", Scope.SESSIONS_WRITE),
    Endpoint("get", "/sessions/{session}/messages/", Scope.SESSIONS_READ),
    Endpoint(
        "post", "/sessions/{session}/messages/", Scope.SESSIONS_WRITE, {"role": "user", "content": "hi"}
    ),
    Endpoint("get", "/assistants/{slug}/memory/", Scope.MEMORY_READ),
    Endpoint(
        "post", "/assistants/{slug}/memory/", Scope.MEMORY_WRITE, {"path": "memory/new.md", "content": "x"}
    ),
    Endpoint("get", "/assistants/{slug}/memory/MEMORY.md", Scope.MEMORY_READ),
    Endpoint("get", "/assistants/{slug}/memory/MEMORY.md?from=1&lines=1", Scope.MEMORY_READ),
    Endpoint("put", "/assistants/{slug}/memory/MEMORY.md", Scope.MEMORY_WRITE, {"content": "changed"}),
    Endpoint("delete", "/assistants/{slug}/memory/MEMORY.md", Scope.MEMORY_WRITE),
    Endpoint("get", "/assistants/{slug}/memory/MEMORY.md/revisions/", Scope.MEMORY_READ),
    Endpoint("get", "/assistants/{slug}/search/?q=acme+secret", Scope.MEMORY_READ),
    Endpoint("post", "/assistants/{slug}/reindex/", Scope.MEMORY_WRITE, {"full": True}),
]
OWNED = [e for e in ENDPOINTS if e.owned]
SCOPED = [e for e in ENDPOINTS if e.scope != MEMBER]


@pytest.fixture
def objects(world) -> dict[str, Any]:
    """One of everything in team acme, plus the same in globex so slugs and paths exist there too."""
    session = factories.make_session(world.assistant, "main")
    factories.add_messages(session, {"role": "user", "content": "hello"})
    factories.make_document(world.assistant, "MEMORY.md", "# Notes\nacme secret\n")
    factories.make_document(world.other_assistant, "MEMORY.md", "# Globex notes\n")
    key, _ = factories.make_api_key(world.acme, ["memory:read"], name="acme key")
    task = record_task(task_id="acme-task-1", team=world.acme, kind="reindex", object_ids={"assistant": 1})
    return {"slug": world.assistant.slug, "session": session.pk, "key": key.pk, "task": task.task_id}


def call(client: Any, endpoint: Endpoint, objects: dict[str, Any]) -> Any:
    url = API + endpoint.url.format(**objects)
    if endpoint.body is None:
        return getattr(client, endpoint.method)(url)
    return getattr(client, endpoint.method)(url, endpoint.body, format="json")


def scopes_without(scope: str) -> list[str]:
    """Every scope that does not grant ``scope`` (admin grants everything)."""
    if scope == ANY_READ:
        return [Scope.SESSIONS_WRITE, Scope.MEMORY_WRITE]
    return [s for s in ALL_SCOPES if s not in (scope, Scope.ADMIN)]


def scopes_granting(scope: str) -> list[str]:
    return [Scope.MEMORY_READ] if scope == ANY_READ else [scope]


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", OWNED, ids=str)
def test_another_teams_key_gets_404_and_changes_nothing(world, objects, other_api, endpoint):
    before = snapshot()
    assert_error(call(other_api, endpoint, objects), 404, "not_found")
    assert snapshot() == before


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", OWNED, ids=str)
def test_another_teams_user_gets_404(world, objects, endpoint):
    # An admin of globex, so no scope stands between the request and the lookup.
    outsider = (
        world.charlie
        if endpoint.scope != Scope.ADMIN
        else factories.make_user("gina", team=world.globex, role="admin")
    )
    client = login_client(outsider)
    before = snapshot()
    assert_error(call(client, endpoint, objects), 404, "not_found")
    assert snapshot() == before


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", SCOPED, ids=str)
def test_a_key_without_the_scope_gets_403_and_changes_nothing(world, objects, scoped_api, endpoint):
    client = scoped_api(*scopes_without(endpoint.scope))
    before = snapshot()
    error = assert_error(call(client, endpoint, objects), 403, "insufficient_scope")
    assert "required_scope" in error["details"]
    assert snapshot() == before


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_a_key_with_just_the_scope_succeeds(world, objects, scoped_api, endpoint):
    client = (
        scoped_api(*scopes_granting(endpoint.scope))
        if endpoint.scope != MEMBER
        else scoped_api("memory:read")
    )
    response = call(client, endpoint, objects)
    assert 200 <= response.status_code < 300, (response.status_code, response.content[:300])


@pytest.mark.django_db
def test_team_lists_show_only_the_callers_team(world, objects, other_api):
    assistants = other_api.get(f"{API}/assistants/").json()["assistants"]
    assert [a["slug"] for a in assistants] == ["rival"]
    keys = other_api.get(f"{API}/api-keys/").json()["api_keys"]
    assert "acme key" not in {k["name"] for k in keys}
    assert other_api.get(f"{API}/assistants/rival/memory/").json()["documents"][0]["path"] == "MEMORY.md"


@pytest.mark.django_db
def test_same_slug_in_two_teams_resolves_to_the_callers_own(world, api, other_api):
    twin = factories.make_assistant(world.globex, "helper", name="Globex helper")
    factories.make_document(twin, "MEMORY.md", "globex only\n")
    factories.make_document(world.assistant, "MEMORY.md", "acme only\n")
    assert other_api.get(f"{API}/assistants/helper/memory/MEMORY.md").json()["content"] == "globex only\n"
    assert api.get(f"{API}/assistants/helper/memory/MEMORY.md").json()["content"] == "acme only\n"
    assert other_api.get(f"{API}/assistants/helper/").json()["name"] == "Globex helper"


WRITES = [e for e in ENDPOINTS if e.method != "get"]


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", WRITES, ids=str)
def test_a_viewer_signed_in_cannot_write(world, objects, endpoint):
    before = snapshot()
    assert_error(call(login_client(world.vera), endpoint, objects), 403, "insufficient_scope")
    assert snapshot() == before


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", [e for e in ENDPOINTS if e.method == "get"], ids=str)
def test_a_viewer_signed_in_can_read_except_admin_endpoints(world, objects, endpoint):
    response = call(login_client(world.vera), endpoint, objects)
    if endpoint.scope == Scope.ADMIN:
        assert_error(response, 403, "insufficient_scope")
    else:
        assert response.status_code == 200, response.content[:300]


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", [e for e in WRITES if e.scope == Scope.ADMIN], ids=str)
def test_a_member_cannot_use_admin_endpoints_but_an_admin_can(world, objects, endpoint):
    assert_error(call(login_client(world.bob), endpoint, objects), 403, "insufficient_scope")
    response = call(login_client(world.alice), endpoint, objects)
    assert 200 <= response.status_code < 300, response.content[:300]


@pytest.mark.django_db
def test_a_member_can_write_sessions_and_memory(world, objects):
    bob = login_client(world.bob)
    assert (
        bob.post(
            f"{API}/sessions/{objects['session']}/messages/",
            {"role": "user", "content": "from bob"},
            format="json",
        ).status_code
        == 201
    )
    response = bob.put(
        f"{API}/assistants/helper/memory/MEMORY.md", {"content": "bob was here\n"}, format="json"
    )
    assert response.status_code == 200
    revision = bob.get(f"{API}/assistants/helper/memory/MEMORY.md/revisions/").json()["revisions"][0]
    assert (revision["author"], revision["user"], revision["action"]) == ("user", "bob", "update")


@pytest.mark.django_db
def test_unauthenticated_and_bad_keys_get_401(world, objects):
    from rest_framework.test import APIClient

    assert_error(APIClient().get(f"{API}/assistants/"), 401, "not_authenticated")
    assert_error(bearer_client("ocs_deadbeef_nope").get(f"{API}/assistants/"), 401, "invalid_api_key")
    assert_error(bearer_client("garbage").get(f"{API}/assistants/"), 401, "invalid_api_key")
    basic = APIClient()
    basic.credentials(HTTP_AUTHORIZATION="Basic abc")
    assert_error(basic.get(f"{API}/assistants/"), 401, "invalid_authorization")


@pytest.mark.django_db
def test_revoked_and_expired_keys_get_401(world):
    from datetime import timedelta

    from django.utils import timezone

    _, revoked = factories.make_api_key(world.acme, ALL_SCOPES, revoked_at=timezone.now())
    _, expired = factories.make_api_key(
        world.acme, ALL_SCOPES, expires_at=timezone.now() - timedelta(minutes=1)
    )
    assert_error(bearer_client(revoked).get(f"{API}/assistants/"), 401, "api_key_revoked")
    assert_error(bearer_client(expired).get(f"{API}/assistants/"), 401, "api_key_expired")


@pytest.mark.django_db
def test_a_user_without_a_team_gets_403(world):
    loner = factories.make_user("loner")
    assert_error(login_client(loner).get(f"{API}/assistants/"), 403, "no_team")
    assert_error(login_client(world.charlie, team=world.acme).get(f"{API}/assistants/"), 403, "no_team")
