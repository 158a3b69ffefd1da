"""Where every line of a memory document came from (docs/design.md, Provenance, consolidation and forgetting).

A revision stores the origin of each of its lines (`memory_app.governance.lines`); `next_origins` computes
them for a new revision from the previous one, and `line_provenance` answers, for a document,
one entry per line: its text, the revision that wrote it (who, through what, when) and its trust.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Literal, TypedDict

from memory_app.governance.lines import SELF, carry_origins, decode_runs, split_lines
from memory_app.models import MemoryDocument, MemoryRevision


def latest_revision(document: MemoryDocument | None) -> MemoryRevision | None:
    """Return the document's newest revision (what the next revision's origins carry on from)."""
    if document is None or document.pk is None:
        return None
    return (
        MemoryRevision.objects.filter(document=document)
        .order_by("-created_at", "-id")
        .only("pk", "content", "line_origins")
        .first()
    )


def revision_origins(revision: MemoryRevision) -> list[int]:
    """One origin revision id per line of ``revision.content``.

    A revision written before origins were recorded (or whose list does not match its text)
    answers for all its lines itself.
    """
    lines = split_lines(revision.content)
    origins = decode_runs(revision.line_origins or [], own=revision.pk)
    return origins if len(origins) == len(lines) else [revision.pk] * len(lines)


def next_origins(
    lineage: MemoryDocument | None, content: str, *, base: MemoryRevision | None = None
) -> list[int]:
    """The origins of a new revision holding ``content``: carried from ``base`` (default: the newest)."""
    base = base if base is not None else latest_revision(lineage)
    if base is None:
        return [SELF] * len(split_lines(content))
    return carry_origins(split_lines(base.content), revision_origins(base), split_lines(content), SELF)


class ApiKeyRef(TypedDict):
    id: int
    name: str


# "import" is a Python keyword: the functional form.
Origin = TypedDict(
    "Origin",
    {
        "kind": str,
        "revision": int,
        "action": str,
        "author": str,
        "user": str | None,
        "api_key": ApiKeyRef | None,
        "session": int | None,
        "message": int | None,
        "import": int | None,
        "proposal": int | None,
        "note": str,
    },
)


class UnknownOrigin(TypedDict):
    """A line of a document written before revisions existed."""

    kind: Literal["unknown"]


class ShownLine(TypedDict):
    """A line's origin, trust and time, as search's ``explain`` shows it."""

    line: int
    origin: Origin | UnknownOrigin
    trust: str
    at: datetime | None


class LineProvenance(ShownLine):
    """A line of a document with its text, origin, trust and time (`line_provenance`)."""

    text: str


def origin_dict(revision: MemoryRevision) -> Origin:
    """The structured origin of a revision: kind, who, through which key, session, message or import."""
    proposal_pk = getattr(revision, "proposal_id", None)
    return {
        "kind": revision.origin_kind,
        "revision": revision.pk,
        "action": revision.action,
        "author": revision.author,
        "user": revision.user.get_username() if revision.user_id and revision.user else None,
        "api_key": {"id": revision.api_key_pk, "name": revision.api_key_name}
        if revision.api_key_pk is not None
        else None,
        "session": revision.session_pk,
        "message": revision.message_pk,
        "import": revision.import_pk,
        "proposal": proposal_pk,
        "note": revision.note,
    }


def origins_by_revision(assistant_id: int, ids: Iterable[int]) -> dict[int, MemoryRevision]:
    """Load the origin revisions named by a document's lines (the assistant's own only)."""
    wanted = set(ids)
    revisions = (
        MemoryRevision.objects.filter(assistant_id=assistant_id, pk__in=wanted)
        .select_related("user")
        .defer("content", "line_origins")
    )
    return {revision.pk: revision for revision in revisions}


def line_provenance(document: MemoryDocument) -> list[LineProvenance]:
    """One entry per line of the document: ``line``, ``text``, ``origin``, ``trust``, ``at``."""
    head = latest_revision(document)
    lines = split_lines(document.content)
    if head is not None and head.content == document.content:
        origins = revision_origins(head)
    else:  # a document without revisions (written before revisions existed) has no known origin
        origins = [0] * len(lines)
    revisions = origins_by_revision(document.assistant_id, origins)
    return [
        _entry(number, text, revisions.get(origin))
        for number, (text, origin) in enumerate(zip(lines, origins, strict=True), start=1)
    ]


def _entry(number: int, text: str, revision: MemoryRevision | None) -> LineProvenance:
    if revision is None:
        return {"line": number, "text": text, "origin": {"kind": "unknown"}, "trust": "untrusted", "at": None}
    return {
        "line": number,
        "text": text,
        "origin": origin_dict(revision),
        "trust": revision.trust,
        "at": revision.created_at,
    }


def lines_provenance(document: MemoryDocument, numbers: Sequence[int]) -> list[LineProvenance]:
    """The entries of `line_provenance` for some line numbers only (search's ``explain``)."""
    wanted = set(numbers)
    return [entry for entry in line_provenance(document) if entry["line"] in wanted]


def attach_provenance(assistant_id: int, results: list[dict[str, Any]]) -> None:
    """Add to each memory result's ``explain`` the origin and trust of the lines it shows.

    Search's ``explain`` (memory_app.api.search_views): each document is read once per search.
    """
    by_path: dict[str, list[LineProvenance]] = {}
    paths = {r["path"] for r in results if r.get("source") == "memory" and isinstance(r.get("explain"), dict)}
    for document in MemoryDocument.objects.filter(assistant_id=assistant_id, path__in=paths):
        by_path[document.path] = line_provenance(document)
    for result in results:
        entries = by_path.get(result["path"]) if result.get("source") == "memory" else None
        if entries is None or not isinstance(result.get("explain"), dict):
            continue
        shown = entries[result["start_line"] - 1 : result["end_line"]]
        result["explain"]["provenance"] = [
            ShownLine(line=e["line"], origin=e["origin"], trust=e["trust"], at=e["at"]) for e in shown
        ]
