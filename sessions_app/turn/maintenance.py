"""After a turn: the memory flush or compaction its session's token figures call for (docs/design.md §D2)."""

from __future__ import annotations

import logging
from typing import Any

from openclaw_site.jobs.tasks import TaskQueue, enqueue
from sessions_app.compaction.flush import skip_reason
from sessions_app.context.figures import TokenFigures, token_figures
from sessions_app.models import Session
from sessions_app.selectors import session_owner
from sessions_app.transcript import read_session

logger = logging.getLogger(__name__)


def schedule_maintenance(
    session_id: int, *, prompt_estimate: int = 0, session: Session | None = None
) -> dict[str, Any]:
    """Queue the compaction (threshold) or the flush the session's figures call for, after commit.

    Called after every successful turn and after a REST ingest; `prompt_estimate` is the next
    prompt when it is known (before a turn's model call), as in OpenClaw's projected count.
    `session` is the row as the caller's append left it (locked and saved), so it is not read again.
    """
    if session is None:
        session = read_session(session_id)
    return maintenance_for(session, token_figures(session, prompt_estimate=prompt_estimate))


def maintenance_for(session: Session, figures: TokenFigures) -> dict[str, Any]:
    """Queue what `figures` (the session's, computed by the caller) call for; see `schedule_maintenance`."""
    session_id = session.pk
    if figures.compaction_due:
        enqueue(
            "sessions_app.tasks.compact_session_task",
            session_id,
            "threshold",
            owner=session_owner(session=session),
            task_name=f"compact-{session_id}-{session.compaction_count}",
            queue=TaskQueue.URGENT,
            coalesce_key=f"compact-session:{session_id}",
        )
        return {"compaction": True, "flush": False}
    if figures.flush_reason and skip_reason(session) is None:
        enqueue(
            "sessions_app.tasks.memory_flush_task",
            session_id,
            owner=session_owner(session=session),
            task_name=f"flush-{session_id}-{session.compaction_count}",
            queue=TaskQueue.URGENT,
            coalesce_key=f"flush-session:{session_id}",
        )
        return {"compaction": False, "flush": True, "flush_reason": figures.flush_reason}
    return {"compaction": False, "flush": False}
