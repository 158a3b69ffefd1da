"""Reads of django-q2's task tables for the dashboard's jobs page, scoped to one team.

django-q2 knows nothing about teams, so a task is attributed to a team through its arguments: our
tasks take ids (style.md) named ``session_id``, ``assistant_id`` or ``document_id``, which we look up
under the caller's team. A task whose owner cannot be established is not shown to anyone, which is
the safe direction.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from django.utils import timezone
from django.utils.module_loading import import_string

from openclaw_site.models import Team

RECENT_TASKS = 200


@dataclass(frozen=True)
class JobRow:
    """One background task as the jobs page shows it."""

    id: str
    name: str
    func: str
    state: str  # queued | running | succeeded | failed
    started: datetime | None
    stopped: datetime | None
    error: str
    result: Any
    attempts: int
    progress_done: int | None = None
    progress_total: int | None = None
    progress_message: str = ""

    @property
    def duration(self) -> timedelta | None:
        if self.started and self.stopped:
            return self.stopped - self.started
        return None

    @property
    def is_active(self) -> bool:
        return self.state in ("queued", "running")

    @property
    def duration_text(self) -> str:
        seconds = self.duration.total_seconds() if self.duration else 0.0
        return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"

    @property
    def label(self) -> str:
        """The task function's name in words: ``export_session`` → "Export session"."""
        return self.func.rsplit(".", 1)[-1].replace("_", " ").capitalize()

    @property
    def progress_percent(self) -> int:
        if not self.progress_total:
            return 0
        return min(100, round(100 * (self.progress_done or 0) / self.progress_total))


def _owner_lookups() -> dict[str, Callable[[int], int | None]]:
    from memory_app.models import MemoryDocument
    from openclaw_site.models import Assistant
    from sessions_app.models import CompactionRun, Session

    def team_of(model: Any, path: str) -> Callable[[int], int | None]:
        # Cached per page view: a burst of tasks usually names the same few sessions.
        return lru_cache(maxsize=None)(
            lambda pk: model.objects.filter(pk=pk).values_list(path, flat=True).first()
        )

    return {
        "session_id": team_of(Session, "assistant__team_id"),
        "assistant_id": team_of(Assistant, "team_id"),
        "document_id": team_of(MemoryDocument, "assistant__team_id"),
        "run_id": team_of(CompactionRun, "session__assistant__team_id"),
        "team_id": lambda pk: pk,
    }


@lru_cache(maxsize=256)
def _parameter_names(func: str) -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(import_string(func)).parameters)
    except (ImportError, ValueError, TypeError, AttributeError):
        return ()


def task_team_id(
    func: str, args: Any, kwargs: Any, lookups: dict[str, Callable[[int], int | None]] | None = None
) -> int | None:
    """Return the id of the team a task works for, from its id arguments; None if unknown."""
    named = dict(zip(_parameter_names(func), args or ()))
    named.update(kwargs or {})
    for name, lookup in (lookups or _owner_lookups()).items():
        value = named.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return lookup(value)
    return None


def _error_text(result: Any) -> str:
    return str(result)[:4000] if result is not None else ""


def tracked_jobs(team: Team, *, limit: int) -> list[JobRow]:
    """Return the team's tracked tasks (`TaskRecord`, with their progress), newest first."""
    from openclaw_site.models import TaskRecord
    from openclaw_site.tasks import task_status

    rows = []
    for record in TaskRecord.objects.filter(team=team).order_by("-created_at")[:limit]:
        status = task_status(record)
        progress = status["progress"] or {}
        rows.append(
            JobRow(
                id=record.task_id,
                name=record.kind,
                func=record.kind,
                state=status["state"],
                started=status["started_at"] or record.created_at,
                stopped=status["finished_at"],
                error=status["error"] or "",
                result=status["result"],
                attempts=status["attempts"] or 0,
                progress_done=progress.get("done"),
                progress_total=progress.get("total"),
                progress_message=str(progress.get("message", "")),
            )
        )
    return rows


# The jobs page polls while a task is queued or running, unless it has waited this long: then no
# worker is taking tasks, and polling every 2 s would not change that.
ACTIVE_WINDOW = timedelta(minutes=10)


def worth_polling(rows: list[JobRow]) -> bool:
    """True when a queued or running task started recently enough to finish while one watches."""
    cutoff = timezone.now() - ACTIVE_WINDOW
    return any(row.is_active and (row.started is None or row.started > cutoff) for row in rows)


def team_jobs(team: Team, *, limit: int = 100) -> list[JobRow]:
    """Return the team's tracked and untracked tasks, queued and running first, then newest first."""
    rows = tracked_jobs(team, limit=limit) + untracked_jobs(team)
    active = [row for row in rows if row.state in ("queued", "running")]
    done = sorted(
        (row for row in rows if row not in active),
        key=lambda row: row.stopped or row.started or timezone.now(),
        reverse=True,
    )
    return (active + done)[:limit]


def untracked_jobs(team: Team) -> list[JobRow]:
    """Return django-q2's own rows of the team's untracked tasks (exports, transcript indexing...)."""
    from django_q.models import OrmQ, Task

    rows: list[JobRow] = []
    now = timezone.now()
    lookups = _owner_lookups()
    for queued in OrmQ.objects.order_by("-id")[:RECENT_TASKS]:
        package = queued.task
        if (
            task_team_id(str(package.get("func", "")), package.get("args"), package.get("kwargs"), lookups)
            != team.pk
        ):
            continue
        running = queued.lock is not None and queued.lock > now
        rows.append(
            JobRow(
                id=str(package.get("id", "")),
                name=str(package.get("name") or ""),
                func=str(package.get("func", "")),
                state="running" if running else "queued",
                started=package.get("started"),
                stopped=None,
                error="",
                result=None,
                attempts=0,
            )
        )
    for task in Task.objects.order_by("-stopped")[:RECENT_TASKS]:
        if task_team_id(task.func, task.args, task.kwargs, lookups) != team.pk:
            continue
        rows.append(
            JobRow(
                id=task.id,
                name=task.name,
                func=task.func,
                state="succeeded" if task.success else "failed",
                started=task.started,
                stopped=task.stopped,
                error="" if task.success else _error_text(task.result),
                result=task.result if task.success else None,
                attempts=task.attempt_count,
            )
        )
    return rows
