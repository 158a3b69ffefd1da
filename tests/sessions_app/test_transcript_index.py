"""Session transcripts in memory search (docs/openclaw-behaviour.md §4.11, docs/design.md §D10), on real Postgres."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from memory_app.index import extend
from memory_app.models import FTS_ONLY_MODEL, EmbeddingCache, IndexedSource, MemoryChunk, Source
from memory_app.search.hybrid import hybrid_search
from openclaw_site.models import TaskRecord
from sessions_app.indexing import (
    index_session_transcript,
    message_text,
    note_transcript_change,
    pending_delta,
    session_entry,
    transcript_lines,
)
from sessions_app.models import CompactionEntry, Message, Session
from tests import factories
from tests.fake_openai import FakeOpenAI
from tests.messages import assistant, chatter, tool_call, tool_result, user

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def conversation(session, *, start: datetime = T0):
    """A transcript with every kind of entry that must or must not be indexed."""
    return factories.add_messages(
        session,
        {
            "role": "user",
            "content": "Hi!\n\n  Can you   remember that our   staging DB is heron-db?",
            "timestamp": int(start.timestamp() * 1000),
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "secret plan"},
                {"type": "text", "text": "Noted:"},
                {"type": "text", "text": "staging DB is heron-db."},
                {"type": "toolCall", "id": "c1", "name": "memory_get", "arguments": {}},
            ],
            "usage": {"input": 10, "output": 5},
            "timestamp": int((start + timedelta(minutes=1)).timestamp() * 1000),
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "memory_get",
            "content": [{"type": "text", "text": "TOOL OUTPUT heron"}],
            "timestamp": int((start + timedelta(minutes=2)).timestamp() * 1000),
        },
        {
            "role": "user",
            "content": "My API key is sk-proj-abcdefghijklmnopqrstuvwxyz123456, keep it safe.",
            "timestamp": int((start + timedelta(minutes=3)).timestamp() * 1000),
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "I will not repeat it."}],
            "usage": {"input": 10, "output": 5},
            "timestamp": int((start + timedelta(minutes=4)).timestamp() * 1000),
        },
    )


def test_message_text_takes_strings_and_text_blocks() -> None:
    assert message_text("plain") == "plain"
    assert (
        message_text(
            [{"type": "text", "text": "a"}, {"type": "image", "data": "x"}, {"type": "text", "text": "b"}]
        )
        == "a b"
    )
    assert message_text(None) == ""


def test_transcript_lines_keep_user_and_assistant_text_only(world) -> None:
    session = factories.make_session(world.assistant, key="chat-1")
    conversation(session)
    factories.add_messages(session, {"role": "system", "content": "You are terse."})
    Message.objects.filter(session=session, seq=5).update(silent=True)  # e.g. a flush turn's reply

    rendered = transcript_lines(Message.objects.filter(session=session).order_by("seq"))

    assert rendered.lines == [
        "User: Hi! Can you remember that our staging DB is heron-db?",
        "Assistant: Noted: staging DB is heron-db.",
        "User: My API key is sk-pro…3456, keep it safe.",
    ]
    assert rendered.seqs == [1, 2, 4]
    assert rendered.times[0] == T0 and rendered.times[2] == T0 + timedelta(minutes=3)


def test_index_maps_lines_to_seqs_and_keeps_message_times(world, fake_embeddings) -> None:
    session = factories.make_session(world.assistant, key="chat-1")
    conversation(session)

    index_session_transcript(session.pk)

    [chunk] = MemoryChunk.objects.filter(assistant=world.assistant, source=Source.SESSIONS)
    assert (chunk.path, chunk.session_pk) == ("sessions/chat-1.jsonl", session.pk)
    assert (chunk.start_line, chunk.end_line) == (1, 5)
    assert chunk.line_numbers == [1, 2, 4, 5]
    assert chunk.timestamp == T0 + timedelta(minutes=4)
    assert "sk-proj-abcdefghijklmnopqrstuvwxyz123456" not in chunk.text
    assert "TOOL OUTPUT" not in chunk.text and "secret plan" not in chunk.text
    assert IndexedSource.objects.get(source=Source.SESSIONS, key=str(session.pk)).indexed_upto == 5


def test_session_results_cite_the_session_and_message_seqs(world, fake_embeddings) -> None:
    session = factories.make_session(world.assistant, key="chat-1")
    conversation(session)
    index_session_transcript(session.pk)

    response = hybrid_search(
        assistant=world.assistant,
        query="staging DB heron-db",
        snippet_mode="best",
        snippet_max_chars=120,
        explain=True,
    )

    [result] = response.results
    assert result.source == "sessions" and result.session_id == session.pk
    assert result.path == "sessions/chat-1.jsonl"
    assert (result.start_line, result.end_line) == (1, 2)
    assert result.citation == "sessions/chat-1.jsonl#L1-L2"
    assert result.snippet.startswith("User: Hi!")


def test_session_chunks_decay_by_message_time(world, fake_embeddings) -> None:
    old = factories.make_session(world.assistant, key="old")
    factories.add_messages(
        old, {"role": "user", "content": "the pelican budget is 40k", "timestamp": int(T0.timestamp() * 1000)}
    )
    index_session_transcript(old.pk)
    now = T0 + timedelta(days=30)

    [result] = hybrid_search(
        assistant=world.assistant, query="pelican budget", decay=True, now=now, explain=True, min_score=0
    ).results

    assert result.explain["decay_multiplier"] == pytest.approx(0.5)


def test_thresholds_gate_indexing(world, fake_embeddings, django_capture_on_commit_callbacks) -> None:
    world.assistant.settings["memorySearch"]["sync"]["sessions"] = {
        "deltaBytes": 100000,
        "deltaMessages": 3,
        "postCompactionForce": True,
    }
    world.assistant.save()
    session = factories.make_session(world.assistant, key="s")

    with django_capture_on_commit_callbacks(execute=True):
        factories.add_messages(
            session,
            {"role": "user", "content": "one walrus"},
            {"role": "assistant", "content": [{"type": "text", "text": "two"}]},
        )
    assert not MemoryChunk.objects.filter(source=Source.SESSIONS).exists()
    assert pending_delta(session)[1] == 2

    with django_capture_on_commit_callbacks(execute=True):
        factories.add_messages(session, {"role": "user", "content": "three walruses"})
    assert MemoryChunk.objects.filter(source=Source.SESSIONS, session_pk=session.pk).exists()
    assert pending_delta(session) == (0, 0)
    assert note_transcript_change(session.pk) is False


def test_byte_threshold_also_triggers(world, fake_embeddings, django_capture_on_commit_callbacks) -> None:
    world.assistant.settings["memorySearch"]["sync"]["sessions"] = {
        "deltaBytes": 500,
        "deltaMessages": 50,
        "postCompactionForce": True,
    }
    world.assistant.save()
    session = factories.make_session(world.assistant, key="s")
    with django_capture_on_commit_callbacks(execute=True):
        factories.add_messages(session, {"role": "user", "content": "long " * 200})
    assert MemoryChunk.objects.filter(source=Source.SESSIONS, session_pk=session.pk).exists()


def test_a_compaction_indexes_the_transcript(
    world, fake_embeddings, django_capture_on_commit_callbacks
) -> None:
    session = factories.make_session(world.assistant, key="s")
    messages = factories.add_messages(session, {"role": "user", "content": "the otter plan"})
    assert not MemoryChunk.objects.filter(source=Source.SESSIONS).exists()  # under 50 messages

    with django_capture_on_commit_callbacks(execute=True):
        CompactionEntry.objects.create(
            session=session,
            seq=2,
            summary="summary",
            first_kept=messages[0],
            first_kept_entry_id=messages[0].entry_id,
            tokens_before=100,
            trigger="manual",
            created_at=T0,
        )

    assert MemoryChunk.objects.filter(source=Source.SESSIONS, session_pk=session.pk).exists()


def test_deleting_a_session_removes_its_chunks(world, fake_embeddings) -> None:
    session = factories.make_session(world.assistant, key="gone")
    conversation(session)
    index_session_transcript(session.pk)
    session.delete()
    assert not MemoryChunk.objects.filter(source=Source.SESSIONS).exists()


def test_sessions_can_be_left_out_of_the_index(world, fake_embeddings) -> None:
    world.assistant.settings["memorySearch"]["sources"] = ["memory"]
    world.assistant.save()
    session = factories.make_session(world.assistant, key="s")
    conversation(session)
    outcome = index_session_transcript(session.pk)
    assert outcome.skipped == 1 and not MemoryChunk.objects.filter(source=Source.SESSIONS).exists()


def test_a_full_reindex_covers_transcripts(world, fake_embeddings) -> None:
    from memory_app.index.rebuild import reindex_assistant

    session = factories.make_session(world.assistant, key="s")
    conversation(session)
    reindex_assistant(world.assistant.pk, full=True)
    assert MemoryChunk.objects.filter(source=Source.SESSIONS, session_pk=session.pk).exists()


def test_transcript_hash_changes_with_content(world) -> None:
    session = factories.make_session(world.assistant, key="s")
    factories.add_messages(session, {"role": "user", "content": "a"})
    before = session_entry(session).source_hash
    factories.add_messages(session, {"role": "user", "content": "b"})
    session.refresh_from_db()
    after = session_entry(session)
    assert after.source_hash != before and after.upto == 2


def test_the_periodic_refresh_indexes_quiet_sessions_once(
    world, fake_embeddings: FakeOpenAI, django_capture_on_commit_callbacks
) -> None:
    from memory_app.tasks import refresh_indexes
    from sessions_app.indexing import SessionTranscripts

    session = factories.make_session(world.assistant, key="quiet")
    with django_capture_on_commit_callbacks(execute=True):
        factories.add_messages(session, {"role": "user", "content": "the capybara lives upstairs"})
    assert not MemoryChunk.objects.filter(source=Source.SESSIONS).exists()  # under the thresholds
    assert SessionTranscripts().keys(world.assistant.pk, changed_only=True) == [str(session.pk)]

    with django_capture_on_commit_callbacks(execute=True):  # the session's own index job runs
        assert refresh_indexes()["queued"] == 1

    assert MemoryChunk.objects.filter(source=Source.SESSIONS, session_pk=session.pk).exists()
    assert SessionTranscripts().keys(world.assistant.pk, changed_only=True) == []
    calls = len(fake_embeddings.embedding_requests)
    with django_capture_on_commit_callbacks(execute=True):
        assert refresh_indexes()["queued"] == 0
    assert len(fake_embeddings.embedding_requests) == calls


@pytest.fixture
def someone_waiting(world) -> TaskRecord:
    """Another job in the queue: an index run then gives its worker up after each slice."""
    return TaskRecord.objects.create(
        task_id=uuid.uuid4().hex, team=world.acme, kind="export_session", coalesce_key="export-session:0"
    )


def _chunk_rows(session) -> list[tuple[int, int, str, list[int]]]:
    rows = MemoryChunk.objects.filter(source=Source.SESSIONS, session_pk=session.pk).order_by(
        "start_line", "id"
    )
    return [(r.start_line, r.end_line, r.hash, r.line_numbers) for r in rows]


@pytest.mark.parametrize("words", [3, 40, 400])
def test_an_index_run_extends_the_rows_as_a_full_index_would(world, fake_embeddings, words) -> None:
    """Runs after appends re-chunk only the tail, and end with the rows a full pass writes."""

    session = factories.make_session(world.assistant, key="growing")
    for start in range(0, 24, 6):
        factories.add_messages(session, *chatter(6, words=words, start=start))
        call = assistant(calls=[tool_call(f"c{start}", "memory_get")])
        factories.add_messages(session, call, tool_result(f"c{start}", "x", name="memory_get"))
        index_session_transcript(session.pk)
    extended = _chunk_rows(session)

    index_session_transcript(session.pk, force=True)

    assert extended == _chunk_rows(session)
    session.refresh_from_db()
    assert (
        IndexedSource.objects.get(source=Source.SESSIONS, key=str(session.pk)).indexed_upto
        == session.last_seq
    )


def test_an_extending_run_leaves_the_earlier_chunks_alone(world, fake_embeddings) -> None:
    session = factories.make_session(world.assistant, key="growing")
    factories.add_messages(session, *chatter(30, words=40))
    index_session_transcript(session.pk)
    before = dict(MemoryChunk.objects.filter(session_pk=session.pk).values_list("id", "start_line"))
    last_start = max(before.values())

    factories.add_messages(session, *chatter(2, words=40, start=30))
    outcome = index_session_transcript(session.pk)

    after = dict(MemoryChunk.objects.filter(session_pk=session.pk).values_list("id", "start_line"))
    assert outcome.note == "extended"
    assert {pk for pk, line in before.items() if line < last_start} <= set(after)
    assert all(line >= last_start for pk, line in after.items() if pk not in before)
    assert index_session_transcript(session.pk).note == "up to date"


@pytest.mark.parametrize("words", [3, 40, 400])
def test_an_index_run_in_slices_ends_with_the_rows_a_full_index_writes(
    world, someone_waiting, fake_embeddings, words, settings
) -> None:
    """A run out of time writes the chunks it embedded; the next run goes on from the last one."""
    settings.SESSION_INDEX_SLICE_SECONDS = 1e-9  # every run stops as soon as it may
    session = factories.make_session(world.assistant, key="sliced")
    factories.add_messages(session, *chatter(4, words=words))
    index_session_transcript(session.pk)
    factories.add_messages(session, *chatter(30, words=words, start=4))
    runs = []
    while (outcome := index_session_transcript(session.pk)).more:
        runs.append(outcome)
        assert outcome.note == "extended"
        assert len(runs) < 1000
    sliced = _chunk_rows(session)

    index_session_transcript(session.pk, force=True)

    assert len(runs) > 1
    assert sliced == _chunk_rows(session)
    session.refresh_from_db()
    ticket = IndexedSource.objects.get(source=Source.SESSIONS, key=str(session.pk))
    assert ticket.indexed_upto == session.last_seq
    assert index_session_transcript(session.pk).note == "up to date"


def _indexed_then_grown(world, settings, key: str, *more: dict) -> Session:
    """Return a session indexed at 4 messages, then grown by 80 (and ``more``), with 0-length slices."""
    settings.SESSION_INDEX_SLICE_SECONDS = 1e-9
    session = factories.make_session(world.assistant, key=key)
    factories.add_messages(session, *chatter(2, words=40))
    index_session_transcript(session.pk)
    factories.add_messages(session, *chatter(40, words=40, start=2), *more)
    return session


def test_a_slice_writes_all_the_text_at_once_and_the_vectors_follow(
    world, someone_waiting, fake_embeddings, settings
) -> None:
    """Text first, vectors after: one run out of time leaves every new line findable by full text."""
    session = _indexed_then_grown(world, settings, "partial")

    outcome = index_session_transcript(session.pk)

    session.refresh_from_db()
    ticket = IndexedSource.objects.get(source=Source.SESSIONS, key=str(session.pk))
    rows = MemoryChunk.objects.filter(session_pk=session.pk)
    assert outcome.more and ticket.indexed_upto == session.last_seq
    assert set(range(1, session.last_seq + 1)) <= set().union(*rows.values_list("line_numbers", flat=True))
    assert pending_delta(session) == (0, 0)
    assert rows.filter(model=FTS_ONLY_MODEL).exists()

    runs = 1
    while index_session_transcript(session.pk).more:
        runs += 1
        assert runs < 1000
    assert runs > 1
    assert not rows.filter(model=FTS_ONLY_MODEL).exists()
    assert index_session_transcript(session.pk).note == "up to date"


def test_the_jobs_page_shows_how_far_a_transcripts_vectors_are(
    world, someone_waiting, fake_embeddings, settings, django_capture_on_commit_callbacks
) -> None:
    from openclaw_site.jobs.listing import job_row
    from sessions_app.indexing import schedule_session_index

    session = _indexed_then_grown(world, settings, "progress")
    rows = MemoryChunk.objects.filter(session_pk=session.pk)

    with django_capture_on_commit_callbacks(execute=True):
        schedule_session_index(session.pk)

    slices = [job_row(r) for r in TaskRecord.objects.filter(kind="index_session_transcript").order_by("id")]
    first, last = slices[0], slices[-1]
    assert len(slices) > 2 and not rows.filter(model=FTS_ONLY_MODEL).exists()
    session.refresh_from_db()
    assert first.progress_total == session.last_seq and 0 < first.progress_done < first.progress_total
    assert first.progress_message == (
        f"text searchable; vectors up to message {first.progress_done:,} of {session.last_seq:,}"
    )
    assert (last.progress_done, last.progress_message) == (session.last_seq, "vectors complete")
    assert [s.progress_done for s in slices] == sorted(s.progress_done for s in slices)


def test_a_slice_with_time_left_goes_on_past_one_batch_of_earlier_rows(
    world, someone_waiting, fake_embeddings, settings, monkeypatch
) -> None:
    """A fast embedder fills every waiting row in one run, not one batch per trip through the queue."""

    monkeypatch.setattr(extend, "FILL_BATCH", 4)
    session = _indexed_then_grown(world, settings, "fast")
    assert index_session_transcript(session.pk).more
    rows = MemoryChunk.objects.filter(session_pk=session.pk)
    waiting = rows.filter(model=FTS_ONLY_MODEL).count()
    assert waiting > 3 * extend.FILL_BATCH

    settings.SESSION_INDEX_SLICE_SECONDS = 60
    outcome = index_session_transcript(session.pk)

    session.refresh_from_db()
    assert not outcome.more and outcome.lines_with_vectors == outcome.lines == session.last_seq
    assert outcome.embedded >= waiting and not rows.filter(model=FTS_ONLY_MODEL).exists()


def test_with_nobody_waiting_one_run_goes_on_slice_after_slice(world, fake_embeddings, settings) -> None:
    """0-length slices, so a slice embeds one chunk: the run went on through every one of them."""
    session = _indexed_then_grown(world, settings, "alone")
    rows = MemoryChunk.objects.filter(session_pk=session.pk)
    before = rows.count()

    outcome = index_session_transcript(session.pk)

    session.refresh_from_db()
    assert not outcome.more and outcome.lines_with_vectors == outcome.lines == session.last_seq
    assert outcome.embedded == rows.count() - before and not rows.filter(model=FTS_ONLY_MODEL).exists()


def test_a_run_queues_the_rest_after_its_time_even_with_nobody_waiting(
    world, fake_embeddings, settings
) -> None:
    """So it stays inside the task timeout, and a stopping worker does not wait for a whole transcript."""
    session = _indexed_then_grown(world, settings, "long")
    settings.SESSION_INDEX_RUN_SECONDS = 0

    assert index_session_transcript(session.pk).more


def test_a_line_waiting_for_its_vector_is_found_by_its_words(
    world, someone_waiting, fake_embeddings, settings
) -> None:
    session = _indexed_then_grown(world, settings, "waiting", user("Ship it on the marmoset release."))

    assert index_session_transcript(session.pk).more
    [result] = hybrid_search(assistant=world.assistant, query="marmoset", explain=True).results

    session.refresh_from_db()
    assert (result.session_id, result.end_line) == (session.pk, session.last_seq)
    assert MemoryChunk.objects.filter(
        session_pk=session.pk, model=FTS_ONLY_MODEL, text__contains="marmoset"
    ).exists()


def test_the_periodic_refresh_gives_a_lost_vector_job_its_vectors_in_slices(
    world, someone_waiting, fake_embeddings, settings, django_capture_on_commit_callbacks
) -> None:
    """Every line indexed, some without a vector, and the job that was to embed them gone."""
    from memory_app.tasks import refresh_indexes

    session = _indexed_then_grown(world, settings, "lost")
    assert index_session_transcript(session.pk).more  # its next run was queued after the commit: lost
    rows = MemoryChunk.objects.filter(session_pk=session.pk)
    embedded_before = set(rows.exclude(model=FTS_ONLY_MODEL).values_list("id", flat=True))

    with django_capture_on_commit_callbacks(execute=True) as queued:
        refreshed = refresh_indexes()
        assert refreshed["queued"] == 1 and refreshed["chunks_written"] == 0  # not indexed here

    assert len(queued) > 1  # the session's job ran, in slices
    assert not rows.filter(model=FTS_ONLY_MODEL).exists()
    assert embedded_before <= set(rows.values_list("id", flat=True))  # earlier rows kept, not rewritten
    assert index_session_transcript(session.pk).note == "up to date"


def test_a_first_index_is_sliced_as_well(world, someone_waiting, fake_embeddings, settings) -> None:
    settings.SESSION_INDEX_SLICE_SECONDS = 1e-9
    session = factories.make_session(world.assistant, key="first")
    factories.add_messages(session, *chatter(30, words=40))
    other = factories.make_session(world.assistant, key="other")  # the assistant has an index
    factories.add_messages(other, *chatter(1))
    index_session_transcript(other.pk)

    first = index_session_transcript(session.pk)
    while index_session_transcript(session.pk).more:
        pass
    sliced = _chunk_rows(session)
    index_session_transcript(session.pk, force=True)

    assert first.more and first.note == "extended"
    assert sliced == _chunk_rows(session)


@pytest.mark.django_db(transaction=True)
def test_a_second_run_of_a_transcripts_index_waits_for_the_first(world, fake_embeddings) -> None:
    """Side by side, each run would find the other's rows and fall back to a whole pass."""
    from openclaw_site.jobs.runs import Deferred
    from openclaw_site.platform.locks import session_lock
    from sessions_app.indexing import BUSY_RETRY_SECONDS, run_debounced_index

    session = factories.make_session(world.assistant, key="busy")
    factories.add_messages(session, *chatter(4))

    with session_lock(f"transcript-index:{session.pk}"), pytest.raises(Deferred) as deferred:
        run_debounced_index(session.pk)

    wait = (deferred.value.until - datetime.now(UTC)).total_seconds()
    assert 0 < wait <= BUSY_RETRY_SECONDS
    assert not MemoryChunk.objects.filter(session_pk=session.pk).exists()
    assert run_debounced_index(session.pk)["entries"] == 1  # free again: it runs
    assert MemoryChunk.objects.filter(session_pk=session.pk).exists()


