"""Keeping the task records bounded and true: finished records purged after the retention, queued and running ones whose task was lost marked failed (docs/design.md, Background work)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django_q.models import Task

from openclaw_site.jobs.runs import live_records
from openclaw_site.models import TaskRecord, TaskState

logger = logging.getLogger(__name__)


FINISHED_STATES = (TaskState.SUCCEEDED, TaskState.FAILED)


# The retention purge deletes at most this many records a run (every 10 minutes), so one run never
# holds locks on a large table for long.
PURGE_BATCH = 10_000


# A running record past the task timeout by this much lost its worker (`_fail_overdue_running`).
OVERDUE_MARGIN_SECONDS = 60


def purge_task_records() -> dict[str, int]:
    """Delete finished records past the retention; fail pending ones whose task was lost and
    running ones whose worker was lost.

    Scheduled every 10 minutes (migration openclaw_site/0004). One bounded DELETE of the oldest
    finished records (`PURGE_BATCH`), so the table stays as long as the retention; one of
    django-q2's task outcomes past the same retention.
    """
    now = timezone.now()
    cutoff = now - timedelta(days=settings.TASK_RETENTION_DAYS)
    oldest = (
        TaskRecord.objects.filter(state__in=FINISHED_STATES, finished_at__lt=cutoff)
        .order_by("finished_at")
        .values("pk")[:PURGE_BATCH]
    )
    deleted, _ = TaskRecord.objects.filter(pk__in=oldest).delete()
    # django-q2's own outcomes (settings.Q_CLUSTER's save_limit 0: kept without its prune), likewise.
    results = Task.objects.filter(stopped__lt=cutoff).order_by("stopped").values("pk")[:PURGE_BATCH]
    deleted_results, _ = Task.objects.filter(pk__in=results).delete()
    return {
        "deleted": deleted,
        "released": _fail_lost_pending(now),
        "stopped": _fail_overdue_running(now),
        "deleted_results": deleted_results,
    }


def _fail_lost_pending(now: Any) -> int:
    """Fail pending coalescing records not started within django-q2's retry time.

    django-q2 delivers a task again after ``retry`` seconds when its worker died; a record still
    queued after that has most likely lost its task, and every later change would fold into it.
    Failing it frees its key. Should its task run after all, `run_tracked` records that run.
    """
    lost_after = timedelta(seconds=int(settings.Q_CLUSTER["retry"]))
    return TaskRecord.objects.filter(
        state=TaskState.QUEUED, coalesce_key__isnull=False, created_at__lt=now - lost_after
    ).update(
        state=TaskState.FAILED,
        error=f"not started within {int(lost_after.total_seconds())} s: its task was lost; "
        "the next change queues a new one",
        finished_at=now,
        updated_at=now,
    )


def _fail_overdue_running(now: Any) -> int:
    """Fail running records that started longer ago than django-q2's task timeout.

    No task runs past the timeout: django-q2 stops the worker of one that does. A record still
    running after that lost its worker (stopped at the timeout, killed, its host gone). With the
    Redis broker nothing delivers its task again, so without this the Jobs page would show it
    running for good; should the ORM broker deliver it again, `run_tracked` records that run.
    """
    timeout = int(settings.Q_CLUSTER["timeout"])
    overdue = now - timedelta(seconds=timeout + OVERDUE_MARGIN_SECONDS)
    return (
        live_records()
        .filter(state=TaskState.RUNNING, started_at__lt=overdue)
        .update(
            state=TaskState.FAILED,
            error=f"running longer than the task timeout ({timeout} s): its worker stopped or was stopped",
            finished_at=now,
            updated_at=now,
        )
    )
