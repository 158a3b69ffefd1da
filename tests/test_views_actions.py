"""The dashboard's everyday actions: rename, archive and delete assistants, sessions and documents;
export and import a workspace; retry a failed turn. Full and htmx responses, roles, other teams."""

from __future__ import annotations

import io
import zipfile

import pytest

from memory_app.models import MemoryDocument, MemoryRevision
from openclaw_site.models import Assistant
from sessions_app.models import Message, Session
from tests import factories
from tests.fake_openai import error_reply, text_reply
from tests.views_support import HX, is_full_page, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def export_root(settings, tmp_path, django_capture_on_commit_callbacks):
    settings.EXPORT_ROOT = tmp_path / "exports"
    return settings.EXPORT_ROOT


# --- assistants ---------------------------------------------------------------------------------


def test_admin_renames_and_archives_an_assistant_members_cannot(world):
    admin, member = signed_in(world.alice), signed_in(world.bob)
    assert member.post("/assistants/helper/rename/", {"name": "Nope"}).status_code == 403
    response = admin.post("/assistants/helper/rename/", {"name": "Concierge"}, **HX)
    assert response.status_code == 200 and response["HX-Redirect"] == "/assistants/helper/"
    assert Assistant.objects.get(pk=world.assistant.pk).name == "Concierge"
    admin.post("/assistants/helper/archive/", {"archived": "1"})
    admin.get("/")  # shows the flash messages once
    home = admin.get("/").content.decode()
    assert "Concierge" not in home and "1 archived" in home
    archived = admin.get("/?archived=1", **HX)
    assert not is_full_page(archived) and "Concierge" in archived.content.decode()
    assert "archived" in admin.get("/assistants/helper/").content.decode()
    admin.post("/assistants/helper/archive/", {"archived": "0"})
    assert "Concierge" in admin.get("/").content.decode()


def test_deleting_an_assistant_removes_its_exported_files(
    world, export_root, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        factories.make_document(world.assistant, "MEMORY.md", "remember\n")
    workspace = export_root / "acme" / "helper"
    assert (workspace / "MEMORY.md").exists()
    assert signed_in(world.bob).post("/assistants/helper/delete/").status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        response = signed_in(world.alice).post("/assistants/helper/delete/")
    assert response.status_code == 302 and response["Location"] == "/"
    assert not Assistant.objects.filter(pk=world.assistant.pk).exists()
    assert not workspace.exists() and (export_root / "acme").exists()


def test_another_teams_assistant_is_not_found_for_every_action(world):
    client = signed_in(world.alice)
    for action in ("rename", "archive", "delete"):
        assert client.post(f"/assistants/rival/{action}/", {"name": "x"}).status_code == 404
    assert Assistant.objects.get(pk=world.other_assistant.pk).name == world.other_assistant.name


# --- sessions -----------------------------------------------------------------------------------


def test_member_renames_archives_and_deletes_a_session(
    world, export_root, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        session = factories.make_session(world.assistant, title="Old title")
        factories.add_messages(session, {"role": "user", "content": "hi"})
    client = signed_in(world.bob)
    renamed = client.post(f"/sessions/{session.pk}/rename/", {"title": "Launch plan"}, **HX)
    assert renamed.status_code == 200 and not is_full_page(renamed)
    assert 'id="session-head"' in renamed.content.decode() and "Launch plan" in renamed.content.decode()
    assert client.post(f"/sessions/{session.pk}/rename/", {"title": "x" * 201}).status_code == 302
    assert Session.objects.get(pk=session.pk).title == "Launch plan"

    client.post(f"/sessions/{session.pk}/archive/", {"archived": "1"})
    listing = client.get("/assistants/helper/sessions/").content.decode()
    assert "Launch plan" not in listing and "1 archived" in listing
    assert "Launch plan" in client.get("/assistants/helper/sessions/?archived=1", **HX).content.decode()

    transcript = export_root / "acme" / "helper" / "sessions" / f"{session.key}.jsonl"
    assert transcript.exists()
    assert signed_in(world.vera).post(f"/sessions/{session.pk}/delete/").status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        deleted = client.post(f"/sessions/{session.pk}/delete/", **HX)
    assert deleted["HX-Redirect"] == "/assistants/helper/sessions/"
    assert not Session.objects.filter(pk=session.pk).exists() and not transcript.exists()


def test_session_actions_of_another_team_are_404(world):
    theirs = factories.make_session(world.other_assistant, title="Theirs")
    client = signed_in(world.bob)
    for action in ("rename", "archive", "delete", "retry"):
        assert client.post(f"/sessions/{theirs.pk}/{action}/", {"title": "x"}).status_code == 404
    assert Session.objects.get(pk=theirs.pk).title == "Theirs"


def test_retry_runs_the_failed_turn_again_without_a_second_user_message(world, llm):
    session = factories.make_session(world.assistant)
    client = signed_in(world.bob)
    llm.queue(error_reply(500, "The server had an error while processing your request."))
    # Without htmx the chat post runs the turn at once (with htmx it streams; tests/views_support.py).
    client.post(f"/sessions/{session.pk}/chat/", {"text": "What is the launch date?"})
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Retry this turn" in page
    llm.queue(text_reply("It is December 15."))
    retried = client.post(f"/sessions/{session.pk}/retry/", **HX)
    assert retried.status_code == 200 and not is_full_page(retried)
    assert "It is December 15." in retried.content.decode()
    roles = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "stop_reason"))
    assert roles == [("user", ""), ("assistant", "error"), ("assistant", "stop")]
    assert llm.chat_requests[-1]["messages"][-1] == {"role": "user", "content": "What is the launch date?"}
    again = client.post(f"/sessions/{session.pk}/retry/", **HX).content.decode()
    assert "nothing to retry" in again


