"""Team-scoped reads of sessions (sessions_app.selectors): a team's own sessions, never another's."""

from __future__ import annotations

import pytest
from django.utils import timezone

from openclaw_site.selectors import NotFound
from sessions_app.models import CompactionEntry, CompactionRun
from sessions_app.selectors import (
    compaction_entry_list,
    compaction_run_list,
    message_get,
    session_get,
    session_list,
)
from tests import factories
from tests.api_support import API, assert_error

pytestmark = pytest.mark.django_db


def test_session_get_finds_the_teams_own_and_refuses_another_teams(world):
    ours = factories.make_session(world.assistant)
    theirs = factories.make_session(world.other_assistant)
    found = session_get(team=world.acme, pk=ours.pk)
    assert found == ours and found.assistant == world.assistant
    assert session_get(team=world.globex, pk=theirs.pk) == theirs
    with pytest.raises(NotFound) as missing:
        session_get(team=world.acme, pk=theirs.pk)
    assert missing.value.what == "Session" and str(missing.value) == "No such session in this team."


def test_session_list_holds_the_assistants_sessions_with_message_counts(world):
    quiet = factories.make_session(world.assistant, "quiet")
    busy = factories.make_session(world.assistant, "busy")
    factories.add_messages(busy, {"role": "user", "content": "one"}, {"role": "user", "content": "two"})
    factories.make_session(world.other_assistant, "theirs")
    listed = list(session_list(assistant=world.assistant))
    assert [(s.key, s.message_count) for s in listed] == [("busy", 2), ("quiet", 0)]
    assert quiet in listed


def test_message_get_reads_within_the_session(world):
    session = factories.make_session(world.assistant)
    other = factories.make_session(world.assistant)
    [message] = factories.add_messages(session, {"role": "user", "content": "hello"})
    assert message_get(session=session, seq=message.seq) == message
    with pytest.raises(NotFound) as missing:
        message_get(session=other, seq=message.seq)
    assert str(missing.value) == "No such message in this session."


def test_compaction_lists_read_one_session_in_their_orders(world):
    session, other = factories.make_session(world.assistant), factories.make_session(world.assistant)

    def entry(target, seq):
        return CompactionEntry.objects.create(
            session=target,
            seq=seq,
            summary="s",
            first_kept_entry_id="x",
            tokens_before=1,
            trigger="manual",
            created_at=timezone.now(),
        )

    late, early = entry(session, 9), entry(session, 3)
    entry(other, 1)
    first = CompactionRun.objects.create(session=session, trigger="manual", state="failed")
    second = CompactionRun.objects.create(session=session, trigger="manual", state="committed", entry=late)
    CompactionRun.objects.create(session=other, trigger="manual", state="failed")
    assert list(compaction_entry_list(session=session)) == [early, late]
    runs = list(compaction_run_list(session=session))
    assert runs == [second, first] and runs[0].entry == late


def test_the_api_keeps_the_session_404_message(api, world):
    theirs = factories.make_session(world.other_assistant)
    error = assert_error(api.get(f"{API}/sessions/{theirs.pk}/"), 404, "not_found")
    assert error["message"] == "Session not found."