@pytest.mark.parametrize("debounce_seconds, handed_over", [(60, False), (0, True), (None, True)])
def test_the_sessions_next_job_takes_the_transcript_over_once_it_may_start(
    world, fake_embeddings, settings, debounce_seconds, handed_over
) -> None:
    """Queued meanwhile, it waits for this run: going on to the end would leave it behind the whole transcript.

    None: queued by the periodic refresh, with no debounced request.
    """
    from memory_app.index import debounce

    session = _indexed_then_grown(world, settings, "handover")
    TaskRecord.objects.create(
        task_id=uuid.uuid4().hex,
        team=world.acme,
        kind="index_session_transcript",
        coalesce_key=f"index-session:{session.pk}",
    )
    if debounce_seconds is not None:
        debounce.request(
            assistant_id=world.assistant.pk,
            source=Source.SESSIONS,
            key=str(session.pk),
            delay_seconds=debounce_seconds,
            max_delay_seconds=debounce_seconds,
        )

    outcome = index_session_transcript(session.pk)

    assert outcome.more is handed_over  # 0-length slices: handed over after the first one


# --- the helper: a busy transcript's vectors on a worker its run leaves idle ---------------------


def _waiting_lines(session) -> list[int]:
    return list(
        MemoryChunk.objects.filter(session_pk=session.pk, model=FTS_ONLY_MODEL)
        .order_by("start_line")
        .values_list("start_line", flat=True)
    )


