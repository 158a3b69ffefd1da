from __future__ import annotations

from django.urls import path

from sessions_app.api import context_views, host_views, views
from sessions_app.api.exports import SessionExportJsonlApi

_BY_KEY = "assistants/<slug:slug>/sessions/by-key/<str:key>/"

urlpatterns = [
    # Agent hosts that run their own loop: the OpenClaw plugin (sessions_app/api/host_views.py).
    path(_BY_KEY, host_views.HostSessionApi.as_view(), name="api-session-by-key"),
    path(f"{_BY_KEY}turns/", host_views.HostTurnsApi.as_view(), name="api-session-by-key-turns"),
    path(f"{_BY_KEY}bootstrap/", host_views.HostBootstrapApi.as_view(), name="api-session-by-key-bootstrap"),
    path(f"{_BY_KEY}context/", host_views.HostContextApi.as_view(), name="api-session-by-key-context"),
    path(f"{_BY_KEY}compact/", host_views.HostCompactApi.as_view(), name="api-session-by-key-compact"),
    path("assistants/<slug:slug>/tools/<str:name>/", host_views.HostToolApi.as_view(), name="api-tool"),
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
