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
