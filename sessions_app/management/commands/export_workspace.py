from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from openclaw_site.models import Assistant
from sessions_app.workspace.exports import MirrorIncomplete, export_assistant, export_storage
from sessions_app.workspace.storage import LocalExportStorage


class Command(BaseCommand):
    help = (
        "Write an assistant as an OpenClaw workspace (MEMORY.md, memory/, sessions/*.jsonl, "
        "sessions/sessions.json) to EXPORT_ROOT/<team>/<assistant>/, or to --out DIR."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="team slug")
        parser.add_argument("--assistant", required=True, help="assistant slug")
        parser.add_argument("--out", type=Path, help="an empty or new directory to write the workspace to")

    def handle(self, *args: Any, team: str, assistant: str, out: Path | None, **options: Any) -> None:
        target = Assistant.objects.filter(team__slug=team, slug=assistant).first()
        if target is None:
            raise CommandError(f"No assistant {assistant!r} in team {team!r}.")
        if out is None:
            storage = export_storage()
            try:
                summary = export_assistant(target.pk, storage=storage)
            except MirrorIncomplete as incomplete:
                raise CommandError(str(incomplete)) from None
            location = storage.path(summary.location)
        else:
            # Refuse a non-empty directory: the export would mix with (and could be mistaken for) other files.
            if out.exists() and (not out.is_dir() or any(out.iterdir())):
                raise CommandError(f"{out} exists and is not an empty directory; choose a new or empty one.")
            summary = export_assistant(target.pk, storage=LocalExportStorage(out), base="")
            location = out
        self.stdout.write(
            self.style.SUCCESS(
                f"Exported {team}/{assistant} to {location}: {summary.documents} memory document(s), "
                f"{summary.sessions} session(s)."
            )
        )
        for problem in summary.unwritten:
            self.stderr.write(f"Not written: {problem}")
