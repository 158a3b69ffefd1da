from __future__ import annotations

from django.urls import path

from sessions_app.api.exports import SessionExportJsonlApi

urlpatterns: list = [
    path("sessions/<int:session_id>/export.jsonl", SessionExportJsonlApi.as_view(), name="session-export-jsonl"),
]
