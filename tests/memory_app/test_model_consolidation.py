"""The model path of consolidation against the scripted OpenAI-compatible server: every proposal is
validated (sources exist, the change applies, at most 25% of a document's entries lost), the
discarded ones logged with their reason (docs/design.md, Provenance, consolidation and forgetting)."""

from __future__ import annotations

import logging

import pytest

from memory_app.documents import Provenance, write_document
from memory_app.governance.consolidation import approve_proposal, collect_entries
from memory_app.governance.model_consolidation import TOOL_NAME, Invalid, consolidate, validate
from memory_app.models import MemoryDocument, Proposal
from openclaw_site.models import UsageRecord
from tests.fake_openai import tool_call_reply

pytestmark = pytest.mark.django_db


def _memory(world) -> None:
    person = Provenance(author="user", user=world.alice)
    write_document(
        assistant=world.assistant,
        path="MEMORY.md",
        content="# Team\n- The weekly sync is on Tuesdays\n- Budget is 10k\n- Deploys need two approvals",
        provenance=person,
    )
    write_document(
        assistant=world.assistant,
        path="memory/2026-02-17.md",
        content="- The sync moved to Thursdays\n- The office wifi password is on the fridge",
        provenance=Provenance(author="flush", session_pk=3),
    )


def proposal(kind: str, sources: list[tuple[str, int]], new_text: str = "", **extra) -> dict:
    return {
        "kind": kind,
        "sources": [{"path": p, "line": n} for p, n in sources],
        "new_text": new_text,
        "target_path": extra.pop("target_path", ""),
        "confidence": extra.pop("confidence", 0.8),
        "rationale": extra.pop("rationale", "because"),
    }


def test_model_proposals_are_validated_and_the_bad_ones_discarded_with_a_reason(llm, world, caplog):
    _memory(world)
    llm.queue(
        tool_call_reply(
            [
                (
                    TOOL_NAME,
                    {
                        "proposals": [
                            proposal(
                                "supersede",
                                [("MEMORY.md", 2), ("memory/2026-02-17.md", 1)],
                                "- The weekly sync is on Thursdays",
                                confidence=0.9,
                            ),
                            proposal("merge", [("MEMORY.md", 2), ("memory/2026-02-17.md", 9)], "- x"),
                            proposal("retire", [("MEMORY.md", 2), ("MEMORY.md", 3)]),
                            proposal(
                                "promote",
                                [("memory/2026-02-17.md", 2)],
                                "- The office wifi password is on the fridge",
                                target_path="../../etc/passwd",
                            ),
                            proposal("merge", [("MEMORY.md", 3)], "- Budget is 10k"),
                        ]
                    },
                )
            ]
        )
    )
    with caplog.at_level(logging.WARNING, logger="memory_app.governance.model_consolidation"):
        result = consolidate(world.assistant)

    model = result["model"]
    assert model["proposed"] == 1 and model["error"] == ""
    reasons = [d["reason"] for d in model["discarded"]]
    assert reasons[0] == "source memory/2026-02-17.md#L9 does not exist"
    assert reasons[1] == "drops 2 of 3 entries of MEMORY.md (more than 25%)"
    assert reasons[2].startswith("target_path:")
    assert reasons[3] == "a merge needs at least two sources"
    assert sum("discarded" in record.getMessage() for record in caplog.records) == 4

    [request] = llm.chat_requests
    [tool] = request["tools"]
    assert tool["function"]["name"] == TOOL_NAME and tool["function"]["strict"] is True
    assert "MEMORY.md#L2 (owner): - The weekly sync is on Tuesdays" in request["messages"][1]["content"]
    assert UsageRecord.objects.filter(purpose="consolidation").count() == 1

    supersede = Proposal.objects.get(kind="supersede")
    assert supersede.documents == [
        {"path": "MEMORY.md", "start_line": 2, "end_line": 2},
        {"path": "memory/2026-02-17.md", "start_line": 1, "end_line": 1},
    ]
    assert "+- The weekly sync is on Thursdays" in supersede.diff
    approve_proposal(supersede, provenance=Provenance(author="user", user=world.bob))
    assert "Thursdays" in MemoryDocument.objects.get(path="MEMORY.md").content
    assert "Tuesdays" not in MemoryDocument.objects.get(path="MEMORY.md").content


def test_a_change_that_no_longer_applies_is_discarded(world):
    _memory(world)
    by_line = {(e.path, e.line): e for e in collect_entries(world.assistant)}
    write_document(
        assistant=world.assistant,
        path="memory/2026-02-17.md",
        content="- Something else",
        provenance=Provenance(author="user", user=world.alice),
    )
    raw = proposal("supersede", [("MEMORY.md", 2), ("memory/2026-02-17.md", 1)], "- Thursdays")
    with pytest.raises(Invalid, match="the change does not apply"):
        validate(world.assistant, raw, by_line)


def test_a_promotion_appends_to_memory_md_and_leaves_the_daily_note(llm, world):
    _memory(world)
    text = "- The office wifi password is on the fridge"
    llm.queue(
        tool_call_reply(
            [
                (
                    TOOL_NAME,
                    {
                        "proposals": [
                            proposal("promote", [("memory/2026-02-17.md", 2)], text, target_path="MEMORY.md")
                        ]
                    },
                )
            ]
        )
    )
    consolidate(world.assistant)
    promote = Proposal.objects.get(kind="promote")
    assert promote.documents[-1] == {"path": "MEMORY.md", "start_line": 5, "end_line": 5}
    approve_proposal(promote, provenance=Provenance(author="user", user=world.bob))
    assert MemoryDocument.objects.get(path="MEMORY.md").content.endswith(text)
    assert MemoryDocument.objects.get(path="memory/2026-02-17.md").content == "- The sync moved to Thursdays"


def test_a_model_answer_without_the_tool_call_files_nothing(llm, world):
    from tests.fake_openai import text_reply

    _memory(world)
    llm.queue(text_reply("All clean."))
    result = consolidate(world.assistant)
    assert result["model"]["proposed"] == 0 and TOOL_NAME in result["model"]["error"]
    assert not Proposal.objects.filter(kind__in=["supersede", "promote", "retire"]).exists()


def test_without_a_model_only_the_deterministic_pass_runs(no_llm, world):
    _memory(world)
    assert consolidate(world.assistant)["model"] is None
