"""Services for sessions: create, rename, delete. Messages are appended by sessions_app.transcript."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction

from openclaw_site.errors import ApiError
from openclaw_site.models import Assistant
from sessions_app.models import Session, new_session_key

# Keys name export files (sessions/<key>.jsonl), so no separators; colons allow OpenClaw's
# "agent:main:main" style keys.
SESSION_KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,127}$")


def _session_exists(key: str) -> ApiError:
    return ApiError(
        "session_exists",
        f"The assistant already has a session {key!r}.",
        status_code=409,
        details={"field": "key"},
    )


@transaction.atomic
def session_create(*, assistant: Assistant, key: str | None = None, title: str = "") -> Session:
    """Create a session of ``assistant`` (a random key when none is given)."""
    key = key or new_session_key()
    if not SESSION_KEY_PATTERN.match(key):
        raise ApiError(
            "validation_error",
            "key: letters, digits and . _ : @ + = - only, up to 128 characters.",
            details={"field": "key"},
        )
    if Session.objects.filter(assistant=assistant, key=key).exists():
        raise _session_exists(key)
    try:
        with transaction.atomic():
            return Session.objects.create(assistant=assistant, key=key, title=title)
    except IntegrityError:  # a concurrent create with the same key won
        raise _session_exists(key) from None


@transaction.atomic
def session_update(*, session: Session, title: str) -> Session:
    """Rename a session."""
    locked = Session.objects.select_for_update().get(pk=session.pk)
    locked.title = title
    locked.save(update_fields=["title", "updated_at"])
    return locked


@transaction.atomic
def session_delete(*, session: Session) -> None:
    """Delete a session with its transcript and compaction history."""
    Session.objects.filter(pk=session.pk).delete()


def session_get_or_create(*, assistant: Assistant, key: str | None) -> Session:
    """Return the assistant's session ``key``, creating it (a random key when None) if it is new."""
    if key:
        existing = Session.objects.filter(assistant=assistant, key=key).first()
        if existing is not None:
            return existing
    try:
        return session_create(assistant=assistant, key=key)
    except ApiError as error:
        if error.code != "session_exists":
            raise
        return Session.objects.get(assistant=assistant, key=key)  # created meanwhile by another request