# --- documents ----------------------------------------------------------------------------------


def test_renaming_a_document_keeps_its_revisions_and_moves_its_file(
    world, export_root, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        document = factories.make_document(world.assistant, "memory/draft.md", "one\n")
    client = signed_in(world.bob)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/assistants/helper/memory/rename/memory/draft.md", {"path": "memory/plans/final.md"}, **HX
        )
    assert response["HX-Redirect"] == "/assistants/helper/memory/doc/memory/plans/final.md"
    document.refresh_from_db()
    assert document.path == "memory/plans/final.md"
    revisions = MemoryRevision.objects.filter(document=document).order_by("id")
    assert [r.action for r in revisions] == ["create", "rename"] and {r.path for r in revisions} == {
        document.path
    }
    assert (export_root / "acme/helper/memory/plans/final.md").read_text() == "one\n"
    assert not (export_root / "acme/helper/memory/draft.md").exists()
    page = client.get("/assistants/helper/memory/doc/memory/plans/final.md").content.decode()
    assert "renamed from memory/draft.md" in page


@pytest.mark.parametrize("target", ["../etc/passwd", "notes.txt", "MEMORY.md"])
def test_a_bad_or_taken_path_renames_nothing(world, target):
    factories.make_document(world.assistant, "MEMORY.md", "root\n")
    factories.make_document(world.assistant, "memory/a.md", "a\n")
    response = signed_in(world.bob).post(
        "/assistants/helper/memory/rename/memory/a.md", {"path": target}, follow=True
    )
    assert "Not renamed" in response.content.decode()
    assert MemoryDocument.objects.filter(assistant=world.assistant, path="memory/a.md").exists()


# --- workspace export and import ----------------------------------------------------------------


