"""Consolidation proposals: the deterministic pass, and approving or rejecting what it proposes.

docs/design.md, Provenance, consolidation and forgetting. The pass reads every entry of the
assistant's memory (with the origin and trust of its line) and proposes to merge exact and near
duplicates (normal forms equal, or alike by `NEAR_DUPLICATE`) into one line. Nothing changes until
a person (or a key with ``memory:write``) approves: then each touched document gets one revision,
attributed to the reviewer and linked to the proposal. A proposal is named by its fingerprint, so
a rejected one is never proposed again, and an open one not twice.
"""

from __future__ import annotations

import difflib
import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from django.db import transaction
from django.utils import timezone

from memory_app.documents import Provenance, StaleWrite, appended_text, write_document
from memory_app.governance.lines import is_entry, normalise_line, similarity, split_lines
from memory_app.governance.provenance import latest_revision, revision_origins
from memory_app.index.embedding import embed_with_cache
from memory_app.models import (
    MemoryChunk,
    MemoryDocument,
    MemoryRevision,
    Proposal,
    Source,
    Trust,
    content_hash,
)
from memory_app.paths import ROOT_FILES
from memory_app.search.calibration import scale_for
from openclaw_site.errors import DomainError
from openclaw_site.models import Assistant, UsagePurpose
from openclaw_site.usage.ledger import record_usage
from providers.chat import Usage
from providers.embeddings import get_embedder

# Two entries whose normal forms are at least this alike (difflib's ratio) are near duplicates.
NEAR_DUPLICATE = 0.9
# ...and so are two whose embeddings are at least this alike (when the index holds vectors), on the
# common scale of `memory_app.search.calibration`: raw cosine for MiniLM, 0.978 for e5-small, whose
# unrelated texts already sit at 0.72-0.78 (docs/evaluation.md, LoCoMo memory before and after).
SEMANTIC_DUPLICATE = 0.92
# The pass compares at most this many entries (the newest documents' are left for the next run).
MAX_ENTRIES = 5000
TRUST_RANK: dict[str, int] = {Trust.OWNER: 0, Trust.AGENT: 1, Trust.UNTRUSTED: 2}


class ProposalDecided(DomainError):
    """409 `proposal_decided`: the proposal is not open any more (``state`` says what it is)."""

    def __init__(self, proposal: Proposal) -> None:
        super().__init__(
            "proposal_decided",
            f"Proposal {proposal.pk} is already {proposal.state}.",
            status=409,
            details={"state": str(proposal.state)},
        )
        self.state = str(proposal.state)


class ProposalStale(DomainError):
    """409 `proposal_stale`: a line the proposal rests on changed since it was proposed.

    ``reason`` says which line, without the advice the ``message`` adds.
    """

    def __init__(self, path: str, line: int) -> None:
        self.reason = f"{path} line {line} changed since the proposal was made"
        super().__init__(
            "proposal_stale",
            f"{self.reason}; run consolidate again for a fresh proposal.",
            status=409,
            details={"path": path, "line": line},
        )
        self.path = path
        self.line: int | None = line


class ProposalChanged(ProposalStale):
    """409 `proposal_stale`: a document the approval writes changed while it was being approved."""

    def __init__(self, path: str) -> None:
        DomainError.__init__(self, "proposal_stale", f"{path} changed while approving.", status=409)
        self.reason = f"{path} changed while approving"
        self.path = path
        self.line = None


@dataclass(frozen=True)
class Entry:
    """One entry line of memory, with the trust of the revision that wrote it."""

    path: str
    line: int
    text: str
    norm: str
    revision: int
    trust: str

    def source(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "text": self.text,
            "revision": self.revision,
            "trust": self.trust,
        }


def _document_order(path: str) -> tuple[int, str]:
    return (0 if path in ROOT_FILES else 1, path)


def collect_entries(assistant: Assistant) -> list[Entry]:
    """Every entry of the assistant's memory, MEMORY.md first, each with its origin's trust."""
    documents = sorted(
        MemoryDocument.objects.filter(assistant=assistant), key=lambda d: _document_order(d.path)
    )
    found: list[tuple[str, int, str, int]] = []
    for document in documents:
        head = latest_revision(document)
        lines = split_lines(document.content)
        origins = (
            revision_origins(head)
            if head is not None and head.content == document.content
            else [0] * len(lines)
        )
        found += [
            (document.path, number, text, origin)
            for number, (text, origin) in enumerate(zip(lines, origins, strict=True), start=1)
            if is_entry(text)
        ]
    found = found[:MAX_ENTRIES]
    trusts = dict(
        MemoryRevision.objects.filter(assistant=assistant, pk__in={f[3] for f in found}).values_list(
            "pk", "trust"
        )
    )
    return [
        Entry(path, line, text, normalise_line(text), origin, trusts.get(origin, Trust.UNTRUSTED))
        for path, line, text, origin in found
    ]