def test_the_helper_fills_from_the_newest_back_and_leaves_the_last_chunk_to_the_run(
    world, someone_waiting, fake_embeddings, settings
) -> None:
    from memory_app.index.extend import fill_from_newest

    session = _indexed_then_grown(world, settings, "helped")
    assert index_session_transcript(session.pk).more  # someone waits: one slice, the rest waits
    waiting = _waiting_lines(session)
    last_start = MemoryChunk.objects.filter(session_pk=session.pk).order_by("-start_line")[0].start_line
    assert len(waiting) > 3

    filled = fill_from_newest(
        world.assistant, source=Source.SESSIONS, session_pk=session.pk, budget_seconds=1e-9
    )

    newest_before_last = max(line for line in waiting if line < last_start)
    assert filled is not None and filled.embedded == 1 and filled.more
    assert _waiting_lines(session) == [line for line in waiting if line != newest_before_last]

    while (
        filled := fill_from_newest(
            world.assistant, source=Source.SESSIONS, session_pk=session.pk, budget_seconds=60
        )
    ) and filled.more:
        pass
    assert all(line >= last_start for line in _waiting_lines(session))

    # The run and its helper end with the rows one whole pass writes.
    while index_session_transcript(session.pk).more:
        pass
    helped = _chunk_rows(session)
    index_session_transcript(session.pk, force=True)
    assert helped == _chunk_rows(session) and not _waiting_lines(session)


