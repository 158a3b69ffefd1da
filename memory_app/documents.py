"""Writing memory documents: every write leaves a revision that says who wrote it and why.

Every path that changes memory (API, admin, dashboard, flush, import) goes through these
functions, so the reindex and the export are triggered whoever saved (docs/design.md, How a message flows).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from typing import Any, TypedDict

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q

from memory_app.governance.forgotten import blocked_lines, is_forgotten
from memory_app.governance.lines import (
    drop_duplicates,
    encode_runs,
    first_appended_line,
    is_entry,
    split_lines,
)
from memory_app.governance.provenance import next_origins
from memory_app.models import (
    Author,
    MemoryDocument,
    MemoryRevision,
    OriginKind,
    RevisionAction,
    Trust,
    content_hash,
)
from memory_app.paths import mirror_ancestors, mirror_clash, validate_memory_path
from memory_app.selectors import current_revision_id
from memory_app.signals import memory_document_changed, notifications_are_held
from openclaw_site.errors import DomainError
from openclaw_site.models import Assistant, WorkspaceAccess
from openclaw_site.teams.services import check_writable


class StaleWrite(DomainError):
    """409 `stale_write`: the document changed since the caller read it (``expected_hash`` did not match).

    Also a create that found the path taken by a concurrent request while it ran. ``details``
    carry the hash the caller sent and the current hash and revision (docs/design.md, REST API).
    """

    def __init__(
        self,
        path: str,
        *,
        current_revision: int | None = None,
        expected_hash: str | None = None,
        current_hash: str | None = None,
    ) -> None:
        super().__init__(
            "stale_write",
            f"{path} changed since you read it; read it again and retry.",
            status=409,
            details={
                "path": path,
                "expected_hash": expected_hash,
                "current_hash": current_hash,
                "current_revision": current_revision,
            },
        )
        self.path = path
        self.current_revision = current_revision


class StaleRevision(StaleWrite):
    """409 `stale_write` of an agent's replace: the document's newest revision is not the one it read."""

    def __init__(self, path: str, *, current_revision: int | None) -> None:
        DomainError.__init__(
            self,
            "stale_write",
            f"{path} changed since you read it: read it again (memory_get) and retry with its revision.",
            status=409,
            details={"path": path, "current_revision": current_revision},
        )
        self.path = path
        self.current_revision = current_revision


class DocumentExists(DomainError):
    """409 `document_exists`: a create-only write (`create_document`) found the path taken."""

    def __init__(self, path: str, *, current_revision: int | None) -> None:
        super().__init__(
            "document_exists",
            f"{path} already exists (revision {current_revision}); use PUT to replace it.",
            status=409,
            details={"field": "path", "path": path, "current_revision": current_revision},
        )
        self.path = path
        self.current_revision = current_revision


class WorkspaceNotWritable(DomainError):
    """403 `workspace_read_only`: an agent write to an assistant whose workspace is not ``rw``."""

    def __init__(self, assistant: Assistant) -> None:
        access = assistant.get_workspace_access_display().lower()
        super().__init__(
            "workspace_read_only",
            f"The workspace of assistant {assistant.slug!r} is {access} ({assistant.workspace_access}). "
            "Agents may not write its memory.",
            status=403,
            details={"workspace_access": assistant.workspace_access},
        )
        self.access = assistant.workspace_access


class PathTaken(DomainError):
    """409 `path_taken`: another document of the assistant already has the path a rename asked for."""

    def __init__(self, path: str) -> None:
        super().__init__(
            "path_taken", f"{path} already exists.", status=409, details={"field": "path", "path": path}
        )
        self.path = path


@dataclass(frozen=True)
class Provenance:
    """Who causes a write: the author kind plus the user, API key, session, message or import behind it.

    ``untrusted`` marks text derived from outside content (a fetched page or file the agent read);
    `kind` and `trust` follow from the rest (docs/design.md, Provenance, consolidation and forgetting).
    """

    author: str
    user: Any = None
    session_pk: int | None = None
    message_pk: int | None = None
    note: str = ""
    api_key_pk: int | None = None
    api_key_name: str = ""
    import_pk: int | None = None
    proposal_pk: int | None = None
    untrusted: bool = False

    @property
    def kind(self) -> str:
        if self.proposal_pk is not None:
            return OriginKind.PROPOSAL
        if self.author == Author.AGENT:
            return OriginKind.AGENT
        if self.author == Author.FLUSH:
            return OriginKind.FLUSH
        if self.author == Author.IMPORT:
            return OriginKind.IMPORT
        if self.api_key_pk is not None and not getattr(self.user, "pk", None):
            return OriginKind.API_KEY
        return OriginKind.PERSON

    @property
    def trust(self) -> str:
        kind = self.kind
        if self.untrusted or kind == OriginKind.IMPORT:
            return Trust.UNTRUSTED
        if kind == OriginKind.PROPOSAL:  # approved by a person, or by a key (a program)
            return Trust.OWNER if getattr(self.user, "pk", None) else Trust.AGENT
        return Trust.OWNER if kind == OriginKind.PERSON else Trust.AGENT


def check_mirror_room(assistant: Assistant, path: str, *, moving_from: str | None = None) -> None:
    """Refuse a new path the export mirror could not hold beside the assistant's other documents.

    A file where another document needs a folder, or a case twin, stopped the whole mirror
    (docs/design.md, Limits and refusals); `memory_app.paths.mirror_clash` says why.
    """
    near = Q(path__iexact=path) | Q(path__istartswith=f"{path}/")
    for folder in mirror_ancestors(path):
        near |= Q(path__iexact=folder)
    others = MemoryDocument.objects.filter(near, assistant=assistant).exclude(path=moving_from or path)
    reason = mirror_clash(path, list(others.values_list("path", flat=True)[:20]))
    if reason is not None:
        raise DomainError(
            "invalid_path",
            f"Invalid memory path: {reason}.",
            details={"field": "path", "path": path, "reason": reason},
        )


def check_document_size(path: str, content: str) -> None:
    """Refuse a document the write would grow past OPENCLAW_MAX_MEMORY_DOCUMENT_BYTES (413)."""
    size, limit = len(content.encode()), settings.MAX_MEMORY_DOCUMENT_BYTES
    if size > limit:
        raise DomainError(
            "payload_too_large",
            f"{path} would be {size} bytes; the limit is {limit}. Nothing was written: start a new "
            "document or shorten this one.",
            status=413,
            details={"field": "content", "path": path, "size": size, "limit": limit},
        )


def _notify(assistant: Assistant, path: str, document_id: int | None) -> None:
    if notifications_are_held():  # a bulk writer queues the follow-up work itself
        return
    team_id, assistant_id = assistant.team_id, assistant.pk
    transaction.on_commit(
        lambda: memory_document_changed.send(
            sender=MemoryDocument,
            team_id=team_id,
            assistant_id=assistant_id,
            path=path,
            document_id=document_id,
        )
    )


def _revision(
    document: MemoryDocument | None,
    *,
    assistant: Assistant,
    path: str,
    content: str,
    action: str,
    provenance: Provenance,
    lineage: MemoryDocument | None = None,
    base: MemoryRevision | None = None,
) -> MemoryRevision:
    """Insert the revision; its line origins carry on from ``base`` (default: ``lineage``'s newest)."""
    check_writable(assistant)  # every write leaves a revision, so this refuses them all
    origins = next_origins(lineage or document, content, base=base)
    return MemoryRevision.objects.create(
        assistant=assistant,
        document=document,
        path=path,
        content=content,
        content_hash=content_hash(content),
        action=action,
        author=provenance.author,
        user=provenance.user if getattr(provenance.user, "pk", None) else None,
        session_pk=provenance.session_pk,
        message_pk=provenance.message_pk,
        note=provenance.note[:255],
        origin_kind=provenance.kind,
        trust=provenance.trust,
        api_key_pk=provenance.api_key_pk,
        api_key_name=provenance.api_key_name[:100],
        import_pk=provenance.import_pk,
        proposal_id=provenance.proposal_pk,
        line_origins=encode_runs(origins),
    )


@transaction.atomic
def write_document(
    *, assistant: Assistant, path: str, content: str, provenance: Provenance, expected_hash: str | None = None
) -> tuple[MemoryDocument, MemoryRevision | None]:
    """Create or replace a document; return it and its new revision (None if nothing changed).

    ``expected_hash`` is the content hash the caller read (``""``: the document must not exist
    yet); any other document, including one created by a concurrent request while this one ran,
    is `StaleWrite` carrying its current hash and revision, never replaced (docs/design.md, REST API).
    """
    path = validate_memory_path(path)
    document = (
        MemoryDocument.objects.select_for_update(no_key=True).filter(assistant=assistant, path=path).first()
    )
    if expected_hash is not None and (document.content_hash if document else "") != expected_hash:
        raise _stale(path, document, expected_hash)
    content = _without_forgotten(assistant, content, provenance)
    if document is not None and document.content == content:
        return document, None
    action = RevisionAction.UPDATE if document else RevisionAction.CREATE
    if document is None:
        document = _insert_document(
            assistant=assistant, path=path, content=content, expected_hash=expected_hash
        )
    else:
        document.content = content
        document.content_hash = content_hash(content)
        document.save()
    revision = _revision(
        document, assistant=assistant, path=path, content=content, action=action, provenance=provenance
    )
    _notify(assistant, path, document.pk)
    return document, revision


def _without_forgotten(assistant: Assistant, content: str, provenance: Provenance) -> str:
    """Leave out forgotten lines from a write that is not a person's (memory_app.governance.forgotten)."""
    if provenance.trust == Trust.OWNER:
        return content
    lines = split_lines(content)
    blocked = blocked_lines(assistant.pk, lines)
    return "\n".join(line for index, line in enumerate(lines) if index not in blocked) if blocked else content


def _stale(path: str, document: MemoryDocument | None, expected_hash: str | None) -> StaleWrite:
    """The `StaleWrite` of a write that expected ``expected_hash`` and found ``document``."""
    return StaleWrite(
        path,
        current_revision=current_revision_id(document=document) if document else None,
        expected_hash=expected_hash,
        current_hash=document.content_hash if document else None,
    )


def create_document(
    *, assistant: Assistant, path: str, content: str, provenance: Provenance
) -> tuple[MemoryDocument, MemoryRevision | None]:
    """Create a document that must not exist yet: `DocumentExists` when it does, or when a
    concurrent request created it first (docs/design.md, REST API)."""
    try:
        return write_document(
            assistant=assistant, path=path, content=content, provenance=provenance, expected_hash=""
        )
    except StaleWrite as error:
        raise DocumentExists(error.path, current_revision=error.current_revision) from None


def _insert_document(
    *, assistant: Assistant, path: str, content: str, expected_hash: str | None
) -> MemoryDocument:
    """Insert a new document, or raise `StaleWrite` when a concurrent request created the path first.

    The row lock of the read before finds no row to lock while the path is new, so two creators
    both get here; the unique (assistant, path) index makes the second wait for the first to
    commit and then fail. The insert runs in a savepoint, so the caller's transaction goes on to
    read the winner's revision.
    """
    check_mirror_room(assistant, path)
    document = MemoryDocument(
        assistant=assistant, path=path, content=content, content_hash=content_hash(content)
    )
    try:
        with transaction.atomic():
            document.save(force_insert=True)
    except IntegrityError:
        winner = MemoryDocument.objects.filter(assistant=assistant, path=path).first()
        raise _stale(path, winner, expected_hash) from None
    return document


def appended_text(existing: str, addition: str) -> str:
    """Append ``addition`` on a new line (OpenClaw's flush write prepends a newline if missing)."""
    if not existing:
        return addition
    separator = "" if existing.endswith("\n") else "\n"
    return f"{existing}{separator}{addition}"


class DuplicateLine(TypedDict):
    """A line an append left out, and where memory already holds it."""

    text: str
    path: str
    line: int


@dataclass(frozen=True)
class Duplicate:
    """A line of an append that memory already holds: where its copy is."""

    text: str
    path: str
    line: int

    def as_dict(self) -> DuplicateLine:
        return {"text": self.text, "path": self.path, "line": self.line}


@dataclass(frozen=True)
class AppendOutcome:
    """What an append stored: the document, its new revision (None: nothing new), what it skipped."""

    document: MemoryDocument
    revision: MemoryRevision | None
    duplicates: tuple[Duplicate, ...] = ()
    forgotten: int = 0  # lines left out because their source was forgotten


# Besides the document appended to, a repeat of a line of these is not stored (docs/design.md,
# Provenance, consolidation and forgetting: write-time hygiene).
DURABLE_PATHS = ("MEMORY.md", "memory.md")


def _new_lines(
    document: MemoryDocument, addition: str, provenance: Provenance
) -> tuple[str | None, tuple[Duplicate, ...], int]:
    """The part of ``addition`` to store (None: nothing new), the duplicates and forgotten lines left out."""
    others = MemoryDocument.objects.filter(
        assistant_id=document.assistant_id, path__in=DURABLE_PATHS
    ).exclude(pk=document.pk)
    existing = {document.path: split_lines(document.content)}
    existing.update({other.path: split_lines(other.content) for other in others.order_by("path")})
    lines = split_lines(addition)
    blocked = blocked_lines(document.assistant_id, lines) if provenance.trust != Trust.OWNER else set()
    lines = [line for index, line in enumerate(lines) if index not in blocked]
    kept, dropped = drop_duplicates(
        lines, existing, target=document.path, first_line=first_appended_line(document.content)
    )
    duplicates = tuple(Duplicate(lines[index], path, line) for index, path, line in dropped)
    if (duplicates or blocked) and not any(is_entry(line) for line in kept):
        return None, duplicates, len(blocked)
    return "\n".join(kept), duplicates, len(blocked)


@transaction.atomic
def append_to_document(
    *, assistant: Assistant, path: str, addition: str, provenance: Provenance
) -> AppendOutcome:
    """Append text to a document (creating it), under a row lock so concurrent appends both land.

    Entries memory already holds (`DURABLE_PATHS` and the document itself, compared in their
    normal form, `memory_app.governance.lines`) are left out and reported, and so are forgotten lines
    (`memory_app.governance.forgotten`); when nothing new remains, nothing is written.
    """
    path = validate_memory_path(path)
    if not MemoryDocument.objects.filter(assistant=assistant, path=path).exists():
        check_mirror_room(assistant, path)
    _, created = MemoryDocument.objects.get_or_create(
        assistant=assistant, path=path, defaults={"content_hash": content_hash("")}
    )
    document = MemoryDocument.objects.select_for_update(no_key=True).get(assistant=assistant, path=path)
    new: str | None
    duplicates: tuple[Duplicate, ...]
    if is_forgotten(assistant.pk, "session", provenance.session_pk):  # a replayed flush of it
        new, duplicates, forgotten = None, (), len(split_lines(addition))
    else:
        new, duplicates, forgotten = _new_lines(document, addition, provenance)
    if new is None:
        if created:  # nothing to store: the new, empty document goes too
            document.delete()
        return AppendOutcome(document, None, duplicates, forgotten)
    document.content = appended_text(document.content, new)
    check_document_size(path, document.content)  # each revision is a full copy: bounded by the limit
    document.content_hash = content_hash(document.content)
    document.save()
    revision = _revision(
        document,
        assistant=assistant,
        path=path,
        content=document.content,
        action=RevisionAction.APPEND,
        provenance=provenance,
    )
    _notify(assistant, path, document.pk)
    return AppendOutcome(document, revision, duplicates, forgotten)


def daily_note_path(day: date) -> str:
    """Return the path of a day's note, ``memory/YYYY-MM-DD.md`` (docs/openclaw-behaviour.md section 2)."""
    return f"memory/{day.isoformat()}.md"


def _check_agent_writable(assistant: Assistant) -> None:
    if assistant.workspace_access != WorkspaceAccess.RW:
        raise WorkspaceNotWritable(assistant)


def agent_append_daily_note(
    *, assistant: Assistant, text: str, today: date, provenance: Provenance
) -> AppendOutcome:
    """An agent's note: append to today's daily note, only when the workspace is ``rw``."""
    _check_agent_writable(assistant)
    return append_to_document(
        assistant=assistant, path=daily_note_path(today), addition=text, provenance=provenance
    )


@transaction.atomic
def agent_replace_document(
    *, assistant: Assistant, path: str, content: str, base_revision: int | None, provenance: Provenance
) -> tuple[MemoryDocument, MemoryRevision | None]:
    """An agent's replace of a whole document against the revision it read (None: it must not exist yet).

    Refused when the workspace is not ``rw`` (`WorkspaceNotWritable`) or when the document's newest
    revision is not ``base_revision`` (`StaleRevision`, carrying the current one).
    """
    _check_agent_writable(assistant)
    path = validate_memory_path(path)
    document = (
        MemoryDocument.objects.select_for_update(no_key=True).filter(assistant=assistant, path=path).first()
    )
    current = current_revision_id(document=document) if document is not None else None
    if current != base_revision:
        raise StaleRevision(path, current_revision=current)
    # No base revision: create only, even against a create that commits between the two reads.
    expected = document.content_hash if document is not None else ""
    try:
        return write_document(
            assistant=assistant, path=path, content=content, provenance=provenance, expected_hash=expected
        )
    except StaleWrite as error:
        raise StaleRevision(path, current_revision=error.current_revision) from None


@transaction.atomic
def delete_document(*, document: MemoryDocument, provenance: Provenance) -> MemoryRevision:
    """Delete a document; its revisions stay, ending with a ``delete`` revision of the last text."""
    document = MemoryDocument.objects.select_for_update().get(pk=document.pk)
    revision = _revision(
        None,
        assistant=document.assistant,
        path=document.path,
        content=document.content,
        action=RevisionAction.DELETE,
        provenance=provenance,
        lineage=document,
    )
    MemoryRevision.objects.filter(document=document).update(document=None)
    assistant, path = document.assistant, document.path
    document.delete()
    _notify(assistant, path, None)
    return revision


@transaction.atomic
def rename_document(*, document: MemoryDocument, new_path: str, provenance: Provenance) -> MemoryDocument:
    """Move a document to ``new_path``; its revisions move with it, and a ``rename`` revision says so.

    The old path's file and index rows go, the new path's are written (the usual notifications).
    """
    new_path = validate_memory_path(new_path)
    document = MemoryDocument.objects.select_for_update(no_key=True).get(pk=document.pk)
    old_path = document.path
    if new_path == old_path:
        return document
    if MemoryDocument.objects.filter(assistant_id=document.assistant_id, path=new_path).exists():
        raise PathTaken(new_path)
    check_mirror_room(document.assistant, new_path, moving_from=old_path)
    MemoryRevision.objects.filter(document=document).update(path=new_path)
    document.path = new_path
    try:
        with transaction.atomic():
            document.save(update_fields=["path", "updated_at"])
    except IntegrityError:  # a concurrent create of ``new_path`` committed after the check above
        raise PathTaken(new_path) from None
    _revision(
        document,
        assistant=document.assistant,
        path=new_path,
        content=document.content,
        action=RevisionAction.RENAME,
        provenance=replace(
            provenance, note=" · ".join(filter(None, [f"renamed from {old_path}", provenance.note]))
        ),
    )
    _notify(document.assistant, old_path, None)
    _notify(document.assistant, new_path, document.pk)
    return document


@transaction.atomic
def revert_document(
    *, document: MemoryDocument, revision: MemoryRevision, provenance: Provenance
) -> tuple[MemoryDocument, MemoryRevision | None]:
    """Restore a document's text from one of its revisions (a new ``revert`` revision)."""
    document = MemoryDocument.objects.select_for_update(no_key=True).get(pk=document.pk)
    if document.content == revision.content:
        return document, None
    document.content = revision.content
    document.content_hash = content_hash(revision.content)
    document.save()
    new = _revision(
        document,
        assistant=document.assistant,
        path=document.path,
        content=document.content,
        action=RevisionAction.REVERT,
        provenance=provenance,
        base=revision,
    )
    _notify(document.assistant, document.path, document.pk)
    return document, new


def read_lines(content: str, *, start: int | None, count: int | None) -> tuple[str, int, int, int]:
    """Return (text, from, lines, total_lines) for a 1-based line range, like OpenClaw's memory_get."""
    lines = content.split("\n")
    total = len(lines)
    first = max(1, start or 1)
    amount = max(1, count if count is not None else total)
    selected = lines[first - 1 : first - 1 + amount]
    return "\n".join(selected), first, len(selected), total


__all__ = [
    "AppendOutcome",
    "Author",
    "DocumentExists",
    "Duplicate",
    "PathTaken",
    "Provenance",
    "StaleRevision",
    "StaleWrite",
    "WorkspaceNotWritable",
    "agent_append_daily_note",
    "agent_replace_document",
    "append_to_document",
    "appended_text",
    "create_document",
    "daily_note_path",
    "delete_document",
    "read_lines",
    "rename_document",
    "revert_document",
    "write_document",
]
