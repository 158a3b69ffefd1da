"""Enqueue background work after the current transaction commits (django-q2).

Tasks take ids, never model instances, and call one domain function (style.md). With
OPENCLAW_TASKS_SYNC=1 django-q2 runs them inline, which the test suite uses.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

logger = logging.getLogger(__name__)


def enqueue(func: str, *args: Any, task_name: str | None = None, group: str | None = None) -> None:
    """Run ``func(*args)`` in a worker once the surrounding transaction has committed."""

    def _send() -> None:
        from django_q.tasks import async_task

        try:
            async_task(func, *args, task_name=task_name, group=group)
        except Exception:  # a broken broker must not turn a committed write into a 500
            logger.exception("Could not enqueue %s%r", func, args)

    transaction.on_commit(_send)
