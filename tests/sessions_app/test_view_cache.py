"""The per-process view cache (sessions_app.view_cache): a cached view is always the view the
database holds, and extending it reads only the messages stored since."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from sessions_app import view_cache
from sessions_app.context import session_entries
from sessions_app.messages import validate_message
from sessions_app.model_output import store_messages
from tests import factories
from tests.messages import chatter, user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def empty_cache():
    view_cache.clear()
    yield
    view_cache.clear()


def fresh_entries(session, settings) -> list[dict]:
    """The view built from the database alone."""
    held = settings.SESSION_VIEW_CACHE_MESSAGES
    settings.SESSION_VIEW_CACHE_MESSAGES = 0
    try:
        view_cache.forget(session.pk)
        return session_entries(session)
    finally:
        settings.SESSION_VIEW_CACHE_MESSAGES = held


def test_a_cached_view_follows_appends_flush_turns_and_compactions(world, settings) -> None:
    session = factories.make_session(world.assistant, key="cached")
    messages = factories.add_messages(session, *chatter(5))
    session_entries(session)

    factories.add_messages(session, *chatter(2, start=5))
    assert session_entries(session) == fresh_entries(session, settings)
    session_entries(session)

    store_messages(session.pk, [validate_message(user("flush now"), max_bytes=10_000)], flush_turn=True)
    factories.add_compaction(session, first_kept=messages[6])
    assert [e["type"] for e in session_entries(session)][:1] == ["message"]
    assert session_entries(session) == fresh_entries(session, settings)

    factories.add_messages(session, *chatter(1, start=7))
    assert session_entries(session) == fresh_entries(session, settings)
    assert sum(e["type"] == "compaction" for e in session_entries(session)) == 1


def test_extending_a_view_reads_only_the_new_messages(world, settings) -> None:
    session = factories.make_session(world.assistant, key="cached")
    factories.add_messages(session, *chatter(20))
    session_entries(session)
    session.refresh_from_db()
    last_seq = session.last_seq
    factories.add_messages(session, *chatter(1, start=20))

    with CaptureQueriesContext(connection) as queries:
        entries = session_entries(session)

    reads = [q["sql"] for q in queries.captured_queries if 'FROM "sessions_app_message"' in q["sql"]]
    assert len(reads) == 1 and f'"seq" >= {last_seq}' in reads[0]
    assert len(entries) == 42
    assert entries == fresh_entries(session, settings)


def test_a_view_read_inside_a_rolled_back_transaction_is_not_reused(world, settings) -> None:
    session = factories.make_session(world.assistant, key="cached")
    factories.add_messages(session, *chatter(3))
    with pytest.raises(RuntimeError), transaction.atomic():
        factories.add_messages(session, user("never stored"))
        assert session_entries(session)[-1]["message"]["content"] == "never stored"
        raise RuntimeError("roll back")

    factories.add_messages(session, user("stored"))

    entries = session_entries(session)
    assert [e["message"]["content"] for e in entries[-1:]] == ["stored"]
    assert entries == fresh_entries(session, settings)


def test_views_past_the_limit_are_evicted_least_recently_used_first(world, settings) -> None:
    settings.SESSION_VIEW_CACHE_MESSAGES = 20
    first, second = (factories.make_session(world.assistant, key=k) for k in ("first", "second"))
    for session in (first, second):
        factories.add_messages(session, *chatter(6))
        session_entries(session)

    assert view_cache.get(first.pk, None) is None
    assert view_cache.get(second.pk, None) is not None
