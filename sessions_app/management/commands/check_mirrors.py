from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from openclaw_site.models import Assistant
from sessions_app.mirror_check import check_mirrors


class Command(BaseCommand):
    help = (
        "Compare every session's export file with a full rewrite and its transcript index with the "
        "stored messages; print the counts as JSON and exit 1 if anything is lost, duplicated or behind."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--assistant", metavar="TEAM/SLUG", help="check one assistant's sessions only")

    def handle(self, *args: Any, assistant: str | None, **options: Any) -> None:
        target = None
        if assistant is not None:
            team, _, slug = assistant.partition("/")
            target = Assistant.objects.filter(team__slug=team, slug=slug).first()
            if target is None:
                raise CommandError(f"No assistant {slug!r} in team {team!r} (expected TEAM/SLUG).")
        report = check_mirrors(assistant=target)
        self.stdout.write(json.dumps(report.as_dict(), indent=2))
        if not report.ok:
            self.stdout.flush()
            sys.exit(1)
