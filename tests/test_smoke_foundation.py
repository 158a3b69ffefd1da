from __future__ import annotations

import pytest

from sessions_app.models import Message
from tests import factories


@pytest.mark.django_db
def test_appends_assign_gap_free_seq_and_entry_ids(world):
    session = factories.make_session(world.assistant)
    rows = factories.add_messages(
        session,
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "usage": {"input": 5, "output": 2}},
    )
    assert [r.seq for r in rows] == [1, 2]
    assert all(len(r.entry_id) == 8 for r in rows)
    assert Message.objects.filter(session=session).count() == 2


@pytest.mark.django_db
def test_pgvector_extension_is_installed():
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone()[0] >= "0.8"
