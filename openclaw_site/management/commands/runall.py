from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from openclaw_site.db import stop_embedded_database


class Command(BaseCommand):
    help = "Migrate, create demo data if empty, then run the task cluster and the web server until Ctrl-C."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--addr", default=os.environ.get("OPENCLAW_ADDR", "127.0.0.1:8000"))
        parser.add_argument("--no-worker", action="store_true", help="do not start the django-q2 cluster")

    def handle(self, *args, addr: str, no_worker: bool, **options) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("bootstrap_demo")
        if not settings.DEBUG:
            call_command("collectstatic", interactive=False, verbosity=0)
        children = [] if no_worker else [self._spawn([sys.executable, "manage.py", "qcluster"])]
        children.append(self._spawn(self._web_command(addr)))
        self.stdout.write(self.style.SUCCESS(f"Serving on http://{addr}/ (Ctrl-C to stop)"))
        try:
            self._wait(children)
        finally:
            self._stop(children)

    def _web_command(self, addr: str) -> list[str]:
        if settings.DEBUG:
            return [sys.executable, "manage.py", "runserver", "--noreload", addr]
        return [sys.executable, "-m", "gunicorn", "openclaw_site.wsgi", "--bind", addr, "--workers", "2"]

    @staticmethod
    def _spawn(command: list[str]) -> subprocess.Popen:
        return subprocess.Popen(command, cwd=settings.BASE_DIR, start_new_session=True)

    @staticmethod
    def _wait(children: list[subprocess.Popen]) -> None:
        try:
            while all(child.poll() is None for child in children):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass

    def _stop(self, children: list[subprocess.Popen]) -> None:
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
        if not settings.DATABASE_URL:
            stop_embedded_database(settings.VAR_DIR / "pgdata")
        self.stdout.write("Stopped the server, the worker and the embedded database.")
