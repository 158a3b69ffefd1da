"""URL routes of the htmx dashboard (the REST API lives under /api/v1/, see openclaw_site.urls)."""

from __future__ import annotations

from django.urls import path

from memory_app.web import review
from memory_app.web import views as memory
from openclaw_site.web import teams, usage
from openclaw_site.web import views as site
from sessions_app.web import views as sessions
from sessions_app.web import workspace

urlpatterns = [
    path("", site.home, name="home"),
    path("team/", teams.switch_team, name="switch-team"),
    path("team/members/", teams.team_members, name="team"),
    path("team/members/<int:pk>/role/", teams.member_role, name="member-role"),
    path("team/members/<int:pk>/remove/", teams.member_remove, name="member-remove"),
    path("teams/new/", teams.team_new, name="team-new"),
    path("keys/", site.api_keys, name="api-keys"),
    path("keys/<int:pk>/revoke/", site.api_key_revoke, name="api-key-revoke"),
    path("jobs/", site.jobs_page, name="jobs"),
    path("usage/", usage.usage_page, name="usage"),
    path("usage/export.csv", usage.usage_csv, name="usage-csv"),
    path("assistants/new/", site.assistant_create, name="assistant-new"),
    path("assistants/<slug:slug>/", site.assistant_detail, name="assistant"),
    path("assistants/<slug:slug>/rename/", site.assistant_rename, name="assistant-rename"),
    path("assistants/<slug:slug>/archive/", site.assistant_archive, name="assistant-archive"),
    path("assistants/<slug:slug>/delete/", site.assistant_delete, name="assistant-delete"),
    path("assistants/<slug:slug>/export.zip", workspace.workspace_export, name="workspace-export"),
    path("workspace/import/", workspace.workspace_import, name="workspace-import"),
    path("assistants/<slug:slug>/settings/", site.assistant_settings, name="assistant-settings"),
    # Memory: the action comes before the document path, which may contain slashes.
    path("assistants/<slug:slug>/memory/", memory.memory_index, name="memory"),
    path("assistants/<slug:slug>/memory/new/", memory.memory_new, name="memory-new"),
    path("assistants/<slug:slug>/memory/deleted/", memory.memory_deleted, name="memory-deleted"),
    path("assistants/<slug:slug>/memory/reindex/", memory.memory_reindex, name="memory-reindex"),
    path("assistants/<slug:slug>/memory/review/", review.memory_review, name="memory-review"),
    path("review/", review.team_review, name="team-review"),
    path("review/decide/", review.team_review_decide, name="team-review-decide"),
    path(
        "assistants/<slug:slug>/memory/review/decide/",
        review.memory_review_decide,
        name="memory-review-decide",
    ),
    path("assistants/<slug:slug>/memory/consolidate/", review.memory_consolidate, name="memory-consolidate"),
    path("assistants/<slug:slug>/memory/doc/<path:path>", memory.memory_document, name="memory-document"),
    path(
        "assistants/<slug:slug>/memory/id/<int:pk>/", memory.memory_document_by_id, name="memory-document-id"
    ),
    path("assistants/<slug:slug>/memory/edit/<path:path>", memory.memory_edit, name="memory-edit"),
    path("assistants/<slug:slug>/memory/delete/<path:path>", memory.memory_delete, name="memory-delete"),
    path("assistants/<slug:slug>/memory/rename/<path:path>", memory.memory_rename, name="memory-rename"),
    path(
        "assistants/<slug:slug>/memory/status/<path:path>",
        memory.memory_index_status,
        name="memory-index-status",
    ),
    path("assistants/<slug:slug>/memory/revisions/<int:pk>/", memory.memory_revision, name="memory-revision"),
    path(
        "assistants/<slug:slug>/memory/revisions/<int:pk>/revert/", memory.memory_revert, name="memory-revert"
    ),
    path("assistants/<slug:slug>/search/", memory.search, name="search"),
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
