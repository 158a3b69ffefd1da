"""Reads of memory documents and revisions (memory_app.selectors), scoped by the team's assistant."""

from __future__ import annotations

import pytest

from memory_app.documents import Provenance, delete_document, write_document
from memory_app.models import MemoryRevision
from memory_app.selectors import (
    deleted_document_list,
    document_find,
    document_get,
    document_list,
    revision_before,
    revision_get,
    revision_list,
)
from openclaw_site.selectors import NotFound, assistant_get
from tests import factories
from tests.api_support import API, assert_error

pytestmark = pytest.mark.django_db


def test_document_get_finds_the_assistants_own_and_refuses_another_teams(world):
    ours = factories.make_document(world.assistant, "MEMORY.md", "acme")
    theirs = factories.make_document(world.other_assistant, "memory/secret.md", "globex")
    helper = assistant_get(team=world.acme, slug="helper")
    assert document_get(assistant=helper, path="MEMORY.md") == ours
    with pytest.raises(NotFound) as missing:
        document_get(assistant=helper, path="memory/secret.md")
    assert missing.value.what == "Memory document 'memory/secret.md'"
    assert str(missing.value) == "No such memory document."
    assert document_find(assistant=helper, path="memory/secret.md") is None
    assert document_get(assistant=assistant_get(team=world.globex, slug="rival"), path=theirs.path) == theirs
    with pytest.raises(NotFound):
        assistant_get(team=world.acme, slug="rival")  # acme never reaches globex's assistant at all


def test_document_list_holds_only_the_assistants_documents_by_path(world):
    factories.make_document(world.assistant, "memory/b.md", "b")
    factories.make_document(world.assistant, "MEMORY.md", "m")
    factories.make_document(world.other_assistant, "memory/a.md", "theirs")
    assert [d.path for d in document_list(assistant=world.assistant)] == ["MEMORY.md", "memory/b.md"]


def test_revision_get_refuses_another_teams_revision(world):
    factories.make_document(world.assistant, "MEMORY.md", "ours")
    factories.make_document(world.other_assistant, "MEMORY.md", "theirs")
    ours = MemoryRevision.objects.get(assistant=world.assistant)
    theirs = MemoryRevision.objects.get(assistant=world.other_assistant)
    assert revision_get(assistant=world.assistant, pk=ours.pk) == ours
    with pytest.raises(NotFound) as missing:
        revision_get(assistant=world.assistant, pk=theirs.pk)
    assert str(missing.value) == "No such revision."


def test_revision_list_and_revision_before_follow_one_document(world):
    factories.make_document(world.assistant, "MEMORY.md", "v1")
    factories.make_document(world.assistant, "MEMORY.md", "v2")
    factories.make_document(world.other_assistant, "MEMORY.md", "theirs")
    newest, oldest = revision_list(assistant=world.assistant, path="MEMORY.md")
    assert (newest.content, oldest.content) == ("v2", "v1")
    assert revision_before(revision=newest) == oldest and revision_before(revision=oldest) is None


def test_deleted_document_list_names_each_gone_document_once(world):
    gone = factories.make_document(world.assistant, "memory/gone.md", "bye")
    delete_document(document=gone, provenance=Provenance(author="user"))
    back = factories.make_document(world.assistant, "memory/back.md", "x")
    delete_document(document=back, provenance=Provenance(author="user"))
    write_document(
        assistant=world.assistant,
        path="memory/back.md",
        content="again",
        provenance=Provenance(author="user"),
    )
    theirs = factories.make_document(world.other_assistant, "memory/theirs.md", "t")
    delete_document(document=theirs, provenance=Provenance(author="user"))
    [deleted] = deleted_document_list(assistant=world.assistant)
    assert (deleted.path, deleted.action, deleted.content) == ("memory/gone.md", "delete", "bye")


def test_the_api_keeps_the_memory_404_message(api, world):
    factories.make_document(world.other_assistant, "MEMORY.md", "theirs")
    error = assert_error(api.get(f"{API}/assistants/helper/memory/MEMORY.md"), 404, "not_found")
    assert error["message"] == "Memory document 'MEMORY.md' not found."