@pytest.mark.django_db(transaction=True)  # the row lock is another connection's
def test_a_fill_skips_a_row_another_transaction_holds_and_leaves_it_waiting(
    world, fake_embeddings, settings
) -> None:
    """Run and helper meet without waiting for each other (waiting deadlocked their UPDATEs)."""
    from django.db import connection

    from memory_app.index.extend import fill_from_newest
    from tests.db_support import other_connection

    session = _indexed_then_grown(world, settings, "met")
    assert not index_session_transcript(session.pk).more  # nobody waiting: to the end
    rows = MemoryChunk.objects.filter(session_pk=session.pk)
    last_start = rows.order_by("-start_line")[0].start_line
    # A burst's state: the rows before the last chunk stored text-only, waiting for vectors.
    rows.filter(start_line__lt=last_start).update(model=FTS_ONLY_MODEL, embedding=None, dims=0)
    held = rows.filter(start_line__lt=last_start).order_by("-start_line")[0]
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '5s'")  # a wait for the row would fail, not hang

    with other_connection() as holder, holder.transaction():
        holder.execute("SELECT 1 FROM memory_app_memorychunk WHERE id = %s FOR UPDATE", [held.pk])
        filled = fill_from_newest(
            world.assistant, source=Source.SESSIONS, session_pk=session.pk, budget_seconds=60
        )

    assert filled is not None  # the vectors came from the embedding cache: the same texts
    assert _waiting_lines(session) == [held.start_line]  # every other row has its vector
    filled = fill_from_newest(
        world.assistant, source=Source.SESSIONS, session_pk=session.pk, budget_seconds=60
    )
    assert filled is not None and not _waiting_lines(session)  # the lock gone, the next fill writes it


