"""The review queue page: viewers read it, members approve (edited or not) and reject, alone or in bulk."""

from __future__ import annotations

import re

import pytest

from memory_app.governance.consolidation import run_consolidation
from memory_app.models import MemoryDocument, MemoryRevision, Proposal
from tests import factories
from tests.views_support import HX, is_full_page, signed_in

pytestmark = pytest.mark.django_db
REVIEW = "/assistants/helper/memory/review/"


@pytest.fixture
def queue(world):
    factories.make_document(world.assistant, "MEMORY.md", "- The sync is on Tuesdays\n- Budget is 10k")
    factories.make_document(
        world.assistant, "memory/2026-02-16.md", "- the sync is on tuesdays\n- budget is 10k.", author="flush"
    )
    factories.make_document(world.other_assistant, "MEMORY.md", "- Rival secret\n- rival secret")
    run_consolidation(world.assistant)
    run_consolidation(world.other_assistant)
    return world


def test_viewers_read_the_queue_without_decide_buttons(queue):
    page = signed_in(queue.vera).get(REVIEW)
    assert page.status_code == 200 and is_full_page(page)
    content = page.content.decode()
    assert "The sync is on Tuesdays" in content and "memory/2026-02-16.md#L1" in content
    assert (
        "Rival secret" not in content and "Approve selected" not in content and 'name="decide"' not in content
    )
    partial = signed_in(queue.vera).get(REVIEW + "?state=open", **HX)
    assert not is_full_page(partial) and b'id="queue"' in partial.content
    assert signed_in(queue.vera).post(REVIEW + "decide/", {"decide": "reject:1"}).status_code == 403
    assert signed_in(queue.charlie).get(REVIEW).status_code == 404


def test_a_member_approves_one_edited_and_rejects_the_other(queue):
    bob = signed_in(queue.bob)
    sync = Proposal.objects.get(assistant=queue.assistant, new_text__contains="sync")
    budget = Proposal.objects.get(assistant=queue.assistant, new_text__contains="Budget")
    response = bob.post(
        REVIEW + "decide/",
        {"decide": f"approve:{sync.pk}", f"new_text-{sync.pk}": "- The weekly sync is on Tuesdays"},
    )
    assert response.status_code == 302
    assert MemoryDocument.objects.get(assistant=queue.assistant, path="MEMORY.md").content.startswith(
        "- The weekly sync is on Tuesdays"
    )
    assert MemoryRevision.objects.filter(proposal=sync, user=queue.bob).count() == 2
    bob.post(REVIEW + "decide/", {"action": "reject", "ids": [budget.pk]})
    assert Proposal.objects.get(pk=budget.pk).state == "rejected"
    assert "No open proposals" in bob.get(REVIEW).content.decode()
    rejected = bob.get(REVIEW + "?state=rejected").content.decode()
    assert "Budget is 10k" in rejected and "by bob" in rejected


def test_bulk_approve_applies_each(queue):
    ids = list(Proposal.objects.filter(assistant=queue.assistant).values_list("pk", flat=True))
    signed_in(queue.alice).post(REVIEW + "decide/", {"action": "approve", "ids": ids})
    assert set(Proposal.objects.filter(pk__in=ids).values_list("state", flat=True)) == {"approved"}
    assert MemoryDocument.objects.get(assistant=queue.assistant, path="memory/2026-02-16.md").content == ""
    other = Proposal.objects.get(assistant=queue.other_assistant)
    signed_in(queue.alice).post(REVIEW + "decide/", {"action": "approve", "ids": [other.pk]})
    assert Proposal.objects.get(pk=other.pk).state == "open"  # another team's: untouched


def test_the_team_queue_lists_every_assistant_and_decides_across_them(queue):
    second = factories.make_assistant(queue.acme, "scribe")
    factories.make_document(second, "MEMORY.md", "- Coffee at ten\n- coffee at ten.")
    run_consolidation(second)
    page = signed_in(queue.vera).get("/review/")
    content = page.content.decode()
    assert page.status_code == 200 and "Coffee at ten" in content and "The sync is on Tuesdays" in content
    assert "Rival secret" not in content and "/assistants/scribe/memory/review/" in content
    assert b'id="queue"' in signed_in(queue.vera).get("/review/", **HX).content
    coffee = Proposal.objects.get(assistant=second)
    rival = Proposal.objects.get(assistant=queue.other_assistant)
    signed_in(queue.bob).post("/review/decide/", {"action": "reject", "ids": [coffee.pk, rival.pk]})
    assert Proposal.objects.get(pk=coffee.pk).state == "rejected"
    assert Proposal.objects.get(pk=rival.pk).state == "open"
    assert (
        signed_in(queue.vera).post("/review/decide/", {"decide": f"approve:{coffee.pk}"}).status_code == 403
    )


def _review_link(client, path: str = "/") -> str:
    page = client.get(path).content.decode()
    nav = re.search(r'<nav class="mainnav".*?</nav>', page, re.S)
    assert nav is not None
    link = re.search(r'<a href="/review/"[^>]*>.*?</a>', nav.group(0), re.S)
    assert link is not None
    return link.group(0)


def test_the_main_navigation_links_the_team_queue_with_its_open_count(queue):
    assert re.search(r'>Review <span class="count nav-count">2<', _review_link(signed_in(queue.vera)))
    assert '>Review <span class="count nav-count">1<' in _review_link(
        signed_in(queue.charlie)
    )  # globex's own
    bob = signed_in(queue.bob)
    on_queue = _review_link(bob, "/review/")
    assert 'aria-current="page"' in on_queue
    assert 'aria-current="page">Assistants' not in bob.get("/review/").content.decode()
    bob.post(
        "/review/decide/", {"action": "reject", "ids": list(Proposal.objects.values_list("pk", flat=True))}
    )
    assert _review_link(bob).endswith(">Review</a>")  # nothing waits: no count
