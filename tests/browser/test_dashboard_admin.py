"""A team admin sets up a team and its people, finds a failed job, does the everyday renames and
deletes, and reads Markdown memory whose <script> stays inert."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.core import mail
from playwright.sync_api import expect

from memory_app.models import MemoryDocument
from openclaw_site.models import Membership, TaskRecord, TaskState, Team
from sessions_app.models import Session
from tests import factories
from tests.chat_requests import SUMMARY_TEXT, router
from tests.fake_openai import text_reply
from tests.messages import chatter

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def accept_dialogs(page) -> None:
    page.on("dialog", lambda dialog: dialog.accept())


def test_admin_creates_a_team_adds_a_member_who_signs_in_and_lands_in_it(
    page, live_server, world, sign_in, chromium
):
    sign_in(page, "alice")
    page.get_by_role("link", name="Team", exact=True).click()
    page.get_by_role("link", name="New team").click()
    page.get_by_label("Name").fill("Initech")
    page.get_by_label("Slug").fill("initech")
    page.get_by_role("button", name="Create team").click()
    expect(page.get_by_role("heading", name="Initech")).to_be_visible()
    page.get_by_label("Username or e-mail").fill("dana@initech.test")
    page.locator("#id_role").select_option("member")
    page.get_by_role("button", name="Add member").click()
    expect(page.locator("#member-panel")).to_contain_text("Added dana as member")
    link = page.locator("#invite-link").input_value()
    assert mail.outbox and link in mail.outbox[-1].body
    dana = User.objects.get(email="dana@initech.test")
    assert Membership.objects.get(user=dana).team == Team.objects.get(slug="initech")

    other = chromium.new_context()  # the newcomer's own browser
    newcomer = other.new_page()
    newcomer.goto(link)
    expect(newcomer.get_by_role("heading", name="Choose a password")).to_be_visible()
    newcomer.locator("#id_new_password1").fill("initech-secret-77")
    newcomer.locator("#id_new_password2").fill("initech-secret-77")
    newcomer.get_by_role("button", name="Set password").click()
    expect(newcomer.get_by_role("heading", name="Password set")).to_be_visible()
    newcomer.get_by_role("link", name="Sign in").click()
    newcomer.get_by_label("Username").fill("dana")
    newcomer.get_by_label("Password").fill("initech-secret-77")
    newcomer.get_by_role("button", name="Sign in").click()
    expect(newcomer.get_by_text("Initech · member")).to_be_visible()
    expect(newcomer.get_by_role("heading", name="Get started in three steps")).to_be_visible()
    other.close()


def test_the_jobs_page_filters_to_failed_jobs_and_links_to_the_session(page, live_server, world, sign_in):
    session = factories.make_session(world.assistant, title="Launch planning")
    TaskRecord.objects.all().delete()
    for n in range(30):
        TaskRecord.objects.create(
            task_id=f"ok{n:030d}",
            team=world.acme,
            assistant=world.assistant,
            kind="transcript_changed",
            state=TaskState.SUCCEEDED,
            object_ids={"session": session.pk},
        )
    TaskRecord.objects.create(
        task_id="f" * 32,
        team=world.acme,
        assistant=world.assistant,
        kind="export_session",
        state=TaskState.FAILED,
        error="OSError: [Errno 28] No space left on device",
        object_ids={"session": session.pk},
    )
    sign_in(page, "vera")
    page.get_by_role("link", name="Jobs").click()
    rows = page.locator("#job-table tbody tr")
    expect(rows.first).to_contain_text("No space left on device")  # failures first
    page.get_by_label("State").select_option("failed")
    expect(page).to_have_url(re.compile(r"state=failed"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Export session")
    rows.first.get_by_role("link", name=f"session {session.pk}").click()
    expect(page.get_by_role("heading", name="Launch planning")).to_be_visible()


def test_rename_and_delete_a_session_and_a_document(page, live_server, world, sign_in):
    accept_dialogs(page)
    session = factories.make_session(world.assistant, title="Draft title")
    factories.make_document(world.assistant, "memory/draft.md", "# Draft\nfirst line\n")
    sign_in(page, "bob")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.get_by_text("Rename, archive, delete").click()
    page.get_by_label("Title of the session").fill("Launch plan")
    page.get_by_role("button", name="Rename", exact=True).click()
    expect(page.locator(".session-title")).to_have_text("Launch plan")
    assert Session.objects.get(pk=session.pk).title == "Launch plan"
    page.get_by_text("Rename, archive, delete").click()
    page.get_by_role("button", name="Delete session").click()
    expect(page.get_by_role("heading", name=re.compile("^Sessions"))).to_be_visible()
    expect(page.locator(".flash")).to_contain_text("Deleted Launch plan")
    assert not Session.objects.filter(pk=session.pk).exists()

    page.goto(f"{live_server.url}/assistants/helper/memory/doc/memory/draft.md")
    page.locator(".rename-doc summary").click()
    page.get_by_label("New path of memory/draft.md").fill("memory/plans/launch.md")
    page.get_by_role("button", name="Move").click()
    expect(page.get_by_role("heading", name="memory/plans/launch.md")).to_be_visible()
    expect(page.locator(".revisions")).to_contain_text("rename")
    page.get_by_role("button", name="Delete").click()
    expect(page.locator(".flash")).to_contain_text("Deleted memory/plans/launch.md")
    assert not MemoryDocument.objects.filter(assistant=world.assistant).exists()


def test_markdown_is_rendered_and_its_script_stays_inert(page, live_server, world, sign_in):
    text = (
        "# Launch\n\n- **date**: 2026-12-15\n\n<script>window.pwned = true</script>\n\n"
        '[click](javascript:window.pwned=true) <img src=x onerror="window.pwned=true">\n'
    )
    factories.make_document(world.assistant, "memory/launch.md", text)
    sign_in(page, "vera")
    page.goto(f"{live_server.url}/assistants/helper/memory/doc/memory/launch.md")
    body = page.locator(".doc-rendered")
    expect(body.get_by_role("heading", name="Launch")).to_be_visible()
    expect(body.locator("strong")).to_have_text("date")
    expect(body.locator("script, img, a[href^=javascript]")).to_have_count(0)
    expect(body).to_contain_text("<script>window.pwned = true</script>")  # shown as text
    assert page.evaluate("window.pwned === undefined")
    page.get_by_role("link", name="Raw").click()
    expect(page.locator(".code-view")).to_contain_text("# Launch")
    expect(page.locator(".view-switch [aria-current=page]")).to_have_text("Raw")


def test_the_usage_page_splits_a_chats_tokens_by_purpose(page, live_server, world, sign_in, llm):
    world.assistant.settings["compaction"].update({"keepRecentTokens": 40, "recentTurnsPreserve": 0})
    world.assistant.save()
    llm.default_chat = router(
        chat=lambda request: text_reply("Noted.", usage={"prompt_tokens": 3000, "completion_tokens": 40}),
        summary=SUMMARY_TEXT,
        flush="NO_REPLY",
    )
    session = factories.make_session(world.assistant, title="Costs")
    factories.add_messages(session, *chatter(6, words=40))
    sign_in(page, "bob")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    box = page.get_by_label(re.compile("Message to"))
    box.fill("Dana owns the marketing page.")
    box.press("Enter")
    expect(page.locator("#transcript")).to_contain_text("Noted.")
    box.fill("/compact")
    box.press("Enter")
    expect(page.locator(".compaction-card")).to_have_count(1)

    page.get_by_role("link", name="Usage").click()
    by_purpose = page.locator("[data-usage=usage-purpose]")
    expect(by_purpose.locator("tr", has_text="Turns")).to_contain_text("3k")
    expect(by_purpose.locator("tr", has_text="Memory flushes")).to_be_visible()
    expect(by_purpose.locator("tr", has_text="Compaction summaries")).to_be_visible()
    expect(page.locator(".usage-chart svg rect.seg-compaction")).to_have_count(1)
    expect(page.locator("[data-usage=usage-sessions]")).to_contain_text(f"Session {session.pk}")
    page.locator("#usage-days").select_option("7")
    expect(page).to_have_url(re.compile(r"days=7"))
    expect(page.locator(".usage-chart svg g")).to_have_count(7)
