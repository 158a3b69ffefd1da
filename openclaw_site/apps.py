from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class OpenclawSiteConfig(AppConfig):
    name = "openclaw_site"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from openclaw_site.models import ModelPrice
        from openclaw_site.usage.ledger import forget_prices

        post_save.connect(forget_prices, sender=ModelPrice, dispatch_uid="forget-prices-saved")
        post_delete.connect(forget_prices, sender=ModelPrice, dispatch_uid="forget-prices-deleted")
