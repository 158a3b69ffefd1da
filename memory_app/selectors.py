"""Reads of an assistant's memory documents and revisions.

Each selector takes the assistant, which the caller got from `openclaw_site.selectors.assistant_get`
(the team check); everything here is then filtered by that assistant, so another assistant's
document or revision is not found (`NotFound`), never shown.
"""

from __future__ import annotations

from django.db.models import QuerySet

from memory_app.models import MemoryDocument, MemoryRevision, Proposal, RevisionAction
from openclaw_site.models import Assistant, Team
from openclaw_site.selectors import NotFound


def document_find(*, assistant: Assistant, path: str) -> MemoryDocument | None:
    """Return the assistant's document at ``path``, or None."""
    return MemoryDocument.objects.filter(assistant=assistant, path=path).first()


def document_get(*, assistant: Assistant, path: str) -> MemoryDocument:
    """Return the assistant's document at ``path``, or raise NotFound."""
    document = document_find(assistant=assistant, path=path)
    if document is None:
        raise NotFound("memory document", key=path, within=None)
    return document


def current_revision_id(*, document: MemoryDocument) -> int | None:
    """Return the id of the document's newest revision (what a replace names as its base), or None."""
    return (
        MemoryRevision.objects.filter(document=document)
        .order_by("-created_at", "-id")
        .values_list("pk", flat=True)
        .first()
    )


def document_get_by_id(*, assistant: Assistant, pk: int) -> MemoryDocument:
    """Return the assistant's document ``pk`` (a job names documents by id), or raise NotFound."""
    document = MemoryDocument.objects.filter(assistant=assistant, pk=pk).only("pk", "path").first()
    if document is None:
        raise NotFound("memory document", within=None)
    return document


def document_list(*, assistant: Assistant) -> QuerySet[MemoryDocument]:
    """Return the assistant's documents by path, without their texts."""
    return MemoryDocument.objects.filter(assistant=assistant).defer("content").order_by("path")


def revision_get(*, assistant: Assistant, pk: int) -> MemoryRevision:
    """Return the assistant's revision ``pk``, or raise NotFound."""
    revision = MemoryRevision.objects.filter(assistant=assistant, pk=pk).select_related("user").first()
    if revision is None:
        raise NotFound("revision", within=None)
    return revision


def revision_list(*, assistant: Assistant, path: str) -> QuerySet[MemoryRevision]:
    """Return the revisions of the assistant's ``path``, newest first (kept after a delete)."""
    return (
        MemoryRevision.objects.filter(assistant=assistant, path=path)
        .select_related("user")
        .order_by("-created_at", "-id")
    )


def revision_before(*, revision: MemoryRevision) -> MemoryRevision | None:
    """Return the revision of the same document just before ``revision``, if any."""
    return (
        MemoryRevision.objects.filter(
            assistant_id=revision.assistant_id,
            path=revision.path,
            created_at__lte=revision.created_at,
            pk__lt=revision.pk,
        )
        .order_by("-created_at", "-pk")
        .first()
    )


def deleted_document_list(*, assistant: Assistant) -> list[MemoryRevision]:
    """Return the last ``delete`` revision of each document that is gone now, newest first."""
    live = set(MemoryDocument.objects.filter(assistant=assistant).values_list("path", flat=True))
    latest: dict[str, MemoryRevision] = {}
    deletes = MemoryRevision.objects.filter(assistant=assistant, action=RevisionAction.DELETE)
    for revision in deletes.select_related("user"):
        if revision.path not in live and revision.path not in latest:
            latest[revision.path] = revision
    return list(latest.values())


def proposal_list(*, assistant: Assistant, state: str) -> QuerySet[Proposal]:
    """Return the assistant's consolidation proposals in ``state``, most confident first."""
    return (
        Proposal.objects.filter(assistant=assistant, state=state)
        .select_related("decided_by")
        .order_by("-confidence", "pk")
    )


def proposal_get(*, team: Team, pk: int) -> Proposal:
    """Return a proposal of one of the team's assistants, or raise NotFound."""
    proposal = (
        Proposal.objects.filter(assistant__team=team, pk=pk).select_related("assistant", "decided_by").first()
    )
    if proposal is None:
        raise NotFound("proposal", within=None)
    return proposal


def open_proposal_count(*, team: Team) -> int:
    """Return how many proposals of the team's assistants wait for a decision (one indexed count)."""
    return Proposal.objects.filter(assistant__team=team, state=Proposal.State.OPEN).count()


def team_proposal_list(*, team: Team, state: str) -> QuerySet[Proposal]:
    """Return the proposals in ``state`` of every assistant of the team, most confident first."""
    return (
        Proposal.objects.filter(assistant__team=team, state=state)
        .select_related("assistant", "decided_by")
        .order_by("-confidence", "pk")
    )
