"""Dashboard pages a new team meets first, full page and htmx: search marks whole words, the first
steps, the connection settings on the API keys page, /compact on a small session, the slug field,
Settings in words, and long messages clipped."""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path

import pytest
from django.urls import resolve

from integrations.mcp_http import is_mcp_path
from memory_app.web.highlight import highlight_html, highlight_terms
from openclaw_site.models import Team
from sessions_app.models import CompactionRun, Message
from tests import factories
from tests.integrations.openclaw_runner import documented_install_commands
from tests.messages import assistant, user
from tests.views_support import HX, is_full_page, signed_in

pytestmark = pytest.mark.django_db


# --- highlighting (pure) -----------------------------------------------------------------------


def test_highlight_marks_whole_words_and_leaves_stop_words_alone():
    html = highlight_html("Decisions on the launch: we decided", "what did we decide on the launch")
    assert html == "Decisions on the <mark>launch</mark>: we <mark>decided</mark>"
    assert highlight_html("the plan", "the") == "<mark>the</mark> plan"  # nothing else to mark
    assert highlight_html("用Python写 <b>", "python") == "用<mark>Python</mark>写 &lt;b&gt;"
    assert highlight_html("see src/app/main.py now", "main.py") == "see src/app/<mark>main.py</mark> now"


def test_highlight_cuts_chinese_at_stop_words_and_merges_the_pairs():
    assert highlight_terms("我们的向量数据库") == ["向量", "量数", "数据", "据库"]
    assert (
        highlight_html("向量数据库和我们的计划", "我们的向量数据库") == "<mark>向量数据库</mark>和我们的计划"
    )
    assert highlight_html("医疗保险是什么", "什么是医疗保险？") == "<mark>医疗保险</mark>是什么"
    assert highlight_terms("用户的数据") == ["用户", "数据"]


# --- search page -------------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_search_page_marks_whole_words(world, htmx):
    factories.make_document(
        world.assistant, "memory/decisions.md", "# Decisions\n\nWe decided the launch date.\n"
    )
    response = signed_in(world.bob).get(
        "/assistants/helper/search/", {"q": "what did we decide on the launch"}, **(HX if htmx else {})
    )
    assert response.status_code == 200 and is_full_page(response) is not htmx
    marks = re.findall(r"<mark>([^<]*)</mark>", response.content.decode())
    assert marks and set(marks) == {"decided", "launch"}


# --- home: first steps -------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_an_empty_teams_home_shows_three_first_steps(db, htmx):
    admin = factories.make_user("newcomer", team=factories.make_team("fresh"), role="admin")
    response = signed_in(admin).get("/", **(HX if htmx else {}))
    content = response.content.decode()
    assert response.status_code == 200 and is_full_page(response) is not htmx
    steps = re.findall(r'<li class="step">\s*<h3>([^<]+)</h3>', content)
    assert steps == ["Create an assistant", "Connect an agent", "Chat"]
    assert 'href="/assistants/new/"' in content and 'href="/keys/"' in content


def test_a_viewer_of_an_empty_team_is_told_who_creates_assistants(db):
    team = factories.make_team("fresh")
    factories.make_user("admin", team=team, role="admin")
    content = signed_in(factories.make_user("reader", team=team, role="viewer")).get("/").content.decode()
    assert 'id="first-steps"' in content and "An admin of Fresh can create one." in content
    assert 'href="/assistants/new/"' not in content


def test_a_team_with_assistants_sees_them_not_the_first_steps(world):
    content = signed_in(world.bob).get("/").content.decode()
    assert 'id="first-steps"' not in content and "Helper" in content


# --- API keys: connecting an agent -------------------------------------------------------------


def test_api_keys_page_shows_the_connection_of_the_first_assistant(world):
    factories.make_assistant(world.acme, "writer", name="Writer")
    response = signed_in(world.alice).get("/keys/")
    content = response.content.decode()
    assert response.status_code == 200 and is_full_page(response)
    assert 'value="http://testserver/mcp/helper/"' in content
    assert 'value="http://testserver/v1"' in content
    assert (
        "openclaw plugins install -l /path/to/openclaw-site/integrations/openclaw --force --accept-capabilities"
        in content
    )
    assert '<option value="writer" >Writer (writer)</option>' in content.replace("  ", " ")


@pytest.mark.parametrize("htmx", [False, True])
def test_picking_an_assistant_shows_its_connection(world, htmx):
    factories.make_assistant(world.acme, "writer", name="Writer")
    response = signed_in(world.bob).get("/keys/", {"assistant": "writer"}, **(HX if htmx else {}))
    content = response.content.decode()
    assert response.status_code == 200 and is_full_page(response) is not htmx
    if htmx:
        assert content.lstrip().startswith('<section id="connect-panel"')
    assert 'value="http://testserver/mcp/writer/"' in content
    shown = [
        html.unescape(block)
        for block in re.findall(r'<textarea id="connect-openclaw-\w+"[^>]*>(.*?)</textarea>', content, re.S)
    ]
    commands = [
        shlex.split(line)[1:]
        for block in shown
        for line in block.splitlines()
        if line.startswith("openclaw ")
    ]
    # The commands docs/integrations.md gives (and its test runs), for this site and assistant.
    assert commands == documented_install_commands(
        "http://testserver", "writer", root=Path("/path/to/openclaw-site")
    )
    assert "export OPENCLAW_SITE_API_KEY=<a key with sessions:write, memory:read, memory:write>" in shown[1]
    assert "docs/integrations.md" in content


