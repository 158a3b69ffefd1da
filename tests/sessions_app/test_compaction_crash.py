"""A compaction whose process is killed (SIGKILL, mid-flush) can be retried at once.

The compaction lock is a Postgres session-level advisory lock on a connection of its own
(sessions_app.compaction.runs.hold_compaction_lock): when the process dies, Postgres ends its
connections and the lock goes with them, so the next attempt takes over the abandoned run
instead of answering 409 until a stale timeout. The flush prompt is stored only with the flush's
first answer, so the killed flush leaves no orphan prompt behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from sessions_app.compaction.compact import compact_session
from sessions_app.models import CompactionEntry, CompactionRun, Message
from tests.chat_requests import is_flush_request, router
from tests.fake_openai import delay_reply, text_reply
from tests.sessions_app.test_compaction import long_session

BASE_DIR = Path(settings.BASE_DIR)
# The child compacts the session on the test database through the same settings and model.
CHILD = """
import os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
from django.conf import settings
settings.DATABASES["default"]["NAME"] = os.environ["CRASH_TEST_DATABASE"]
import django
django.setup()
from sessions_app.compaction.compact import compact_session
compact_session(session_id=int(sys.argv[1]), trigger="manual")
"""


def child_env(llm) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        CRASH_TEST_DATABASE=connection.settings_dict["NAME"],
        LLM_BASE_URL=llm.base_url,
        LLM_API_KEY="test-key",
        LLM_MODEL="fake-chat",
        LLM_MAX_RETRIES="0",
        LLM_TIMEOUT_SECONDS="120",
        PYTHONPATH=str(BASE_DIR),
    )
    return env


def wait_for(condition, *, seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the child never reached the flush"
        time.sleep(0.1)


@pytest.mark.django_db(transaction=True)
def test_a_compaction_killed_mid_flush_is_retried_successfully_at_once(llm, world):
    session = long_session(world)
    before = list(Message.objects.filter(session=session).order_by("seq").values_list("entry_id", flat=True))
    llm.default_chat = router(flush=delay_reply(600, text_reply("NO_REPLY")))  # the flush hangs
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(session.pk)],
        cwd=BASE_DIR,
        env=child_env(llm),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(
            lambda: any(is_flush_request(body) for body in llm.chat_requests) or child.poll() is not None
        )
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        abandoned = CompactionRun.objects.get(session=session)
        assert abandoned.state == "flushing"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stderr:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL

    # The first retry succeeds: no 409, no waiting for a stale timeout.
    llm.default_chat = router()
    run = compact_session(session_id=session.pk, trigger="manual")
    assert run is not None and run.state == "committed"
    abandoned.refresh_from_db()
    assert abandoned.state == "failed" and abandoned.reason.startswith("stale: its worker is gone")
    # Nothing half-written: the history is the old messages, then exactly one flush turn (the
    # retry's prompt and its NO_REPLY) and one compaction entry.
    rows = list(Message.objects.filter(session=session).order_by("seq"))
    assert [row.entry_id for row in rows if not row.flush_turn] == before
    assert [(row.role, row.flush_turn) for row in rows[len(before) :]] == [
        ("user", True),
        ("assistant", True),
    ]
    assert CompactionEntry.objects.filter(session=session).count() == 1
