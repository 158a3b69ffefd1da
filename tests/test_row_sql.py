"""`RowRead` gives what the ORM's `select_related` query gives, from SQL built once (docs/design.md, Request cost)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from openclaw_site.models import ApiKey
from openclaw_site.platform.row_sql import RowRead
from sessions_app.models import Session
from tests import factories

pytestmark = pytest.mark.django_db


def field_values(instance: Model) -> dict[str, Any]:
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields}


def test_a_session_read_matches_the_querysets_and_carries_its_assistant_and_team(world):
    world.assistant.settings = {**world.assistant.settings, "extra": {"nested": [1, "二"]}}
    world.assistant.save()
    session = factories.make_session(world.assistant, title="标题 with JSON")
    read = RowRead(Session, "assistant", "assistant__team", where="t0.id = %s AND t1.team_id = %s")
    expected = Session.objects.select_related("assistant", "assistant__team").get(pk=session.pk)

    with CaptureQueriesContext(connection) as captured:
        got = read.one([session.pk, world.acme.pk])
        assert got is not None
        team = got.assistant.team  # cached on the foreign keys: no second query
    assert len(captured.captured_queries) == 1

    assert field_values(got) == field_values(expected)
    assert field_values(got.assistant) == field_values(expected.assistant)
    assert field_values(team) == field_values(expected.assistant.team)
    assert got.assistant.settings["extra"] == {"nested": [1, "二"]}  # JSON decoded as the ORM does
    assert not got._state.adding and got._state.db == "default"
    got.save(update_fields=["title"])  # a loaded instance saves like one from a queryset


def test_a_read_that_matches_no_row_gives_none(world):
    session = factories.make_session(world.assistant)
    read = RowRead(Session, "assistant", where="t0.id = %s AND t1.team_id = %s")
    assert read.one([session.pk, world.globex.pk]) is None  # another team's session is not found
    with pytest.raises(Session.DoesNotExist):
        read.get([session.pk, world.globex.pk])


def test_a_key_read_with_a_lock_clause(world):
    key, _ = factories.make_api_key(world.acme, ["sessions:read"])
    read = RowRead(ApiKey, "team", where="t0.prefix = %s", suffix="FOR NO KEY UPDATE OF t0")
    got = read.one([key.prefix])
    assert got is not None and got.pk == key.pk and got.scopes == ["sessions:read"]
    assert got.team.slug == "acme"


def test_a_path_that_is_not_a_foreign_key_is_refused(db):
    with pytest.raises(TypeError, match="not a foreign key"):
        RowRead(Session, "title", where="true").one([])


def test_an_insert_stores_what_the_orm_would_and_skips_rows_that_clash(world):
    from django.db import IntegrityError, transaction

    from openclaw_site.platform.row_sql import RowInsert
    from sessions_app.models import Message

    session = factories.make_session(world.assistant)
    now = timezone.now()

    def row(seq: int, entry_id: str) -> Message:
        return Message(
            session=session,
            seq=seq,
            entry_id=entry_id,
            role="user",
            content=[{"type": "text", "text": "好"}],
            details={"k": [1]},
            created_at=now,
        )

    insert = RowInsert(Message, unique="message_session_entry_unique")
    first = insert.insert([row(1, "aaaa0001"), row(2, "aaaa0002")])
    assert [r.seq for r in first] == [1, 2] and all(r.pk and not r._state.adding for r in first)
    stored = Message.objects.get(pk=first[0].pk)
    assert (stored.content, stored.details, stored.is_error, stored.created_at) == (
        [{"type": "text", "text": "好"}],
        {"k": [1]},
        False,
        now,
    )

    again = insert.insert([row(3, "aaaa0002"), row(4, "aaaa0004")])  # the first holds a taken id
    assert [r.seq for r in again] == [4]
    assert Message.objects.filter(session=session).count() == 3

    with pytest.raises(IntegrityError), transaction.atomic():  # another constraint still refuses
        insert.insert([row(4, "aaaa0005")])


def test_an_insert_returns_what_postgres_made_of_each_inserted_row(world):
    from openclaw_site.platform.row_sql import RowInsert
    from sessions_app.models import Message

    session = factories.make_session(world.assistant)
    insert = RowInsert(
        Message, unique="message_session_entry_unique", returning={"stored_text": "content::text"}
    )
    rows = [
        Message(
            session=session,
            seq=seq,
            entry_id=f"bbbb000{seq}",
            role="user",
            content=content,
            created_at=timezone.now(),
        )
        for seq, content in [(1, {"b": 1, "a": "好"}), (2, "plain")]
    ]
    inserted = insert.insert(rows)
    assert [row.stored_text for row in inserted] == ['{"a": "好", "b": 1}', '"plain"']  # jsonb's own text


def test_an_insert_keeps_every_value_through_its_json_parameter(world):
    """Text with quotes, backslashes and emoji, a JSON string, SQL NULL against JSON null, and a
    datetime in another zone with its microseconds all come back as they were."""
    from datetime import timedelta
    from datetime import timezone as tz

    from openclaw_site.platform.row_sql import RowInsert
    from sessions_app.models import Message

    session = factories.make_session(world.assistant)
    when = timezone.now().astimezone(tz(timedelta(hours=8))).replace(microsecond=123456)
    text = 'a "quoted" \\ back\\slash,\nnew line, {braces} 🦞 部署窗口'
    rows = [
        Message(session=session, seq=1, entry_id="bbbb0001", role="user", content=text, created_at=when),
        Message(
            session=session,
            seq=2,
            entry_id="bbbb0002",
            role="toolResult",
            tool_call_id="call_1",
            tool_name="exec",
            is_error=True,
            content=[{"type": "text", "text": text}],
            details={"none": None, "n": 1.5},
            usage=None,
            created_at=when,
        ),
    ]
    RowInsert(Message, unique="message_session_entry_unique").insert(rows)
    first, second = Message.objects.filter(session=session).order_by("seq")
    assert first.content == text and first.created_at == when
    assert second.content == [{"type": "text", "text": text}] and second.is_error is True
    assert second.details == {"none": None, "n": 1.5}
    assert Message.objects.filter(session=session, usage__isnull=True).count() == 2  # SQL NULL, not JSON null


def test_a_built_row_is_the_row_the_keyword_constructor_makes(world):
    from openclaw_site.platform.row_sql import RowInsert
    from sessions_app.models import Message

    session = factories.make_session(world.assistant)
    now = timezone.now()
    fields = {"seq": 3, "entry_id": "cccc0003", "role": "user", "content": ["x"], "created_at": now}
    insert = RowInsert(Message, unique="message_session_entry_unique")

    built = insert.build({"session": session}, **fields)
    expected = Message(session=session, **fields)
    assert field_values(built) == field_values(expected)  # the fields not given get their defaults
    assert built.session is session and built._state.adding and built.pk is None
    with pytest.raises(TypeError, match="no column"):
        insert.build({"session": session}, sequence=1)

    (stored,) = insert.insert([built])
    assert Message.objects.get(pk=stored.pk).entry_id == "cccc0003"


def generic_plan(queryset) -> str:
    """PostgreSQL's plan of ``queryset`` for any values, as a prepared statement may keep it."""
    sql, params = queryset.query.sql_with_params()
    numbered = sql % tuple(f"${i}" for i in range(1, len(params) + 1))
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (GENERIC_PLAN) {numbered}")
        return "\n".join(row[0] for row in cursor.fetchall())