def duplicate_groups(
    entries: Sequence[Entry], similar: Sequence[tuple[str, str, float]] = ()
) -> list[tuple[list[Entry], float]]:
    """Groups of entries saying the same thing, each with its confidence (1.0: the same normal form).

    ``similar`` adds pairs of normal forms found alike another way (their embeddings), with
    their similarity.
    """
    by_norm: dict[str, list[Entry]] = defaultdict(list)
    for entry in entries:
        by_norm[entry.norm].append(entry)
    norms = sorted(by_norm, key=len)
    parent = {norm: norm for norm in norms}
    score: dict[str, float] = {}

    def root(norm: str) -> str:
        while parent[norm] != norm:
            norm = parent[norm]
        return norm

    for i, a in enumerate(norms):
        for b in norms[i + 1 :]:
            if 2 * len(a) < NEAR_DUPLICATE * (len(a) + len(b)):
                break  # the ratio cannot reach it; sorted by length, every later one is longer still
            ratio = similarity(a, b)
            if ratio >= NEAR_DUPLICATE and root(a) != root(b):
                low = min(score.get(root(a), 1.0), score.get(root(b), 1.0), ratio)
                parent[root(b)] = root(a)
                score[root(a)] = low
    for a, b, alike in similar:
        if a in parent and b in parent and root(a) != root(b):
            low = min(score.get(root(a), 1.0), score.get(root(b), 1.0), alike)
            parent[root(b)] = root(a)
            score[root(a)] = low
    groups: dict[str, list[Entry]] = defaultdict(list)
    for norm in norms:
        groups[root(norm)].extend(by_norm[norm])
    return [
        (sorted(members, key=_keeper_order), round(score.get(key, 1.0), 4))
        for key, members in groups.items()
        if len(members) > 1
    ]


def _keeper_order(entry: Entry) -> tuple[int, tuple[int, str], int]:
    """The line a merge keeps comes first: the most trusted, in MEMORY.md, the earliest."""
    return (TRUST_RANK.get(entry.trust, 2), _document_order(entry.path), entry.line)


def fingerprint(kind: str, texts: Sequence[str]) -> str:
    """What a proposal proposes, independent of where the lines sit: kind and normal forms."""
    body = "\n".join([kind, *sorted({normalise_line(text) for text in texts})])
    return hashlib.sha256(body.encode()).hexdigest()


def apply_change(
    contents: dict[str, str],
    *,
    kind: str,
    sources: Sequence[dict[str, Any]],
    new_text: str,
    target_path: str = "",
) -> dict[str, str]:
    """The touched documents after a proposal is applied.

    ``merge`` and ``supersede``: the first source's line becomes ``new_text``, the other sources
    go. ``retire``: every source goes. ``promote``: ``new_text`` is appended to ``target_path``
    and the sources leave their daily notes. A source line that moved (another approval removed
    lines above it) is found by its text, the nearest copy first; `ProposalStale` when its text
    is no longer in the document.
    """
    lines = {path: split_lines(text) for path, text in contents.items()}
    keep_first = kind in (Proposal.Kind.MERGE, Proposal.Kind.SUPERSEDE)
    replaced: dict[str, dict[int, list[str]]] = defaultdict(dict)
    for index, source in enumerate(sources):
        number = _current_line(lines.get(source["path"], []), source, taken=replaced[source["path"]])
        replaced[source["path"]][number] = split_lines(new_text) if index == 0 and keep_first else []
    result = {}
    for path, changes in replaced.items():
        out: list[str] = []
        for number, text in enumerate(lines[path], start=1):
            out.extend(changes.get(number, [text]))
        result[path] = "\n".join(out)
    if kind == Proposal.Kind.PROMOTE:
        result[target_path] = appended_text(result.get(target_path, contents.get(target_path, "")), new_text)
    return result