def _zip_of(files: dict[str, str]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    buffer.seek(0)
    buffer.name = "workspace.zip"
    return buffer


def test_export_downloads_the_workspace_and_import_loads_it_back(world):
    factories.make_document(world.assistant, "MEMORY.md", "# Facts\n- launch on Friday\n")
    session = factories.make_session(world.assistant, key="main")
    factories.add_messages(session, {"role": "user", "content": "hello"})
    download = signed_in(world.vera).get("/assistants/helper/export.zip")
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    data = io.BytesIO(b"".join(download.streaming_content))
    names = zipfile.ZipFile(data).namelist()
    assert {"MEMORY.md", "sessions/main.jsonl", "sessions/sessions.json", "assistant.json"} <= set(names)

    client = signed_in(world.alice)
    form = client.get("/workspace/import/?assistant=copy")
    assert form.status_code == 200 and is_full_page(form) and 'value="copy"' in form.content.decode()
    data.seek(0)
    data.name = "helper.zip"
    response = client.post("/workspace/import/", {"assistant": "copy", "archive": data})
    assert response.status_code == 302 and response["Location"] == "/assistants/copy/"
    copy = Assistant.objects.get(team=world.acme, slug="copy")
    assert copy.memory_documents.get(path="MEMORY.md").content == "# Facts\n- launch on Friday\n"
    assert copy.sessions.get(key="main").messages.count() == 1


@pytest.mark.parametrize(
    ("files", "error"),
    [
        ({"../evil.md": "x"}, "outside the workspace"),
        ({"notes.txt": "x"}, "is it an OpenClaw workspace"),
        ({"sessions/broken.jsonl": "{not json"}, "broken.jsonl"),
    ],
)
def test_a_bad_upload_imports_nothing(world, files, error):
    response = signed_in(world.alice).post(
        "/workspace/import/", {"assistant": "new", "archive": _zip_of(files)}, **HX
    )
    assert response.status_code == 422 and not is_full_page(response)
    assert "Nothing was imported" in response.content.decode() and error in response.content.decode()
    assert not Assistant.objects.filter(slug="new").exists()


def test_import_refuses_an_existing_assistant_unless_replace_and_members(world, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    upload = _zip_of({"MEMORY.md": "new text\n"})
    assert (
        signed_in(world.bob)
        .post("/workspace/import/", {"assistant": "helper", "archive": upload})
        .status_code
        == 403
    )
    client = signed_in(world.alice)
    refused = client.post(
        "/workspace/import/", {"assistant": "helper", "archive": _zip_of({"MEMORY.md": "x\n"})}
    )
    assert refused.status_code == 422 and "exists already: tick this box" in refused.content.decode()
    not_zip = io.BytesIO(b"plain text")
    not_zip.name = "x.zip"
    assert (
        "not a zip file"
        in client.post("/workspace/import/", {"assistant": "z", "archive": not_zip}).content.decode()
    )


@pytest.mark.parametrize("htmx", [False, True])
def test_importing_over_an_existing_assistant_asks_first_then_replaces(world, settings, tmp_path, htmx):
    settings.VAR_DIR = tmp_path
    factories.make_document(world.assistant, "MEMORY.md", "old\n")
    client = signed_in(world.alice)
    headers = HX if htmx else {}
    asked = client.post(
        "/workspace/import/",
        {"assistant": "helper", "archive": _zip_of({"MEMORY.md": "x\n"}), "replace": "on"},
        **headers,
    )
    page = asked.content.decode()
    assert asked.status_code == 200 and "Replace Helper with the uploaded workspace?" in page
    assert "removes its 0 sessions and 1 memory document" in page
    assert is_full_page(asked) is not htmx
    assert world.assistant.memory_documents.get(path="MEMORY.md").content == "old\n"  # nothing yet

    done = client.post(
        "/workspace/import/", {"assistant": "helper", "replace": "on", "confirmed": "1"}, **headers
    )
    assert done.status_code == 200 if htmx else done.status_code == 302
    assert (done["HX-Redirect"] if htmx else done["Location"]) == "/assistants/helper/"
    assert world.assistant.memory_documents.get(path="MEMORY.md").content == "x\n"
    assert list((tmp_path / "import-staging").iterdir()) == []
    again = client.post("/workspace/import/", {"assistant": "helper", "replace": "on", "confirmed": "1"})
    assert again.status_code == 422  # the staged upload was used once


def test_a_zipped_workspace_folder_imports_too(world):
    upload = _zip_of({"my-workspace/MEMORY.md": "wrapped\n", "my-workspace/memory/notes.md": "n\n"})
    response = signed_in(world.alice).post("/workspace/import/", {"assistant": "wrapped", "archive": upload})
    assert response.status_code == 302
    paths = set(Assistant.objects.get(slug="wrapped").memory_documents.values_list("path", flat=True))
    assert paths == {"MEMORY.md", "memory/notes.md"}


def _age(path, seconds: float) -> None:
    import os
    import time

    then = time.time() - seconds
    os.utime(path, (then, then))


def test_an_upload_left_unconfirmed_expires_and_is_removed(settings, tmp_path):
    from sessions_app.workspace import staging
    from sessions_app.workspace.imports import WorkspaceImportError

    settings.VAR_DIR = tmp_path
    abandoned = staging.stage_upload(io.BytesIO(b"old"))
    path = tmp_path / staging.STAGING_DIR / f"{abandoned}.zip"
    _age(path, staging.STAGED_UPLOAD_SECONDS + 1)

    fresh = staging.stage_upload(io.BytesIO(b"new"))  # staging removes what has expired

    assert not path.exists()
    with pytest.raises(WorkspaceImportError, match="expired"):
        staging.take_staged_upload(abandoned)
    with staging.take_staged_upload(fresh) as handle:
        assert handle.read() == b"new"


def test_the_periodic_job_removes_abandoned_uploads_and_keeps_waiting_ones(settings, tmp_path):
    from django_q.models import Schedule

    from sessions_app import tasks
    from sessions_app.workspace import staging

    settings.VAR_DIR = tmp_path
    assert tasks.remove_abandoned_uploads() == 0  # no staging folder yet: nothing to do
    abandoned = [staging.stage_upload(io.BytesIO(b"old")) for _ in range(2)]
    waiting = staging.stage_upload(io.BytesIO(b"new"))
    for token in abandoned:
        _age(tmp_path / staging.STAGING_DIR / f"{token}.zip", staging.STAGED_UPLOAD_SECONDS + 1)

    assert tasks.remove_abandoned_uploads() == 2  # what django-q2 runs on its schedule

    assert sorted(p.name for p in (tmp_path / staging.STAGING_DIR).iterdir()) == [f"{waiting}.zip"]
    schedule = Schedule.objects.get(func="sessions_app.tasks.remove_abandoned_uploads")
    assert (schedule.schedule_type, schedule.minutes, schedule.repeats) == ("I", 10, -1)


def test_a_staging_that_fails_half_way_leaves_no_file(settings, tmp_path):
    from sessions_app.workspace import staging

    class Broken(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            if self.tell():
                raise OSError("the client went away")
            return super().read(4)

    settings.VAR_DIR = tmp_path
    with pytest.raises(OSError, match="went away"):
        staging.stage_upload(Broken(b"partial upload"))
    assert list((tmp_path / staging.STAGING_DIR).iterdir()) == []


def test_a_new_upload_before_the_confirmation_replaces_the_staged_one(world, settings, tmp_path):
    from sessions_app.workspace import staging

    settings.VAR_DIR = tmp_path
    factories.make_document(world.assistant, "MEMORY.md", "old\n")
    client = signed_in(world.alice)
    for content in ("first\n", "second\n"):  # asked twice, confirmed once
        asked = client.post(
            "/workspace/import/",
            {"assistant": "helper", "archive": _zip_of({"MEMORY.md": content}), "replace": "on"},
        )
        assert asked.status_code == 200
        assert len(list((tmp_path / staging.STAGING_DIR).iterdir())) == 1

    done = client.post("/workspace/import/", {"assistant": "helper", "replace": "on", "confirmed": "1"})
    assert done.status_code == 302
    assert world.assistant.memory_documents.get(path="MEMORY.md").content == "second\n"
    assert list((tmp_path / staging.STAGING_DIR).iterdir()) == []
