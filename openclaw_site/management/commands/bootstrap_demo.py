from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from openclaw_site.models import Assistant, Membership, Role, Team


class Command(BaseCommand):
    help = "On an empty database, create a demo team, an admin user and a demo assistant."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="where the server will answer")

    @transaction.atomic
    def handle(self, *args: Any, url: str, **options: Any) -> None:
        User = get_user_model()
        if User.objects.exists() or Team.objects.exists():
            self.stdout.write("Database already has users; demo data not created.")
            return
        password = secrets.token_urlsafe(12)
        team = Team.objects.create(slug="demo", name="Demo team")
        admin = User.objects.create_superuser("admin", "admin@example.com", password)
        Membership.objects.create(user=admin, team=team, role=Role.ADMIN)
        Assistant.objects.create(
            team=team,
            slug="demo",
            name="Demo assistant",
            system_prompt="You are a helpful assistant with long-term memory.",
        )
        self.stdout.write(
            self.style.SUCCESS(
                "Created team 'demo', assistant 'demo' and user 'admin'.\n"
                f"Sign in at {url}/ as admin / {password}\n"
                f"(Django admin: {url}/admin/ · API docs: {url}/api/v1/docs/)"
            )
        )
