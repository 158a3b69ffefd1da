"""Every page fits a 375 px phone and a 1440 px desktop: nothing scrolls sideways but wide tables
(inside their own scroll box), and every form control has a label."""

from __future__ import annotations

import re

import pytest

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
    revision = document.revisions.first()
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
    ]


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
        if width == 375:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^\w]+", "_", path).strip("_") or "home"
            page.add_style_tag(
                content=".topbar, .composer, .session-side, .sticky-actions { position: static !important; }"
            )
            page.screenshot(path=str(SCREENSHOTS / f"phone_{name}.png"), full_page=True)
