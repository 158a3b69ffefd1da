"""A person signs in, creates an assistant, edits MEMORY.md, and cannot see another team's session."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memory_app.models import MemoryDocument, MemoryRevision
from openclaw_site.models import Assistant
from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_sign_in(page, live_server, world):
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    page.get_by_label("Username").fill("bob")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("didn't match")
    page.get_by_label("Username").fill("bob")
    page.get_by_label("Password").fill("pw-secret-123")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Assistants")).to_be_visible()
    expect(page.get_by_role("link", name=re.compile("Helper"))).to_be_visible()
    expect(page.get_by_text("Rival")).to_have_count(0)
    expect(page.get_by_text("Acme · member")).to_be_visible()


def test_create_an_assistant(page, live_server, world, sign_in):
    sign_in(page, "alice")
    page.get_by_role("link", name="New assistant").click()
    page.get_by_label("Name").fill("Launch planner")
    page.get_by_label("Slug").fill("helper")  # taken: the error shows next to the field
    page.get_by_label("Context window").fill("1000")
    page.get_by_role("button", name="Create assistant").click()
    expect(page.locator("#id_slug_error")).to_contain_text("already has an assistant")
    expect(page.locator("#id_context_window_error")).to_be_visible()
    expect(page.get_by_label("Slug")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Slug")).to_be_focused()  # keyboard focus goes to the first bad field
    page.get_by_label("Slug").fill("planner")
    page.get_by_label("Context window").fill("128000")
    page.get_by_label("Timezone").fill("Europe/Paris")
    page.get_by_role("button", name="Create assistant").click()
    expect(page).to_have_url(f"{live_server.url}/assistants/planner/")
    expect(page.get_by_role("heading", name="Launch planner")).to_be_visible()
    expect(page.get_by_text("Created Launch planner.")).to_be_visible()
    assistant = Assistant.objects.get(team=world.acme, slug="planner")
    assert assistant.context_window == 128000 and assistant.timezone == "Europe/Paris"
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Assistants").click()
    expect(page.get_by_role("link", name=re.compile("Launch planner"))).to_be_visible()


def test_edit_memory_md(page, live_server, world, sign_in):
    factories.make_document(world.assistant, "MEMORY.md", "# Memory\n\n- The user prefers short answers.\n")
    sign_in(page, "bob")
    page.get_by_role("link", name=re.compile("Helper")).click()
    page.get_by_role("link", name="Memory", exact=True).click()
    page.get_by_role("link", name=re.compile("MEMORY.md")).first.click()
    page.get_by_role("link", name="Edit").click()
    editor = page.get_by_label("Content")
    editor.click()
    editor.press("Control+End")
    editor.type("- Launch date: 2026-12-15 (decided with Dana).\n")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(f"{live_server.url}/assistants/helper/memory/doc/MEMORY.md")
    expect(page.get_by_text("Saved MEMORY.md.")).to_be_visible()
    expect(page.locator("#document-body")).to_contain_text("Launch date: 2026-12-15")
    expect(page.locator(".rev-list li")).to_have_count(2)
    document = MemoryDocument.objects.get(assistant=world.assistant, path="MEMORY.md")
    assert document.content.endswith("- Launch date: 2026-12-15 (decided with Dana).\n")
    assert MemoryRevision.objects.filter(document=document, action="update", user=world.bob).exists()


def test_another_teams_session_url_is_404(page, live_server, world, sign_in):
    theirs = factories.make_session(world.other_assistant, title="Globex secrets")
    factories.add_messages(theirs, {"role": "user", "content": "the globex merger code is ZEBRA-7"})
    sign_in(page, "bob")
    response = page.goto(f"{live_server.url}/sessions/{theirs.pk}/")
    assert response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_text("ZEBRA-7")).to_have_count(0)
    expect(page.get_by_text("Globex secrets")).to_have_count(0)
    response = page.goto(f"{live_server.url}/sessions/{theirs.pk}/context/")
    assert response.status == 404
