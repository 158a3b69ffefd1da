"""Fair sharing between teams (docs/design.md, Limits and refusals; Background work).

A team whose searches or imports take every one of its slots is refused 429 `team_busy` with
Retry-After on each surface, while another team goes on; an import queues two jobs on the default
queue, not an index and an export job per document on the urgent one.
"""

from __future__ import annotations

import html
import io
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import psycopg
import pytest
from django.conf import settings

from memory_app.models import MemoryChunk, MemoryDocument
from openclaw_site.jobs import tasks
from openclaw_site.jobs.tasks import TaskQueue
from openclaw_site.models import Assistant, Membership, TaskRecord
from openclaw_site.platform.env import half_the_cpus, usable_cpus
from openclaw_site.usage.fair_share import TeamWork, slot_key
from sessions_app.workspace.imports import import_workspace
from tests import factories
from tests.api_support import API, assert_error
from tests.conftest import ALL_SCOPES, bearer_client
from tests.db_support import connection_pool, other_connection
from tests.mcp_client import call_tool, mcp_url, tool_error, tool_json
from tests.views_support import HX, signed_in


@contextmanager
def slots_taken(team_id: int, work: TeamWork, count: int) -> Iterator[psycopg.Connection]:
    """Hold ``count`` of the team's slots from another connection, as running requests would."""
    with other_connection() as conn:
        for slot in range(count):
            row = conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", slot_key(work, team_id, slot)
            ).fetchone()
            assert row is not None and row[0]
        yield conn


@pytest.mark.django_db(transaction=True)
def test_a_team_with_every_search_slot_taken_is_told_to_retry_and_another_team_is_not(
    world, no_embeddings, asgi_live_server
):
    factories.make_document(world.assistant, "MEMORY.md", "the harbour opens at six")
    factories.make_document(world.other_assistant, "MEMORY.md", "the harbour opens at six")
    acme = bearer_client(factories.make_api_key(world.acme, ALL_SCOPES)[1])
    acme_secret = factories.make_api_key(world.acme, ALL_SCOPES)[1]
    globex = bearer_client(factories.make_api_key(world.globex, ALL_SCOPES)[1])
    search = {"q": "harbour"}
    with slots_taken(world.acme.pk, TeamWork.SEARCH, settings.TEAM_SEARCH_SLOTS):
        refused = acme.get(f"{API}/assistants/helper/search/", search)
        error = assert_error(refused, 429, "team_busy")
        assert refused["Retry-After"] == "1" and error["details"] == {
            "retry_after": 1,
            "work": "search",
            "limit": settings.TEAM_SEARCH_SLOTS,
        }
        assert "its share of the server" in error["message"]
        mcp = tool_error(
            call_tool(mcp_url(asgi_live_server.url), acme_secret, "memory_search", {"query": "harbour"})
        )
        assert mcp["code"] == "team_busy" and mcp["details"]["retry_after"] == 1
        page = signed_in(world.alice).get("/assistants/helper/search/", search, **HX)
        assert page.status_code == 429 and "its share of the server" in html.unescape(page.content.decode())
        other = globex.get(f"{API}/assistants/rival/search/", search)
        assert other.status_code == 200 and other.json()["results"]
    again = acme.get(f"{API}/assistants/helper/search/", search)  # the slots came free
    assert again.status_code == 200 and again.json()["results"]
    found = tool_json(
        call_tool(mcp_url(asgi_live_server.url), acme_secret, "memory_search", {"query": "harbour"})
    )
    assert found["results"]


@pytest.mark.django_db(transaction=True)
def test_one_search_slot_short_of_the_limit_still_searches(world, no_embeddings):
    factories.make_document(world.assistant, "MEMORY.md", "the harbour opens at six")
    acme = bearer_client(factories.make_api_key(world.acme, ALL_SCOPES)[1])
    with slots_taken(world.acme.pk, TeamWork.SEARCH, settings.TEAM_SEARCH_SLOTS - 1):
        assert acme.get(f"{API}/assistants/helper/search/", {"q": "harbour"}).status_code == 200
        # ... and the search let its slot go: the same one is free for the next.
        assert acme.get(f"{API}/assistants/helper/search/", {"q": "harbour"}).status_code == 200


