"""The session path costs what the model sees, not the history (docs/design.md §D11).

An append, a context build and the session figures issue the same number of queries whether a
session holds 10 or 1,000 messages, and nothing before the latest compaction's first kept message
is read. Entry ids are random, kept unique by the database, and drawn again on the rare clash.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from openclaw_site.teams.assistant_settings import validate_settings
from sessions_app import transcript
from sessions_app.compaction.compact import compact_session
from sessions_app.context.build import build_model_context
from sessions_app.context.figures import token_figures
from sessions_app.context.view import session_entries
from sessions_app.messages import validate_message
from sessions_app.models import CompactionEntry, Message, Session
from tests import factories
from tests.messages import chatter, user

pytestmark = pytest.mark.django_db


def queries_of(action: Callable[[], Any]) -> int:
    with CaptureQueriesContext(connection) as captured:
        action()
    return len(captured.captured_queries)


def session_with(world: Any, pairs: int) -> Session:
    session = factories.make_session(world.assistant)
    factories.add_messages(session, *chatter(pairs, words=5))
    return session


def append_one(session: Session) -> Callable[[], Any]:
    message = validate_message(user("one more"), max_bytes=10**6)
    return lambda: transcript.append_messages(session_id=session.pk, messages=[message])


def test_an_append_issues_the_same_queries_at_10_and_1000_messages(world, no_llm):
    small, large = session_with(world, 5), session_with(world, 500)
    assert queries_of(append_one(small)) == queries_of(append_one(large))


def test_a_batch_append_issues_the_same_queries_as_a_single_one(world, no_llm):
    session = session_with(world, 5)
    batch = [validate_message(user(f"m{i}"), max_bytes=10**6) for i in range(200)]
    single = queries_of(append_one(session))
    assert queries_of(lambda: transcript.append_messages(session_id=session.pk, messages=batch)) == single


def test_context_and_figures_issue_the_same_queries_at_10_and_1000_messages(world, no_llm):
    small, large = session_with(world, 5), session_with(world, 500)
    for build in (build_model_context, token_figures):
        assert queries_of(partial(build, small)) == queries_of(partial(build, large))


def test_the_context_reads_nothing_before_the_first_kept_message(world, no_llm):
    world.assistant.settings = validate_settings({"compaction": {"keepRecentTokens": 40}})
    world.assistant.save()
    views = []
    for pairs in (5, 500):
        session = session_with(world, pairs)
        compact_session(session_id=session.pk, trigger="manual")
        factories.add_messages(session, *chatter(3, words=5))
        entry = CompactionEntry.objects.get(session=session)
        entries = session_entries(session)
        assert entries[0]["seq"] == entry.first_kept.seq  # the view starts at the first kept message
        views.append(len(entries))
    # The same budget keeps about the same few messages, whatever came before them.
    assert abs(views[0] - views[1]) <= 2 and views[1] < 20


def test_the_transcript_size_is_kept_by_each_append(world, no_llm):
    session = session_with(world, 3)
    factories.add_messages(session, user("日本語 and ascii"))
    session.refresh_from_db()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT SUM(OCTET_LENGTH(content::text)) FROM sessions_app_message WHERE session_id = %s",
            [session.pk],
        )
        (expected,) = cursor.fetchone()
    assert session.transcript_bytes == expected > 0


def test_a_clashing_entry_id_is_drawn_again(world, no_llm, monkeypatch):
    session = session_with(world, 1)
    taken = Message.objects.filter(session=session).values_list("entry_id", flat=True).first()
    draws = iter([taken, "0000beef"])
    monkeypatch.setattr(transcript, "new_entry_id", lambda: next(draws))
    [stored] = factories.add_messages(session, user("after the clash"))
    assert stored.entry_id == "0000beef"
    assert Message.objects.filter(session=session).count() == 3  # nothing lost, nothing doubled


def test_only_the_clashing_row_of_a_batch_is_drawn_again(world, no_llm, monkeypatch):
    session = session_with(world, 1)
    taken = Message.objects.filter(session=session).values_list("entry_id", flat=True).first()
    draws = iter(["000000a1", taken, "000000a3", "000000b2"])
    monkeypatch.setattr(transcript, "new_entry_id", lambda: next(draws))
    stored = factories.add_messages(session, user("one"), user("two"), user("three"))
    assert [row.entry_id for row in stored] == ["000000a1", "000000b2", "000000a3"]
    assert [row.seq for row in stored] == [3, 4, 5]
    rows = Message.objects.filter(session=session).order_by("seq")
    assert [row.entry_id for row in rows][2:] == ["000000a1", "000000b2", "000000a3"]
    session.refresh_from_db()
    assert session.last_seq == 5 and session.transcript_bytes == transcript.stored_content_bytes(session)


def test_an_id_held_by_a_compaction_entry_is_not_given_to_a_message(world, no_llm, monkeypatch):
    world.assistant.settings = validate_settings({"compaction": {"keepRecentTokens": 100}})
    world.assistant.save()
    session = session_with(world, 6)
    compact_session(session_id=session.pk, trigger="manual")
    held = CompactionEntry.objects.get(session=session).entry_id
    draws = iter([held, "1234abcd"])
    monkeypatch.setattr(transcript, "new_entry_id", lambda: next(draws))
    [stored] = factories.add_messages(session, user("next"))
    assert stored.entry_id == "1234abcd"


def test_ids_that_keep_clashing_fail_the_append_and_store_nothing(world, no_llm, monkeypatch):
    session = session_with(world, 1)
    taken = Message.objects.filter(session=session).values_list("entry_id", flat=True).first()
    monkeypatch.setattr(transcript, "new_entry_id", lambda: taken)
    before = Message.objects.filter(session=session).count()
    with pytest.raises(RuntimeError, match="no free entry ids"):
        factories.add_messages(session, user("never stored"))
    assert Message.objects.filter(session=session).count() == before


def test_a_context_build_counts_no_stored_message_again(world, no_llm, monkeypatch):
    from memory_app import tokens

    session = session_with(world, 50)
    counted: list[str] = []
    count = tokens._estimate_message_tokens
    monkeypatch.setattr(tokens, "_estimate_message_tokens", lambda m: counted.append(m["role"]) or count(m))

    context = build_model_context(session)
    assert context.prompt_estimate > 0 and context.breakdown(context_window=200000).messages > 0
    # Every message was counted when it was stored; the build, the estimate and the breakdown reuse that.
    assert counted == []
