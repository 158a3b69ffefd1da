"""API keys managed over the API, and background task status."""

from __future__ import annotations

import pytest

from openclaw_site.jobs.runs import update_progress
from openclaw_site.jobs.tasks import TaskOwner, enqueue, record_task
from openclaw_site.models import ApiKey, TaskRecord, hash_secret
from tests import factories
from tests.api_support import API, assert_error, login_client
from tests.conftest import bearer_client

pytestmark = pytest.mark.django_db


def test_a_created_key_shows_its_secret_once_and_works(api, world):
    response = api.post(
        f"{API}/api-keys/", {"name": "ci", "scopes": ["sessions:read", "sessions:read"]}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    secret = body["secret"]
    key = ApiKey.objects.get(pk=body["id"])
    assert key.secret_hash == hash_secret(secret) and secret not in str(key.__dict__)
    assert body["scopes"] == ["sessions:read"] and secret.startswith(body["prefix"])
    listed = api.get(f"{API}/api-keys/").json()["api_keys"]
    assert "secret" not in listed[0] and secret not in str(listed)
    new_client = bearer_client(secret)
    assert new_client.get(f"{API}/assistants/helper/sessions/").status_code == 200
    assert_error(new_client.get(f"{API}/assistants/helper/memory/"), 403, "insufficient_scope")


def test_a_browser_admin_creates_keys_as_themselves(world):
    body = (
        login_client(world.alice)
        .post(f"{API}/api-keys/", {"name": "mine", "scopes": ["admin"]}, format="json")
        .json()
    )
    assert body["created_by"] == "alice"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": "x", "scopes": ["root"]}, "scopes"),
        ({"name": "x", "scopes": []}, "scopes"),
        ({"scopes": ["admin"]}, "name"),
        ({"name": "x", "scopes": ["admin"], "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
    ],
)
def test_invalid_keys_are_a_400(api, body, field):
    count = ApiKey.objects.count()
    error = assert_error(api.post(f"{API}/api-keys/", body, format="json"), 400, "validation_error")
    assert error["details"]["field"] == field
    assert ApiKey.objects.count() == count


def test_revoking_a_key_stops_it(api, world):
    key, secret = factories.make_api_key(world.acme, ["sessions:read"])
    response = api.delete(f"{API}/api-keys/{key.pk}/")
    assert (
        response.status_code == 200 and response.json()["active"] is False and response.json()["revoked_at"]
    )
    assert_error(bearer_client(secret).get(f"{API}/assistants/"), 401, "api_key_revoked")
    first = ApiKey.objects.get(pk=key.pk).revoked_at
    api.delete(f"{API}/api-keys/{key.pk}/")
    assert ApiKey.objects.get(pk=key.pk).revoked_at == first


def count_to(total: int) -> dict:
    """A tracked test task: reports progress as it goes."""
    from openclaw_site.jobs.runs import report_progress

    for done in range(1, total + 1):
        report_progress(done, total, f"step {done}")
    return {"counted": total}


def explode(_: int) -> None:
    raise RuntimeError("boom")


def test_a_tracked_task_reports_state_progress_and_result(api, world, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        record = enqueue(
            "tests.test_api_keys_tasks.count_to",
            3,
            owner=TaskOwner.for_assistant(world.assistant),
            kind="count",
        )
        assert api.get(f"{API}/tasks/{record.task_id}/").json()["state"] == "queued"
    body = api.get(f"{API}/tasks/{record.task_id}/").json()
    assert (body["state"], body["result"], body["kind"]) == ("succeeded", {"counted": 3}, "count")
    assert body["progress"] == {"done": 3, "total": 3, "message": "step 3"}
    assert body["objects"] == {"assistant": world.assistant.pk} and body["finished_at"]
    assert TaskRecord.objects.get(task_id=record.task_id).q_task_id


def test_a_failed_task_says_why(api, world, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        record = enqueue(
            "tests.test_api_keys_tasks.explode", 1, owner=TaskOwner(team_id=world.acme.pk), kind="explode"
        )
    body = api.get(f"{API}/tasks/{record.task_id}/").json()
    assert body["state"] == "failed" and "boom" in body["error"]


def test_a_recorded_task_takes_its_outcome_from_django_q(api, world, django_capture_on_commit_callbacks):
    from django_q.tasks import async_task

    task_id = async_task("tests.test_api_keys_tasks.count_to", 2)  # sync in tests: runs now
    record_task(task_id=task_id, team=world.acme, kind="count", object_ids={})
    update_progress(task_id, 2, 2)
    body = api.get(f"{API}/tasks/{task_id}/").json()
    assert (body["state"], body["result"], body["progress"]) == (
        "succeeded",
        {"counted": 2},
        {"done": 2, "total": 2},
    )
    assert body["attempts"] >= 1


def test_unknown_and_foreign_tasks_are_a_404(api, world):
    record_task(task_id="theirs", team=world.globex, kind="reindex")
    assert_error(api.get(f"{API}/tasks/theirs/"), 404, "not_found")
    assert_error(api.get(f"{API}/tasks/never-existed/"), 404, "not_found")


@pytest.mark.parametrize(
    "kind, allowed, refused",
    [
        ("reindex", ["memory:read", "admin"], ["sessions:read", "sessions:write"]),
        ("compact_session_task", ["sessions:read", "admin"], ["memory:read", "memory:write"]),
        ("export_assistant", ["sessions:read", "memory:read"], []),
        ("count", ["admin"], ["sessions:read", "memory:read", "memory:write"]),  # unclassified kinds
    ],
)
def test_reading_a_task_needs_the_scope_of_its_kind(scoped_api, world, kind, allowed, refused):
    record_task(task_id=f"task-{kind}", team=world.acme, kind=kind)
    url = f"{API}/tasks/task-{kind}/"
    for scope in allowed:
        assert scoped_api(scope).get(url).status_code == 200, scope
    for scope in refused:
        error = assert_error(scoped_api(scope).get(url), 403, "insufficient_scope")
        assert error["details"]["required_scope"]