def _current_line(lines: Sequence[str], source: dict[str, Any], *, taken: dict[int, Any]) -> int:
    """Where the source's text is now: its own line if unchanged, else the nearest free copy."""
    wanted, text = int(source["line"]), str(source["text"])
    if 1 <= wanted <= len(lines) and lines[wanted - 1] == text and wanted not in taken:
        return wanted
    copies = [n for n, line in enumerate(lines, start=1) if line == text and n not in taken]
    if not copies:
        raise ProposalStale(source["path"], wanted)
    return min(copies, key=lambda n: abs(n - wanted))


def apply_proposal(contents: dict[str, str], proposal: Proposal, new_text: str) -> dict[str, str]:
    """`apply_change` with a stored proposal's kind, sources and target."""
    return apply_change(
        contents,
        kind=proposal.kind,
        sources=proposal.sources,
        new_text=new_text,
        target_path=proposal.target_path,
    )


def unified_diff(before: dict[str, str], after: dict[str, str]) -> str:
    """One unified diff over the touched documents (``a/<path>`` to ``b/<path>``)."""
    parts: list[str] = []
    for path in sorted(after):
        old = split_lines(before[path]) if path in before else []
        parts.extend(
            difflib.unified_diff(old, split_lines(after[path]), f"a/{path}", f"b/{path}", lineterm="")
        )
    return "\n".join(parts)


def _contents(assistant: Assistant, paths: set[str]) -> dict[str, str]:
    return dict(
        MemoryDocument.objects.filter(assistant=assistant, path__in=paths).values_list("path", "content")
    )


def _merge_fields(assistant: Assistant, group: list[Entry], confidence: float) -> dict[str, Any]:
    sources = [entry.source() for entry in group]
    contents = _contents(assistant, {entry.path for entry in group})
    after = apply_change(contents, kind=Proposal.Kind.MERGE, sources=sources, new_text=group[0].text)
    return {
        "kind": Proposal.Kind.MERGE,
        "documents": [
            {"path": e.path, "start_line": e.line, "end_line": e.line}
            for e in sorted(group, key=lambda e: (_document_order(e.path), e.line))
        ],
        "new_text": group[0].text,
        "sources": sources,
        "confidence": confidence,
        "diff": unified_diff(contents, after),
        "reason": "exact duplicates"
        if all(e.norm == group[0].norm for e in group)
        else f"near duplicates (similarity {confidence})",
    }


