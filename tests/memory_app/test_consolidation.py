"""Consolidation proposals: the deterministic pass, approve and reject (docs/design.md,
Provenance, consolidation and forgetting)."""

from __future__ import annotations

import pytest

from memory_app.documents import Provenance, write_document
from memory_app.governance.consolidation import duplicate_groups, run_consolidation
from memory_app.index.rows import index_document
from memory_app.models import MemoryDocument, MemoryRevision, Proposal
from tests.api_support import API, assert_error, login_client, snapshot

pytestmark = pytest.mark.django_db
PROPOSALS = f"{API}/assistants/helper/proposals/"


def write(world, path: str, content: str, **provenance) -> None:
    write_document(
        assistant=world.assistant,
        path=path,
        content=content,
        provenance=Provenance(**{"author": "user", "user": world.alice, **provenance}),
    )


@pytest.fixture
def week(world):
    """A week of memory: a fact five times over, a near duplicate, an untrusted copy, unrelated lines."""
    write(world, "MEMORY.md", "# Team\n- The weekly sync is on Tuesdays\n- Deploys need two approvals")
    write(
        world,
        "memory/2026-02-16.md",
        "- the weekly sync is on tuesdays.\n- Lunch was pizza",
        author="flush",
        user=None,
    )
    write(
        world,
        "memory/2026-02-17.md",
        "* The weekly sync is on Tuesdays\n- Deploys need 2 approvals",
        author="agent",
        user=None,
    )
    write(
        world,
        "memory/2026-02-18.md",
        "- Deploys need two approvals!\n- Vendor says prices doubled",
        author="agent",
        user=None,
        untrusted=True,
    )
    return world


def open_proposals(client) -> list[dict]:
    response = client.get(PROPOSALS)
    assert response.status_code == 200, response.content
    return response.json()["proposals"]


def test_the_deterministic_pass_finds_exact_and_near_duplicates_without_a_model(api, week, no_llm):
    outcome = run_consolidation(week.assistant)
    assert outcome["proposed"] == 2
    proposals = open_proposals(api)
    assert {p["kind"] for p in proposals} == {"merge"}
    sync = next(p for p in proposals if "sync" in p["new_text"])
    assert sync["confidence"] == 1.0 and sync["new_text"] == "- The weekly sync is on Tuesdays"
    assert sync["documents"] == [
        {"path": "MEMORY.md", "start_line": 2, "end_line": 2},
        {"path": "memory/2026-02-16.md", "start_line": 1, "end_line": 1},
        {"path": "memory/2026-02-17.md", "start_line": 1, "end_line": 1},
    ]
    assert sync["sources"][0]["path"] == "MEMORY.md" and sync["sources"][0]["trust"] == "owner"
    assert (
        "\n-- the weekly sync is on tuesdays.\n" in sync["diff"]
        and "+++ b/memory/2026-02-16.md" in sync["diff"]
    )
    approvals = next(p for p in proposals if "approvals" in p["new_text"])
    # The untrusted copy is a source, never the line kept.
    assert (
        approvals["new_text"] == "- Deploys need two approvals"
        and approvals["sources"][0]["trust"] == "owner"
    )
    assert {s["trust"] for s in approvals["sources"]} == {"owner", "agent", "untrusted"}
    assert 0.9 <= approvals["confidence"] < 1.0
    assert not MemoryRevision.objects.filter(origin_kind="proposal").exists()  # nothing applied


