"""What a forgotten source blocks (docs/design.md, Provenance, consolidation and forgetting).

`memory_app.governance.forget` records each forgotten session, API key or import with the normal-form hashes
of the lines it removed. A later write that is not a person's leaves those lines out (a re-import,
a replayed flush, an agent repeating them), a write naming a forgotten session stores nothing,
and a forgotten session's transcript is not indexed again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from memory_app.governance.lines import is_entry, normalise_line
from memory_app.models import ForgottenSource


def line_hash(text: str) -> str:
    """What `ForgottenSource` keeps of a forgotten line: the SHA-256 of its normal form."""
    return hashlib.sha256(normalise_line(text).encode()).hexdigest()


def forgotten_hashes(assistant_id: int) -> set[str]:
    """The normal-form hashes of every line forgotten from the assistant's memory."""
    hashes: set[str] = set()
    for line_hashes in ForgottenSource.objects.filter(assistant_id=assistant_id).values_list(
        "line_hashes", flat=True
    ):
        hashes.update(line_hashes)
    return hashes


def is_forgotten(assistant_id: int, kind: str, key: int | None) -> bool:
    return (
        key is not None
        and ForgottenSource.objects.filter(assistant_id=assistant_id, kind=kind, key=key).exists()
    )


def is_forgotten_session(session_pk: int) -> bool:
    """Whether a session was forgotten (its transcript is not indexed again)."""
    return ForgottenSource.objects.filter(kind="session", key=session_pk).exists()


def blocked_lines(assistant_id: int, lines: Iterable[str]) -> set[int]:
    """Indexes of ``lines`` that repeat a forgotten line (entries only)."""
    hashes = forgotten_hashes(assistant_id)
    if not hashes:
        return set()
    return {index for index, text in enumerate(lines) if is_entry(text) and line_hash(text) in hashes}
