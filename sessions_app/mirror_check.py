"""Checking what is derived from the transcripts against them (docs/design.md, Exports: checking the mirrors).

`check_mirrors` goes through the sessions one at a time and counts:

- **the export mirror**: the session's JSONL file against a full rewrite (`session_jsonl_lines`),
  byte for byte, and where they differ, line by line by entry: lines of the rewrite the file lacks
  (all of them when the file is missing), entries the file holds twice, lines no rewrite has (a torn
  line, an entry of nobody's) and entries whose line differs;
- **the transcript index** (the active generation's chunks of the session): the messages the
  indexer renders (`sessions_app.indexing.session_entry`, so silent turns, tool results and other
  messages it leaves out on purpose are not counted as lost) up to ``indexed_upto`` that no chunk
  cites, chunks stored twice, and whether the index is behind the last such message. Behind is a
  problem when the indexer's own rules ask for an index (`index_is_due`); below the delta
  thresholds it is only pending (the periodic refresh takes it).

Reads are bounded per session: one transcript streamed at a time, never every session's messages.
The counts are meant for a quiet system (no export or index job pending).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memory_app.index import config
from memory_app.models import IndexedSource, IndexState, MemoryChunk, Source
from openclaw_site.models import Assistant
from sessions_app.indexing import index_is_due, session_entry
from sessions_app.models import Session
from sessions_app.workspace.exports import export_storage, session_jsonl_lines, transcript_name
from sessions_app.workspace.storage import ExportStorage

# What any non-zero count means something was lost, duplicated or left behind.
PROBLEMS = (
    "sessions_export_differs",
    "export_missing_files",
    "export_missing_lines",
    "export_duplicated_lines",
    "export_extra_lines",
    "export_changed_lines",
    "sessions_index_behind",
    "index_messages_behind",
    "sessions_index_duplicated",
    "index_duplicated_chunks",
    "index_messages_lost",
)
# Work not done yet that nothing has asked for: transcripts below the delta thresholds.
PENDING = ("sessions_index_waiting", "index_messages_waiting")


@dataclass
class MirrorReport:
    sessions_checked: int = 0
    problems: Counter[str] = field(default_factory=Counter)
    pending: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not any(self.problems.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "sessions_checked": self.sessions_checked,
            "problems": {name: self.problems[name] for name in PROBLEMS},
            "pending": {name: self.pending[name] for name in PENDING},
        }


@dataclass(frozen=True)
class ExportCheck:
    differs: bool = False
    missing_file: bool = False
    missing_lines: int = 0
    duplicated_lines: int = 0
    extra_lines: int = 0
    changed_lines: int = 0


@dataclass(frozen=True)
class IndexCheck:
    behind: bool = False
    due: bool = False
    duplicated_chunks: int = 0
    messages_lost: int = 0
    messages_waiting: int = 0


def check_mirrors(
    *, assistant: Assistant | None = None, storage: ExportStorage | None = None
) -> MirrorReport:
    """Check every session (of ``assistant``, if given) against its export file and its index."""
    storage = storage or export_storage()
    sessions = Session.objects.select_related("assistant__team").order_by("pk")
    if assistant is not None:
        sessions = sessions.filter(assistant=assistant)
    report = MirrorReport()
    generations: dict[int, int | None] = {}
    for session in sessions.iterator(chunk_size=100):
        report.sessions_checked += 1
        _count_export(report, check_export(storage, session))
        if session.assistant_id not in generations:
            generations[session.assistant_id] = _active_generation(session.assistant)
        generation = generations[session.assistant_id]
        if generation is not None:
            _count_index(report, check_index(session, generation=generation))
    return report


def _active_generation(assistant: Assistant) -> int | None:
    """Return the generation that answers the assistant's searches; None if transcripts are not indexed."""
    if Source.SESSIONS not in config.indexed_sources(assistant):
        return None
    # No state yet: nothing was indexed, and the first index writes the default generation.
    state = IndexState.objects.filter(assistant=assistant).first() or IndexState(assistant=assistant)
    return state.active_generation


# --- the export file -----------------------------------------------------------------------------


