"""Races answer what to retry, never a 500 or a 503 (docs/design.md, Limits and refusals).

Real parallel requests on real Postgres, each thread with its own connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import connection, transaction
from django.test import Client

from memory_app.documents import Provenance, write_document
from memory_app.models import MemoryDocument
from openclaw_site.models import Membership
from tests import factories
from tests.db_support import other_connection
from tests.test_api_concurrency import run_in_threads
from tests.views_support import signed_in

WAIT_SECONDS = 60  # a bound on waiting for another thread, never a timing under test


@pytest.mark.django_db(transaction=True)
@pytest.mark.urls("tests.urls_errors")
def test_a_deadlock_is_409_conflict_retry_not_503(world):
    response = Client().get("/api/v1/test/deadlock/")
    assert response.status_code == 409 and response["Retry-After"] == "1"
    error = response.json()["error"]
    assert error["code"] == "conflict_retry" and "Send it again" in error["message"]
    page = Client(raise_request_exception=False).get("/test/deadlock-page/")
    assert page.status_code == 409 and b"Send it again" in page.content


@pytest.mark.django_db(transaction=True)
def test_two_admins_demoting_each_other_leave_one_admin_and_no_error(world):
    dave = factories.make_user("dave", team=world.acme, role="admin")
    alice_m = Membership.objects.get(team=world.acme, user=world.alice)
    dave_m = Membership.objects.get(team=world.acme, user=dave)
    clients = [signed_in(world.alice), signed_in(dave)]
    targets = [dave_m.pk, alice_m.pk]
    for _ in range(4):
        Membership.objects.filter(pk__in=targets).update(role="admin")

        def demote(index: int) -> tuple[int, list[str]]:
            response = clients[index].post(f"/team/members/{targets[index]}/role/", {"role": "member"})
            return response.status_code, [str(m) for m in get_messages(response.wsgi_request)]

        outcomes = run_in_threads(2, demote)
        statuses = sorted(status for status, _ in outcomes)
        # Whichever demotion lands second finds its author no longer an admin (403 at the door) or
        # finds the team down to one admin (refused with a message): never a 5xx.
        assert statuses in ([302, 302], [302, 403]), outcomes
        said = sorted(text for _, texts in outcomes for text in texts)
        assert any("is now member" in text for text in said), said
        if statuses == [302, 302]:
            assert any("needs an admin" in text for text in said), said
        assert Membership.objects.filter(pk__in=targets, role="admin").count() == 1


@pytest.mark.django_db(transaction=True)
def test_adding_one_person_twice_at_once_is_one_add_and_one_clear_refusal(world):
    clients = [signed_in(world.alice), signed_in(world.alice)]

    def add(index: int) -> tuple[int, str]:
        response = clients[index].post("/team/members/", {"identifier": "charlie", "role": "member"})
        return response.status_code, response.content.decode()

    outcomes = run_in_threads(2, add)
    assert sorted(status for status, _ in outcomes) == [200, 422], [s for s, _ in outcomes]
    assert any("is in Acme already" in body for _, body in outcomes)
    assert Membership.objects.filter(team=world.acme, user=world.charlie).count() == 1


def wait_until_waiting_on_a_lock(count: int = 1) -> None:
    """Return once ``count`` backends wait for a row or index lock (the race's loser is queued)."""
    deadline = time.monotonic() + WAIT_SECONDS
    with other_connection() as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            ).fetchone()
            if row is not None and row[0] >= count:
                return
            time.sleep(0.02)
    raise AssertionError("no request ever waited for the lock")


def in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(work())
        except BaseException as error:  # asserted on by the test
            outcome.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


@pytest.mark.django_db(transaction=True)
def test_a_dashboard_rename_racing_a_create_of_the_same_path_is_refused_not_500(world):
    document = factories.make_document(world.assistant, "memory/draft.md", "the draft")
    created, release = threading.Event(), threading.Event()

    def create() -> None:
        with transaction.atomic():
            write_document(
                assistant=world.assistant,
                path="memory/final.md",
                content="written by the other request",
                provenance=Provenance(author="user"),
                expected_hash="",
            )
            created.set()
            release.wait(WAIT_SECONDS)

    creator, created_outcome = in_thread(create)
    assert created.wait(WAIT_SECONDS)
    client = signed_in(world.alice)
    renamer, renamed = in_thread(
        lambda: client.post(
            f"/assistants/{world.assistant.slug}/memory/rename/memory/draft.md", {"path": "memory/final.md"}
        )
    )
    wait_until_waiting_on_a_lock()  # the rename found the path free and now waits on the insert
    release.set()
    creator.join(WAIT_SECONDS)
    renamer.join(WAIT_SECONDS)
    assert created_outcome == [None]
    response = renamed[0]
    assert response.status_code == 302, response
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Not renamed: memory/final.md already exists."
    ]
    assert MemoryDocument.objects.get(pk=document.pk).path == "memory/draft.md"
    final = MemoryDocument.objects.get(assistant=world.assistant, path="memory/final.md")
    assert final.content == "written by the other request"
