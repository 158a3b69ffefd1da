"""The server's log as an operator reads it (docs/design.md, The log): one access line per request
and none for static files, no second line for an error status, django-q2's per-job lines left out,
a slow task logged, and a streamed response under ASGI without Django's warning."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import urllib.request
import warnings
from typing import Any

import pytest
from django.conf import settings

from openclaw_site.jobs import runs
from openclaw_site.platform.log_filters import SkipAnsweredStatus, SkipQueueChatter
from tests import factories
from tests.messages import user

UVICORN_ACCESS = '%s - "%s %s HTTP/%s" %d'  # uvicorn's access record: client, method, path, version, status


def _record(
    name: str, msg: str, args: Any = (), level: int = logging.INFO, **extra: Any
) -> logging.LogRecord:
    record = logging.LogRecord(name, level, __file__, 1, msg, args, None)
    record.__dict__.update(extra)
    return record


def _access(path: str) -> logging.LogRecord:
    return _record("uvicorn.access", UVICORN_ACCESS, ("127.0.0.1:5555", "GET", path, "1.1", 200))


# Run in a fresh interpreter with the settings as `make run` has them (LOG_LEVEL unset, DEBUG on):
# each logger gets what the server's code and its libraries send it.
EMITTER = """
ACCESS = '%s - "%s %s HTTP/%s" %d'  # uvicorn's access record
import logging, sys
import django
django.setup()
access = logging.getLogger("uvicorn.access")
for path in ["/static/css/app.css", "/static/vendor/htmx.min.js", "/assistants/helper/"]:
    access.info(ACCESS, "127.0.0.1:5555", "GET", path, "1.1", 200)
logging.getLogger("django.server").info('"%s" %s %s', "GET /static/js/app.js HTTP/1.1", 200, 9)
request = logging.getLogger("django.request")
request.warning("Not Found: %s", "/nope/", extra={"status_code": 404})
request.error("Service Unavailable: %s", "/api/v1/sessions/1/messages/", extra={"status_code": 503})
try:
    raise RuntimeError("a bug")
except RuntimeError:
    request.error("Internal Server Error: %s", "/boom/", exc_info=True, extra={"status_code": 500})
queue = logging.getLogger("django-q")
queue.info("Enqueued [openclaw] 12")
queue.info("Process-52ed7eba processing export-session-1 'openclaw_site.jobs.runs.run_tracked'")
queue.info("Processed 'openclaw_site.jobs.runs.run_tracked' (export-session-1)")
queue.info("Q Cluster zulu-emma [openclaw] running.")
queue.error("Failed 'openclaw_site.jobs.runs.run_tracked' (export-session-2) - boom")
"""


def test_the_log_has_one_line_per_request_no_static_files_and_no_queue_chatter():
    env = {key: value for key, value in os.environ.items() if key not in ("LOG_LEVEL", "DJANGO_DEBUG")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", DATABASE_URL="postgres://log@127.0.0.1:1/none")
    done = subprocess.run(
        [sys.executable, "-c", EMITTER],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stderr.splitlines()
    assert lines[0] == '127.0.0.1:5555 - "GET /assistants/helper/ HTTP/1.1" 200'
    assert "/static/" not in done.stderr
    # The access line says the 404 and the 503; django.request adds only what it knows more.
    assert "Not Found" not in done.stderr and "Service Unavailable" not in done.stderr
    assert lines[1] == "Internal Server Error: /boom/" and lines.count("RuntimeError: a bug") == 1
    assert (
        "Enqueued" not in done.stderr and "processing" not in done.stderr and "Processed" not in done.stderr
    )
    assert lines[-2:] == [
        "Q Cluster zulu-emma [openclaw] running.",
        "Failed 'openclaw_site.jobs.runs.run_tracked' (export-session-2) - boom",
    ]


def test_django_request_keeps_exceptions_and_drops_what_the_access_line_says():
    status_only = _record("django.request", "Not Found: %s", ("/nope/",), logging.WARNING, status_code=404)
    assert not SkipAnsweredStatus().filter(status_only)
    try:
        raise RuntimeError("a bug")
    except RuntimeError:
        import sys

        crashed = logging.LogRecord(
            "django.request", logging.ERROR, __file__, 1, "Internal Server Error", (), sys.exc_info()
        )
    crashed.status_code = 500
    assert SkipAnsweredStatus().filter(crashed)
    assert SkipAnsweredStatus().filter(_record("django.request", "something else", (), logging.WARNING))


def test_django_q2_lines_per_job_are_left_out_and_the_rest_kept():
    chatter = SkipQueueChatter()
    for line in [
        "Enqueued [openclaw] 12",
        "Process-52ed7eba processing export-session-1 'openclaw_site.jobs.runs.run_tracked'",
        "Processed 'openclaw_site.jobs.runs.run_tracked' (export-session-1)",
    ]:
        assert not chatter.filter(_record("django-q", line)), line
    for line in ["Q Cluster zulu-emma [openclaw] running.", "Process-1 ready for work at 25226"]:
        assert chatter.filter(_record("django-q", line)), line
    failed = _record("django-q", "Failed 'x' (job) - boom", level=logging.ERROR)
    assert chatter.filter(failed)


@pytest.mark.django_db
def test_a_slow_task_is_logged_and_a_quick_one_is_not(world, caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger="openclaw_site.jobs.tasks")
    monkeypatch.setattr(runs, "SLOW_TASK_SECONDS", 3600.0)
    runs.run_tracked("t" * 32, "os.path.join", "a", "b")
    assert not [r for r in caplog.records if "took" in r.getMessage()]
    monkeypatch.setattr(runs, "SLOW_TASK_SECONDS", 0.0)
    runs.run_tracked("u" * 32, "os.path.join", "a", "b")
    slow = [r.getMessage() for r in caplog.records if "took" in r.getMessage()]
    assert len(slow) == 1 and slow[0].startswith("Task os.path.join (" + "u" * 32 + ") took")


def test_a_synchronous_stream_under_asgi_is_sent_whole_without_a_warning(
    asgi_live_server, world, acme_secret
):
    session = factories.make_session(world.assistant, key="streamed")
    factories.add_messages(session, user("first line"), user("second line"))
    request = urllib.request.Request(
        f"{asgi_live_server.url}/api/v1/sessions/{session.pk}/export.jsonl",
        headers={"Authorization": f"Bearer {acme_secret}"},
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read().decode()
    assert body.count("\n") == 3 and "first line" in body and "second line" in body
    assert not [w for w in caught if "StreamingHttpResponse" in str(w.message)]
