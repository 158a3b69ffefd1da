from __future__ import annotations

from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from memory_app import receivers  # noqa: F401  (connects the reindex-on-write receiver)
        from memory_app.candidates import configure_connection

        connection_created.connect(configure_connection, dispatch_uid="memory_app.configure_connection")
