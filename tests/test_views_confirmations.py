"""Destructive dashboard actions without JavaScript: their buttons are GET forms, the URL's GET is a
confirmation page ("Delete X? This removes … [Delete] [Cancel]") whose form POSTs the action; the
GET changes nothing, and htmx keeps posting directly after its inline hx-confirm."""

from __future__ import annotations

import re

import pytest

from memory_app.models import MemoryDocument
from openclaw_site.models import ApiKey, Assistant, Membership
from sessions_app.models import Session
from tests import factories
from tests.views_support import is_full_page, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def things(world):
    session = factories.make_session(world.assistant, "main", title="Launch planning")
    document = factories.make_document(world.assistant, "memory/notes.md", "notes\n")
    key, _ = factories.make_api_key(world.acme, ["sessions:read"], name="CI ingest")
    return session, document, key


def confirmations(world, things):
    session, _, key = things
    bob = Membership.objects.get(user=world.bob, team=world.acme)
    return [
        ("/assistants/helper/delete/", "Delete Helper?", "Delete assistant", "/assistants/helper/"),
        ("/assistants/helper/archive/", "Archive Helper?", "Archive", "/assistants/helper/"),
        (
            f"/sessions/{session.pk}/delete/",
            "Delete “Launch planning”?",
            "Delete session",
            f"/sessions/{session.pk}/",
        ),
        (
            f"/sessions/{session.pk}/archive/",
            "Archive “Launch planning”?",
            "Archive",
            f"/sessions/{session.pk}/",
        ),
        (
            "/assistants/helper/memory/delete/memory/notes.md",
            "Delete memory/notes.md?",
            "Delete",
            "/assistants/helper/memory/doc/memory/notes.md",
        ),
        (f"/team/members/{bob.pk}/remove/", "Remove bob from Acme?", "Remove", "/team/members/"),
        (f"/keys/{key.pk}/revoke/", "Revoke “CI ingest”?", "Revoke", "/keys/"),
    ]


def state(world):
    return (
        Assistant.objects.filter(archived_at__isnull=True).count(),
        Session.objects.filter(archived_at__isnull=True).count(),
        MemoryDocument.objects.count(),
        Membership.objects.count(),
        ApiKey.objects.filter(revoked_at__isnull=True).count(),
    )


def test_each_destructive_action_asks_on_a_page_of_its_own_and_changes_nothing(world, things):
    client = signed_in(world.alice)
    before = state(world)
    for url, question, button, cancel in confirmations(world, things):
        response = client.get(url)
        page = response.content.decode()
        assert response.status_code == 200 and is_full_page(response), url
        assert question in page, (url, question)
        assert re.search(rf'<form method="post" action="{re.escape(url)}"', page), url
        assert f">{button}</button>" in page and f'href="{cancel}"' in page, url
    assert state(world) == before


def test_the_confirmation_page_posts_the_action(world, things):
    session, _, _ = things
    client = signed_in(world.alice)
    page = client.get(f"/sessions/{session.pk}/archive/").content.decode()
    assert '<input type="hidden" name="archived" value="1">' in page
    assert client.post(f"/sessions/{session.pk}/archive/", {"archived": "1"}).status_code == 302
    session.refresh_from_db()
    assert session.archived_at is not None
    assert client.post(f"/sessions/{session.pk}/delete/").status_code == 302
    assert not Session.objects.filter(pk=session.pk).exists()


def test_a_confirmation_page_is_refused_to_a_role_that_may_not_act(world, things):
    session, _, key = things
    assert signed_in(world.vera).get(f"/sessions/{session.pk}/delete/").status_code == 403
    assert signed_in(world.bob).get("/assistants/helper/delete/").status_code == 403
    assert signed_in(world.bob).get(f"/keys/{key.pk}/revoke/").status_code == 403
    assert signed_in(world.charlie).get(f"/sessions/{session.pk}/delete/").status_code == 404


def test_the_buttons_work_without_javascript_and_with_htmx(world, things):
    session, _, _ = things
    page = signed_in(world.alice).get(f"/sessions/{session.pk}/").content.decode()
    form = re.search(r'<form method="get" action="/sessions/\d+/delete/"[^>]*>', page).group(0)
    assert f'hx-post="/sessions/{session.pk}/delete/"' in form and "hx-confirm=" in form
