"""Deleting what running work works on ends that work cleanly (docs/design.md, Background work).

Each deletion happens in another thread, with its own database connection, while the work waits
for the scripted model server (`tests/fake_openai.py`): a compaction for its summary, an index run
for its vectors. The work then stops with a clear answer or a task record that says why, never a
500 or a raw database error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction

from memory_app.index.jobs import queue_reindex
from memory_app.models import EmbeddingCache, MemoryChunk
from openclaw_site.models import Assistant, TaskRecord
from openclaw_site.teams.services import assistant_delete
from sessions_app import services
from sessions_app.compaction.compact import compact_session
from sessions_app.compaction.errors import CompactionRefused
from sessions_app.indexing import schedule_session_index
from sessions_app.models import CompactionEntry, CompactionRun, Session
from tests import factories
from tests.api_support import API, assert_error
from tests.chat_requests import SUMMARY_TEXT, router
from tests.conftest import bearer_client
from tests.fake_openai import FakeOpenAI
from tests.messages import chatter
from tests.views_support import HX, signed_in

pytestmark = pytest.mark.django_db(transaction=True)

WAIT_SECONDS = 60  # a bound on waiting for the other thread, never a timing under test


def long_session(world: Any) -> Session:
    from openclaw_site.teams.assistant_settings import validate_settings

    world.assistant.settings = validate_settings({"compaction": {"keepRecentTokens": 300}})
    world.assistant.save()
    session = factories.make_session(world.assistant)
    factories.add_messages(session, *chatter(8))
    return session


def summary_that_waits(reached: threading.Event, release: threading.Event) -> Callable[[Any], str]:
    """A summariser answer given only once the test has done what it does meanwhile."""

    def answer(request: Any) -> str:
        reached.set()
        release.wait(WAIT_SECONDS)
        return SUMMARY_TEXT

    return answer


def in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Start ``work`` in a thread with its own connection; its result or exception lands in the list."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(work())
        except BaseException as error:  # handed to the test, which asserts on it
            outcome.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def test_a_session_deleted_during_its_rest_compaction_answers_410(world, llm, acme_secret):
    session = long_session(world)
    reached, release = threading.Event(), threading.Event()
    llm.default_chat = router(summary=summary_that_waits(reached, release))
    compacting = bearer_client(acme_secret)
    thread, outcome = in_thread(
        lambda: compacting.post(f"{API}/sessions/{session.pk}/compact/", {}, format="json")
    )
    assert reached.wait(WAIT_SECONDS)
    deleted = bearer_client(acme_secret).delete(f"{API}/sessions/{session.pk}/")
    release.set()
    thread.join(WAIT_SECONDS)
    assert deleted.status_code == 204
    error = assert_error(outcome[0], 410, "session_deleted")
    assert "deleted" in error["message"] and "wrote nothing" in error["message"]
    assert not Session.objects.filter(pk=session.pk).exists()
    assert not CompactionRun.objects.exists() and not CompactionEntry.objects.exists()


def test_a_session_deleted_during_a_dashboard_compaction_goes_back_to_the_list(world, llm):
    session = long_session(world)
    reached, release = threading.Event(), threading.Event()
    llm.default_chat = router(summary=summary_that_waits(reached, release))
    client = signed_in(world.alice)
    thread, outcome = in_thread(
        lambda: client.post(f"/sessions/{session.pk}/compact/", {"instructions": "Keep it short"}, **HX)
    )
    assert reached.wait(WAIT_SECONDS)
    services.session_delete(session=session)
    release.set()
    thread.join(WAIT_SECONDS)
    response = outcome[0]
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/assistants/{world.assistant.slug}/sessions/"
    listing = client.get(response["HX-Redirect"]).content.decode()
    assert "The session was deleted, so the compaction stopped and wrote nothing." in listing


def test_a_compaction_queued_for_a_deleted_session_is_refused_as_such(world, no_llm):
    session = long_session(world)
    services.session_delete(session=session)
    with pytest.raises(CompactionRefused) as refused:
        compact_session(session_id=session.pk, trigger="manual")
    assert (refused.value.code, refused.value.status) == ("session_deleted", 410)


def delete_once_embedding_starts(fake: FakeOpenAI, delete: Callable[[], None]) -> threading.Event:
    """Delete (in the model server's thread) when the first embeddings request arrives."""
    done = threading.Event()

    def hook(body: Any) -> None:
        if done.is_set():
            return
        try:
            delete()
        finally:
            connection.close()
            done.set()

    fake.on_embeddings = hook
    return done


def test_a_reindex_of_an_assistant_deleted_meanwhile_stops_and_says_why(world, fake_embeddings):
    for n in range(5):
        factories.make_document(world.assistant, f"memory/note-{n}.md", f"note {n} about the harbour")
    EmbeddingCache.objects.all().delete()  # so the reindex asks the embedder again
    assistant_id = world.assistant.pk
    deleted = delete_once_embedding_starts(
        fake_embeddings, lambda: assistant_delete(assistant=Assistant.objects.get(pk=assistant_id))
    )
    with transaction.atomic():  # the task runs inline once this commits (OPENCLAW_TASKS_SYNC)
        record = queue_reindex(world.assistant, full=True)
    assert deleted.is_set()
    record.refresh_from_db()
    assert record.state == "failed" and record.assistant_id is None
    assert record.error == (
        "Stopped: the assistant was deleted while its index was being built; nothing more was indexed."
    )
    assert record.result == {"stopped": record.error.removeprefix("Stopped: ")}
    assert not MemoryChunk.objects.filter(assistant_id=assistant_id).exists()
    jobs = signed_in(world.alice).get("/jobs/").content.decode()
    assert "the assistant was deleted while its index was being built" in jobs
    assert "IntegrityError" not in jobs and "DoesNotExist" not in jobs


def test_a_transcript_index_of_a_session_deleted_meanwhile_stops_and_leaves_no_rows(world, fake_embeddings):
    session = factories.make_session(world.assistant, "doomed")
    factories.add_messages(session, *chatter(6))
    EmbeddingCache.objects.all().delete()
    deleted = delete_once_embedding_starts(
        fake_embeddings, lambda: services.session_delete(session=Session.objects.get(pk=session.pk))
    )
    with transaction.atomic():
        assert schedule_session_index(session.pk)
    assert deleted.is_set()
    record = TaskRecord.objects.get(kind="index_session_transcript", object_ids__session=session.pk)
    assert record.state == "failed"
    assert record.error.startswith("Stopped: the session was deleted while its transcript was being indexed")
    assert not MemoryChunk.objects.filter(assistant=world.assistant, session_pk=session.pk).exists()
    jobs = signed_in(world.alice).get("/jobs/").content.decode()
    assert "the session was deleted while its transcript was being indexed" in jobs
    assert "IntegrityError" not in jobs
