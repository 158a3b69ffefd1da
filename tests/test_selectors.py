"""Team-scoped reads of the site (openclaw_site.selectors): a team's own objects, never another's."""

from __future__ import annotations

import pytest

from openclaw_site.jobs.tasks import record_task
from openclaw_site.selectors import (
    NotFound,
    api_key_get,
    api_key_list,
    assistant_get,
    assistant_list,
    task_record_get,
    task_record_list,
)
from tests import factories
from tests.api_support import API, assert_error
from tests.views_support import signed_in

pytestmark = pytest.mark.django_db


def test_assistant_get_finds_the_teams_own_and_refuses_another_teams(world):
    assert assistant_get(team=world.acme, slug="helper") == world.assistant
    assert assistant_get(team=world.globex, slug="rival") == world.other_assistant
    with pytest.raises(NotFound) as missing:
        assistant_get(team=world.globex, slug="helper")
    assert (
        missing.value.what == "Assistant 'helper'" and str(missing.value) == "No such assistant in this team."
    )
    with pytest.raises(NotFound):
        assistant_get(team=world.acme, slug="never-made")


def test_assistant_list_holds_only_the_teams_assistants(world):
    factories.make_assistant(world.acme, "another")
    assert [a.slug for a in assistant_list(team=world.acme)] == ["another", "helper"]
    assert list(assistant_list(team=world.globex)) == [world.other_assistant]


def test_api_key_get_and_list_are_the_teams_own(world):
    ours, _ = factories.make_api_key(world.acme, ["admin"], name="ours")
    theirs, _ = factories.make_api_key(world.globex, ["admin"], name="theirs")
    assert api_key_get(team=world.acme, pk=ours.pk) == ours
    with pytest.raises(NotFound) as missing:
        api_key_get(team=world.acme, pk=theirs.pk)
    assert missing.value.what == "API key" and str(missing.value) == "No such API key in this team."
    assert list(api_key_list(team=world.acme)) == [ours]
    assert list(api_key_list(team=world.globex)) == [theirs]


def test_task_record_get_and_list_are_the_teams_own(world):
    ours = record_task(task_id="ours", team=world.acme, kind="reindex")
    theirs = record_task(task_id="theirs", team=world.globex, kind="reindex")
    assert task_record_get(team=world.acme, task_id="ours") == ours
    with pytest.raises(NotFound) as missing:
        task_record_get(team=world.acme, task_id="theirs")
    assert missing.value.what == "Task"
    assert ours in task_record_list(team=world.acme) and theirs not in task_record_list(team=world.acme)
    assert list(task_record_list(team=world.globex).filter(kind="reindex")) == [theirs]


def test_the_api_answers_a_selectors_not_found_with_the_404_body(api, world):
    theirs, _ = factories.make_api_key(world.globex, ["admin"])
    error = assert_error(api.get(f"{API}/assistants/rival/"), 404, "not_found")
    assert error["message"] == "Assistant 'rival' not found."
    assert assert_error(api.delete(f"{API}/api-keys/{theirs.pk}/"), 404, "not_found")["message"] == (
        "API key not found."
    )
    assert assert_error(api.get(f"{API}/tasks/nope/"), 404, "not_found")["message"] == "Task not found."


def test_the_dashboard_answers_a_selectors_not_found_with_its_404_page(world):
    response = signed_in(world.alice).get("/assistants/rival/")
    assert response.status_code == 404 and b"There is nothing here in your team." in response.content
