"""The output serializers render a run receipt as the compaction errors show it, byte for byte.

A compaction error's details carry `sessions_app.compaction.errors.run_dict`; every answer renders the
same run through `CompactionRunOutput`: the two must say the same thing in the same JSON.
"""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from sessions_app.api.serializers import CompactionRunOutput, stored_messages_data
from sessions_app.compaction.errors import run_dict
from sessions_app.models import CompactionRun
from sessions_app.transcript import to_agent_message
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("with_entry", [True, False])
def test_a_run_renders_as_the_errors_show_it(world, with_entry):
    session = factories.make_session(world.assistant, "main")
    first, _ = factories.add_messages(
        session, {"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}
    )
    entry = factories.add_compaction(session, first_kept=first) if with_entry else None
    run = CompactionRun.objects.create(
        session=session,
        trigger="manual",
        state="committed" if with_entry else "failed",
        reason="" if with_entry else "the model timed out",
        flush_details={"status": "skipped", "appended": []},
        entry=entry,
        tokens_before=181234,
        tokens_after=9000 if with_entry else None,
        finished_at=timezone.now(),
    )
    rendered = json.dumps(CompactionRunOutput(run).data)
    assert rendered == json.dumps(run_dict(run))
    assert json.loads(rendered)["created_at"].endswith("+00:00")


def test_a_stored_message_is_the_agent_message_then_its_storage_fields(world):
    session = factories.make_session(world.assistant, "main")
    rows = factories.add_messages(
        session,
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "model": "m"},
    )
    for row, shown in zip(rows, stored_messages_data(rows), strict=True):
        storage = {
            "id": row.pk,
            "seq": row.seq,
            "entry_id": row.entry_id,
            "silent": row.silent,
            "estimated_tokens": row.estimated_tokens,
            "created_at": row.created_at.isoformat(),
        }
        assert json.dumps(shown) == json.dumps({**to_agent_message(row), **storage})
