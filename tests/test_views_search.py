"""Dashboard search page and the memory document's index badge, on real Postgres full-text search.

The test settings run without an embedder (EMBEDDING_PROVIDER=none), so these searches are
keyword searches; `fake_embeddings` points the embedder at the scripted server for hybrid ones.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from memory_app.index.rebuild import reindex_assistant
from memory_app.models import MemoryDocument
from tests import factories
from tests.views_support import HX, is_full_page, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def memory(world):
    factories.make_document(
        world.assistant,
        "MEMORY.md",
        "# Memory\n\n- The user prefers short answers.\n- Launch date: 2026-12-15, decided with Dana.\n",
    )
    factories.make_document(
        world.assistant, "memory/2026-11-30.md", "- Deploy key lives at vault path secret/deploy.\n"
    )
    factories.make_document(
        world.other_assistant, "MEMORY.md", "- Globex launch date is secret: 2027-01-01.\n"
    )
    session = factories.make_session(world.assistant, title="Zebra chat")
    factories.add_messages(
        session,
        {"role": "user", "content": "Which code did the build use?"},
        {
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "c1", "name": "exec", "arguments": {"cmd": "git log"}}],
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "exec",
            "content": [{"type": "text", "text": "commit 9f3ab21"}],
        },
        {"role": "assistant", "content": "The zebra build used commit 9f3ab21."},
    )
    reindex_assistant(world.assistant.pk)
    reindex_assistant(world.other_assistant.pk)
    return session


def test_search_page_without_a_query_explains_itself(world):
    response = signed_in(world.vera).get("/assistants/helper/search/")
    assert response.status_code == 200 and is_full_page(response)
    content = response.content.decode()
    assert '<label for="id_q" class="visually-hidden">Search query</label>' in content
    assert re.search(r'<input type="checkbox" name="sources" value="memory"[^>]*checked', content)
    assert "by meaning and by exact words" in content


def test_search_finds_memory_with_highlight_citation_link_and_explain(world, memory):
    response = signed_in(world.vera).get("/assistants/helper/search/?q=launch+date")
    assert response.status_code == 200
    content = response.content.decode()
    result = re.search(r'<article class="result">.*?</article>', content, re.S).group(0)
    assert 'badge-source-memory">memory<' in result
    assert (
        '<a class="mono result-cite" href="/assistants/helper/memory/doc/MEMORY.md?from=1&amp;lines='
        in result
    )
    assert "<mark>Launch</mark> <mark>date</mark>" in result
    assert (
        "Vector score" in result
        and "Text score" in result
        and "Decay multiplier" in result
        and "MMR position" in result
    )
    assert "2027-01-01" not in content  # another team's memory
    assert "text search" in content  # no embedder in the test settings: the page says what ran


def test_session_result_links_to_the_message_it_quotes(world, memory):
    content = signed_in(world.bob).get("/assistants/helper/search/?q=zebra+9f3ab21").content.decode()
    result = re.search(r'<article class="result">.*?badge-source-sessions.*?</article>', content, re.S).group(
        0
    )
    quoted = memory.messages.get(role="assistant", content="The zebra build used commit 9f3ab21.")
    assert quoted.seq == 4  # a tool call and its result sit between the question and the answer
    links = re.findall(r'href="(/sessions/\d+/messages/\d+/)"', result)
    first_seq = int(re.search(r"messages #(\d+)", result).group(1))
    assert links == [f"/sessions/{memory.pk}/messages/{first_seq}/"]
    assert "Zebra chat" in result
    page = signed_in(world.bob).get(links[0]).content.decode()
    assert "msg-target" in page and "zebra" in page


def test_sources_filter_and_htmx_partial(world, memory):
    client = signed_in(world.bob)
    response = client.get("/assistants/helper/search/?q=zebra+launch&sources=memory&opts=1", **HX)
    assert response.status_code == 200 and not is_full_page(response)
    content = response.content.decode()
    assert content.lstrip().startswith('<section id="results"')
    assert "badge-source-memory" in content and "badge-source-sessions" not in content


def test_mmr_and_decay_toggles_reach_the_search(world, memory):
    content = (
        signed_in(world.bob)
        .get("/assistants/helper/search/?q=launch&opts=1&sources=memory&mmr=on&decay=on")
        .content.decode()
    )
    assert re.search(r"MMR position</th><td class=\"num\">1</td>", content)  # 1-based rank after re-ranking
    assert re.search(r'name="mmr"[^>]*checked', content) and re.search(r'name="decay"[^>]*checked', content)


def test_bare_query_link_uses_the_assistants_settings(world, memory):
    settings = world.assistant.settings
    settings["memorySearch"]["sources"] = ["memory"]
    world.assistant.settings = settings
    world.assistant.save()
    content = signed_in(world.bob).get("/assistants/helper/search/?q=zebra+launch").content.decode()
    assert "badge-source-sessions" not in content
    assert not re.search(r'value="sessions"[^>]*checked', content)


def test_hybrid_search_with_embeddings_reports_vector_scores(world, fake_embeddings):
    factories.make_document(world.assistant, "MEMORY.md", "- The marketing page belongs to Dana.\n")
    reindex_assistant(world.assistant.pk)
    content = (
        signed_in(world.bob).get("/assistants/helper/search/?q=who+owns+the+marketing+page").content.decode()
    )
    assert "hybrid search" in content
    vector = float(re.search(r'Vector score</th><td class="num">([\d.]+)<', content).group(1))
    assert vector > 0


def test_search_of_another_team_is_404(world, memory):
    assert signed_in(world.charlie).get("/assistants/helper/search/?q=launch").status_code == 404
    content = signed_in(world.charlie).get("/assistants/rival/search/?q=launch").content.decode()
    assert "2027-01-01" in content and "2026-12-15" not in content


# --- the index badge of a document ------------------------------------------------------------


def test_saved_document_shows_indexed(world):
    factories.make_document(world.assistant, "MEMORY.md", "hello index\n")
    reindex_assistant(world.assistant.pk)  # what the task queued after the commit does
    content = signed_in(world.vera).get("/assistants/helper/memory/doc/MEMORY.md").content.decode()
    badge = re.search(r'<span id="index-status".*?</span>\s*</span>', content, re.S).group(0)
    assert "indexed" in badge and "every 1s" not in badge


def test_a_save_not_yet_indexed_polls_then_settles(world):
    document = factories.make_document(world.assistant, "MEMORY.md", "old text\n")
    # A save whose reindex task has not run yet (in production a worker picks it up ~1.5 s later).
    from memory_app.models import content_hash

    MemoryDocument.objects.filter(pk=document.pk).update(
        content="new text\n", content_hash=content_hash("new text\n")
    )
    client = signed_in(world.vera)
    badge = client.get("/assistants/helper/memory/status/MEMORY.md", **HX).content.decode()
    assert "indexing…" in badge and 'hx-trigger="every 1s"' in badge and not badge.startswith("<!doctype")
    reindex_assistant(world.assistant.pk)
    badge = client.get("/assistants/helper/memory/status/MEMORY.md", **HX).content.decode()
    assert "indexed" in badge and "every 1s" not in badge
    MemoryDocument.objects.filter(pk=document.pk).update(
        content="newer\n",
        content_hash=content_hash("newer\n"),
        updated_at=timezone.now() - timedelta(minutes=10),
    )
    badge = client.get("/assistants/helper/memory/status/MEMORY.md", **HX).content.decode()
    assert "not indexed yet" in badge and "every 1s" not in badge


@pytest.mark.parametrize("htmx", [False, True])
def test_results_below_the_score_floor_are_labelled_low_confidence(world, fake_embeddings, htmx):
    factories.make_document(world.assistant, "MEMORY.md", "- The marketing page belongs to Dana.\n")
    settings = world.assistant.settings
    settings["memorySearch"]["query"]["minScore"] = 1.0  # nothing can pass it
    settings["memorySearch"]["query"]["hybrid"]["enabled"] = False  # no keyword hit fills the slots
    world.assistant.settings = settings
    world.assistant.save()
    reindex_assistant(world.assistant.pk)
    url = "/assistants/helper/search/?q=who+owns+the+marketing+page"
    response = signed_in(world.bob).get(url, **(HX if htmx else {}))
    content = response.content.decode()
    assert is_full_page(response) is not htmx
    assert "Low-confidence matches — nothing scored above the floor" in content
    assert "MEMORY.md" in content  # the nearest are still shown


def test_results_above_the_floor_carry_no_low_confidence_label(world, fake_embeddings):
    factories.make_document(world.assistant, "MEMORY.md", "- The marketing page belongs to Dana.\n")
    reindex_assistant(world.assistant.pk)
    content = signed_in(world.bob).get("/assistants/helper/search/?q=marketing+page+Dana").content.decode()
    assert "MEMORY.md" in content and "Low-confidence" not in content
