"""The team's background tasks for the dashboard's jobs page, read from their TaskRecord rows.

`openclaw_site.tasks.enqueue` writes each task's record, with its team, when the task is queued,
and `run_tracked` keeps its state, times, progress and error there; so the page shows exactly the
team's own tasks, whatever their functions' parameters are called.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from openclaw_site.models import TaskRecord, TaskState, Team
from openclaw_site.selectors import task_record_list

ACTIVE_STATES = (TaskState.QUEUED, TaskState.RUNNING)


@dataclass(frozen=True)
class JobRow:
    """One background task as the jobs page shows it."""

    id: str
    name: str
    state: str  # queued | running | succeeded | failed
    started: datetime | None
    stopped: datetime | None
    error: str
    progress_done: int | None = None
    progress_total: int | None = None
    progress_message: str = ""
    coalesced: int = 0  # later changes folded into this job before it started

    @property
    def duration(self) -> timedelta | None:
        if self.started and self.stopped:
            return self.stopped - self.started
        return None

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def duration_text(self) -> str:
        seconds = self.duration.total_seconds() if self.duration else 0.0
        return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"

    @property
    def label(self) -> str:
        """The task's kind in words: ``export_session`` → "Export session"."""
        return self.name.rsplit(".", 1)[-1].replace("_", " ").capitalize()

    @property
    def progress_percent(self) -> int:
        if not self.progress_total:
            return 0
        return min(100, round(100 * (self.progress_done or 0) / self.progress_total))


def job_row(record: TaskRecord) -> JobRow:
    """Return the jobs page's row of a task record (a queued task shows since when it waits)."""
    progress = record.progress or {}
    return JobRow(
        id=record.task_id,
        name=record.kind,
        state=record.state,
        started=record.started_at or record.created_at,
        stopped=record.finished_at,
        error=record.error,
        progress_done=progress.get("done"),
        progress_total=progress.get("total"),
        progress_message=str(progress.get("message", "")),
        coalesced=record.coalesced,
    )


def team_jobs(team: Team, *, limit: int = 100) -> list[JobRow]:
    """Return the team's tasks: queued and running first, then the finished ones, newest first."""
    records = task_record_list(team=team)
    active = [job_row(record) for record in records.filter(state__in=ACTIVE_STATES)[:limit]]
    done = sorted(
        (job_row(record) for record in records.exclude(state__in=ACTIVE_STATES)[:limit]),
        key=lambda row: row.stopped or row.started or timezone.now(),
        reverse=True,
    )
    return (active + done)[:limit]


# The jobs page polls while a task is queued or running, unless it has waited this long: then no
# worker is taking tasks, and polling every 2 s would not change that.
ACTIVE_WINDOW = timedelta(minutes=10)


def worth_polling(rows: list[JobRow]) -> bool:
    """True when a queued or running task started recently enough to finish while one watches."""
    cutoff = timezone.now() - ACTIVE_WINDOW
    return any(row.is_active and (row.started is None or row.started > cutoff) for row in rows)
