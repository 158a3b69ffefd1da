"""Filters that keep the server's log to what an operator reads (docs/design.md, The log).

Wired in `settings.LOGGING`: the access log (uvicorn's, gunicorn's through its uvicorn workers,
runserver's) leaves out static files; `django.request` leaves out the line it writes for a
response that merely has an error status, which the access log already shows (its records with an
exception, and so a traceback, stay); django-q2 leaves out its lines for each job queued, started
and done (a failure is an error, and `openclaw_site.jobs.tasks` warns of a slow task).
"""

from __future__ import annotations

import logging
import re

from django.conf import settings


class SkipStaticAccess(logging.Filter):
    """Drop access-log lines of static files (``"GET /static/... HTTP/1.1" 200``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        pattern = re.compile(rf'"(?:GET|HEAD) {re.escape(settings.STATIC_URL)}')
        return pattern.search(record.getMessage()) is None


class SkipAnsweredStatus(logging.Filter):
    """Drop `django.request`'s "Not Found: /x" for a response without an exception behind it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(record, "status_code", None) is None or bool(record.exc_info)


# django-q2 2.x: "Enqueued [openclaw] 12" (tasks.async_task), "Process-1 processing job-name 'func'"
# (worker.worker), "Processed 'func' (job-name)" (monitor.monitor), each at INFO.
_QUEUE_CHATTER = re.compile(r"^(?:Enqueued \[|Processed '|\S+ processing )")


class SkipQueueChatter(logging.Filter):
    """Drop django-q2's INFO line for every job queued, started and finished."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno != logging.INFO or _QUEUE_CHATTER.match(record.getMessage()) is None
