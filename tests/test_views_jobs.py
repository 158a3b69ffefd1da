"""The Jobs page: one row per job, failures first with their error, filters, pages, links."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from openclaw_site.models import TaskRecord
from tests import factories
from tests.fake_openai import error_reply
from tests.views_support import HX, is_full_page, signed_in

pytestmark = pytest.mark.django_db


def record(world, n, *, kind="export_session", state="succeeded", key=None, assistant=None, ago=0, **fields):
    now = timezone.now() - timedelta(seconds=ago)
    return TaskRecord.objects.create(
        task_id=f"{n:032d}",
        team=fields.pop("team", world.acme),
        assistant=assistant or world.assistant,
        kind=kind,
        state=state,
        coalesce_key=key,
        started_at=now,
        finished_at=now if state in ("succeeded", "failed") else None,
        **fields,
    )


def rows(content: str) -> list[str]:
    return re.findall(r'<tr class="job-(\w+)">', content)


@pytest.fixture
def history(world):
    TaskRecord.objects.all().delete()  # what the factories queued
    session = factories.make_session(world.assistant)
    TaskRecord.objects.all().delete()
    for n in range(5):  # five runs of one export job: one row
        record(
            world,
            n,
            key=f"export-session:{session.pk}",
            object_ids={"session": session.pk},
            ago=n,
            coalesced=2,
        )
    record(world, 10, state="failed", ago=100, error="OSError: disk full", object_ids={"session": session.pk})
    record(world, 11, kind="reindex_assistant", state="running", progress={"done": 4, "total": 8})
    record(world, 12, kind="globex_job", team=world.globex, assistant=world.other_assistant)
    return session


def test_runs_of_one_job_are_one_row_and_failures_come_first(world, history):
    page = signed_in(world.vera).get("/jobs/")
    assert page.status_code == 200 and is_full_page(page)
    content = page.content.decode()
    assert rows(content) == ["failed", "running", "succeeded"]
    assert "5 runs" in content and "folded 10 changes" in content
    assert "OSError: disk full" in content and "Globex job" not in content
    assert f'href="/sessions/{history.pk}/"' in content
    assert 'aria-valuenow="4"' in content and "width: 50%" in content


def test_filters_narrow_the_rows_and_htmx_gets_the_table_only(world, history):
    client = signed_in(world.bob)
    failed = client.get("/jobs/?state=failed", **HX)
    assert failed.status_code == 200 and not is_full_page(failed)
    assert rows(failed.content.decode()) == ["failed"]
    by_kind = client.get("/jobs/?kind=reindex_assistant").content.decode()
    assert rows(by_kind) == ["running"] and 'value="reindex_assistant" selected' in by_kind
    other = factories.make_assistant(world.acme, "other")
    assert "No jobs match" in client.get(f"/jobs/?assistant={other.slug}").content.decode()
    assert client.get("/jobs/?assistant=rival").status_code == 404


def test_pages_of_25_rows(world):
    TaskRecord.objects.all().delete()
    for n in range(30):
        record(world, n, ago=n)
    client = signed_in(world.bob)
    first = client.get("/jobs/").content.decode()
    assert len(rows(first)) == 25 and "Page 1 of 2" in first and "page=2" in first
    second = client.get("/jobs/?page=2", **HX).content.decode()
    assert len(rows(second)) == 5 and "← Newer" in second
    assert len(rows(client.get("/jobs/?page=99").content.decode())) == 5  # the last page


def test_a_document_job_links_to_its_document(world):
    document = factories.make_document(world.assistant, "memory/notes.md", "hello\n")
    TaskRecord.objects.all().delete()
    record(world, 1, kind="reindex_document", object_ids={"document": document.pk})
    content = signed_in(world.bob).get("/jobs/").content.decode()
    link = f"/assistants/helper/memory/id/{document.pk}/"
    assert link in content
    response = signed_in(world.bob).get(link)
    assert (
        response.status_code == 302
        and response["Location"] == "/assistants/helper/memory/doc/memory/notes.md"
    )
    assert signed_in(world.charlie).get(link).status_code == 404


@pytest.mark.parametrize("htmx", [False, True])
def test_a_failed_turn_is_on_the_jobs_page_with_its_error_and_session(world, llm, htmx):
    session = factories.make_session(world.assistant, title="Launch planning")
    client = signed_in(world.bob)
    llm.queue(error_reply(400, "This model refuses the request"))
    client.post(f"/sessions/{session.pk}/chat/", {"text": "What is the launch date?"})
    response = client.get("/jobs/?state=failed", **(HX if htmx else {}))
    page = response.content.decode()
    assert response.status_code == 200 and is_full_page(response) is not htmx
    assert "Assistant turn" in page and "This model refuses the request" in page
    assert f'href="/sessions/{session.pk}/"' in page
    assert "Assistant turn" in client.get("/jobs/?kind=assistant_turn").content.decode()
    assert "This model refuses the request" not in client.get("/jobs/?state=succeeded").content.decode()
