"""Small factories for test data (plain functions; no factory library needed)."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import count
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from memory_app.documents import Provenance, write_document
from memory_app.models import MemoryDocument
from openclaw_site.models import ApiKey, Assistant, Membership, Team
from sessions_app.messages import validate_message
from sessions_app.models import CompactionEntry, Message, Session
from sessions_app.transcript import append_messages, lock_session, take_seq

_ids = count(1)


def make_team(slug: str | None = None) -> Team:
    slug = slug or f"team-{next(_ids)}"
    return Team.objects.create(slug=slug, name=slug.replace("-", " ").title())


def make_user(
    username: str, *, team: Team | None = None, role: str = "member", password: str = "pw-secret-123"
):
    user = get_user_model().objects.create_user(
        username=username, password=password, email=f"{username}@example.com"
    )
    if team is not None:
        Membership.objects.create(user=user, team=team, role=role)
    return user


def make_api_key(
    team: Team, scopes: list[str], *, name: str = "test key", **fields: Any
) -> tuple[ApiKey, str]:
    key, secret = ApiKey.generate(team=team, name=name, scopes=scopes, **fields)
    key.save()
    return key, secret


def make_assistant(team: Team, slug: str = "helper", **fields: Any) -> Assistant:
    fields.setdefault("name", slug.title())
    return Assistant.objects.create(team=team, slug=slug, **fields)


def make_session(assistant: Assistant, key: str | None = None, **fields: Any) -> Session:
    if key is not None:
        fields["key"] = key
    return Session.objects.create(assistant=assistant, **fields)


def add_messages(session: Session, *messages: dict[str, Any]) -> list[Message]:
    """Append OpenClaw-shaped message dicts through the real append path."""
    inputs = [validate_message(m, max_bytes=10_000_000) for m in messages]
    return append_messages(session_id=session.pk, messages=inputs)


def make_document(assistant: Assistant, path: str, content: str, *, author: str = "user") -> MemoryDocument:
    document, _ = write_document(
        assistant=assistant, path=path, content=content, provenance=Provenance(author=author)
    )
    return document


def add_compaction(
    session: Session,
    *,
    first_kept: Message,
    summary: str = "## Decisions\n- eu-west-3",
    entry_id: str = "c0ffee01",
) -> CompactionEntry:
    """Write a compaction entry as compaction does: the next seq, under the session's lock."""
    with transaction.atomic():
        locked = lock_session(session.pk)
        entry = CompactionEntry.objects.create(
            session=locked,
            seq=take_seq(locked),
            entry_id=entry_id,
            summary=summary,
            first_kept=first_kept,
            first_kept_entry_id=first_kept.entry_id,
            tokens_before=181234,
            tokens_after=9000,
            trigger="manual",
            details={"readFiles": ["deploy.yaml"], "modifiedFiles": []},
            from_hook=True,
            created_at=datetime(2026, 2, 16, 10, 0, tzinfo=UTC),
        )
        locked.save(update_fields=["last_seq"])
    return entry
