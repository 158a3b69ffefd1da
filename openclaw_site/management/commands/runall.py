"""`make run`: migrate, create demo data on an empty database, run the task clusters and the web server.

The web server serves `config.asgi:application` (ASGI, so streamed replies hold no worker,
docs/design.md, Streaming): uvicorn in development; gunicorn with uvicorn workers when DEBUG is
off (uvicorn's own `--workers` where this uvicorn has no `uvicorn.workers`). Its database
connections come from a pool (DB_POOL_SIZE, default 100 per process): under ASGI each request
runs in a thread of its own, so a connection kept per thread would only wait for its thread to go.

Two django-q2 clusters: the default one (exports, indexing, the schedules) and the urgent one
(memory flushes and compactions, settings.Q_URGENT_CLUSTER), each a `manage.py qcluster` process
with its own workers, so a backlog on one never delays the other.

Ctrl-C (SIGINT) or SIGTERM stops what it started: the web server, the django-q2 clusters (which let
running tasks finish), and the embedded PostgreSQL if this process started it. Its process id is in
``<VAR_DIR>/runall.pid`` while it runs, so `make stop` (openclaw_site/platform/stop.py) can send that SIGTERM
from another terminal.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from openclaw_site.platform import db, stop

STOP_TIMEOUT_SECONDS = 30


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]


class Command(BaseCommand):
    help = "Migrate, create demo data if empty, then run the task clusters and the web server until Ctrl-C."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addr", default=os.environ.get("OPENCLAW_ADDR", "127.0.0.1:8000"))
        parser.add_argument("--no-worker", action="store_true", help="do not start the django-q2 clusters")

    def handle(self, *args: Any, addr: str, no_worker: bool, **options: Any) -> None:
        # SIGTERM (systemd, docker stop, a test harness) cleans up exactly like Ctrl-C; SIGINT is set
        # explicitly because a shell that starts us in the background may have left it ignored.
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        signal.signal(signal.SIGINT, _raise_keyboard_interrupt)
        children: list[Child] = []
        stop.write_pid_file(settings.VAR_DIR)
        try:
            call_command("migrate", interactive=False, verbosity=0)
            call_command("bootstrap_demo", url=f"http://{addr}")
            if not settings.DEBUG:
                call_command("collectstatic", interactive=False, verbosity=0)
            if not no_worker:
                qcluster = [sys.executable, "manage.py", "qcluster"]
                children.append(self._spawn("worker", qcluster, env=_cluster_env(None)))
                urgent = _cluster_env(settings.Q_URGENT_CLUSTER)
                children.append(self._spawn("urgent worker", qcluster, env=urgent))
            children.append(
                self._spawn("web server", web_command(addr, debug=settings.DEBUG), env=_web_env())
            )
            self.stdout.write(self.style.SUCCESS(f"Serving on http://{addr}/ (Ctrl-C to stop)"))
            died = self._wait(children)
        except KeyboardInterrupt:
            died = None
        finally:
            self._stop(children)
            stop.remove_pid_file(settings.VAR_DIR)
        if died is not None:
            raise CommandError(
                f"The {died.name} exited with code {died.process.returncode}; stopped the rest."
            )

    @staticmethod
    def _spawn(name: str, command: list[str], *, env: dict[str, str] | None = None) -> Child:
        # Own process groups: a terminal's Ctrl-C reaches only this process, which then stops each child
        # in order (a worker must get its signal alone, see _stop).
        return Child(name, subprocess.Popen(command, cwd=settings.BASE_DIR, env=env, start_new_session=True))

    @staticmethod
    def _wait(children: list[Child]) -> Child | None:
        """Block until Ctrl-C (return None) or until a child exits on its own (return it)."""
        try:
            while True:
                for child in children:
                    if child.process.poll() is not None:
                        return child
                time.sleep(0.5)
        except KeyboardInterrupt:
            return None

    def _stop(self, children: list[Child]) -> None:
        # A second Ctrl-C must not abandon the children half-stopped.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for child in reversed(children):  # the web server first, so no new work arrives
            self._stop_child(child)
        pgdata = settings.VAR_DIR / "pgdata"
        if not settings.DATABASE_URL and db.started_by_this_process(pgdata):
            db.stop_embedded_database(pgdata)
            self.stdout.write("Stopped the web server, the worker and the embedded database.")
        else:
            self.stdout.write("Stopped the web server and the worker.")

    @staticmethod
    def _stop_child(child: Child) -> None:
        if child.process.poll() is not None:
            return
        # SIGTERM to the main process only: django-q2's cluster then stops its sentinel and lets workers
        # finish. Signalling the whole group kills the sentinel mid-wait and the cluster hangs.
        child.process.send_signal(signal.SIGTERM)
        try:
            child.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(child.process.pid, signal.SIGKILL)
            child.process.wait()


ASGI_APPLICATION = "config.asgi:application"
WEB_WORKERS = "2"


def web_command(addr: str, *, debug: bool) -> list[str]:
    """Return the command that serves the ASGI application on `addr` (host:port)."""
    host, _, port = addr.rpartition(":")
    uvicorn = [sys.executable, "-m", "uvicorn", ASGI_APPLICATION, "--host", host, "--port", port]
    if debug:
        return uvicorn
    if importlib.util.find_spec("uvicorn.workers") is not None:
        worker = ["--worker-class", "uvicorn.workers.UvicornWorker"]
        return [
            sys.executable,
            "-m",
            "gunicorn",
            ASGI_APPLICATION,
            *worker,
            "--bind",
            addr,
            "--workers",
            WEB_WORKERS,
        ]
    return [*uvicorn, "--workers", WEB_WORKERS]


# Connections each web process may hold at once: every open stream holds two for its turn (its
# lock and its queries, docs/design.md, Streaming), so 50 streams spread over the two workers fit.
WEB_POOL_SIZE = "100"


def _web_env() -> dict[str, str]:
    return {**os.environ, "DB_POOL_SIZE": os.environ.get("DB_POOL_SIZE", WEB_POOL_SIZE)}


def _cluster_env(cluster: str | None) -> dict[str, str]:
    """Return the environment of a qcluster process: ``cluster`` names an alternative cluster.

    django-q2 reads the cluster's name from Q_CLUSTER_NAME when it loads its settings, before the
    command's own ``--name`` could take effect.
    """
    env = {key: value for key, value in os.environ.items() if key != "Q_CLUSTER_NAME"}
    if cluster is not None:
        env["Q_CLUSTER_NAME"] = cluster
    return env


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
