from __future__ import annotations

from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memory_app.index import receivers  # noqa: F401  (connects the reindex-on-write receiver)
