"""A debounce that works across worker processes, kept in `IndexedSource` rows.

Each change bumps the row's ``request_version`` and pushes ``due_at`` out by the delay, then
enqueues the index job, one pending per document or session (`openclaw_site.tasks`, coalescing).
The job takes the latest version when it starts (`latest_version`), and sleeps until ``due_at``;
if a newer change came meanwhile (the version moved on) it leaves the work to that change's job,
queued because this one was already running. So a burst of saves indexes once, ``delay`` after the
last one (OpenClaw's 1.5 s watcher debounce, 5 s for transcripts: docs/openclaw-behaviour.md §4.6).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memory_app.models import IndexedSource

# A task never sleeps longer than this in one go, so it notices a superseding request early.
MAX_SLEEP_SECONDS = 5.0


def request(*, assistant_id: int, source: str, key: str, delay_seconds: float) -> int:
    """Record a change and return the version the task for it must carry."""
    with transaction.atomic():
        row, _ = IndexedSource.objects.get_or_create(assistant_id=assistant_id, source=source, key=key)
        IndexedSource.objects.filter(pk=row.pk).update(
            request_version=F("request_version") + 1,
            due_at=timezone.now() + timedelta(seconds=max(0.0, delay_seconds)),
        )
        row.refresh_from_db(fields=["request_version"])
    return row.request_version


def latest_version(*, assistant_id: int, source: str, key: str) -> int | None:
    """Return the version of the latest request, or None if nothing was requested."""
    return (
        IndexedSource.objects.filter(assistant_id=assistant_id, source=source, key=key)
        .values_list("request_version", flat=True)
        .first()
    )


def wait_turn(
    *, assistant_id: int, source: str, key: str, version: int, sleep: Callable[[float], None] = time.sleep
) -> bool:
    """Sleep until the request is due; return False if a newer request superseded it."""
    while True:
        row = (
            IndexedSource.objects.filter(assistant_id=assistant_id, source=source, key=key)
            .values("request_version", "due_at")
            .first()
        )
        if row is None or row["request_version"] != version:
            return False
        remaining = (row["due_at"] - timezone.now()).total_seconds() if row["due_at"] else 0.0
        if remaining <= 0:
            return True
        sleep(min(remaining, MAX_SLEEP_SECONDS))
