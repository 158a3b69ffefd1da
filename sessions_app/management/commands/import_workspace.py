from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessions_app.workspace.imports import WorkspaceImportError, import_workspace


class Command(BaseCommand):
    help = (
        "Load an OpenClaw workspace (MEMORY.md, memory/**/*.md, sessions/*.jsonl, sessions/sessions.json) "
        "into an assistant, all or nothing. Creates the assistant; an existing one needs --replace."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", type=Path)
        parser.add_argument("--team", required=True, help="slug of an existing team")
        parser.add_argument("--assistant", required=True, help="assistant slug (created if missing)")
        parser.add_argument(
            "--replace", action="store_true", help="replace the sessions and memory of an existing assistant"
        )

    def handle(
        self, *args: Any, directory: Path, team: str, assistant: str, replace: bool, **options: Any
    ) -> None:
        try:
            report = import_workspace(
                directory=directory, team_slug=team, assistant_slug=assistant, replace=replace
            )
        except WorkspaceImportError as error:
            raise CommandError(f"Nothing was imported: {error}") from None
        lines = report.lines()
        self.stdout.write(self.style.SUCCESS(lines[0]))
        for line in lines[1:]:
            self.stdout.write(line)
