"""A debounce that works across worker processes, kept in `IndexedSource` rows.

A change records a request (`request`), which sets the row's ``due_at``, then enqueues the index
job, one pending per document or session (`openclaw_site.jobs.tasks`, coalescing). The job asks
`take_turn` when it starts: while the request is not due, it hands its wait back to the queue
(`openclaw_site.jobs.runs.defer_until`) instead of sleeping in a worker, queued again so later changes
fold into it; once due, it takes the request (the row is cleared, so the next change starts a new
one) and indexes what is there then.

When a request falls due: ``delay`` after the latest change, but no later than ``max_delay`` after
the first change not yet taken (``due_by``). With ``max_delay == delay`` that is a fixed delay from
the first change, later ones joining its batch: OpenClaw's session watcher, which starts its 5 s
timer only when none runs (`SESSION_INDEX_DEBOUNCE_SECONDS`). A larger ``max_delay`` is a trailing
debounce, OpenClaw's 1.5 s memory watcher (`MEMORY_INDEX_DEBOUNCE_SECONDS`), capped so that a
document saved without pause is still indexed every `MEMORY_INDEX_MAX_WAIT_SECONDS` (5 s)
(docs/openclaw-behaviour.md §4.6, docs/design.md, Background work).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import F, Value
from django.db.models.functions import Coalesce, Least
from django.utils import timezone

from memory_app.models import IndexedSource


def request(
    *, assistant_id: int, source: str, key: str, delay_seconds: float, max_delay_seconds: float
) -> datetime | None:
    """Record a change; return when its request falls due (module docstring).

    None if an index job took the request in the meantime (it reads the change).
    """
    now = timezone.now()
    trailing = now + timedelta(seconds=max(0.0, delay_seconds))
    latest = now + timedelta(seconds=max(0.0, delay_seconds, max_delay_seconds))
    row, _ = IndexedSource.objects.get_or_create(assistant_id=assistant_id, source=source, key=key)
    # One UPDATE, so concurrent changes do not lose each other's deadline: the right-hand sides
    # read the row as it was.
    due_by = Coalesce(F("due_by"), Value(latest))
    IndexedSource.objects.filter(pk=row.pk).update(due_by=due_by, due_at=Least(Value(trailing), due_by))
    return IndexedSource.objects.values_list("due_at", flat=True).get(pk=row.pk)


def take_turn(*, assistant_id: int, source: str, key: str) -> datetime | None:
    """Return when the pending request falls due if that is still ahead; else take it, return None.

    Taking clears the request, so a change from now on starts the next one (and, this job being
    running, queues the next job). None with nothing pending: the job runs (a forced index).
    """
    rows = IndexedSource.objects.filter(assistant_id=assistant_id, source=source, key=key)
    now = timezone.now()
    if rows.filter(due_at__lte=now).update(due_at=None, due_by=None):
        return None
    due = rows.values_list("due_at", flat=True).first()
    return due if due is not None and due > now else None


def is_ahead(*, assistant_id: int, source: str, key: str) -> bool:
    """Tell whether a pending request is not due yet (its job would only go back to the queue)."""
    rows = IndexedSource.objects.filter(assistant_id=assistant_id, source=source, key=key)
    return rows.filter(due_at__gt=timezone.now()).exists()
