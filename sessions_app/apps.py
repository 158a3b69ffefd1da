from __future__ import annotations

from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from sessions_app import indexing, signals

        signals.connect()
        indexing.connect()  # transcripts in memory search (register source, signals)
