"""What a new team meets in its first hour, on a 375 px phone and a 1440 px desktop: search marks
whole words, an empty team's home shows the first steps, the API keys page shows how to connect an
agent, a long team name leaves "Sign out" on screen, and a long message is clipped until opened."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from openclaw_site.models import Team
from tests import factories
from tests.browser.conftest import SCREENSHOTS
from tests.messages import assistant, user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = [375, 1440]
FITS = "() => document.scrollingElement.scrollWidth <= window.innerWidth"


def _shot(page, name: str, width: int) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"first_hour_{name}_{width}.png"), full_page=True)


@pytest.mark.parametrize("width", WIDTHS)
def test_search_marks_whole_words_and_no_stop_words(page, live_server, world, sign_in, width):
    page.set_viewport_size({"width": width, "height": 900})
    factories.make_document(
        world.assistant,
        "memory/decisions.md",
        "# Decisions\n\nOn Monday the team decided the launch date; the launch is on 2026-12-15.\n",
    )
    factories.make_document(world.assistant, "memory/zh.md", "我们决定使用向量数据库，上线时间另定。\n")
    sign_in(page, "bob")
    page.goto(f"{live_server.url}/assistants/helper/search/")
    page.get_by_label("Search query").fill("what did we decide on the launch")
    page.get_by_label("Search query").press("Enter")
    english = page.locator(".result", has_text="Decisions")
    expect(english).to_have_count(1)
    marks = [text.lower() for text in english.locator("mark").all_inner_texts()]
    assert marks and set(marks) == {"decided", "launch"}
    assert page.evaluate(FITS)
    _shot(page, "search_en", width)

    page.get_by_label("Search query").fill("我们的向量数据库")
    page.get_by_label("Search query").press("Enter")
    chinese = page.locator(".result", has_text="向量数据库")
    expect(chinese).to_have_count(1)
    assert chinese.locator("mark").all_inner_texts() == ["向量数据库"]
    _shot(page, "search_zh", width)


@pytest.mark.parametrize("width", WIDTHS)
def test_an_empty_team_sees_three_first_steps_and_the_slug_follows_the_name(
    page, live_server, db, sign_in, width
):
    page.set_viewport_size({"width": width, "height": 900})
    factories.make_user("newcomer", team=factories.make_team("fresh-start"), role="admin")
    sign_in(page, "newcomer")
    steps = page.locator("#first-steps .step")
    expect(steps).to_have_count(3)
    expect(steps.nth(0)).to_contain_text("Create an assistant")
    expect(steps.nth(1)).to_contain_text("Connect an agent")
    expect(steps.nth(2)).to_contain_text("Chat")
    assert page.evaluate(FITS)
    _shot(page, "first_steps", width)

    steps.nth(0).get_by_role("link", name="Create an assistant").click()
    page.wait_for_url("**/assistants/new/")
    page.wait_for_function("document.documentElement.classList.contains('js')")  # app.js runs
    page.get_by_label("Name").fill("Research Bot: Ünïcode")
    expect(page.get_by_label("Slug")).to_have_value("research-bot-unicode")
    page.get_by_label("Slug").fill("lab")  # edited by hand: the name no longer drives it
    page.get_by_label("Name").fill("Research Bot 2")
    expect(page.get_by_label("Slug")).to_have_value("lab")


@pytest.mark.parametrize("width", WIDTHS)
def test_api_keys_page_shows_how_to_connect_the_chosen_assistant(page, live_server, world, sign_in, width):
    page.set_viewport_size({"width": width, "height": 900})
    factories.make_assistant(world.acme, "writer", name="Writer")
    sign_in(page, "alice")
    page.goto(f"{live_server.url}/keys/")
    expect(page.locator("#connect-mcp")).to_have_value(f"{live_server.url}/mcp/helper/")
    page.get_by_label("Assistant", exact=True).select_option("writer")
    expect(page.locator("#connect-mcp")).to_have_value(f"{live_server.url}/mcp/writer/")
    expect(page.locator("#connect-v1")).to_have_value(f"{live_server.url}/v1")
    expect(page.locator("#connect-openclaw-install")).to_have_value(
        "openclaw plugins install -l /path/to/openclaw-site/integrations/openclaw --force --accept-capabilities"
    )
    configure = page.locator("#connect-openclaw-config").input_value()
    assert f'{{"baseUrl": "{live_server.url}", "assistant": "writer"}}' in configure
    expect(page.locator("#connect-panel")).to_contain_text("OPENCLAW_SITE_API_KEY")
    assert page.url.endswith("/keys/?assistant=writer")
    assert page.evaluate(FITS)
    _shot(page, "api_keys", width)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_32_character_team_name_leaves_sign_out_on_screen(page, live_server, db, sign_in, width):
    page.set_viewport_size({"width": width, "height": 900})
    team = Team.objects.create(slug="long", name="Northwind Research & Development")
    assert len(team.name) == 32
    factories.make_user("nora", team=team, role="admin")
    factories.make_assistant(team, "helper")
    sign_in(page, "nora")
    for url in ["/", "/keys/", "/assistants/helper/settings/"]:
        page.goto(live_server.url + url)
        assert page.evaluate(FITS), url
        sign_out = page.get_by_role("button", name="Sign out")
        expect(sign_out).to_be_in_viewport()
        box = sign_out.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width
    _shot(page, "long_team_name", width)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_long_message_is_clipped_until_show_all(page, live_server, world, sign_in, width):
    page.set_viewport_size({"width": width, "height": 900})
    session = factories.make_session(world.assistant, title="Long paste")
    paragraph = "The quarterly report lists every deployment, its owner and its rollback plan. "
    factories.add_messages(
        session,
        user("\n\n".join(paragraph * 3 for _ in range(20)) + "\n\nTHE LAST LINE"),
        assistant("Noted."),
    )
    sign_in(page, "bob")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    body = page.locator(f"#m-{1} .msg-body")
    clipped = "el => el.scrollHeight > el.clientHeight + 50"
    assert body.evaluate(clipped)
    show_all = page.locator("#m-1 .show-all summary")
    expect(show_all).to_contain_text("Show all")
    expect(page.locator("#m-2 .show-all")).to_have_count(0)  # a short reply is not clipped
    assert page.evaluate(FITS)
    _shot(page, "long_message", width)
    show_all.click()
    assert not body.evaluate(clipped)
    expect(show_all).to_contain_text("Show less")