def test_a_team_may_search_on_half_the_cores_and_never_on_all_of_them():
    assert [half_the_cpus(cpus) for cpus in (1, 2, 3, 4, 8, 64)] == [1, 1, 1, 2, 4, 32]
    assert usable_cpus() == len(os.sched_getaffinity(0))


def default_search_slots(**env: str) -> int:
    """The setting as a new process reads it from its environment (no database is opened)."""
    environment = {k: v for k, v in os.environ.items() if k != "OPENCLAW_TEAM_SEARCH_SLOTS"}
    environment.update(env, DATABASE_URL="postgres://pure-tests-use-no-database@127.0.0.1:1/none")
    code = "from config import settings; print(settings.TEAM_SEARCH_SLOTS)"
    run = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return int(run.stdout)


def test_the_search_slots_default_to_half_the_cores_unless_set():
    assert default_search_slots() == half_the_cpus(usable_cpus())
    assert default_search_slots(OPENCLAW_TEAM_SEARCH_SLOTS="3") == 3
    assert default_search_slots(OPENCLAW_TEAM_SEARCH_SLOTS="0") == 0  # no limit


@pytest.mark.django_db(transaction=True)
def test_with_one_slot_a_second_search_of_the_team_is_refused_and_says_so(world, no_embeddings, settings):
    settings.TEAM_SEARCH_SLOTS = 1
    factories.make_document(world.assistant, "MEMORY.md", "the harbour opens at six")
    acme = bearer_client(factories.make_api_key(world.acme, ALL_SCOPES)[1])
    with slots_taken(world.acme.pk, TeamWork.SEARCH, 1):  # one search of the team is running
        error = assert_error(acme.get(f"{API}/assistants/helper/search/", {"q": "harbour"}), 429, "team_busy")
    assert error["message"].startswith("This team already runs 1 search at once, its share of the server")
    assert error["details"]["limit"] == 1
    assert acme.get(f"{API}/assistants/helper/search/", {"q": "harbour"}).status_code == 200


def slot_is_free(team_id: int, work: TeamWork, slot: int = 0) -> bool:
    """Tell whether no session holds the slot, as another process taking it would find."""
    with other_connection() as conn:
        row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", slot_key(work, team_id, slot)).fetchone()
        return bool(row[0])  # the lock, if taken, ends with `conn`


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("task_broker", ["orm"], indirect=True)
def test_a_teams_searches_one_after_another_each_find_the_slot_free_on_the_served_app(
    world, fake_embeddings, task_broker, asgi_live_server, settings
):
    """As `runall` serves: ASGI, connections lent by a pool with several ready, tasks through django-q2's
    ORM broker.

    A search of an index behind its notes queues a reindex; django-q2's ORM broker closes old
    connections as it queues (ours no longer does, tests/test_task_connection.py), which gave the
    request's connection back to the pool in the middle of the search. Its slot must not go back
    to the pool held, for a later search of the team to be refused.
    """
    settings.TEAM_SEARCH_SLOTS = 1
    base = f"{asgi_live_server.url}{API}/assistants/helper"
    headers = {"Authorization": f"Bearer {factories.make_api_key(world.acme, ALL_SCOPES)[1]}"}
    searches = []  # (status, whether the slot was free once it answered), one after another
    with connection_pool(4, min_size=3):
        for n in range(4):
            note = {"content": f"the zephyr{n} sails at noon\n"}
            put = httpx2.put(f"{base}/memory/memory/zephyr{n}.md", json=note, headers=headers, timeout=30)
            assert put.status_code in (200, 201), put.text
            for _ in range(3):
                found = httpx2.get(f"{base}/search/", params={"q": f"zephyr{n}"}, headers=headers, timeout=30)
                searches.append((found.status_code, slot_is_free(world.acme.pk, TeamWork.SEARCH)))
    assert searches == [(200, True)] * 12


