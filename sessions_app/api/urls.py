from __future__ import annotations

from django.urls import path

from sessions_app.api import context_views, views
from sessions_app.api.exports import SessionExportJsonlApi

urlpatterns = [
    path("assistants/<slug:slug>/sessions/", views.SessionListCreateApi.as_view(), name="api-sessions"),
    path("sessions/<int:session_id>/", views.SessionDetailApi.as_view(), name="api-session"),
    path(
        "sessions/<int:session_id>/messages/", views.SessionMessagesApi.as_view(), name="api-session-messages"
    ),
    path(
        "sessions/<int:session_id>/context/",
        context_views.SessionContextApi.as_view(),
        name="api-session-context",
    ),
    path(
        "sessions/<int:session_id>/compact/",
        context_views.SessionCompactApi.as_view(),
        name="api-session-compact",
    ),
    path(
        "sessions/<int:session_id>/compactions/",
        context_views.SessionCompactionsApi.as_view(),
        name="api-session-compactions",
    ),
    path(
        "sessions/<int:session_id>/export.jsonl", SessionExportJsonlApi.as_view(), name="session-export-jsonl"
    ),
]
