"""Write-time hygiene: an append that repeats a line memory holds does not store it twice.

docs/design.md, Provenance, consolidation and forgetting.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_app.documents import Provenance, append_to_document
from memory_app.models import MemoryDocument, MemoryRevision
from sessions_app.compaction.flush import FlushToolbox, run_memory_flush
from tests import factories
from tests.api_support import API
from tests.messages import assistant, user

pytestmark = pytest.mark.django_db
TOOLS = f"{API}/assistants/helper/tools"
NOW = datetime(2026, 2, 17, 15, 0, tzinfo=UTC)


def write(api, content: str) -> dict:
    response = api.post(
        f"{TOOLS}/memory_write/", {"arguments": {"mode": "append", "content": content}}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()["details"]


def test_the_plugin_tool_answers_which_line_a_repeat_duplicates(api, world):
    factories.make_document(world.assistant, "MEMORY.md", "# Team\n- The weekly sync is on Tuesdays.")
    first = write(api, "- Deploys go out on Fridays")
    assert first["changed"] and first["duplicates"] == []
    revisions = MemoryRevision.objects.count()

    again = write(api, "* deploys go out on  FRIDAYS.\n- the weekly sync is on tuesdays")
    assert not again["changed"] and again["revision"] is None
    assert again["duplicates"] == [
        {"text": "* deploys go out on  FRIDAYS.", "path": first["path"], "line": 1},
        {"text": "- the weekly sync is on tuesdays", "path": "MEMORY.md", "line": 2},
    ]
    assert MemoryRevision.objects.count() == revisions

    mixed = write(api, "- Deploys go out on Fridays\n- The on-call phone is 555-0199")
    assert mixed["changed"] and [d["line"] for d in mixed["duplicates"]] == [1]
    content = MemoryDocument.objects.get(path=first["path"]).content
    assert content.count("Fridays") == 1 and content.endswith("- The on-call phone is 555-0199")


def test_an_append_of_only_repeats_creates_no_document(world):
    factories.make_document(world.assistant, "MEMORY.md", "- Fact one")
    outcome = append_to_document(
        assistant=world.assistant,
        path="memory/2026-02-17.md",
        addition="- fact one",
        provenance=Provenance(author="agent"),
    )
    assert outcome.revision is None and [d.path for d in outcome.duplicates] == ["MEMORY.md"]
    assert not MemoryDocument.objects.filter(path="memory/2026-02-17.md").exists()


def test_headings_and_blank_lines_may_repeat(world):
    factories.make_document(world.assistant, "memory/2026-02-17.md", "## Notes\n- a\n")
    outcome = append_to_document(
        assistant=world.assistant,
        path="memory/2026-02-17.md",
        addition="## Notes\n\n- b",
        provenance=Provenance(author="agent"),
    )
    assert outcome.duplicates == () and outcome.document.content == "## Notes\n- a\n## Notes\n\n- b"


def test_the_flush_tool_says_what_it_left_out(world):
    session = factories.make_session(world.assistant)
    factories.make_document(world.assistant, "memory/2026-02-17.md", "- Deploys go out on Fridays")
    toolbox = FlushToolbox(session=session, relative_path="memory/2026-02-17.md")
    answer = toolbox.run(
        "write", {"path": "memory/2026-02-17.md", "content": "- deploys go out on fridays"}, message_pk=1
    )
    assert answer.startswith("Nothing appended") and "memory/2026-02-17.md#L1" in answer
    assert toolbox.appended == []


def test_a_replayed_offline_flush_stores_nothing_new(no_llm, world):
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("We decided to deploy on Fridays."), assistant("Noted."))
    run_memory_flush(session_id=session.pk, now=NOW)
    before = MemoryRevision.objects.count()
    session.refresh_from_db()
    session.memory_flush_compaction_count = None  # as if this cycle had not flushed yet
    session.save()
    outcome = run_memory_flush(session_id=session.pk, now=NOW)
    assert outcome.status == "flushed" and MemoryRevision.objects.count() == before


@pytest.mark.django_db(transaction=True)
def test_mcp_memory_write_reports_the_duplicate_and_records_the_key(asgi_live_server, world, acme_secret):
    from tests.mcp_client import call_tool, mcp_url, tool_json

    url = mcp_url(asgi_live_server.url)
    first = tool_json(
        call_tool(url, acme_secret, "memory_write", {"mode": "append", "content": "- Budget is 10k"})
    )
    again = tool_json(
        call_tool(url, acme_secret, "memory_write", {"mode": "append", "content": "budget is 10k."})
    )
    assert first["changed"] and not again["changed"]
    assert again["duplicates"] == [{"text": "budget is 10k.", "path": first["path"], "line": 1}]
    revision = MemoryRevision.objects.get(pk=first["revision"])
    assert (revision.origin_kind, revision.trust, revision.api_key_name) == ("agent", "agent", "test key")