def check_export(storage: ExportStorage, session: Session) -> ExportCheck:
    """Compare the session's transcript file with a full rewrite, byte for byte, then entry by entry."""
    rewrite = _Lines(line.encode("utf-8") for line in session_jsonl_lines(session, upto=session.last_seq))
    expected = {key: digest for key, digest in rewrite if key is not None}
    found = storage.read_lines(transcript_name(session))
    if found is None:
        return ExportCheck(differs=True, missing_file=True, missing_lines=len(expected))
    file = _Lines(found)
    seen: Counter[str] = Counter()
    duplicated = extra = changed = 0
    for key, digest in file:
        if key is None or key not in expected:
            extra += 1
        elif seen[key]:
            duplicated += 1
        elif digest != expected[key]:
            changed += 1
        if key is not None:
            seen[key] += 1
    return ExportCheck(
        differs=file.whole.digest() != rewrite.whole.digest(),
        missing_lines=len(expected.keys() - seen.keys()),
        duplicated_lines=duplicated,
        extra_lines=extra,
        changed_lines=changed,
    )


class _Lines:
    """Pass JSONL lines through as (entry key, digest of the line), hashing all of them as one text."""

    def __init__(self, lines: Iterable[bytes]) -> None:
        self._lines = lines
        self.whole = hashlib.sha256()

    def __iter__(self) -> Iterator[tuple[str | None, bytes]]:
        for line in self._lines:
            self.whole.update(line)
            yield _entry_key(line), hashlib.sha256(line).digest()


def _entry_key(line: bytes) -> str | None:
    """Return what a line is: its ``type`` and ``id`` (the header's id is the session's); None if unreadable."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return f"{data.get('type')}:{data.get('id')}" if isinstance(data, dict) else None


def _count_export(report: MirrorReport, check: ExportCheck) -> None:
    problems = report.problems
    problems["sessions_export_differs"] += check.differs
    problems["export_missing_files"] += check.missing_file
    problems["export_missing_lines"] += check.missing_lines
    problems["export_duplicated_lines"] += check.duplicated_lines
    problems["export_extra_lines"] += check.extra_lines
    problems["export_changed_lines"] += check.changed_lines


# --- the transcript index ------------------------------------------------------------------------


def check_index(session: Session, *, generation: int) -> IndexCheck:
    """Compare the messages the indexer renders with the chunks of ``generation`` that cite them."""
    indexable = session_entry(session).line_map or ()  # the seq of each message the indexer renders
    upto = (
        IndexedSource.objects.filter(
            assistant_id=session.assistant_id, source=Source.SESSIONS, key=str(session.pk)
        )
        .values_list("indexed_upto", flat=True)
        .first()
    ) or 0
    chunks = MemoryChunk.objects.filter(
        assistant_id=session.assistant_id,
        source=Source.SESSIONS,
        session_pk=session.pk,
        generation=generation,
    ).values_list("start_line", "end_line", "hash", "line_numbers")
    cited: set[int] = set()
    copies: Counter[tuple[int, int, str]] = Counter()
    for start, end, digest, seqs in chunks.iterator(chunk_size=500):
        copies[(start, end, digest)] += 1
        cited.update(seqs)
    waiting = sum(1 for seq in indexable if seq > upto)
    return IndexCheck(
        behind=waiting > 0,
        due=waiting > 0 and index_is_due(session),
        duplicated_chunks=sum(n - 1 for n in copies.values()),
        messages_lost=sum(1 for seq in indexable if seq <= upto and seq not in cited),
        messages_waiting=waiting,
    )


def _count_index(report: MirrorReport, check: IndexCheck) -> None:
    report.problems["sessions_index_duplicated"] += check.duplicated_chunks > 0
    report.problems["index_duplicated_chunks"] += check.duplicated_chunks
    report.problems["index_messages_lost"] += check.messages_lost
    if check.due:
        report.problems["sessions_index_behind"] += 1
        report.problems["index_messages_behind"] += check.messages_waiting
    elif check.behind:
        report.pending["sessions_index_waiting"] += 1
        report.pending["index_messages_waiting"] += check.messages_waiting
