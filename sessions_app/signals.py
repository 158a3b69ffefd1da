"""Keep the export mirror in step with every change, whoever makes it (API, admin, dashboard, import).

Receivers only enqueue; `openclaw_site.jobs.tasks.enqueue` sends after the commit, so a rolled-back
change exports nothing and a worker never reads data that is not committed yet.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from openclaw_site.jobs.tasks import TaskOwner, enqueue
from openclaw_site.models import Assistant
from sessions_app.models import CompactionEntry, Session
from sessions_app.selectors import session_owner
from sessions_app.workspace.exports import queue_sessions_index


def memory_changed(
    sender: Any, *, team_id: int, assistant_id: int, path: str, document_id: int | None, **kwargs: Any
) -> None:
    owner = TaskOwner(team_id=team_id, assistant_id=assistant_id, document_id=document_id)
    enqueue(
        "sessions_app.tasks.export_memory",
        assistant_id,
        path,
        owner=owner,
        task_name=f"export-memory-{assistant_id}",
        coalesce_key=f"export-memory:{assistant_id}:{path}",
    )


def session_saved(sender: Any, instance: Session, **kwargs: Any) -> None:
    # An append updates its session row without a save and queues its own export
    # (transcript.after_transcript_change).
    enqueue(
        "sessions_app.tasks.export_session",
        instance.pk,
        owner=session_owner(session=instance),
        task_name=f"export-session-{instance.pk}",
        coalesce_key=f"export-session:{instance.pk}",
    )


def session_deleted(sender: Any, instance: Session, origin: Any = None, **kwargs: Any) -> None:
    # Deleting an assistant (or its team) deletes its sessions too: the workspace goes with it, so
    # there is no index to rewrite, and a task record naming the assistant would break that delete's
    # foreign keys at commit.
    deleted = origin.model if isinstance(origin, QuerySet) else type(origin)
    if origin is not None and deleted is not Session:
        return
    queue_sessions_index(TaskOwner(team_id=instance.assistant.team_id, assistant_id=instance.assistant_id))


def compaction_saved(sender: Any, instance: CompactionEntry, **kwargs: Any) -> None:
    enqueue(
        "sessions_app.tasks.export_session",
        instance.session_id,
        owner=session_owner(session=instance.session),
        task_name=f"export-session-{instance.session_id}",
        coalesce_key=f"export-session:{instance.session_id}",
    )


def assistant_saved(sender: Any, instance: Assistant, **kwargs: Any) -> None:
    enqueue(
        "sessions_app.tasks.export_assistant_metadata",
        instance.pk,
        owner=TaskOwner.for_assistant(instance),
        task_name=f"export-assistant-{instance.pk}",
        coalesce_key=f"export-assistant:{instance.pk}",
    )


def assistant_deleted(sender: Any, instance: Assistant, origin: Any = None, **kwargs: Any) -> None:
    # The files go with the assistant. A deleted team takes its task records too, so only an
    # assistant's own delete can queue the removal (the record names the team, not the assistant).
    deleted = origin.model if isinstance(origin, QuerySet) else type(origin)
    if origin is not None and deleted is not Assistant:
        return
    enqueue(
        "sessions_app.tasks.remove_workspace",
        instance.team.slug,
        instance.slug,
        owner=TaskOwner(team_id=instance.team_id),
        task_name=f"remove-workspace-{instance.pk}",
    )


def connect() -> None:
    """Connect the receivers (called once from SessionsAppConfig.ready)."""
    from django.db.models.signals import post_delete, post_save

    from memory_app.signals import memory_document_changed

    memory_document_changed.connect(memory_changed, dispatch_uid="sessions_app.export_memory")
    post_save.connect(session_saved, sender=Session, dispatch_uid="sessions_app.export_session_saved")
    post_delete.connect(session_deleted, sender=Session, dispatch_uid="sessions_app.export_session_deleted")
    post_save.connect(compaction_saved, sender=CompactionEntry, dispatch_uid="sessions_app.export_compaction")
    post_save.connect(assistant_saved, sender=Assistant, dispatch_uid="sessions_app.export_assistant")
    post_delete.connect(assistant_deleted, sender=Assistant, dispatch_uid="sessions_app.remove_workspace")