def similar_by_vectors(assistant: Assistant, entries: Sequence[Entry]) -> list[tuple[str, str, float]]:
    """Pairs of normal forms whose embeddings are at least `SEMANTIC_DUPLICATE` alike.

    The cosine is read on the embedder's scale (`calibration.scale_for`): on e5-small's raw cosine
    the threshold would join most lines about one person into one group. Only when the assistant's memory index holds vectors (an embedder works for it); the lines'
    vectors come through the embedding cache, so an unchanged line is embedded once.
    """
    indexed = MemoryChunk.objects.filter(assistant=assistant, source=Source.MEMORY, dims__gt=0)
    embedder = get_embedder() if indexed.exists() else None
    norms = sorted({entry.norm for entry in entries})
    if embedder is None or len(norms) < 2:
        return []
    by_hash = {content_hash(norm): norm for norm in norms}
    vectors = embed_with_cache(embedder, by_hash)
    if vectors.embedded:
        record_usage(
            assistant=assistant,
            purpose=UsagePurpose.EMBEDDING,
            model=embedder.model,
            usage=Usage(input=vectors.tokens, total=vectors.tokens),
        )
    known = [h for h in by_hash if h in vectors.by_hash]
    if len(known) < 2:
        return []
    matrix = np.array([vectors.by_hash[h] for h in known], dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    scale = scale_for(embedder.model)
    cosine = matrix @ matrix.T
    rows, cols = np.nonzero(np.triu(cosine, k=1) >= scale.raw(SEMANTIC_DUPLICATE))
    return [
        (by_hash[known[i]], by_hash[known[j]], round(scale.normalise(float(cosine[i, j])), 4))
        for i, j in zip(rows, cols, strict=True)
    ]


AUTO_APPLY = Provenance(author="agent", note="auto-apply (memoryConsolidation.autoApply)")


def auto_apply(proposal: Proposal) -> bool:
    """Apply a new proposal when its kind is in the assistant's ``memoryConsolidation.autoApply``.

    Never one that rests on an untrusted line (a person decides those), and never when a source
    changed meanwhile; otherwise the proposal stays open for review. Returns whether it applied.
    """
    if proposal.kind not in proposal.assistant.config.consolidation.auto_apply:
        return False
    if any(source.get("trust") == Trust.UNTRUSTED for source in proposal.sources):
        return False
    try:
        approve_proposal(proposal, provenance=AUTO_APPLY)
    except (ProposalStale, ProposalDecided):
        return False
    return True


def run_consolidation(assistant: Assistant) -> dict[str, Any]:
    """The deterministic pass: propose a merge for each duplicate group not proposed before."""
    entries = collect_entries(assistant)
    proposed = known = applied = 0
    for group, confidence in duplicate_groups(entries, similar_by_vectors(assistant, entries)):
        key = fingerprint(Proposal.Kind.MERGE, [entry.text for entry in group])
        if Proposal.objects.filter(assistant=assistant, fingerprint=key).exists():
            known += 1  # open, approved or rejected before: a rejection is remembered
            continue
        with transaction.atomic():
            proposal, created = Proposal.objects.get_or_create(
                assistant=assistant, fingerprint=key, defaults=_merge_fields(assistant, group, confidence)
            )
        proposed += int(created)
        applied += int(created and auto_apply(proposal))
    return {"entries": len(entries), "proposed": proposed, "known": known, "auto_applied": applied}


# --- review ------------------------------------------------------------------------------------


def _open_for_update(proposal: Proposal) -> Proposal:
    locked = Proposal.objects.select_for_update().get(pk=proposal.pk)
    if locked.state != Proposal.State.OPEN:
        raise ProposalDecided(locked)
    return locked


def _decided_by(proposal: Proposal, provenance: Provenance) -> None:
    proposal.decided_by = provenance.user if getattr(provenance.user, "pk", None) else None
    proposal.decided_note = provenance.note[:255]
    proposal.decided_at = timezone.now()


@transaction.atomic
def approve_proposal(
    proposal: Proposal, *, provenance: Provenance, new_text: str | None = None
) -> list[MemoryRevision]:
    """Apply an open proposal (``new_text``: the reviewer's edit): one revision per document.

    Each revision is attributed to the reviewer and links the proposal (origin ``proposal``).
    `ProposalStale` when a source line changed since (`ProposalChanged` when a document changed
    while approving), `ProposalDecided` when it is not open; nothing is written then.
    """
    proposal = _open_for_update(proposal)
    text = proposal.new_text if new_text is None else new_text
    paths = {source["path"] for source in proposal.sources} | ({proposal.target_path} - {""})
    documents = {
        d.path: d
        for d in MemoryDocument.objects.select_for_update(no_key=True).filter(
            assistant=proposal.assistant, path__in=paths
        )
    }
    after = apply_proposal({path: d.content for path, d in documents.items()}, proposal, text)
    by = replace(
        provenance,
        proposal_pk=proposal.pk,
        note=" · ".join(filter(None, [f"proposal {proposal.pk}", provenance.note])),
    )
    revisions = []
    for path in sorted(after):
        try:
            _, revision = write_document(
                assistant=proposal.assistant,
                path=path,
                content=after[path],
                provenance=by,
                expected_hash=documents[path].content_hash if path in documents else "",
            )
        except StaleWrite:  # a concurrent write took the path or changed it since the locked read
            raise ProposalChanged(path) from None
        if revision is not None:
            revisions.append(revision)
    proposal.state, proposal.new_text = Proposal.State.APPROVED, text
    _decided_by(proposal, provenance)
    proposal.save()
    return revisions


@transaction.atomic
def reject_proposal(proposal: Proposal, *, provenance: Provenance) -> Proposal:
    """Reject an open proposal; its fingerprint keeps the pass from proposing it again."""
    proposal = _open_for_update(proposal)
    proposal.state = Proposal.State.REJECTED
    _decided_by(proposal, provenance)
    proposal.save()
    return proposal


def proposal_dict(proposal: Proposal) -> dict[str, Any]:
    """The REST shape of a proposal (docs/design.md, REST API)."""
    return {
        "id": proposal.pk,
        "kind": proposal.kind,
        "state": proposal.state,
        "documents": proposal.documents,
        "new_text": proposal.new_text,
        "sources": proposal.sources,
        "confidence": proposal.confidence,
        "diff": proposal.diff,
        "reason": proposal.reason,
        "created_at": proposal.created_at,
        "target_path": proposal.target_path,
        "decided_by": proposal.decided_by.get_username()
        if proposal.decided_by_id and proposal.decided_by
        else None,
        "decided_at": proposal.decided_at,
    }
