"""The team's background tasks for the dashboard's Jobs page, read from their TaskRecord rows.

`openclaw_site.jobs.tasks.enqueue` writes each task's record, with its team, when the task is queued,
and `run_tracked` keeps its state, times, progress and error there; so the page shows exactly the
team's own tasks, whatever their functions' parameters are called.

The page groups the records in SQL: the runs of one job (the same ``coalesce_key``, e.g. every
export of session 12) in one state are one row with their count, the changes folded into them and
the latest run's times, error and progress; a task without a key is a row of its own. Failures
come first, then what is running or waiting, then what succeeded, newest first in each.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Case, Count, IntegerField, Max, Min, QuerySet, Sum, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from openclaw_site.models import Assistant, TaskRecord, TaskState, Team
from openclaw_site.selectors import task_record_list

ACTIVE_STATES = (TaskState.QUEUED, TaskState.RUNNING)
PAGE_SIZE = 25

# Failures first (what someone opens the page for), then running, waiting, done.
_STATE_RANK = Case(
    When(state=TaskState.FAILED, then=Value(0)),
    When(state=TaskState.RUNNING, then=Value(1)),
    When(state=TaskState.QUEUED, then=Value(2)),
    default=Value(3),
    output_field=IntegerField(),
)

STATE_WORDS: dict[str, str] = {
    TaskState.QUEUED: "waiting",
    TaskState.RUNNING: "running",
    TaskState.SUCCEEDED: "done",
    TaskState.FAILED: "failed",
}


@dataclass(frozen=True)
class JobRow:
    """One row of the Jobs page: a task, or the runs of one job in one state."""

    id: str
    name: str
    state: str  # queued | running | succeeded | failed
    started: datetime | None
    stopped: datetime | None
    error: str
    progress_done: int | None = None
    progress_total: int | None = None
    progress_message: str = ""
    coalesced: int = 0  # changes folded into these runs before they started
    runs: int = 1
    first_at: datetime | None = None
    assistant: Assistant | None = None
    object_ids: dict[str, int] | None = None

    @property
    def duration(self) -> timedelta | None:
        if self.started and self.stopped:
            return self.stopped - self.started
        return None

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def state_text(self) -> str:
        return STATE_WORDS.get(self.state, self.state)

    @property
    def duration_text(self) -> str:
        seconds = self.duration.total_seconds() if self.duration else 0.0
        return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"

    @property
    def label(self) -> str:
        """The task's kind in words: ``export_session`` → "Export session"."""
        return kind_label(self.name)

    @property
    def session_id(self) -> int | None:
        return (self.object_ids or {}).get("session")

    @property
    def document_id(self) -> int | None:
        return (self.object_ids or {}).get("document")

    @property
    def progress_percent(self) -> int:
        if not self.progress_total:
            return 0
        return min(100, round(100 * (self.progress_done or 0) / self.progress_total))


def kind_label(kind: str) -> str:
    """A task kind in words: ``sessions_app.tasks.export_session`` → "Export session"."""
    return kind.rsplit(".", 1)[-1].replace("_", " ").capitalize()


@dataclass(frozen=True)
class JobFilter:
    """What the page is narrowed to; empty fields narrow nothing."""

    state: str = ""
    kind: str = ""
    assistant: Assistant | None = None


def filtered_records(team: Team, where: JobFilter) -> QuerySet[TaskRecord]:
    """Return the team's records that match the filter."""
    records = task_record_list(team=team)
    if where.state:
        records = records.filter(state=where.state)
    if where.kind:
        records = records.filter(kind=where.kind)
    if where.assistant is not None:
        records = records.filter(assistant=where.assistant)
    return records


def team_kinds(team: Team) -> list[str]:
    """Return the kinds of task the team has records of, for the filter."""
    return list(task_record_list(team=team).order_by("kind").values_list("kind", flat=True).distinct())


def grouped(records: QuerySet[TaskRecord]) -> QuerySet[Any]:
    """Group the records by job and state (one GROUP BY), failures first, then newest first."""
    return (
        records.order_by()
        .annotate(job=Coalesce("coalesce_key", "task_id"))
        .values("job", "state")
        .annotate(
            runs=Count("id"),
            latest=Max("id"),
            first_at=Min("created_at"),
            last_at=Max(Coalesce("finished_at", "started_at", "created_at")),
            folded=Sum("coalesced"),
            rank=_STATE_RANK,
        )
        .order_by("rank", "-last_at", "-latest")
    )


def job_page(
    team: Team, where: JobFilter, *, number: Any = 1, size: int = PAGE_SIZE
) -> tuple[Page[Any], list[JobRow]]:
    """Return one page of grouped rows and their JobRows (the latest run of each, one more query)."""
    page = Paginator(grouped(filtered_records(team, where)), size).get_page(number)
    groups = list(page.object_list)
    latest = TaskRecord.objects.select_related("assistant").in_bulk([g["latest"] for g in groups])
    return page, [job_row(latest[g["latest"]], group=g) for g in groups]


def job_row(record: TaskRecord, *, group: dict[str, Any] | None = None) -> JobRow:
    """Return the row of a task record (a queued task shows since when it waits), with its group's counts."""
    progress = record.progress or {}
    group = group or {}
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
        coalesced=group.get("folded", record.coalesced) or 0,
        runs=group.get("runs", 1),
        first_at=group.get("first_at"),
        assistant=record.assistant,
        object_ids=record.object_ids or {},
    )


# The jobs page polls while a task is queued or running, unless it has waited this long: then no
# worker is taking tasks, and polling every 2 s would not change that.
ACTIVE_WINDOW = timedelta(minutes=10)


def worth_polling(rows: list[JobRow]) -> bool:
    """True when a queued or running task started recently enough to finish while one watches."""
    cutoff = timezone.now() - ACTIVE_WINDOW
    return any(row.is_active and (row.started is None or row.started > cutoff) for row in rows)
