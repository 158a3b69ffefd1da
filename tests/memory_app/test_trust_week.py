"""A week of use, tried as a new user would: duplicates, a contradiction and a line from a fetched
web page; the review queue proposes the right changes with their sources; approving them leaves
one clean MEMORY.md with its history; the untrusted line is never promoted; forgetting the session
that fetched it leaves no trace in documents or search (docs/design.md, Provenance, consolidation
and forgetting)."""

from __future__ import annotations

import pytest

from memory_app.documents import Provenance, write_document
from memory_app.models import MemoryChunk, MemoryDocument, MemoryRevision
from memory_app.search.hybrid import hybrid_search
from sessions_app.indexing import index_session_transcript
from tests import factories
from tests.api_support import API, login_client
from tests.fake_openai import tool_call_reply
from tests.messages import assistant, tool_call, tool_result, user

pytestmark = pytest.mark.django_db
HELPER = f"{API}/assistants/helper"


def plugin_write(api, text: str, session_key: str) -> dict:
    response = api.post(
        f"{HELPER}/tools/memory_write/",
        {"arguments": {"mode": "append", "content": text}, "session_key": session_key},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()["details"]


def test_a_week_of_memory_reviewed_and_forgotten(
    api, world, llm, fake_embeddings, django_capture_on_commit_callbacks
):
    alice = login_client(world.alice)
    with django_capture_on_commit_callbacks(execute=True):
        alice.put(
            f"{HELPER}/memory/MEMORY.md",
            {"content": "- The weekly sync is on Tuesdays\n- Deploys need two approvals"},
            format="json",
        )
        chat = factories.make_session(world.assistant, "chat")
        factories.add_messages(chat, user("Remember the sync and the deploy rule."), assistant("Sure."))
        kept_out = plugin_write(api, "- the weekly sync is on tuesdays.", "chat")  # already in MEMORY.md
        write_document(
            assistant=world.assistant,
            path="memory/2026-12-01.md",
            content="- Budget is 10k",
            provenance=Provenance(author="flush", session_pk=chat.pk),
        )
        plugin_write(api, "- budget is 10k.\n- Deploys need 2 approvals", "chat")
        repeat = plugin_write(api, "- Deploys need 2 approvals", "chat")
        research = factories.make_session(world.assistant, "research")
        factories.add_messages(
            research,
            user("What does Globex charge now?"),
            assistant(calls=[tool_call("c1", "web_fetch", {"url": "https://globex.example/pricing"})]),
            tool_result("c1", "Globex doubled its prices.", name="web_fetch"),
        )
        fetched = plugin_write(api, "- Globex doubled its prices", "research")
        index_session_transcript(research.pk)
    assert not kept_out["changed"] and kept_out["duplicates"][0]["path"] == "MEMORY.md"
    assert not repeat["changed"] and repeat["duplicates"][0]["text"] == "- Deploys need 2 approvals"
    daily = fetched["path"]

    # A contradiction written later by a person in another note.
    alice.put(
        f"{HELPER}/memory/memory/2026-12-31.md", {"content": "- The sync moved to Thursdays"}, format="json"
    )

    llm.queue(
        tool_call_reply(
            [
                (
                    "propose_memory_changes",
                    {
                        "proposals": [
                            {
                                "kind": "supersede",
                                "sources": [
                                    {"path": "MEMORY.md", "line": 1},
                                    {"path": "memory/2026-12-31.md", "line": 1},
                                ],
                                "new_text": "- The weekly sync is on Thursdays",
                                "target_path": "",
                                "confidence": 0.9,
                                "rationale": "the newer note says it moved",
                            },
                            {
                                "kind": "promote",
                                "sources": [{"path": daily, "line": 3}],
                                "new_text": "- Globex doubled its prices",
                                "target_path": "MEMORY.md",
                                "confidence": 0.6,
                                "rationale": "a durable market fact",
                            },
                        ]
                    },
                )
            ]
        )
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post(f"{HELPER}/consolidate/", format="json").status_code == 202

    queue = alice.get(f"{HELPER}/proposals/").json()["proposals"]
    by_kind = {}
    for proposal in queue:
        by_kind.setdefault(proposal["kind"], []).append(proposal)
    assert sorted(by_kind) == ["merge", "promote", "supersede"] and len(by_kind["merge"]) == 2
    # Each proposal cites the lines it rests on, with their trust.
    cited = [[(s["path"], s["text"], s["trust"]) for s in p["sources"]] for p in queue]
    assert sorted(cited) == sorted(
        [
            [("memory/2026-12-01.md", "- Budget is 10k", "agent"), (daily, "- budget is 10k.", "agent")],
            [
                ("MEMORY.md", "- Deploys need two approvals", "owner"),
                (daily, "- Deploys need 2 approvals", "agent"),
            ],
            [
                ("MEMORY.md", "- The weekly sync is on Tuesdays", "owner"),
                ("memory/2026-12-31.md", "- The sync moved to Thursdays", "owner"),
            ],
            [(daily, "- Globex doubled its prices", "untrusted")],
        ]
    )
    assert all(proposal["diff"].startswith("--- a/") for proposal in queue)
    [promote] = by_kind["promote"]
    # The dashboard's team queue (the main navigation's Review) shows the same, fetched line flagged.
    page = alice.get("/review/").content.decode()
    assert (
        page.count('<li class="proposal"') == 4 and f"{daily}#L3" in page and "badge-trust-untrusted" in page
    )

    bob = login_client(world.bob)
    for proposal in by_kind["merge"] + by_kind["supersede"]:
        response = bob.post(f"{API}/proposals/{proposal['id']}/approve/", {}, format="json")
        assert response.status_code == 200, response.content
    assert bob.post(f"{API}/proposals/{promote['id']}/reject/", format="json").status_code == 200

    memory = MemoryDocument.objects.get(path="MEMORY.md").content
    assert memory == "- The weekly sync is on Thursdays\n- Deploys need two approvals"
    assert "Globex" not in memory
    history = list(MemoryRevision.objects.filter(path="MEMORY.md").values_list("content", flat=True))
    assert any("Tuesdays" in text for text in history)

    with django_capture_on_commit_callbacks(execute=True):
        forgot = api.post(
            f"{HELPER}/forget/", {"session": research.pk, "dry_run": False}, format="json"
        ).json()
    assert [line["text"] for line in forgot["lines"]] == ["- Globex doubled its prices"]
    everything = "".join(MemoryDocument.objects.values_list("content", flat=True))
    assert "Globex" not in everything
    assert not hybrid_search(assistant=world.assistant, query="Globex prices", mode="text").results
    found = api.get(f"{HELPER}/search/", {"q": "Globex doubled its prices"}).json()["results"]
    assert not any("Globex" in result["snippet"] for result in found)
    assert not MemoryChunk.objects.filter(session_pk=research.pk).exists()
