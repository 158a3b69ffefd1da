"""Services for assistants and API keys: the writes the REST API and the admin perform.

Each takes keyword arguments, runs in one transaction and raises a `DomainError` with a stable code
when the request cannot be honoured, so a rejected request changes nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from openclaw_site.errors import DomainError
from openclaw_site.models import ApiKey, Assistant, Team
from openclaw_site.teams.assistant_settings import SettingsError, check_fits_window, validate_settings
from openclaw_site.teams.settings_document import SettingsDocument

DEFAULT_CONTEXT_WINDOW = int(Assistant._meta.get_field("context_window").default)
ASSISTANT_FIELDS = ("name", "model", "context_window", "system_prompt", "timezone", "workspace_access")


def check_writable(assistant: Assistant) -> None:
    """Refuse any write or turn on an archived assistant with 409 ``assistant_archived``.

    The one rule of docs/design.md, Limits and refusals: an archived assistant is read-only. Every
    writer of its content calls this (the transcript's `append_messages`, every memory revision,
    turns, compactions, session changes), so every adapter (REST, MCP, /v1, dashboard) gets the
    same refusal; reads and exports never call it.
    """
    if assistant.archived_at is not None:
        raise DomainError(
            "assistant_archived",
            f"Assistant {assistant.slug!r} is archived, so it is read-only: its sessions, memory and "
            "exports can be read, but nothing is written and no turn runs. Restore it (dashboard: the "
            "assistant's page, Restore from archive) to write to it again.",
            status=409,
            details={"assistant": assistant.slug},
        )


def settings_error(error: SettingsError) -> DomainError:
    """Turn a settings validation error into the 400 the API answers, naming the bad key's path."""
    return DomainError("invalid_settings", f"{error.path}: {error.message}", details={"path": error.path})


def checked_settings(patch: object, *, current: object = None) -> SettingsDocument:
    """Validate ``patch`` merged onto ``current`` (or the defaults) and return the complete document."""
    try:
        # Re-validating the stored document first fills defaults added since it was written.
        base = validate_settings(current) if current is not None else None
        return validate_settings(patch, base=base)
    except SettingsError as error:
        raise settings_error(error) from None


def check_window(document: SettingsDocument, *, context_window: int) -> None:
    """Refuse settings whose token figures leave no room in the assistant's window (400)."""
    try:
        check_fits_window(document, context_window=context_window)
    except SettingsError as error:
        raise settings_error(error) from None


@transaction.atomic
def assistant_create(*, team: Team, slug: str, name: str, settings: Any = None, **fields: Any) -> Assistant:
    """Create an assistant in ``team`` with validated settings (defaults filled)."""
    unknown = set(fields) - set(ASSISTANT_FIELDS)
    if unknown:
        raise TypeError(f"unknown assistant fields: {sorted(unknown)}")
    document = checked_settings(settings)
    check_window(document, context_window=fields.get("context_window") or DEFAULT_CONTEXT_WINDOW)
    if Assistant.objects.filter(team=team, slug=slug).exists():
        raise _assistant_exists(slug)
    assistant = Assistant(team=team, slug=slug, name=name, settings=document, **fields)
    try:
        with transaction.atomic():
            assistant.save()
    except IntegrityError:  # a concurrent create of the same slug won the race
        raise _assistant_exists(slug) from None
    return assistant


def _assistant_exists(slug: str) -> DomainError:
    return DomainError(
        "assistant_exists",
        f"The team already has an assistant {slug!r}.",
        status=409,
        details={"field": "slug"},
    )


@transaction.atomic
def assistant_update(*, assistant: Assistant, settings: Any = None, **fields: Any) -> Assistant:
    """Change an assistant's fields; ``settings`` is merged onto the current settings."""
    unknown = set(fields) - set(ASSISTANT_FIELDS)
    if unknown:
        raise TypeError(f"unknown assistant fields: {sorted(unknown)}")
    locked = Assistant.objects.select_for_update(no_key=True).get(pk=assistant.pk)
    check_writable(locked)  # archived is read-only, its own record included (restore it first)
    if settings is not None:
        locked.settings = checked_settings(settings, current=locked.settings)
    for name, value in fields.items():
        setattr(locked, name, value)
    check_window(locked.settings, context_window=locked.context_window)
    locked.save()
    return locked


@transaction.atomic
def assistant_delete(*, assistant: Assistant) -> None:
    """Delete an assistant with its sessions and memory (the caller asked for exactly that)."""
    Assistant.objects.filter(pk=assistant.pk).delete()


@transaction.atomic
def assistant_archive(*, assistant: Assistant, archived: bool) -> Assistant:
    """Archive an assistant (kept whole, listed apart) or bring it back."""
    Assistant.objects.filter(pk=assistant.pk).update(archived_at=timezone.now() if archived else None)
    assistant.refresh_from_db(fields=["archived_at"])
    return assistant


@transaction.atomic
def api_key_create(
    *, team: Team, name: str, scopes: list[str], expires_at: datetime | None = None, created_by: Any = None
) -> tuple[ApiKey, str]:
    """Create an API key and return it with its secret, which is shown once and never stored."""
    if expires_at is not None and expires_at <= timezone.now():
        raise DomainError(
            "validation_error", "expires_at must be in the future.", details={"field": "expires_at"}
        )
    key, secret = ApiKey.generate(
        team=team, name=name, scopes=sorted(set(scopes)), expires_at=expires_at, created_by=created_by
    )
    key.save()
    return key, secret


@transaction.atomic
def api_key_revoke(*, key: ApiKey) -> ApiKey:
    """Revoke a key (idempotent: a revoked key keeps its first revocation time)."""
    locked = ApiKey.objects.select_for_update(no_key=True).get(pk=key.pk)
    if locked.revoked_at is None:
        locked.revoked_at = timezone.now()
        locked.save(update_fields=["revoked_at"])
    return locked
