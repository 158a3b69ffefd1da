from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_slug

from openclaw_site.models import Team


class Command(BaseCommand):
    help = "Create a team."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")

    def handle(self, *args: Any, slug: str, name: str, **options: Any) -> None:
        try:
            validate_slug(slug)
        except ValidationError:
            raise CommandError(f"{slug!r} is not a valid slug (letters, digits, '-' and '_').") from None
        if Team.objects.filter(slug=slug).exists():
            raise CommandError(f"Team {slug!r} already exists.")
        Team.objects.create(slug=slug, name=name or slug)
        self.stdout.write(f"Created team {slug}")
