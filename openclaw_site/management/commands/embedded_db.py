from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from openclaw_site.platform.db import started_by_this_process, stop_embedded_database


class Command(BaseCommand):
    help = "Show or stop the embedded PostgreSQL under var/pgdata (started on demand by settings)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["status", "stop"])

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if settings.DATABASE_URL:
            raise CommandError("DATABASE_URL is set: there is no embedded database to manage.")
        pgdata = settings.VAR_DIR / "pgdata"
        if started_by_this_process(pgdata):
            # Not running before: the settings started it for this command, and manage.py stops it
            # again as the command exits (openclaw_site/platform/db.py).
            self.stdout.write("not running")
        elif action == "stop":
            stopped = stop_embedded_database(pgdata)
            self.stdout.write("stopped" if stopped else "not running")
        else:
            self.stdout.write(f"running at {settings.DATABASES['default']['HOST']} (data in {pgdata})")
