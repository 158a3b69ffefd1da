"""Forgetting a source: every line a session, an API key or an import wrote, and its index entries.

docs/design.md, Provenance, consolidation and forgetting. A dry run reports what would go; the
removal writes one revision per document (attributed to whoever asked; the history keeps the
text), removes the index rows of those lines (and, for a session, its transcript's rows), and
records the source in `ForgottenSource`, so the same lines cannot come back through a re-import,
a replayed flush or a reindex (`memory_app.governance.forgotten`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from memory_app.documents import Provenance, delete_document, write_document
from memory_app.governance.forgotten import line_hash
from memory_app.governance.lines import is_entry, split_lines
from memory_app.governance.provenance import latest_revision, revision_origins
from memory_app.index.rows import remove_entry_rows
from memory_app.models import ForgottenSource, MemoryChunk, MemoryDocument, MemoryRevision, Source
from openclaw_site.models import Assistant

SOURCE_FIELDS = {"session": "session_pk", "api_key": "api_key_pk", "import": "import_pk"}


@dataclass
class DocumentRemoval:
    path: str
    lines: list[tuple[int, str]]  # (line number, text) removed
    kept: str  # the text left
    deleted: bool = False
    revision: int | None = None

    @property
    def shown(self) -> list[tuple[int, str]]:
        """The removed lines worth listing (blank lines go too, unlisted)."""
        return [(number, text) for number, text in self.lines if text.strip()]

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "lines_removed": len(self.shown),
            "deleted": self.deleted,
            "revision": self.revision,
        }


@dataclass
class ForgetReport:
    kind: str
    key: int
    dry_run: bool
    documents: list[DocumentRemoval] = field(default_factory=list)
    memory_index_entries: int = 0
    session_index_entries: int = 0
    already_forgotten: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": {self.kind: self.key},
            "dry_run": self.dry_run,
            "lines": [
                {"path": doc.path, "line": number, "text": text}
                for doc in self.documents
                for number, text in doc.shown
            ],
            "documents": [doc.as_dict() for doc in self.documents],
            "index_entries": {"memory": self.memory_index_entries, "sessions": self.session_index_entries},
            "already_forgotten": self.already_forgotten,
        }


def source_is_known(assistant: Assistant, kind: str, key: int) -> bool:
    """Whether anything of the assistant's memory or index names the source."""
    revisions = MemoryRevision.objects.filter(assistant=assistant, **{SOURCE_FIELDS[kind]: key})
    if revisions.exists() or ForgottenSource.objects.filter(assistant=assistant, kind=kind, key=key).exists():
        return True
    if kind == "session":
        return MemoryChunk.objects.filter(
            assistant=assistant, source=Source.SESSIONS, session_pk=key
        ).exists()
    return False


def _plan(assistant: Assistant, kind: str, key: int) -> list[DocumentRemoval]:
    """Per live document written by the source: the lines whose origin is one of its revisions."""
    own = set(
        MemoryRevision.objects.filter(assistant=assistant, **{SOURCE_FIELDS[kind]: key}).values_list(
            "pk", flat=True
        )
    )
    documents = (
        MemoryDocument.objects.filter(assistant=assistant, revisions__pk__in=own).distinct().order_by("path")
    )
    removals = []
    for document in documents:
        head = latest_revision(document)
        if head is None or head.content != document.content:
            continue
        lines = split_lines(document.content)
        origins = revision_origins(head)
        gone = [
            (number, text)
            for number, (text, origin) in enumerate(zip(lines, origins, strict=True), 1)
            if origin in own
        ]
        if gone:
            numbers = {number for number, _ in gone}
            kept = "\n".join(text for number, text in enumerate(lines, 1) if number not in numbers)
            removals.append(DocumentRemoval(document.path, gone, kept))
    return removals


def _document_chunks(assistant: Assistant, removal: DocumentRemoval) -> Any:
    numbers = [number for number, _ in removal.lines]
    return MemoryChunk.objects.filter(
        assistant=assistant, source=Source.MEMORY, path=removal.path, line_numbers__overlap=numbers
    )


@transaction.atomic
def forget_source(
    *, assistant: Assistant, kind: str, key: int, dry_run: bool, provenance: Provenance
) -> ForgetReport:
    """Report (``dry_run``) or remove everything of the assistant's memory the source wrote."""
    report = ForgetReport(kind=kind, key=key, dry_run=dry_run)
    report.already_forgotten = ForgottenSource.objects.filter(
        assistant=assistant, kind=kind, key=key
    ).exists()
    report.documents = _plan(assistant, kind, key)
    report.memory_index_entries = sum(_document_chunks(assistant, r).count() for r in report.documents)
    sessions = MemoryChunk.objects.filter(assistant=assistant, source=Source.SESSIONS, session_pk=key)
    report.session_index_entries = sessions.count() if kind == "session" else 0
    if dry_run:
        return report
    for removal in report.documents:
        _remove(assistant, removal, provenance)
    if kind == "session":
        remove_entry_rows(assistant_id=assistant.pk, source=Source.SESSIONS, session_pk=key)
    hashes = sorted({line_hash(text) for r in report.documents for _, text in r.lines if is_entry(text)})
    record, created = ForgottenSource.objects.get_or_create(
        assistant=assistant, kind=kind, key=key, defaults={"line_hashes": hashes, "user": _user(provenance)}
    )
    if not created and hashes:
        record.line_hashes = sorted(set(record.line_hashes) | set(hashes))
        record.save(update_fields=["line_hashes"])
    return report


def _user(provenance: Provenance) -> Any:
    return provenance.user if getattr(provenance.user, "pk", None) else None


def _remove(assistant: Assistant, removal: DocumentRemoval, provenance: Provenance) -> None:
    document = MemoryDocument.objects.get(assistant=assistant, path=removal.path)
    _document_chunks(assistant, removal).delete()  # search stops citing them now; the reindex follows
    if not any(is_entry(line) for line in split_lines(removal.kept)):
        removal.revision = delete_document(document=document, provenance=provenance).pk
        removal.deleted = True
        return
    _, revision = write_document(
        assistant=assistant, path=removal.path, content=removal.kept, provenance=provenance
    )
    removal.revision = revision.pk if revision else None