def workspace_zip(documents: int) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for n in range(documents):
            archive.writestr(f"memory/note-{n:03}.md", f"note {n}: the harbour opens at six\n")
    buffer.seek(0)
    buffer.name = "workspace.zip"
    return buffer


@pytest.mark.django_db(transaction=True)
def test_a_second_import_of_a_team_at_once_is_refused_and_imports_nothing(world):
    with slots_taken(world.acme.pk, TeamWork.IMPORT, settings.TEAM_IMPORT_SLOTS):
        response = signed_in(world.alice).post(
            "/workspace/import/", {"assistant": "imported", "archive": workspace_zip(3)}
        )
        assert response.status_code == 429 and response["Retry-After"] == "1"
        assert "Another import of this team is running; nothing was imported." in html.unescape(
            response.content.decode()
        )
        assert not Assistant.objects.filter(slug="imported").exists()
        Membership.objects.filter(team=world.globex, user=world.charlie).update(role="admin")
        done = signed_in(world.charlie).post(  # globex imports meanwhile
            "/workspace/import/", {"assistant": "imported", "archive": workspace_zip(3)}
        )
        assert done.status_code == 302
    assert (
        MemoryDocument.objects.filter(assistant__team=world.globex, assistant__slug="imported").count() == 3
    )


@pytest.mark.django_db(transaction=True)
def test_an_import_queues_one_reindex_and_one_export_on_the_default_queue(
    world, fake_embeddings, tmp_path, monkeypatch
):
    for n in range(40):
        (tmp_path / "memory").mkdir(exist_ok=True)
        (tmp_path / "memory" / f"note-{n:02}.md").write_text(f"note {n}: the harbour opens at six\n")
    sent: list[tuple[str, str]] = []
    real_send = tasks.send

    def recording_send(job, **kwargs):  # what reaches the broker, and on which queue; then sends it
        sent.append((job.func, job.queue.value))
        return real_send(job, **kwargs)

    monkeypatch.setattr(tasks, "send", recording_send)
    report = import_workspace(directory=tmp_path, team_slug="acme", assistant_slug="imported")
    assert report.documents == 40
    assistant = Assistant.objects.get(team=world.acme, slug="imported")
    funcs = sorted({func for func, _ in sent})
    assert (
        "memory_app.tasks.reindex_document" not in funcs and "sessions_app.tasks.export_memory" not in funcs
    )
    assert ("memory_app.tasks.reindex_assistant", TaskQueue.DEFAULT.value) in sent
    assert ("sessions_app.tasks.export_assistant", TaskQueue.DEFAULT.value) in sent
    assert all(queue == TaskQueue.DEFAULT.value for _, queue in sent), sent
    assert len(sent) <= 4, sent
    records = TaskRecord.objects.filter(assistant=assistant)
    assert {r.kind for r in records} >= {"reindex", "export_assistant"}
    assert all(r.state == "succeeded" for r in records), [(r.kind, r.error) for r in records]
    indexed = MemoryChunk.objects.filter(assistant=assistant, source="memory").values("path").distinct()
    assert indexed.count() == 40  # the one reindex indexed every document


# --- pacing: a team over its share rests while another team searches ----------------------------


