from __future__ import annotations

from django.apps import AppConfig


class OpenclawSiteConfig(AppConfig):
    name = "openclaw_site"
    default_auto_field = "django.db.models.BigAutoField"
