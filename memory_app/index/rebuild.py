"""Reindexing an assistant: incremental runs, and a new generation built beside the active one and switched to in one transaction (docs/design.md §D8-D9)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db import IntegrityError, transaction
from django.utils import timezone

from memory_app.index import config
from memory_app.index.entries import (
    IndexProgressReport,
    ProgressCallback,
    SourceEntry,
    document_entry,
    external_sources,
)
from memory_app.index.rows import (
    IndexOutcome,
    get_state,
    index_entries,
    start_build,
    target_generations,
    text_only,
)
from memory_app.index.text_index import ensure_text_index
from memory_app.index.vectors import ensure_vector_index
from memory_app.models import (
    IndexState,
    MemoryChunk,
    MemoryDocument,
    Source,
)
from openclaw_site.jobs.runs import WorkGone
from openclaw_site.models import Assistant
from openclaw_site.platform.locks import LockTimeout, session_lock
from providers.embeddings import Embedder, get_embedder

logger = logging.getLogger(__name__)


# Entries chunked and embedded together during a full reindex (one embed pass per group).
REINDEX_GROUP_SIZE = 64


def _entries(assistant: Assistant, sources: Iterable[str], *, changed_only: bool) -> Iterable[SourceEntry]:
    """Yield the entries of the assistant's indexed sources, documents first."""
    for source in sources:
        if source == Source.MEMORY:
            for document in MemoryDocument.objects.filter(assistant=assistant).order_by("path").iterator():
                yield document_entry(document)
        elif source in external_sources:
            provider = external_sources[source]
            for key in provider.keys(assistant.pk, changed_only=changed_only):
                entry = provider.load(assistant.pk, key)
                if entry is not None:
                    yield entry


def _count_entries(assistant: Assistant, sources: Iterable[str], *, changed_only: bool) -> int:
    total = 0
    for source in sources:
        if source == Source.MEMORY:
            total += MemoryDocument.objects.filter(assistant=assistant).count()
        elif source in external_sources:
            total += len(external_sources[source].keys(assistant.pk, changed_only=changed_only))
    return total


def _groups(entries: Iterable[SourceEntry], size: int) -> Iterable[list[SourceEntry]]:
    group: list[SourceEntry] = []
    for entry in entries:
        group.append(entry)
        if len(group) >= size:
            yield group
            group = []
    if group:
        yield group


def save_progress(assistant_id: int, progress: IndexProgressReport) -> int:
    """Record reindex progress on the IndexState (shown by the task and the dashboard); return
    how many states were updated (none once the assistant is deleted, its state with it)."""
    return IndexState.objects.filter(assistant_id=assistant_id).update(
        progress=progress, updated_at=timezone.now()
    )


ASSISTANT_DELETED = "the assistant was deleted while its index was being built; nothing more was indexed."


@contextmanager
def _stops_when_deleted(assistant_id: int) -> Iterator[None]:
    """Turn the database's refusal to write for a deleted assistant into `WorkGone`.

    A reindex checks that its assistant still exists after every group (`_report`); one deleted
    during a group makes the group's writes fail (a foreign key, a state row gone), and the task
    then stops with a sentence on the Jobs page, not the raw database error (docs/design.md,
    Background work).
    """
    try:
        yield
    except (IntegrityError, ObjectDoesNotExist):
        if Assistant.objects.filter(pk=assistant_id).exists():
            raise
        raise WorkGone(ASSISTANT_DELETED) from None


def reindex_assistant(
    assistant_id: int,
    *,
    full: bool = False,
    progress: ProgressCallback | None = None,
    queue_external: bool = False,
) -> IndexOutcome:
    """Bring an assistant's index up to date; a full run (or a new fingerprint) builds a new
    generation and swaps it in when complete.

    With ``queue_external`` an up-to-date run indexes memory documents itself and hands the
    other sources' entries that lag (new lines, rows still without a vector) to their own index
    jobs, which extend a transcript in slices instead of reading it whole (the periodic refresh).
    """
    assistant = Assistant.objects.filter(pk=assistant_id).first()
    if assistant is None:
        return IndexOutcome(note="the assistant was deleted")
    try:
        # One reindex per assistant at a time, across workers (the second one has nothing to add).
        with (
            session_lock(f"memory-reindex:{assistant_id}", timeout_seconds=0),
            _stops_when_deleted(assistant_id),
        ):
            embedder = get_embedder()
            current = config.fingerprint(assistant, embedder)
            state = get_state(assistant, current)
            if not full and state.fingerprint == current:
                return _incremental(assistant, state, current, embedder, progress, queue_external)
            return _rebuild(assistant, current, embedder, progress)
    except LockTimeout:
        return IndexOutcome(note="another reindex of this assistant is running")


def _report(assistant_id: int, progress: ProgressCallback | None, data: IndexProgressReport) -> None:
    if not save_progress(assistant_id, data) and not Assistant.objects.filter(pk=assistant_id).exists():
        raise WorkGone(ASSISTANT_DELETED)
    if progress is not None:
        progress(data)