def test_approving_writes_one_revision_per_document_attributed_to_the_reviewer(week):
    run_consolidation(week.assistant)
    proposal = Proposal.objects.get(new_text__contains="sync")
    bob = login_client(week.bob)
    response = bob.post(f"{API}/proposals/{proposal.pk}/approve/", {}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["proposal"]["state"] == "approved" and body["proposal"]["decided_by"] == "bob"
    assert sorted(r["path"] for r in body["revisions"]) == ["memory/2026-02-16.md", "memory/2026-02-17.md"]
    for revision in MemoryRevision.objects.filter(pk__in=[r["id"] for r in body["revisions"]]):
        assert (revision.origin_kind, revision.user, revision.proposal_id) == (
            "proposal",
            week.bob,
            proposal.pk,
        )
    texts = dict(MemoryDocument.objects.values_list("path", "content"))
    assert "".join(texts.values()).lower().count("weekly sync") == 1
    assert texts["memory/2026-02-16.md"] == "- Lunch was pizza"
    # History intact: the removed line is still in the earlier revision.
    assert MemoryRevision.objects.filter(
        path="memory/2026-02-16.md", content__contains="weekly sync"
    ).exists()
    assert_error(
        bob.post(f"{API}/proposals/{proposal.pk}/approve/", {}, format="json"), 409, "proposal_decided"
    )


def test_edit_then_approve_puts_the_reviewers_text_in_memory_md(api, week):
    run_consolidation(week.assistant)
    proposal = Proposal.objects.get(new_text__contains="approvals")
    response = api.post(
        f"{API}/proposals/{proposal.pk}/approve/",
        {"new_text": "- Every deploy needs two approvals"},
        format="json",
    )
    assert response.status_code == 200, response.content
    memory = MemoryDocument.objects.get(path="MEMORY.md").content
    assert "- Every deploy needs two approvals" in memory
    lines = api.get(f"{API}/assistants/helper/memory/MEMORY.md?provenance=true").json()["provenance"]
    edited = next(e for e in lines if "Every deploy" in e["text"])
    assert edited["origin"]["kind"] == "proposal" and edited["origin"]["proposal"] == proposal.pk
    assert edited["origin"]["api_key"]["name"] == "test key" and edited["trust"] == "agent"
    assert_error(
        api.post(f"{API}/proposals/{proposal.pk}/approve/", {"new_text": " "}, format="json"),
        400,
        "validation_error",
    )


def test_a_rejected_proposal_is_remembered_across_runs(api, week):
    run_consolidation(week.assistant)
    proposal = Proposal.objects.get(new_text__contains="sync")
    response = api.post(f"{API}/proposals/{proposal.pk}/reject/", format="json")
    assert response.status_code == 200 and response.json()["state"] == "rejected"
    again = run_consolidation(week.assistant)
    assert again["proposed"] == 0 and again["known"] == 2
    assert [p["id"] for p in api.get(PROPOSALS + "?state=rejected").json()["proposals"]] == [proposal.pk]
    assert proposal.pk not in [p["id"] for p in open_proposals(api)]


def test_a_proposal_whose_lines_changed_is_stale_and_writes_nothing(api, week):
    run_consolidation(week.assistant)
    proposal = Proposal.objects.get(new_text__contains="sync")
    write(week, "memory/2026-02-16.md", "- something else entirely")
    before = snapshot()
    error = assert_error(
        api.post(f"{API}/proposals/{proposal.pk}/approve/", format="json"), 409, "proposal_stale"
    )
    source = next(s for s in proposal.sources if s["path"] == "memory/2026-02-16.md")
    assert error["message"] == (
        f"memory/2026-02-16.md line {source['line']} changed since the proposal was made; "
        "run consolidate again for a fresh proposal."
    )
    assert error["details"] == {"path": "memory/2026-02-16.md", "line": source["line"]}
    assert snapshot() == before and Proposal.objects.get(pk=proposal.pk).state == "open"


def test_deciding_a_decided_proposal_is_a_409(api, week):
    run_consolidation(week.assistant)
    proposal = Proposal.objects.get(new_text__contains="sync")
    assert api.post(f"{API}/proposals/{proposal.pk}/reject/", format="json").status_code == 200
    for action in ("approve", "reject"):
        error = assert_error(
            api.post(f"{API}/proposals/{proposal.pk}/{action}/", format="json"), 409, "proposal_decided"
        )
        assert error["message"] == f"Proposal {proposal.pk} is already rejected."
        assert error["details"] == {"state": "rejected"}


def test_consolidate_returns_the_task(api, week, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"{API}/assistants/helper/consolidate/", format="json")
    assert response.status_code == 202, response.content
    task = api.get(f"{API}/tasks/{response.json()['id']}/").json()
    assert task["kind"] == "consolidate" and task["state"] == "succeeded"
    assert task["result"]["proposed"] == 2


def test_viewers_read_proposals_but_cannot_decide_and_other_teams_see_none(week, other_api, scoped_api):
    run_consolidation(week.assistant)
    proposal = Proposal.objects.first()
    vera = login_client(week.vera)
    assert len(open_proposals(vera)) == 2
    reader = scoped_api("memory:read")
    before = snapshot()
    assert_error(
        vera.post(f"{API}/proposals/{proposal.pk}/approve/", format="json"), 403, "insufficient_scope"
    )
    assert_error(
        reader.post(f"{API}/proposals/{proposal.pk}/reject/", format="json"), 403, "insufficient_scope"
    )
    assert_error(
        reader.post(f"{API}/assistants/helper/consolidate/", format="json"), 403, "insufficient_scope"
    )
    assert_error(other_api.post(f"{API}/proposals/{proposal.pk}/approve/", format="json"), 404, "not_found")
    assert_error(other_api.get(PROPOSALS), 404, "not_found")
    assert_error(vera.get(PROPOSALS + "?state=maybe"), 400, "invalid_parameter")
    assert snapshot() == before and Proposal.objects.get(pk=proposal.pk).state == "open"


def test_groups_are_found_by_normal_form_and_similarity() -> None:
    from memory_app.governance.consolidation import Entry
    from memory_app.governance.lines import normalise_line

    def entry(text: str, line: int) -> Entry:
        return Entry("MEMORY.md", line, text, normalise_line(text), 1, "owner")

    groups = duplicate_groups(
        [
            entry("- A fact", 1),
            entry("a fact.", 2),
            entry("The sync is on Tuesdays", 3),
            entry("The sync is on Tuesday", 4),
            entry("Buy milk", 5),
        ]
    )
    assert sorted(sorted(e.line for e in g) for g, _ in groups) == [[1, 2], [3, 4]]


def test_the_nightly_job_picks_assistants_at_their_local_hour(world, django_capture_on_commit_callbacks):
    from datetime import UTC, datetime

    from django_q.models import Schedule

    from memory_app.governance.model_consolidation import due_for_consolidation
    from memory_app.tasks import nightly_consolidation
    from openclaw_site.models import TaskRecord

    assert Schedule.objects.filter(func="memory_app.tasks.nightly_consolidation", schedule_type="H").exists()
    world.assistant.timezone = "America/New_York"
    world.assistant.save()
    world.other_assistant.settings = {
        **world.other_assistant.settings,
        "memoryConsolidation": {"schedule": "off"},
    }
    world.other_assistant.save()
    eight_utc = datetime(2026, 2, 17, 8, 0, tzinfo=UTC)  # 03:00 in New York
    assert due_for_consolidation(eight_utc) == [world.assistant]
    assert due_for_consolidation(datetime(2026, 2, 17, 3, 0, tzinfo=UTC)) == []  # 'rival' is off
    with django_capture_on_commit_callbacks(execute=True):
        queued = nightly_consolidation()
    assert set(queued) == {"queued"}
    assert TaskRecord.objects.filter(kind="consolidate").count() == len(queued["queued"])


def test_with_vectors_the_pass_also_groups_lines_alike_in_meaning(world, fake_embeddings):

    write(world, "MEMORY.md", "- Deploys go out on Fridays\n- Budget is 10k")
    write(world, "memory/2026-02-16.md", "- On Fridays, deploys go out", author="flush", user=None)
    for document in MemoryDocument.objects.all():
        index_document(document.pk)
    assert run_consolidation(world.assistant)["proposed"] == 1
    [proposal] = Proposal.objects.all()
    assert [s["text"] for s in proposal.sources] == [
        "- Deploys go out on Fridays",
        "- On Fridays, deploys go out",
    ]
    assert proposal.reason.startswith("near duplicates") and proposal.confidence >= 0.92


def test_without_vectors_word_order_alone_is_not_a_duplicate(world):
    write(world, "MEMORY.md", "- Deploys go out on Fridays")
    write(world, "memory/2026-02-16.md", "- On Fridays, deploys go out", author="flush", user=None)
    assert run_consolidation(world.assistant)["proposed"] == 0


@pytest.mark.django_db(transaction=True)
def test_an_agent_files_a_proposal_over_mcp_and_rest_instead_of_writing(
    asgi_live_server, world, acme_secret, api
):
    from tests.mcp_client import call_tool, mcp_url, tool_error, tool_json

    write(
        world, "MEMORY.md", "- The sync is on Tuesdays\n- Budget is 10k\n- Deploys on Fridays\n- Tea at four"
    )
    write(world, "memory/2026-02-17.md", "- The sync moved to Thursdays", author="agent", user=None)
    url = mcp_url(asgi_live_server.url)
    filed = tool_json(
        call_tool(
            url,
            acme_secret,
            "memory_propose",
            {
                "kind": "supersede",
                "sources": [{"path": "MEMORY.md", "line": 1}, {"path": "memory/2026-02-17.md", "line": 1}],
                "new_text": "- The sync is on Thursdays",
                "rationale": "the user said it moved",
            },
        )
    )
    assert (
        filed["state"] == "open"
        and filed["kind"] == "supersede"
        and filed["reason"].startswith("filed by mcp")
    )
    refused = tool_error(
        call_tool(
            url,
            acme_secret,
            "memory_propose",
            {"kind": "retire", "sources": [{"path": "MEMORY.md", "line": 9}]},
        )
    )
    assert (
        refused["code"] == "invalid_proposal"
        and refused["details"]["reason"] == "source MEMORY.md#L9 does not exist"
    )
    rest = api.post(
        PROPOSALS,
        {"kind": "retire", "sources": [{"path": "MEMORY.md", "line": 4}], "rationale": "stale"},
        format="json",
    )
    assert rest.status_code == 201, rest.content
    assert_error(
        api.post(
            PROPOSALS,
            {
                "kind": "retire",
                "sources": [{"path": "MEMORY.md", "line": 1}, {"path": "MEMORY.md", "line": 2}],
            },
            format="json",
        ),
        400,
        "invalid_proposal",
    )
    assert MemoryDocument.objects.get(path="MEMORY.md").content.startswith(
        "- The sync is on Tuesdays"
    )  # unchanged
    assert Proposal.objects.filter(state="open").count() == 2


def test_auto_apply_is_off_by_default_and_never_touches_untrusted_lines(week):
    assert week.assistant.config.consolidation.auto_apply == ()
    assert run_consolidation(week.assistant)["auto_applied"] == 0
    assert set(Proposal.objects.values_list("state", flat=True)) == {"open"}


def test_auto_apply_of_merges_when_the_setting_asks(week):
    week.assistant.settings = {**week.assistant.settings, "memoryConsolidation": {"autoApply": ["merge"]}}
    week.assistant.save()
    outcome = run_consolidation(week.assistant)
    assert outcome["proposed"] == 2 and outcome["auto_applied"] == 1
    applied = Proposal.objects.get(state="approved")
    assert "sync" in applied.new_text and applied.decided_by is None
    assert MemoryRevision.objects.filter(proposal=applied, trust="agent", origin_kind="proposal").exists()
    # The approvals group cites an untrusted line: a person decides it.
    assert Proposal.objects.get(new_text__contains="approvals").state == "open"


def test_a_source_line_that_moved_is_found_by_its_text() -> None:
    from memory_app.governance.consolidation import ProposalStale, apply_change

    sources = [
        {"path": "a.md", "line": 3, "text": "- x", "revision": 1, "trust": "owner"},
        {"path": "a.md", "line": 4, "text": "- X.", "revision": 1, "trust": "owner"},
    ]
    moved = {"a.md": "- y\n- x\n- X."}  # a line above them went
    assert apply_change(moved, kind="merge", sources=sources, new_text="- x") == {"a.md": "- y\n- x"}
    with pytest.raises(ProposalStale):
        apply_change({"a.md": "- y\n- X."}, kind="merge", sources=sources, new_text="- x")