def test_the_addresses_shown_are_the_ones_served(world):
    content = signed_in(world.bob).get("/keys/").content.decode()
    mcp = re.search(r'id="connect-mcp"[^>]*value="http://testserver([^"]+)"', content)
    v1 = re.search(r'id="connect-v1"[^>]*value="http://testserver([^"]+)"', content)
    assert mcp and is_mcp_path(mcp.group(1))
    assert v1 and resolve(v1.group(1) + "/models").url_name == "openai-models"
    assert resolve(v1.group(1) + "/chat/completions").url_name == "openai-chat-completions"


def test_another_teams_assistant_cannot_be_picked(world):
    assert signed_in(world.bob).get("/keys/", {"assistant": "rival"}).status_code == 404


def test_a_team_without_assistants_is_told_to_create_one_first(db):
    admin = factories.make_user("newcomer", team=factories.make_team("fresh"), role="admin")
    content = signed_in(admin).get("/keys/").content.decode()
    assert "Create an assistant first" in content and 'id="connect-mcp"' not in content


# --- /compact on a small session -----------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_compact_on_a_small_session_says_how_far_it_is_and_records_no_run(world, llm, htmx):
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("hi"), assistant("hello"))
    client = signed_in(world.bob)
    extra = HX if htmx else {}
    response = client.post(f"/sessions/{session.pk}/compact/", {"instructions": ""}, follow=not htmx, **extra)
    chat = client.post(f"/sessions/{session.pk}/chat/", {"text": "/compact"}, follow=not htmx, **extra)
    for page in (response, chat):
        text = page.content.decode()
        assert "Nothing to compact yet: this session holds about" in text
        assert re.search(r"holds about \d+ tokens.*once the session passes 20k tokens, about 20k more", text)
        assert "Automatic compaction starts at" in text
    assert not CompactionRun.objects.exists()
    assert not Message.objects.filter(session=session, content="/compact").exists()
    preview = client.get(f"/sessions/{session.pk}/compact/", **extra).content.decode()
    assert "Nothing to compact yet" in preview and "Compact now" not in preview


# --- new assistant: the slug follows the name ------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_new_assistant_slug_field_follows_the_name(world, htmx):
    response = signed_in(world.alice).get("/assistants/new/", **(HX if htmx else {}))
    content = response.content.decode()
    assert is_full_page(response) is not htmx
    assert re.search(r'<input[^>]*name="slug"[^>]*data-slug-from="#id_name"', content)
    if not htmx:
        assert "/static/js/app.js" in content


# --- settings in words -------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_settings_are_grouped_by_purpose_with_labels_and_keys(world, htmx):
    response = signed_in(world.alice).get("/assistants/helper/settings/", **(HX if htmx else {}))
    content = response.content.decode()
    assert response.status_code == 200 and is_full_page(response) is not htmx
    titles = re.findall(r'<details class="panel settings-section"[^>]*>\s*<summary><h2>([^<]+)</h2>', content)
    assert titles[:2] == ["When the conversation gets long", "How summaries are written"]
    assert "Trimming old tool output" in titles and "Search ranking" in titles
    label = re.search(
        r'<label for="id_compaction.reserveTokens">([^<]+) <code class="setting-key">([^<]+)</code>', content
    )
    assert label and label.groups() == ("Room kept for the reply", "compaction.reserveTokens")
    assert "<code>reserveTokens</code>" not in content  # no raw key as the label
    assert re.search(r'id="section-when-the-conversation-gets-long" open', content)
    assert not re.search(r'id="section-search-ranking" open', content)


def test_every_setting_has_a_section_and_a_label():
    from openclaw_site.web.forms import LABELS, SECTIONS, iter_leaves

    leaves = [path for path, _ in iter_leaves()]
    in_sections = [path for section in SECTIONS for path in section.paths]
    assert sorted(in_sections) == sorted(leaves) and set(LABELS) == set(leaves)


def test_a_section_with_an_error_opens(world):
    from tests.test_views_site import _settings_post

    data = _settings_post(world.assistant, **{"memorySearch.query.hybrid.mmr.lambda": "7"})
    response = signed_in(world.alice).post("/assistants/helper/settings/", data, **HX)
    assert response.status_code == 422
    assert re.search(r'id="section-search-ranking" open', response.content.decode())


# --- long messages -----------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_long_messages_are_clipped_behind_show_all(world, no_llm, htmx):
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("word " * 600), assistant("short"), assistant("line\n" * 40))
    path = f"/sessions/{session.pk}/" if not htmx else f"/sessions/{session.pk}/transcript/"
    content = signed_in(world.bob).get(path, **(HX if htmx else {})).content.decode()
    articles = re.findall(r'<article class="msg.*?</article>', content, re.S)
    assert len(articles) == 3
    assert '<details class="show-all">' in articles[0] and "3.0k chars" in articles[0]
    assert '<details class="show-all">' not in articles[1]
    assert '<details class="show-all">' in articles[2]  # many lines


# --- the top bar ---------------------------------------------------------------------------------


def test_the_team_badge_carries_the_whole_name_in_its_title(db):
    team = Team.objects.create(slug="long", name="Northwind Research & Development")
    content = signed_in(factories.make_user("nora", team=team, role="admin")).get("/").content.decode()
    assert 'title="Your team: Northwind Research &amp; Development · admin"' in content