def _run(
    assistant: Assistant,
    *,
    generations: list[int],
    current: dict[str, Any],
    embedder: Embedder | None,
    phase: str,
    progress: ProgressCallback | None,
    sources: Sequence[str] | None = None,
) -> IndexOutcome:
    """Index every entry of ``sources`` (default: the fingerprint's) into ``generations`` in
    groups, reporting progress after each group."""
    sources = current["sources"] if sources is None else sources
    # A new generation starts empty: every entry must be written, changed or not.
    changed_only = phase != "building"
    total = _count_entries(assistant, sources, changed_only=changed_only)
    outcome = IndexOutcome(generations=generations)
    done = 0
    _report(
        assistant.pk, progress, {"phase": phase, "done": 0, "total": total, "generation": generations[-1]}
    )
    for group in _groups(_entries(assistant, sources, changed_only=changed_only), REINDEX_GROUP_SIZE):
        outcome.add(
            index_entries(assistant, group, embedder=embedder, current=current, generations=generations)
        )
        done += len(group)
        _report(
            assistant.pk,
            progress,
            {
                "phase": phase,
                "done": done,
                "total": total,
                "generation": generations[-1],
                "embedded": outcome.embedded,
            },
        )
    return outcome


def _incremental(
    assistant: Assistant,
    state: IndexState,
    current: dict[str, Any],
    embedder: Embedder | None,
    progress: ProgressCallback | None,
    queue_external: bool,
) -> IndexOutcome:
    if state.building_generation and state.building_fingerprint != current:
        _abandon_build(assistant)
    state = get_state(assistant, current)
    generations = target_generations(state, current)
    if current.get("dims"):
        ensure_vector_index(int(current["dims"]), assistant.pk)
    ensure_text_index(assistant.pk)
    handed_over = [s for s in current["sources"] if s in external_sources] if queue_external else []
    outcome = _run(
        assistant,
        generations=generations,
        current=current,
        embedder=embedder,
        phase="indexing",
        progress=progress,
        sources=[s for s in current["sources"] if s not in handed_over],
    )
    for source in handed_over:
        outcome.queued += _schedule_lagging(assistant, source, state.active_generation, embedder)
    removed = _remove_orphans(assistant, current["sources"])
    _report(
        assistant.pk,
        progress,
        {
            "phase": "done",
            "done": outcome.entries + outcome.skipped,
            "total": outcome.entries + outcome.skipped,
            "removed": removed,
            "generation": generations[0],
            "embedded": outcome.embedded,
        },
    )
    return outcome


def _schedule_lagging(assistant: Assistant, source: str, generation: int, embedder: Embedder | None) -> int:
    """Queue the source's index job for its entries with new lines or rows without a vector.

    A transcript whose vector job was lost (a crashed worker) has every line indexed, so only its
    text-only rows tell that it lags; without an embedder text-only rows are all there is.
    """
    provider = external_sources[source]
    keys = set(provider.keys(assistant.pk, changed_only=True))
    if embedder is not None:
        waiting = MemoryChunk.objects.filter(
            text_only(), assistant=assistant, generation=generation, source=source
        )
        keys.update(str(pk) for pk in waiting.values_list("session_pk", flat=True).distinct())
    ordered = sorted(keys, key=int)
    if ordered:
        provider.schedule(assistant.pk, ordered)
    return len(ordered)


def _abandon_build(assistant: Assistant) -> None:
    with transaction.atomic():
        state = IndexState.objects.select_for_update(no_key=True).get(assistant=assistant)
        if state.building_generation:
            MemoryChunk.objects.filter(assistant=assistant, generation=state.building_generation).delete()
        state.building_generation, state.building_fingerprint = None, None
        state.save(update_fields=["building_generation", "building_fingerprint", "updated_at"])


def _rebuild(
    assistant: Assistant,
    current: dict[str, Any],
    embedder: Embedder | None,
    progress: ProgressCallback | None,
) -> IndexOutcome:
    state = start_build(assistant, current)
    generation = state.building_generation
    assert generation is not None
    outcome = _run(
        assistant,
        generations=[generation],
        current=current,
        embedder=embedder,
        phase="building",
        progress=progress,
    )
    if _swap(assistant, generation, current):
        _remove_orphans(assistant, current["sources"])
        _report(
            assistant.pk,
            progress,
            {
                "phase": "done",
                "done": outcome.entries + outcome.skipped,
                "total": outcome.entries + outcome.skipped,
                "generation": generation,
                "embedded": outcome.embedded,
            },
        )
    outcome.generations = [generation]
    return outcome


def _swap(assistant: Assistant, generation: int, current: dict[str, Any]) -> bool:
    """Make the built generation the active one and drop every other generation's rows."""
    with transaction.atomic():
        state = IndexState.objects.select_for_update(no_key=True).get(assistant=assistant)
        if state.building_generation != generation or state.building_fingerprint != current:
            return False  # the settings changed again during the build; that build takes over
        state.active_generation, state.fingerprint = generation, current
        state.building_generation, state.building_fingerprint = None, None
        state.last_error = ""
        state.save()
        MemoryChunk.objects.filter(assistant=assistant).exclude(generation=generation).delete()
    return True


def _remove_orphans(assistant: Assistant, sources: Sequence[str]) -> int:
    """Delete rows whose document or session no longer exists, or whose source is off."""
    rows = MemoryChunk.objects.filter(assistant=assistant)
    removed, _ = rows.exclude(source__in=sources).delete()
    memory_paths = MemoryDocument.objects.filter(assistant=assistant).values("path")
    deleted, _ = rows.filter(source=Source.MEMORY).exclude(path__in=memory_paths).delete()
    removed += deleted
    for source, provider in external_sources.items():
        keys = provider.keys(assistant.pk, changed_only=False)
        deleted, _ = rows.filter(source=source).exclude(session_pk__in=[int(k) for k in keys]).delete()
        removed += deleted
    return removed
