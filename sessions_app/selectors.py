"""Team-scoped reads of sessions, their messages and their compactions.

A session is looked up by id under the caller's team (`session_get`), so another team's session is
not found (`NotFound`), never shown; what hangs off a session is then read through that session.
"""

from __future__ import annotations

from django.db.models import Count, QuerySet

from openclaw_site.jobs.tasks import TaskOwner
from openclaw_site.models import Assistant, Team
from openclaw_site.platform.row_sql import RowRead
from openclaw_site.selectors import NotFound
from sessions_app.models import CompactionEntry, CompactionRun, Message, Session

# Every request on a session starts here (docs/design.md, Request cost).
_SESSION_OF_TEAM = RowRead(Session, "assistant", "assistant__team", where="t0.id = %s AND t1.team_id = %s")


def session_get(*, team: Team, pk: int) -> Session:
    """Return the team's session ``pk`` with its assistant and team, or raise NotFound."""
    session = _SESSION_OF_TEAM.one([pk, team.pk])
    if session is None:
        raise NotFound("session")
    return session


def session_get_by_key(*, assistant: Assistant, key: str) -> Session:
    """Return the assistant's session named ``key``, or raise NotFound (the assistant is the team check)."""
    session = Session.objects.filter(assistant=assistant, key=key).select_related("assistant").first()
    if session is None:
        raise NotFound("session", key=key, within="this assistant")
    return session


def session_owner(*, session: Session) -> TaskOwner:
    """Return the owner of a background task that works on ``session``: its assistant's team."""
    return TaskOwner(
        team_id=session.assistant.team_id, assistant_id=session.assistant_id, session_id=session.pk
    )


def session_list(*, assistant: Assistant, archived: bool | None = None) -> QuerySet[Session]:
    """Return the assistant's sessions with their message counts, latest activity first.

    ``archived``: only the archived (True) or the other (False) sessions; None, all of them.
    """
    sessions = Session.objects.filter(assistant=assistant)
    if archived is not None:
        sessions = sessions.filter(archived_at__isnull=not archived)
    return (
        sessions.select_related("assistant")
        .annotate(message_count=Count("messages"))
        .order_by("-updated_at", "-id")
    )


def message_get(*, session: Session, seq: int) -> Message:
    """Return the session's message ``seq``, or raise NotFound."""
    message = Message.objects.filter(session=session, seq=seq).first()
    if message is None:
        raise NotFound("message", within="this session")
    return message


def compaction_entry_list(*, session: Session) -> QuerySet[CompactionEntry]:
    """Return the session's compaction entries in transcript order."""
    return CompactionEntry.objects.filter(session=session).order_by("seq")


def compaction_run_list(*, session: Session) -> QuerySet[CompactionRun]:
    """Return the session's compaction runs with their entries, newest first."""
    return (
        CompactionRun.objects.filter(session=session).select_related("entry").order_by("-created_at", "-id")
    )


def session_by_key(*, assistant: Assistant, key: str) -> Session | None:
    """Return the assistant's session named ``key``, or None."""
    return Session.objects.filter(assistant=assistant, key=key).select_related("assistant").first()
