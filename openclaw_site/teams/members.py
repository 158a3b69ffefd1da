"""Teams and their people: creating a team, adding, re-roling and removing members (docs/design.md, Teams).

Each function runs in one transaction and raises a `DomainError` with a stable code when the request
cannot be honoured, so a refused change writes nothing. A team always keeps at least one admin.
A member added by an e-mail address that has no account yet gets one without a password, and a
set-password link (Django's password-reset token) that is mailed through ``EMAIL_BACKEND`` and
returned, so the admin can hand it over when no mail server is configured.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.contrib.auth.tokens import default_token_generator
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.utils.text import slugify

from openclaw_site.errors import DomainError
from openclaw_site.models import Membership, Role, Team


@dataclass(frozen=True)
class AddedMember:
    membership: Membership
    created_user: bool
    set_password_path: str = ""  # for a new account: where its owner sets a password


@transaction.atomic
def team_create(*, name: str, slug: str, creator: User) -> Team:
    """Create a team whose first admin is ``creator``."""
    if Team.objects.filter(slug=slug).exists():
        raise _slug_taken(slug)
    try:
        with transaction.atomic():
            team = Team.objects.create(name=name, slug=slug)
    except IntegrityError:
        raise _slug_taken(slug) from None
    Membership.objects.create(user=creator, team=team, role=Role.ADMIN)
    return team


def _slug_taken(slug: str) -> DomainError:
    return DomainError(
        "team_exists", f"A team {slug!r} exists already.", status=409, details={"field": "slug"}
    )


@transaction.atomic
def member_add(*, team: Team, identifier: str, role: str, site_url: str = "") -> AddedMember:
    """Add the user named by username or e-mail; an unknown e-mail gets a new account and a link.

    ``site_url`` (scheme and host) makes the mailed link absolute.
    """
    identifier = identifier.strip()
    user = User.objects.filter(Q(username__iexact=identifier) | Q(email__iexact=identifier)).first()
    created = False
    if user is None:
        if "@" not in identifier:
            raise DomainError(
                "no_such_user",
                f"No user {identifier!r}. Give an e-mail address to invite someone new.",
                details={"field": "identifier"},
            )
        user, created = _new_user(identifier), True
    if Membership.objects.filter(team=team, user=user).exists():
        raise _already_member(user, team)
    try:
        with transaction.atomic():
            membership = Membership.objects.create(team=team, user=user, role=role)
    except IntegrityError:  # a concurrent add of the same person won
        raise _already_member(user, team) from None
    link = set_password_path(user) if created else ""
    if created:
        transaction.on_commit(lambda: _mail_invitation(user, team, f"{site_url}{link}"))
    return AddedMember(membership=membership, created_user=created, set_password_path=link)


def _already_member(user: User, team: Team) -> DomainError:
    return DomainError(
        "already_member",
        f"{user.get_username()} is in {team.name} already.",
        status=409,
        details={"field": "identifier"},
    )


def _new_user(email: str) -> User:
    base = slugify(email.split("@", 1)[0]) or "user"
    username, n = base, 1
    while User.objects.filter(username=username).exists():
        n += 1
        username = f"{base}{n}"
    user = User(username=username, email=email)
    user.set_unusable_password()
    user.save()
    return user


def set_password_path(user: User) -> str:
    """Return the path of Django's password-reset confirmation for ``user`` (valid until it is used)."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    return reverse(
        "password_reset_confirm", kwargs={"uidb64": uid, "token": default_token_generator.make_token(user)}
    )


def _mail_invitation(user: User, team: Team, path: str) -> None:
    send_mail(
        subject=f"You were added to {team.name}",
        message=(
            f"You were added to the team {team.name} as {user.get_username()}.\n"
            f"Choose your password here (the link works once): {path}\n"
        ),
        from_email=None,
        recipient_list=[user.email],
    )


@transaction.atomic
def member_set_role(*, membership: Membership, role: str) -> Membership:
    """Change a member's role; the team's last admin stays an admin."""
    locked = _lock_membership(membership)
    if locked.role == Role.ADMIN and role != Role.ADMIN:
        _keep_an_admin(locked)
    locked.role = role
    locked.save(update_fields=["role"])
    return locked


@transaction.atomic
def member_remove(*, membership: Membership) -> None:
    """Remove a member from the team (their account stays); never the last admin."""
    locked = _lock_membership(membership)
    if locked.role == Role.ADMIN:
        _keep_an_admin(locked)
    locked.delete()


def _lock_membership(membership: Membership) -> Membership:
    """Lock the member's team, then the membership; refuse one removed meanwhile.

    Every change of a team's roles and members takes the team row first, so two of them (two
    admins demoting each other at once) run one after the other and the second sees what the
    first did; locking the membership rows alone, each in its own order, deadlocked.
    """
    Team.objects.select_for_update(no_key=True).filter(pk=membership.team_id).first()
    locked = Membership.objects.select_for_update().filter(pk=membership.pk).first()
    if locked is None:
        raise DomainError(
            "not_a_member",
            "That person is no longer in the team (someone removed them a moment ago); reload.",
            status=409,
        )
    return locked


def _keep_an_admin(membership: Membership) -> None:
    # The team row is locked (`_lock_membership`), so the count cannot change under us.
    admins = Membership.objects.filter(team_id=membership.team_id, role=Role.ADMIN).count()
    if admins <= 1:
        raise DomainError(
            "last_admin",
            "A team needs an admin: make someone else an admin first.",
            status=409,
        )


def remember_team(membership: Membership) -> None:
    """Note that the user works in this team now: their next sign-in lands here."""
    Membership.objects.filter(pk=membership.pk).update(last_used_at=timezone.now())
