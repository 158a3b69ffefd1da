"""Services for sessions: create, rename, delete, and the ingest of messages an agent sends.

Messages are appended by sessions_app.transcript.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from django.db import IntegrityError, transaction
from django.utils import timezone

from openclaw_site.errors import DomainError
from openclaw_site.models import Assistant
from openclaw_site.teams.services import check_writable
from sessions_app.messages import MessageInput
from sessions_app.models import Message, Session, new_session_key
from sessions_app.transcript import append_messages
from sessions_app.turn.maintenance import schedule_maintenance

# Keys name export files (sessions/<key>.jsonl), so no separators; colons allow OpenClaw's
# "agent:main:main" style keys.
SESSION_KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,127}$")


def _session_exists(key: str) -> DomainError:
    return DomainError(
        "session_exists",
        f"The assistant already has a session {key!r}.",
        status=409,
        details={"field": "key"},
    )


def check_session_key(key: str) -> None:
    """Refuse a key an export file could not be named by, with 400 ``validation_error``."""
    if not SESSION_KEY_PATTERN.match(key):
        raise DomainError(
            "validation_error",
            "key: letters, digits and . _ : @ + = - only, up to 128 characters.",
            details={"field": "key"},
        )


@transaction.atomic
def session_create(*, assistant: Assistant, key: str | None = None, title: str = "") -> Session:
    """Create a session of ``assistant`` (a random key when none is given)."""
    check_writable(assistant)
    key = key or new_session_key()
    check_session_key(key)
    if Session.objects.filter(assistant=assistant, key=key).exists():
        raise _session_exists(key)
    try:
        with transaction.atomic():
            return Session.objects.create(assistant=assistant, key=key, title=title)
    except IntegrityError:  # a concurrent create with the same key won
        raise _session_exists(key) from None


@transaction.atomic
def session_get_or_create(*, assistant: Assistant, key: str | None) -> tuple[Session, bool]:
    """Return the assistant's session ``key``, creating it if needed (a random key when None); the
    flag says it was created."""
    key = key or new_session_key()
    check_session_key(key)
    session = Session.objects.filter(assistant=assistant, key=key).first()
    if session is not None:
        return session, False
    check_writable(assistant)
    try:
        with transaction.atomic():
            return Session.objects.create(assistant=assistant, key=key), True
    except IntegrityError:  # a concurrent create with the same key won: use it
        return Session.objects.get(assistant=assistant, key=key), False


@transaction.atomic
def session_update(*, session: Session, title: str) -> Session:
    """Rename a session."""
    check_writable(session.assistant)
    locked = Session.objects.select_for_update(no_key=True).get(pk=session.pk)
    locked.title = title
    locked.save(update_fields=["title", "updated_at"])
    return locked


def ingest_messages(*, session_id: int, messages: Sequence[MessageInput]) -> list[Message]:
    """Append messages an agent sends (all or nothing), then queue what the session now needs.

    An ingest can push the session over a threshold: the flush or compaction is queued after the
    commit (`sessions_app.turn.maintenance.schedule_maintenance`), as after a turn.
    """
    rows = append_messages(session_id=session_id, messages=messages)
    schedule_maintenance(session_id, session=rows[0].session if rows else None)
    return rows


@transaction.atomic
def session_archive(*, session: Session, archived: bool) -> Session:
    """Archive a session (kept whole, hidden from the dashboard's list) or bring it back."""
    check_writable(session.assistant)
    locked = Session.objects.select_for_update(no_key=True).get(pk=session.pk)
    locked.archived_at = timezone.now() if archived else None
    locked.save(update_fields=["archived_at", "updated_at"])
    return locked


@transaction.atomic
def session_discard_if_empty(*, session_id: int) -> bool:
    """Delete a session this request created if it still holds nothing; return whether it did.

    An adapter that creates a session on first use (`/v1/`, MCP `session_append`) calls it when
    the request is refused after all, so a refusal leaves no empty session behind (docs/design.md,
    Limits and refusals). A session another request has written to meanwhile is kept.
    """
    deleted, _ = Session.objects.filter(pk=session_id, last_seq=0).delete()
    return deleted > 0


@transaction.atomic
def session_delete(*, session: Session) -> None:
    """Delete a session with its transcript and compaction history."""
    check_writable(session.assistant)
    Session.objects.filter(pk=session.pk).delete()
