"""Django admin: memory edits make admin revisions, API key secrets are shown once, records are read-only."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from memory_app.models import MemoryDocument, MemoryRevision, content_hash
from memory_app.signals import memory_document_changed
from openclaw_site.models import ApiKey, Assistant, hash_secret
from sessions_app.models import CompactionEntry, CompactionRun, Message, Session
from tests import factories
from tests.api_support import API
from tests.conftest import bearer_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(world) -> Client:
    from django.contrib.auth import get_user_model

    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-secret-123")
    client = Client()
    client.force_login(root)
    client.user = root
    return client


def add_document(admin_client: Client, world, path: str, content: str):
    return admin_client.post(
        reverse("admin:memory_app_memorydocument_add"),
        {
            "assistant": world.assistant.pk,
            "path": path,
            "content": content,
            "revisions-TOTAL_FORMS": "0",
            "revisions-INITIAL_FORMS": "0",
        },
    )


def test_adding_a_document_makes_an_admin_revision_and_signals(
    admin_client, world, django_capture_on_commit_callbacks
):
    seen = []

    def receiver(sender, **kwargs):
        seen.append(kwargs["path"])

    memory_document_changed.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = add_document(admin_client, world, "memory/admin.md", "line 1\r\nline 2\r\n")
    finally:
        memory_document_changed.disconnect(receiver)
    assert response.status_code == 302, response.content.decode()[:2000]
    document = MemoryDocument.objects.get(assistant=world.assistant, path="memory/admin.md")
    assert document.content == "line 1\nline 2\n" and document.content_hash == content_hash(document.content)
    [revision] = MemoryRevision.objects.filter(document=document)
    assert (revision.author, revision.action, revision.user) == ("admin", "create", admin_client.user)
    assert seen == ["memory/admin.md"]


def test_editing_a_document_makes_an_admin_revision(admin_client, world):
    document = factories.make_document(world.assistant, "MEMORY.md", "old\n")
    url = reverse("admin:memory_app_memorydocument_change", args=[document.pk])
    page = admin_client.get(url)
    assert page.status_code == 200 and "old" in page.content.decode()
    response = admin_client.post(
        url,
        {
            "content": "new text\n",
            "base_hash": document.content_hash,
            "revisions-TOTAL_FORMS": "0",
            "revisions-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    document.refresh_from_db()
    assert document.content == "new text\n"
    latest = MemoryRevision.objects.filter(document=document).first()
    assert (latest.author, latest.action, latest.user, latest.content) == (
        "admin",
        "update",
        admin_client.user,
        "new text\n",
    )
    assert MemoryRevision.objects.filter(document=document).count() == 2


def test_an_edit_over_a_newer_version_is_refused(admin_client, world):
    document = factories.make_document(world.assistant, "MEMORY.md", "v1\n")
    stale_hash = document.content_hash
    factories.make_document(world.assistant, "MEMORY.md", "v2 from the agent\n")
    url = reverse("admin:memory_app_memorydocument_change", args=[document.pk])
    response = admin_client.post(
        url,
        {
            "content": "my edit\n",
            "base_hash": stale_hash,
            "revisions-TOTAL_FORMS": "0",
            "revisions-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200 and "changed since you opened it" in response.content.decode()
    document.refresh_from_db()
    assert document.content == "v2 from the agent\n"


@pytest.mark.parametrize("path", ["../x.md", "/etc/passwd", "memory/x.txt", "notes.md"])
def test_bad_paths_are_refused_in_the_admin(admin_client, world, path):
    response = add_document(admin_client, world, path, "x")
    assert response.status_code == 200 and "Invalid memory path" in response.content.decode()
    assert not MemoryDocument.objects.exists() and not MemoryRevision.objects.exists()


def test_deleting_a_document_keeps_an_admin_delete_revision(admin_client, world):
    document = factories.make_document(world.assistant, "memory/old.md", "bye\n")
    response = admin_client.post(
        reverse("admin:memory_app_memorydocument_delete", args=[document.pk]), {"post": "yes"}
    )
    assert response.status_code == 302
    assert not MemoryDocument.objects.exists()
    latest = MemoryRevision.objects.filter(path="memory/old.md").first()
    assert (latest.action, latest.author, latest.content) == ("delete", "admin", "bye\n")


def test_bulk_delete_goes_through_the_service(admin_client, world):
    a = factories.make_document(world.assistant, "memory/a.md", "a")
    b = factories.make_document(world.assistant, "memory/b.md", "b")
    response = admin_client.post(
        reverse("admin:memory_app_memorydocument_changelist"),
        {"action": "delete_selected", "_selected_action": [a.pk, b.pk], "post": "yes"},
    )
    assert response.status_code == 302
    assert not MemoryDocument.objects.exists()
    assert MemoryRevision.objects.filter(action="delete", author="admin").count() == 2


def test_revisions_are_read_only(admin_client, world):
    document = factories.make_document(world.assistant, "MEMORY.md", "x")
    revision = MemoryRevision.objects.get(document=document)
    assert (
        admin_client.get(
            reverse("admin:memory_app_memoryrevision_changelist") + "?author__exact=user"
        ).status_code
        == 200
    )
    assert admin_client.get(reverse("admin:memory_app_memoryrevision_add")).status_code == 403
    url = reverse("admin:memory_app_memoryrevision_change", args=[revision.pk])
    assert admin_client.get(url).status_code == 200
    admin_client.post(url, {"content": "tampered"})
    revision.refresh_from_db()
    assert revision.content == "x"


def test_an_api_key_created_in_the_admin_shows_its_secret_once(admin_client, world):
    response = admin_client.post(
        reverse("admin:openclaw_site_apikey_add"),
        {"team": world.acme.pk, "name": "from admin", "scopes": ["memory:read", "sessions:read"]},
    )
    assert response.status_code == 200
    html = response.content.decode()
    secret = re.search(r'value="(ocs_[0-9a-f]{8}_[^"]+)"', html).group(1)
    key = ApiKey.objects.get(name="from admin")
    assert key.secret_hash == hash_secret(secret) and key.scopes == ["memory:read", "sessions:read"]
    assert key.created_by == admin_client.user and "no-store" in response["Cache-Control"]
    assert bearer_client(secret).get(f"{API}/assistants/helper/memory/").status_code == 200
    for page in (
        reverse("admin:openclaw_site_apikey_change", args=[key.pk]),
        reverse("admin:openclaw_site_apikey_changelist"),
    ):
        shown = admin_client.get(page)
        assert shown.status_code == 200 and secret not in shown.content.decode()
    assert secret not in str(admin_client.session.items())


def test_the_revoke_action_revokes(admin_client, world):
    key, secret = factories.make_api_key(world.acme, ["admin"])
    response = admin_client.post(
        reverse("admin:openclaw_site_apikey_changelist"),
        {"action": "revoke_keys", "_selected_action": [key.pk]},
    )
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert bearer_client(secret).get(f"{API}/assistants/").status_code == 401


def test_assistant_settings_are_validated_in_the_admin(admin_client, world):
    url = reverse("admin:openclaw_site_assistant_change", args=[world.assistant.pk])
    assert admin_client.get(url).status_code == 200
    form = {
        "team": world.acme.pk,
        "slug": "helper",
        "name": "Helper",
        "model": "",
        "context_window": 200000,
        "system_prompt": "",
        "timezone": "UTC",
        "workspace_access": "rw",
        "settings": '{"compaction": {"reserveTokens": -5}}',
    }
    response = admin_client.post(url, form)
    assert response.status_code == 200 and "settings.compaction.reserveTokens" in response.content.decode()
    form["settings"] = '{"compaction": {"reserveTokens": 5000}}'
    assert admin_client.post(url, form).status_code == 302
    settings = Assistant.objects.get(pk=world.assistant.pk).settings
    assert (
        settings["compaction"]["reserveTokens"] == 5000
        and settings["compaction"]["keepRecentTokens"] == 20000
    )


@pytest.fixture
def transcript(world) -> Session:
    session = factories.make_session(world.assistant, "main", title="Main")
    rows = factories.add_messages(
        session,
        {"role": "user", "content": "find the needle"},
        {"role": "assistant", "content": "ok", "silent": True},
    )
    entry = CompactionEntry.objects.create(
        session=session,
        seq=3,
        summary="summary",
        first_kept=rows[1],
        first_kept_entry_id=rows[1].entry_id,
        tokens_before=10,
        trigger="manual",
        created_at=rows[1].created_at,
    )
    CompactionRun.objects.create(session=session, trigger="manual", state="committed", entry=entry)
    return session


@pytest.mark.parametrize(
    "model, query",
    [
        ("session", "?assistant__team__id__exact=1&q=main"),
        ("message", "?role__exact=user&silent__exact=1&q=needle"),
        ("compactionentry", "?trigger__exact=manual&q=summary"),
        ("compactionrun", "?state__exact=committed&trigger__exact=manual"),
    ],
)
def test_session_records_are_listed_filtered_and_read_only(admin_client, transcript, model, query):
    changelist = reverse(f"admin:sessions_app_{model}_changelist")
    assert admin_client.get(changelist).status_code == 200
    assert admin_client.get(changelist + query).status_code == 200
    assert admin_client.get(reverse(f"admin:sessions_app_{model}_add")).status_code == 403


def test_message_search_and_filters_narrow_the_list(admin_client, transcript):
    changelist = reverse("admin:sessions_app_message_changelist")
    found = admin_client.get(changelist + "?q=needle").context["cl"].result_count
    silent = admin_client.get(changelist + "?silent__exact=1").context["cl"].result_count
    assert (found, silent) == (1, 1)
    message = Message.objects.get(session=transcript, seq=1)
    url = reverse("admin:sessions_app_message_change", args=[message.pk])
    assert admin_client.get(url).status_code == 200
    admin_client.post(url, {"content": '"changed"'})
    message.refresh_from_db()
    assert message.content == "find the needle"
