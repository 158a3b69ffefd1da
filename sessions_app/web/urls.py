"""URL routes of the dashboard's session pages and the workspace's export and import."""

from __future__ import annotations

from django.urls import path

from sessions_app.web import views as sessions
from sessions_app.web import workspace

urlpatterns = [
    path("assistants/<slug:slug>/export.zip", workspace.workspace_export, name="workspace-export"),
    path("workspace/import/", workspace.workspace_import, name="workspace-import"),
    # Sessions are addressed by id, like the REST API's /sessions/{id}/.
    path("assistants/<slug:slug>/sessions/", sessions.session_list, name="sessions"),
    path("sessions/<int:pk>/", sessions.session_detail, name="session"),
    path("sessions/<int:pk>/gauge/", sessions.session_gauge, name="session-gauge"),
    path("sessions/<int:pk>/transcript/", sessions.session_transcript, name="session-transcript"),
    path("sessions/<int:pk>/runs/", sessions.session_runs, name="session-runs"),
    path("sessions/<int:pk>/refresh/", sessions.session_refresh, name="session-refresh"),
    path("sessions/<int:pk>/chat/", sessions.session_chat, name="session-chat"),
    path(
        "sessions/<int:pk>/chat/stream/<str:token>/",
        sessions.session_chat_stream,
        name="session-chat-stream",
    ),
    path("sessions/<int:pk>/context/", sessions.session_context, name="session-context"),
    path("sessions/<int:pk>/compact/", sessions.session_compact, name="session-compact"),
    path("sessions/<int:pk>/rename/", sessions.session_rename, name="session-rename"),
    path("sessions/<int:pk>/archive/", sessions.session_archive, name="session-archive"),
    path("sessions/<int:pk>/delete/", sessions.session_delete, name="session-delete"),
    path("sessions/<int:pk>/retry/", sessions.session_retry, name="session-retry"),
    path("sessions/<int:pk>/messages/<int:seq>/", sessions.session_message, name="session-message"),
    path(
        "sessions/<int:pk>/compactions/<str:entry_id>/",
        sessions.compaction_covered,
        name="compaction-covered",
    ),
]