@pytest.fixture
def helper_worth_it(world, monkeypatch) -> None:
    """A few waiting rows are worth a helper, and appends queue no index of their own."""

    monkeypatch.setattr(extend, "HELPER_MIN_ROWS", 4)
    world.assistant.settings["memorySearch"]["sync"]["sessions"] = {
        "deltaBytes": 10**9,
        "deltaMessages": 10**6,
        "postCompactionForce": False,
    }
    world.assistant.save()


@pytest.mark.django_db(transaction=True)  # jobs queued after the commit run at once, as in a worker
def test_a_run_alone_asks_for_the_helper_and_one_among_others_or_with_little_left_does_not(
    world, fake_embeddings, settings, monkeypatch, helper_worth_it
) -> None:

    lone = _indexed_then_grown(world, settings, "lone")

    assert not index_session_transcript(lone.pk).more  # nobody waiting: one run to the end

    [helper] = TaskRecord.objects.filter(kind="fill_session_vectors")
    assert helper.coalesce_key == f"fill-session:{lone.pk}" and helper.state == "succeeded"
    assert helper.result["embedded"] > 0 and not _waiting_lines(lone)

    busy = _indexed_then_grown(world, settings, "among-others")
    TaskRecord.objects.create(  # another session's export, running on the other worker
        task_id=uuid.uuid4().hex,
        team=world.acme,
        kind="export_session",
        state="running",
        started_at=datetime.now(UTC),
    )
    assert not index_session_transcript(busy.pk).more
    assert not TaskRecord.objects.filter(kind="fill_session_vectors", coalesce_key=f"fill-session:{busy.pk}")
    assert not _waiting_lines(busy)

    TaskRecord.objects.filter(state="running").update(state="succeeded")
    monkeypatch.setattr(extend, "HELPER_MIN_ROWS", 10**6)  # too little waiting to be worth a second worker
    small = _indexed_then_grown(world, settings, "small")
    assert not index_session_transcript(small.pk).more
    assert not TaskRecord.objects.filter(kind="fill_session_vectors", coalesce_key=f"fill-session:{small.pk}")


