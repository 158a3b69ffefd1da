"""Background tasks of sessions_app: thin wrappers that take ids and call one domain function.

Every export task brings files up to what Postgres holds (appending to transcripts, rewriting the
rest; docs/design.md, Exports), so running one twice, late, or after a worker crashed half-way
(django-q2 redelivers it) leaves the same files: retries are safe.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from memory_app.index.rows import IndexOutcomeReport
from openclaw_site.jobs.runs import Skipped
from sessions_app.workspace import exports, staging

if TYPE_CHECKING:
    from sessions_app.compaction.errors import CompactionError
    from sessions_app.compaction.flush import FlushOutcomeDict

logger = logging.getLogger(__name__)


def export_session(session_id: int) -> None:
    """Mirror a session's transcript and its assistant's sessions.json to EXPORT_ROOT."""
    if not exports.export_session(session_id):
        logger.info("session %s no longer exists; nothing to export", session_id)


def export_sessions_index(assistant_id: int) -> None:
    """Update sessions.json and drop transcripts of deleted or renamed sessions."""
    exports.export_sessions_index(assistant_id)


def export_memory(assistant_id: int, path: str) -> None:
    """Mirror one memory document (or remove its file after a delete)."""
    exports.export_memory_document(assistant_id, path)


def export_assistant_metadata(assistant_id: int) -> None:
    """Mirror an assistant's own fields to assistant.json."""
    exports.export_assistant_metadata(assistant_id)


def export_assistant(assistant_id: int) -> None:
    """Rewrite an assistant's whole workspace (used after an import and for repairs)."""
    exports.export_assistant(assistant_id)


def remove_workspace(team_slug: str, assistant_slug: str) -> None:
    """Remove a deleted assistant's files from the export mirror."""
    exports.remove_workspace(team_slug, assistant_slug)


def remove_abandoned_uploads() -> int:
    """Remove staged import uploads nobody confirmed in time (scheduled every 10 minutes)."""
    return staging.remove_expired_uploads()


def transcript_changed(session_id: int) -> None:
    """Note new transcript content: the indexer runs once the delta thresholds are reached."""
    from sessions_app.indexing import note_transcript_change

    note_transcript_change(session_id)


def index_session_transcript(session_id: int, force: bool = False) -> IndexOutcomeReport | Skipped:
    """Index a session transcript after its debounce (sessions_app.indexing)."""
    from sessions_app.indexing import run_debounced_index

    return run_debounced_index(session_id, force)


def fill_session_vectors(session_id: int) -> dict[str, Any]:
    """Embed a busy transcript's waiting rows beside its index run (sessions_app.indexing)."""
    from sessions_app.indexing import fill_session_vectors as fill

    return fill(session_id)


def memory_flush_task(session_id: int) -> FlushOutcomeDict:
    """Run the pre-compaction memory flush of a session (sessions_app.compaction.flush)."""
    from sessions_app.compaction.flush import run_memory_flush

    return run_memory_flush(session_id=session_id).as_dict()


def compact_session_task(session_id: int, trigger: str = "threshold") -> dict[str, Any]:
    """Compact a session through the one entry point; a busy, refused or failed compaction is reported."""
    from sessions_app.compaction.compact import compact_session
    from sessions_app.compaction.errors import CompactionError

    try:
        run = compact_session(session_id=session_id, trigger=trigger)
    except CompactionError as error:  # the run (when there is one) records why; the task succeeded
        return compaction_report(error)
    if run is None:
        return {"status": "not_due"}
    return {"status": run.state, "run": run.pk, "entry": run.entry.entry_id if run.entry else None}


def compaction_report(error: CompactionError) -> dict[str, Any]:
    """A compaction that did not happen, as a task's result says it (the Jobs page, `GET /tasks/`):
    its outcome (busy, refused, failed), the error's code and message, its run and the run's reason."""
    run = error.run
    return {
        "status": error.outcome,
        "code": error.code,
        "message": error.message,
        "run": run.pk if run is not None else None,
        "reason": run.reason if run is not None else "",
    }
