"""Background tasks know their team from the record written when they are queued (openclaw_site.jobs.tasks)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from openclaw_site.jobs.tasks import TaskOwner, enqueue
from openclaw_site.models import TaskRecord
from sessions_app.selectors import session_owner
from tests import factories
from tests.api_support import API
from tests.views_support import signed_in

pytestmark = pytest.mark.django_db


def tally(whatever: int) -> dict:
    """A task whose parameter says nothing about whose it is."""
    return {"tallied": whatever}


def test_a_task_enqueued_for_acme_shows_on_acmes_jobs_page_and_never_on_globexs(
    world, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        enqueue("tests.test_jobs.tally", 7, owner=TaskOwner.for_assistant(world.assistant), kind="acme_tally")
        enqueue(
            "tests.test_jobs.tally",
            8,
            owner=TaskOwner.for_assistant(world.other_assistant),
            kind="globex_tally",
        )
    acme = signed_in(world.bob).get("/jobs/").content.decode()
    globex = signed_in(world.charlie).get("/jobs/").content.decode()
    assert "Acme tally" in acme and "Globex tally" not in acme
    assert "Globex tally" in globex and "Acme tally" not in globex


def test_the_record_decides_whose_a_task_is_not_its_parameter_names(
    world, django_capture_on_commit_callbacks
):
    ours = factories.make_session(world.assistant)
    with django_capture_on_commit_callbacks(execute=True):
        # Named like an id of acme's session, but queued for globex: globex's task.
        enqueue("tests.test_jobs.tally", ours.pk, owner=TaskOwner(team_id=world.globex.pk), kind="renamed")
    [record] = TaskRecord.objects.filter(kind="renamed")
    assert record.team == world.globex and record.state == "succeeded"
    assert "Renamed" in signed_in(world.charlie).get("/jobs/").content.decode()
    assert "Renamed" not in signed_in(world.bob).get("/jobs/").content.decode()


def test_run_inline_a_task_is_recorded_and_finished(world, api, django_capture_on_commit_callbacks):
    session = factories.make_session(world.assistant)
    with django_capture_on_commit_callbacks(execute=True):
        record = enqueue("tests.test_jobs.tally", 3, owner=session_owner(session=session))
        assert TaskRecord.objects.get(pk=record.pk).state == "queued"  # sent only after the commit
    record.refresh_from_db()
    assert (record.kind, record.state, record.result) == ("tally", "succeeded", {"tallied": 3})
    assert record.team == world.acme and record.assistant == world.assistant
    assert record.object_ids == {"assistant": world.assistant.pk, "session": session.pk}
    assert record.q_task_id and record.started_at and record.finished_at >= record.started_at
    body = api.get(f"{API}/tasks/{record.task_id}/").json()
    assert (body["state"], body["result"], body["started_at"] is not None) == (
        "succeeded",
        {"tallied": 3},
        True,
    )


def test_a_rolled_back_change_leaves_no_record_and_sends_nothing(world, django_capture_on_commit_callbacks):
    before = TaskRecord.objects.count()
    with (
        django_capture_on_commit_callbacks(execute=True) as sent,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        enqueue("tests.test_jobs.tally", 1, owner=TaskOwner(team_id=world.acme.pk))
        raise RuntimeError("rolled back")
    assert TaskRecord.objects.count() == before and sent == []


def test_the_feature_apps_record_their_tasks_for_the_objects_team(world, django_capture_on_commit_callbacks):
    session = factories.make_session(world.other_assistant)
    TaskRecord.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):
        factories.add_messages(session, {"role": "user", "content": "hello"})
        document = factories.make_document(world.other_assistant, "MEMORY.md", "globex note")
    kinds = {record.kind: record for record in TaskRecord.objects.all()}
    assert {"export_session", "transcript_changed", "export_memory", "reindex_document"} <= set(kinds)
    assert {record.team for record in kinds.values()} == {world.globex}
    assert kinds["export_session"].object_ids == {
        "assistant": world.other_assistant.pk,
        "session": session.pk,
    }
    assert kinds["reindex_document"].object_ids == {
        "assistant": world.other_assistant.pk,
        "document": document.pk,
    }
    assert all(record.state == "succeeded" for record in kinds.values()), [
        (r.kind, r.state, r.error) for r in kinds.values()
    ]


def test_deleting_an_assistant_keeps_its_tasks_history_and_deleting_a_team_drops_it(
    world, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):  # exports record their task after the commit
        session = factories.make_session(world.assistant)
        factories.add_messages(session, {"role": "user", "content": "hi"})
    kept = TaskRecord.objects.filter(assistant=world.assistant).count()
    assert kept >= 2
    world.assistant.delete()  # its sessions go too: their delete must not record a task for it
    connection.check_constraints()  # the foreign keys hold at commit
    history = TaskRecord.objects.filter(team=world.acme, assistant=None)
    assert history.exclude(kind="remove_workspace").count() == kept  # plus the removal of its files
    world.globex.delete()
    connection.check_constraints()
    assert not TaskRecord.objects.filter(team_id=world.globex.pk).exists()


def test_deleting_one_session_still_rewrites_its_assistants_index(world, django_capture_on_commit_callbacks):
    session = factories.make_session(world.assistant)
    with django_capture_on_commit_callbacks(execute=True):
        session.delete()
    [record] = TaskRecord.objects.filter(kind="export_sessions_index")
    assert record.team == world.acme and record.assistant == world.assistant
