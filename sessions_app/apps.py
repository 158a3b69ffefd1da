from __future__ import annotations

from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memory_app.web.sessions import register_session_links
        from sessions_app import indexing, signals
        from sessions_app.web.memory_links import DashboardSessionLinks

        signals.connect()
        indexing.connect()  # transcripts in memory search (register source, signals)
        register_session_links(DashboardSessionLinks())  # sessions named and linked on memory pages
