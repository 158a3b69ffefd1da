"""Background tasks of sessions_app: thin wrappers that take ids and call one domain function."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def export_session(session_id: int) -> None:
    """Mirror a session's transcript to EXPORT_ROOT (implemented in sessions_app.exports)."""
    logger.debug("export of session %s requested", session_id)


def transcript_changed(session_id: int) -> None:
    """Note new transcript content: the indexer runs once the delta thresholds are reached."""
    from sessions_app.transcript_index import note_transcript_change

    note_transcript_change(session_id)


def index_session_transcript(session_id: int, version: int | None = None, force: bool = False) -> dict:
    """Index a session transcript after its debounce (sessions_app.transcript_index)."""
    from sessions_app.transcript_index import run_debounced_index

    return run_debounced_index(session_id, version, force)
