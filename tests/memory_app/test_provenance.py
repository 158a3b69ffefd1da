"""Provenance on every line: who wrote it, through what, when, and how far to trust it.

docs/design.md, Provenance, consolidation and forgetting.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_app.documents import Provenance, write_document
from memory_app.index.rows import index_document
from memory_app.models import MemoryDocument, MemoryImport, MemoryRevision
from sessions_app.compaction.flush import run_memory_flush
from tests import factories
from tests.api_support import API, login_client
from tests.messages import assistant, tool_call, tool_result, user

pytestmark = pytest.mark.django_db
MEMORY = f"{API}/assistants/helper/memory/"
TOOLS = f"{API}/assistants/helper/tools"
NOW = datetime(2026, 2, 17, 15, 0, tzinfo=UTC)


def provenance_of(client, path: str) -> list[dict]:
    response = client.get(f"{MEMORY}{path}?provenance=true")
    assert response.status_code == 200, response.content
    return response.json()["provenance"]


def test_a_person_and_an_api_key_each_own_their_lines(api, world):
    person = login_client(world.alice)
    assert (
        person.put(
            MEMORY + "MEMORY.md", {"content": "# Team\n- Sync is on Tuesdays"}, format="json"
        ).status_code
        == 201
    )
    document = MemoryDocument.objects.get(path="MEMORY.md")
    body = {
        "content": document.content + "\n- The release train leaves at noon",
        "expected_hash": document.content_hash,
    }
    assert api.put(MEMORY + "MEMORY.md", body, format="json").status_code == 200

    lines = provenance_of(api, "MEMORY.md")
    assert [entry["text"] for entry in lines] == [
        "# Team",
        "- Sync is on Tuesdays",
        "- The release train leaves at noon",
    ]
    first, last = lines[1], lines[2]
    assert (
        first["origin"]["kind"] == "person"
        and first["origin"]["user"] == "alice"
        and first["trust"] == "owner"
    )
    assert last["origin"]["kind"] == "api_key" and last["origin"]["api_key"]["name"] == "test key"
    assert last["trust"] == "agent" and last["at"] is not None
    assert first["origin"]["revision"] != last["origin"]["revision"]


def test_a_line_range_carries_the_provenance_of_its_lines(api, world):
    factories.make_document(world.assistant, "memory/notes.md", "l1\nl2\nl3")
    body = api.get(MEMORY + "memory/notes.md?from=2&lines=1&provenance=1").json()
    assert [entry["line"] for entry in body["provenance"]] == [2]
    assert "provenance" not in api.get(MEMORY + "memory/notes.md").json()


def test_the_plugin_tool_write_is_the_agents_and_untrusted_after_a_web_fetch(api, world):
    session = factories.make_session(world.assistant, "agent:main:1")
    factories.add_messages(session, user("What is our SLA?"))
    wrote = api.post(
        f"{TOOLS}/memory_write/",
        {"arguments": {"mode": "append", "content": "- The SLA is 99.9%"}, "session_key": "agent:main:1"},
        format="json",
    )
    assert wrote.status_code == 200, wrote.content
    path = wrote.json()["details"]["path"]
    factories.add_messages(
        session,
        assistant(calls=[tool_call("call_1", "web_fetch", {"url": "https://example.com"})]),
        tool_result("call_1", "Example Corp's SLA is 95%.", name="web_fetch"),
    )
    api.post(
        f"{TOOLS}/memory_write/",
        {
            "arguments": {"mode": "append", "content": "- Example Corp's SLA is 95%"},
            "session_key": "agent:main:1",
        },
        format="json",
    )
    lines = [entry for entry in provenance_of(api, path) if entry["text"]]
    assert [(e["origin"]["kind"], e["trust"]) for e in lines] == [("agent", "agent"), ("agent", "untrusted")]
    assert {e["origin"]["session"] for e in lines} == {session.pk}
    assert lines[0]["origin"]["api_key"]["name"] == "test key"


def test_the_flush_is_the_agents_unless_it_saw_fetched_content(no_llm, world):
    helper = world.assistant
    session = factories.make_session(helper)
    factories.add_messages(session, user("We decided to deploy on Fridays."), assistant("Noted."))
    run_memory_flush(session_id=session.pk, now=NOW)
    revision = MemoryRevision.objects.get(author="flush")
    assert (revision.origin_kind, revision.trust, revision.session_pk) == ("flush", "agent", session.pk)

    fetched = factories.make_session(helper)
    factories.add_messages(
        fetched,
        user("Read the vendor page. We decided to switch vendors."),
        assistant(calls=[tool_call("call_9", "web_fetch", {"url": "https://vendor.example"})]),
        tool_result("call_9", "Vendor page: prices doubled.", name="web_fetch"),
        assistant("Done."),
    )
    run_memory_flush(session_id=fetched.pk, now=NOW)
    latest = MemoryRevision.objects.filter(session_pk=fetched.pk).get()
    assert (latest.origin_kind, latest.trust) == ("flush", "untrusted")


def test_an_import_is_untrusted_and_named(world, tmp_path):
    from sessions_app.workspace.imports import import_workspace

    (tmp_path / "MEMORY.md").write_text("- Imported fact\n")
    import_workspace(directory=tmp_path, team_slug="acme", assistant_slug="imported")
    revision = MemoryRevision.objects.get(path="MEMORY.md", assistant__slug="imported")
    record = MemoryImport.objects.get(assistant__slug="imported")
    assert (revision.origin_kind, revision.trust, revision.import_pk) == ("import", "untrusted", record.pk)


def test_admin_writes_are_a_persons(world):
    _, revision = write_document(
        assistant=world.assistant,
        path="MEMORY.md",
        content="x",
        provenance=Provenance(author="admin", user=world.alice),
    )
    assert revision is not None and (revision.origin_kind, revision.trust) == ("person", "owner")


def test_a_revert_restores_the_lines_origins(api, world):
    from memory_app.documents import revert_document

    person = Provenance(author="user", user=world.alice)
    document, first = write_document(
        assistant=world.assistant, path="MEMORY.md", content="a\nb", provenance=person
    )
    write_document(
        assistant=world.assistant, path="MEMORY.md", content="a\nc", provenance=Provenance(author="agent")
    )
    revert_document(document=document, revision=first, provenance=person)
    assert {entry["origin"]["revision"] for entry in provenance_of(api, "MEMORY.md")} == {first.pk}


def test_another_teams_document_has_no_provenance_to_show(other_api, world):
    factories.make_document(world.assistant, "MEMORY.md", "secret")
    assert other_api.get(MEMORY + "MEMORY.md?provenance=true").status_code == 404


def test_the_backfill_gives_old_revisions_an_origin_from_author_and_note(api, world):
    import importlib

    from django.apps import apps

    backfill = importlib.import_module("memory_app.migrations.0014_provenance_backfill").backfill
    key = factories.make_api_key(world.acme, ["memory:write"], name="ci bot")[0]
    factories.make_document(world.assistant, "MEMORY.md", "a\nb")
    document = MemoryDocument.objects.get(path="MEMORY.md")
    write_document(
        assistant=world.assistant,
        path="MEMORY.md",
        content="a\nb\nc",
        provenance=Provenance(author="user", note=f"api key {key.name} ({key.prefix})"),
    )
    write_document(
        assistant=world.assistant, path="memory/x.md", content="i", provenance=Provenance(author="import")
    )
    MemoryRevision.objects.update(origin_kind="person", trust="owner", line_origins=[])  # as before 0013

    backfill(apps, None)

    first, second = MemoryRevision.objects.filter(document=document).order_by("pk")
    assert (second.origin_kind, second.trust, second.api_key_pk, second.api_key_name) == (
        "api_key",
        "agent",
        key.pk,
        "ci bot",
    )
    assert second.line_origins == [[first.pk, 2], [0, 1]]
    assert MemoryRevision.objects.get(path="memory/x.md").trust == "untrusted"


def test_the_document_page_shows_who_wrote_each_line_one_click_away(world):
    from tests.views_support import HX, is_full_page, signed_in

    write_document(
        assistant=world.assistant,
        path="MEMORY.md",
        content="- mine",
        provenance=Provenance(author="user", user=world.alice),
    )
    write_document(
        assistant=world.assistant,
        path="MEMORY.md",
        content="- mine\n- fetched",
        provenance=Provenance(author="agent", untrusted=True),
    )
    page = signed_in(world.vera).get("/assistants/helper/memory/doc/MEMORY.md").content.decode()
    assert "?view=provenance" in page
    blame = signed_in(world.vera).get("/assistants/helper/memory/doc/MEMORY.md?view=provenance", **HX)
    assert not is_full_page(blame)
    content = blame.content.decode()
    assert 'class="trust-owner"' in content and ">alice</a>" in content
    assert 'class="trust-untrusted"' in content and "badge-trust-untrusted" in content


def test_search_explain_carries_the_origin_and_trust_of_the_hit(api, world, fake_embeddings):

    document, _ = write_document(
        assistant=world.assistant,
        path="MEMORY.md",
        content="The weekly sync is on Tuesdays.",
        provenance=Provenance(author="user", user=world.alice),
    )
    index_document(document.pk)
    body = api.get(f"{API}/assistants/helper/search/?q=weekly+sync&explain=true").json()
    hit = body["results"][0]
    assert hit["explain"]["provenance"][0]["origin"]["user"] == "alice"
    assert hit["explain"]["provenance"][0]["trust"] == "owner"
    plain = api.get(f"{API}/assistants/helper/search/?q=weekly+sync").json()
    assert "explain" not in plain["results"][0]