@pytest.fixture
def rests(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record each rest fair sharing takes (the seconds its work ran) instead of sleeping it."""
    from openclaw_site.models import TeamSearchMark
    from openclaw_site.usage import fair_share

    fair_share._marked.clear()  # a mark written by an earlier test within the second
    monkeypatch.setattr(fair_share, "ANSWER_SECONDS", 0.0)  # every look reads the marks
    TeamSearchMark.objects.all().delete()  # marks of earlier tests' teams (written on their own connection)
    taken: list[float] = []
    monkeypatch.setattr(fair_share, "_rest", taken.append)
    return taken


def age_marks(seconds: float) -> None:
    """Make every mark ``seconds`` older, as if that time had passed."""
    from datetime import timedelta

    from django.db.models import F

    from openclaw_site.models import TeamSearchMark

    TeamSearchMark.objects.update(
        searched_at=F("searched_at") - timedelta(seconds=seconds),
        refused_at=F("refused_at") - timedelta(seconds=seconds),
    )


@pytest.mark.django_db(transaction=True)
def test_a_team_refused_a_slot_rests_after_its_searches_while_another_team_searches(
    world, no_embeddings, rests
):
    from openclaw_site.usage.fair_share import ACTIVE_SECONDS, _marked

    factories.make_document(world.assistant, "MEMORY.md", "the harbour opens at six")
    factories.make_document(world.other_assistant, "MEMORY.md", "the harbour opens at six")
    acme = bearer_client(factories.make_api_key(world.acme, ALL_SCOPES)[1])
    globex = bearer_client(factories.make_api_key(world.globex, ALL_SCOPES)[1])
    search = {"q": "harbour"}

    # Alone, a team searching flat out never rests, refused or not.
    assert acme.get(f"{API}/assistants/helper/search/", search).status_code == 200
    with slots_taken(world.acme.pk, TeamWork.SEARCH, settings.TEAM_SEARCH_SLOTS):
        assert_error(acme.get(f"{API}/assistants/helper/search/", search), 429, "team_busy")
    assert acme.get(f"{API}/assistants/helper/search/", search).status_code == 200
    assert rests == []

    # Another team searches: the team that asked for more than its slots rests after each
    # search, for as long as it ran; the other team, within its share, never does.
    assert globex.get(f"{API}/assistants/rival/search/", search).status_code == 200
    assert acme.get(f"{API}/assistants/helper/search/", search).status_code == 200
    assert len(rests) == 1 and rests[0] > 0
    for _ in range(3):
        assert globex.get(f"{API}/assistants/rival/search/", search).status_code == 200
    assert len(rests) == 1

    # Once the other team has not searched for ACTIVE_SECONDS, the busy team has the server again.
    age_marks(ACTIVE_SECONDS + 1)
    _marked.clear()
    with slots_taken(world.acme.pk, TeamWork.SEARCH, settings.TEAM_SEARCH_SLOTS):
        assert_error(acme.get(f"{API}/assistants/helper/search/", search), 429, "team_busy")
    assert acme.get(f"{API}/assistants/helper/search/", search).status_code == 200
    assert len(rests) == 1


@pytest.mark.django_db(transaction=True)
def test_an_import_rests_between_documents_while_another_team_searches(
    world, no_embeddings, rests, tmp_path, monkeypatch
):
    from openclaw_site.usage.fair_share import Pacer

    monkeypatch.setattr(Pacer, "PACE_CHECK_SECONDS", 0.0)
    (tmp_path / "memory").mkdir()
    for n in range(3):
        (tmp_path / "memory" / f"note-{n}.md").write_text(f"note {n}\n")
    import_workspace(directory=tmp_path, team_slug="acme", assistant_slug="alone")
    assert rests == []  # nobody else searched

    factories.make_document(world.other_assistant, "MEMORY.md", "the harbour opens at six")
    globex = bearer_client(factories.make_api_key(world.globex, ALL_SCOPES)[1])
    assert globex.get(f"{API}/assistants/rival/search/", {"q": "harbour"}).status_code == 200
    import_workspace(directory=tmp_path, team_slug="acme", assistant_slug="beside")
    assert len(rests) == 3  # one look, and one rest, after each document
    assert MemoryDocument.objects.filter(assistant__slug="beside").count() == 3


def test_the_pace_is_a_setting_and_zero_turns_it_off():
    environment = {k: v for k, v in os.environ.items() if k != "OPENCLAW_TEAM_SEARCH_PACE"}
    environment.update(DATABASE_URL="postgres://pure-tests-use-no-database@127.0.0.1:1/none")
    code = "from config import settings; print(settings.TEAM_SEARCH_PACE)"
    for env, expected in (({}, "2.0"), ({"OPENCLAW_TEAM_SEARCH_PACE": "0"}, "0.0")):
        run = subprocess.run(
            [sys.executable, "-c", code], env={**environment, **env}, capture_output=True, text=True
        )
        assert run.returncode == 0 and run.stdout.strip() == expected, run.stderr