@pytest.mark.django_db(transaction=True)  # jobs queued after the commit run at once, as in a worker
def test_a_helper_whose_worker_died_is_failed_and_another_is_asked_for(
    world, fake_embeddings, settings, helper_worth_it
) -> None:
    """A helper holds its lock while it works; a running record without it lost its worker."""
    from openclaw_site.platform.locks import session_lock

    minute_ago = datetime.now(UTC) - timedelta(minutes=1)

    def helper_running(session) -> TaskRecord:
        return TaskRecord.objects.create(
            task_id=uuid.uuid4().hex,
            team=world.acme,
            kind="fill_session_vectors",
            coalesce_key=f"fill-session:{session.pk}",
            state="running",
            started_at=minute_ago,
        )

    alive = _indexed_then_grown(world, settings, "helper-alive")
    working = helper_running(alive)
    with session_lock(f"transcript-helper:{alive.pk}", timeout_seconds=0):
        assert not index_session_transcript(alive.pk).more
    working.refresh_from_db()
    assert working.state == "running"  # its lock was held: left alone, and no second helper
    assert TaskRecord.objects.filter(kind="fill_session_vectors").count() == 1
    working.delete()
    EmbeddingCache.objects.all().delete()  # the same chatter again: embedded afresh, in slices

    orphaned = _indexed_then_grown(world, settings, "helper-dead")
    dead = helper_running(orphaned)

    assert not index_session_transcript(orphaned.pk).more

    dead.refresh_from_db()
    assert dead.state == "failed" and "worker stopped" in dead.error and dead.finished_at
    [new] = TaskRecord.objects.filter(kind="fill_session_vectors").exclude(pk=dead.pk)
    assert new.coalesce_key == dead.coalesce_key and new.state == "succeeded"
    assert new.result["embedded"] > 0 and not _waiting_lines(orphaned)


@pytest.mark.django_db(transaction=True)
def test_a_second_helper_of_a_transcript_leaves_it_to_the_first(world, fake_embeddings, settings) -> None:
    from openclaw_site.platform.locks import session_lock
    from sessions_app.indexing import fill_session_vectors

    session = _indexed_then_grown(world, settings, "two-helpers")
    with session_lock(f"transcript-helper:{session.pk}", timeout_seconds=0):
        assert fill_session_vectors(session.pk) == {"skipped": "another helper is at work on this transcript"}
