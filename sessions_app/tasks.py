"""Background tasks of sessions_app: thin wrappers that take ids and call one domain function."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def export_session(session_id: int) -> None:
    """Mirror a session's transcript to EXPORT_ROOT (implemented in sessions_app.exports)."""
    logger.debug("export of session %s requested", session_id)


def transcript_changed(session_id: int) -> None:
    """Note new transcript content for the session indexer."""
    logger.debug("transcript of session %s changed", session_id)


def memory_flush_task(session_id: int) -> dict:
    """Run the pre-compaction memory flush of a session (sessions_app.flush)."""
    from sessions_app.flush import run_memory_flush

    return run_memory_flush(session_id=session_id).as_dict()


def compact_session_task(session_id: int, trigger: str = "threshold") -> dict:
    """Compact a session through the one entry point; a busy or refused compaction is reported."""
    from sessions_app.compaction import CompactionBusy, CompactionFailed, CompactionRefused, compact_session

    try:
        run = compact_session(session_id=session_id, trigger=trigger)
    except CompactionBusy as busy:
        return {"status": "busy", "run": busy.run.pk}
    except CompactionRefused as refused:
        return {"status": "refused", "code": refused.code, "run": refused.run.pk if refused.run else None}
    except CompactionFailed as failed:
        return {"status": "failed", "reason": failed.run.reason, "run": failed.run.pk}
    if run is None:
        return {"status": "not_due"}
    return {"status": run.state, "run": run.pk, "entry": run.entry.entry_id if run.entry else None}
