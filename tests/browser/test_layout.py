"""Every page fits a 375 px phone and a 1440 px desktop: nothing scrolls sideways but wide tables
(inside their own scroll box), the active tab is in view, and every form control has a label."""

from __future__ import annotations

import re

import pytest

from openclaw_site.models import Membership, TaskRecord
from openclaw_site.usage import ledger as usage
from providers.chat import Usage
from tests import factories
from tests.browser.conftest import SCREENSHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

UNLABELLED = """() => [...document.querySelectorAll('input, select, textarea')]
  .filter(el => el.type !== 'hidden' && !el.labels?.length && !el.getAttribute('aria-label'))
  .map(el => el.name || el.id)"""


@pytest.fixture
def pages(world):
    session = factories.make_session(
        world.assistant, title="A fairly long session title about the launch plan"
    )
    factories.add_messages(
        session,
        {"role": "user", "content": "hello " * 200},
        {"role": "assistant", "content": "hi " * 100, "usage": {"input": 900, "output": 20}},
    )
    document = factories.make_document(
        world.assistant, "memory/projects/a-rather-long-file-name-for-phones.md", "x" * 500 + "\nline two\n"
    )
    factories.make_api_key(
        world.acme, ["sessions:read", "memory:read"], name="Nightly export to the data lake"
    )
    # A second team puts the team switcher in the top bar, the widest thing on a phone.
    research = factories.make_team("acme-robotics-research-lab")
    Membership.objects.create(user=world.alice, team=research, role="admin")
    revision = document.revisions.first()
    usage.record_usage(
        assistant=world.assistant,
        purpose="turn",
        model="gpt-4o-mini-2024-07-18",
        usage=Usage(input=120_000, output=900),
        session_id=session.pk,
    )
    TaskRecord.objects.create(
        task_id="f" * 32,
        team=world.acme,
        assistant=world.assistant,
        kind="export_session",
        state="failed",
        error="OSError: [Errno 28] No space left on device: " + "/var/exports/acme/helper" * 8,
        object_ids={"session": session.pk},
    )
    return [
        "/",
        "/keys/",
        "/jobs/",
        "/assistants/new/",
        "/assistants/helper/",
        "/assistants/helper/settings/",
        "/assistants/helper/sessions/",
        "/assistants/helper/memory/",
        "/assistants/helper/memory/new/",
        f"/assistants/helper/memory/doc/{document.path}",
        f"/assistants/helper/memory/edit/{document.path}",
        f"/assistants/helper/memory/revisions/{revision.pk}/",
        "/assistants/helper/search/?q=launch",
        f"/sessions/{session.pk}/",
        f"/sessions/{session.pk}/context/",
        f"/sessions/{session.pk}/compact/",
        "/usage/",
        "/usage/?assistant=helper&days=7",
        "/jobs/?state=failed",
        "/team/members/",
        "/teams/new/",
        "/workspace/import/",
        "/accounts/password_change/",
        f"/sessions/{session.pk}/delete/",
        "/assistants/helper/archive/",
    ]


ACTIVE_TABS_OUTSIDE = """() => [...document.querySelectorAll('.tabs [aria-current=page], .mainnav [aria-current=page]')]
  .filter(el => { const r = el.getBoundingClientRect();
                  return r.width === 0 || r.left < 0 || r.right > document.documentElement.clientWidth; })
  .map(el => el.textContent.trim())"""


@pytest.mark.parametrize("width", [375, 1440])
def test_pages_fit_the_screen_and_label_every_control(page, live_server, world, sign_in, pages, width):
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, "alice")
    for path in pages:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{path} scrolls sideways by {overflow} px at {width} px"
        assert page.evaluate(UNLABELLED) == [], path
        assert page.evaluate(ACTIVE_TABS_OUTSIDE) == [], f"{path}: the active tab is out of view"
        if width == 375:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^\w]+", "_", path).strip("_") or "home"
            page.add_style_tag(
                content=".topbar, .composer, .session-side, .sticky-actions { position: static !important; }"
            )
            page.screenshot(path=str(SCREENSHOTS / f"phone_{name}.png"), full_page=True)


@pytest.mark.parametrize("persona", ["vera", "alice"])
def test_the_keys_table_fits_a_phone_for_every_role(page, live_server, world, sign_in, pages, persona):
    page.set_viewport_size({"width": 375, "height": 900})
    sign_in(page, persona)
    page.goto(f"{live_server.url}/keys/")
    clipped = page.evaluate(
        "[...document.querySelectorAll('#key-table .table-wrap')].map(w => w.scrollWidth - w.clientWidth)"
    )
    assert clipped and max(clipped) <= 0
    for label in ("Last used", "Status"):
        cell = page.locator(f"#key-table td[data-label='{label}']").first
        box = cell.bounding_box()
        assert cell.is_visible() and box["x"] >= 0 and box["x"] + box["width"] <= 375, label
    if persona == "alice":
        revoke = page.get_by_role("button", name="Revoke")
        revoke.scroll_into_view_if_needed()
        assert revoke.is_visible() and revoke.bounding_box()["x"] + revoke.bounding_box()["width"] <= 375


SWITCHER_ROOM = """() => { const select = document.getElementById('team-switch');
  const probe = document.createElement('span');
  probe.style.font = getComputedStyle(select).font; probe.style.whiteSpace = 'nowrap';
  probe.textContent = [...select.options].map(o => o.text).sort((a, b) => b.length - a.length)[0];
  document.body.append(probe); const needed = probe.getBoundingClientRect().width; probe.remove();
  return select.getBoundingClientRect().width - needed; }"""


def test_the_team_switcher_shows_the_whole_team_name_on_a_desktop(page, live_server, world, sign_in, pages):
    page.set_viewport_size({"width": 1440, "height": 900})
    sign_in(page, "alice")
    assert page.locator("#team-switch option").all_inner_texts() == [
        "Acme · admin",
        "Acme Robotics Research Lab · admin",
    ]
    assert page.evaluate(SWITCHER_ROOM) > 0, "the longest team name is cut off"
