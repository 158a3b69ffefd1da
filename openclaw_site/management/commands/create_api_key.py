from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from openclaw_site.models import ApiKey, Scope, Team


class Command(BaseCommand):
    help = "Create a team API key and print its secret once (nothing else goes to stdout)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--scopes", nargs="+", required=True, help=" ".join(Scope.values))
        parser.add_argument("--expires-days", type=int, default=None)

    def handle(
        self, *args: Any, team: str, name: str, scopes: list[str], expires_days: int | None, **options: Any
    ) -> None:
        scopes = [s for item in scopes for s in item.split(",") if s]
        unknown = sorted(set(scopes) - set(Scope.values))
        if unknown:
            raise CommandError(f"Unknown scope(s): {', '.join(unknown)}. Known: {', '.join(Scope.values)}")
        team_obj = Team.objects.filter(slug=team).first()
        if team_obj is None:
            raise CommandError(f"No team {team!r}.")
        expires = timezone.now() + timedelta(days=expires_days) if expires_days else None
        key, secret = ApiKey.generate(team=team_obj, name=name, scopes=scopes, expires_at=expires)
        key.save()
        self.stdout.write(secret)
        self.stderr.write(
            f"Created key {name!r} for team {team} with scopes {', '.join(scopes)}; store it now, it is not shown again."
        )
