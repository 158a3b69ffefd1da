from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from openclaw_site.models import Membership, Role, Team


class Command(BaseCommand):
    help = "Create a user (or add an existing one) as a member of a team."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--team", required=True, help="team slug")
        parser.add_argument("--role", default=Role.MEMBER, help="admin, member or viewer")
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--password",
            default=os.environ.get("OPENCLAW_USER_PASSWORD", ""),
            help="defaults to $OPENCLAW_USER_PASSWORD; empty means an unusable password",
        )
        parser.add_argument("--superuser", action="store_true", help="also give Django admin access")

    @transaction.atomic
    def handle(
        self,
        *args: Any,
        username: str,
        team: str,
        role: str,
        email: str,
        password: str,
        superuser: bool,
        **options: Any,
    ) -> None:
        if role not in Role.values:
            raise CommandError(f"--role must be one of: {', '.join(Role.values)}")
        team_obj = Team.objects.filter(slug=team).first()
        if team_obj is None:
            raise CommandError(f"No team {team!r}; create it with `manage.py create_team {team}`.")
        User = get_user_model()
        user, created = User.objects.get_or_create(username=username, defaults={"email": email})
        if created:
            user.set_password(password) if password else user.set_unusable_password()
        if superuser:
            user.is_staff = user.is_superuser = True
        user.save()
        Membership.objects.update_or_create(user=user, team=team_obj, defaults={"role": role})
        self.stdout.write(f"{'Created' if created else 'Updated'} {username} as {role} of {team}")