def test_a_partial_index_condition_keeps_its_index_for_a_plan_made_for_any_values(world):
    from memory_app.models import FTS_ONLY_MODEL, MemoryChunk
    from openclaw_site.models import TaskRecord
    from openclaw_site.platform.row_sql import partial_index_condition

    TaskRecord.objects.bulk_create(
        TaskRecord(task_id=f"done-{i}", team=world.acme, kind="export_session", state="succeeded")
        for i in range(3000)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE openclaw_site_taskrecord")
    live = partial_index_condition(TaskRecord, "taskrecord_active")

    # `state = $1` may be any state: the plan for any values reads every finished record.
    assert "taskrecord_active" not in generic_plan(TaskRecord.objects.filter(state="queued").values("id")[:1])
    assert "taskrecord_active" in generic_plan(
        TaskRecord.objects.filter(live, state="queued").values("id")[:1]
    )

    waiting = partial_index_condition(MemoryChunk, "memchunk_session_text_only")
    probe = MemoryChunk.objects.filter(session_pk=1, generation=1).order_by("start_line").values("start_line")
    # Either partial index of the text-only rows will do (`memchunk_text_only` on a table this small).
    assert "text_only" not in generic_plan(probe.filter(model=FTS_ONLY_MODEL)[:1])
    assert "text_only" in generic_plan(probe.filter(waiting)[:1])
