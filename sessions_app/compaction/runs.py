"""One compaction of a session at a time: the per-session lock, the active `CompactionRun`, its heartbeat, and waiting for another's run to end (docs/design.md §D1)."""

from __future__ import annotations

import logging
import time
from contextlib import ExitStack
from datetime import datetime
from typing import Any

from django.utils import timezone as dj_timezone

from openclaw_site.platform.locks import LockTimeout, session_lock
from sessions_app.compaction.errors import CompactionBusy, SessionGone
from sessions_app.compaction.flush import release_flush
from sessions_app.models import (
    ACTIVE_RUN_STATES,
    CompactionRun,
    RunState,
    Session,
)

logger = logging.getLogger(__name__)


WAIT_POLL_SECONDS = 0.25


def compaction_lock_name(session_id: int) -> str:
    return f"compaction:{session_id}"


def hold_compaction_lock(stack: ExitStack, session: Session) -> None:
    """Take the session's compaction lock for the life of ``stack``; raise CompactionBusy if held.

    A Postgres session-level advisory lock on a connection of its own (openclaw_site.platform.locks): a
    worker that dies, however it dies, ends that connection and the lock with it, so a retry can
    start at once instead of waiting for a stale timeout (docs/design.md, Limits and refusals).
    """
    try:
        stack.enter_context(session_lock(compaction_lock_name(session.pk), timeout_seconds=0))
    except LockTimeout:
        active = CompactionRun.objects.filter(session=session, state__in=ACTIVE_RUN_STATES).first()
        raise CompactionBusy(active or CompactionRun(session=session, trigger="manual")) from None


def acquire_run(session: Session, *, trigger: str, instructions: str | None) -> CompactionRun:
    """Create the session's active run; the caller holds the compaction lock.

    Holding the lock proves that no live worker runs a compaction of this session, so an active
    run found now was left by a worker that died (killed, out of memory, host lost): it is failed
    and this run takes its place.
    """
    now = dj_timezone.now()
    for abandoned in CompactionRun.objects.filter(session=session, state=RunState.FLUSHING):
        _release_abandoned_flush(session, abandoned)
    CompactionRun.objects.filter(session=session, state__in=ACTIVE_RUN_STATES).update(
        state=RunState.FAILED,
        reason="stale: its worker is gone (the compaction lock was free); taken over by a new run",
        finished_at=now,
        updated_at=now,
    )
    return CompactionRun.objects.create(session=session, trigger=trigger, instructions=instructions or "")


def _release_abandoned_flush(session: Session, run: CompactionRun) -> None:
    """A run that died while flushing claimed this cycle's flush but never finished it: undo the claim."""
    before = (run.flush_details or {}).get("before")
    if not isinstance(before, dict):
        return
    previous_at = before.get("memory_flush_at")
    release_flush(
        session.pk,
        cycle=session.compaction_count,
        previous=before.get("memory_flush_compaction_count"),
        previous_at=datetime.fromisoformat(previous_at) if previous_at else None,
    )


def advance(run: CompactionRun, state: str, **fields: Any) -> None:
    """Move the run to a new state (which also proves the worker is alive)."""
    run.state = state
    for name, value in fields.items():
        setattr(run, name, value)
    if state in (RunState.COMMITTED, RunState.FAILED):
        run.finished_at = dj_timezone.now()
    run.save(force_update=True)  # never re-inserts a run deleted with its session


def heartbeat(run: CompactionRun) -> None:
    """Note that the run is alive; stop it before the next model call if its session was deleted."""
    if not CompactionRun.objects.filter(pk=run.pk).update(updated_at=dj_timezone.now()):
        raise SessionGone(f"compaction run {run.pk} is gone with its session")


def wait_for_active_run(session_id: int, *, timeout_seconds: float) -> CompactionRun | None:
    """Wait until the session has no active run; return the run that finished last."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if not CompactionRun.objects.filter(session_id=session_id, state__in=ACTIVE_RUN_STATES).exists():
            break
        time.sleep(WAIT_POLL_SECONDS)
    return CompactionRun.objects.filter(session_id=session_id).order_by("-created_at", "-id").first()
