from __future__ import annotations

from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    """Retrieval evaluation (`manage.py eval_locomo`); installed by `evaluation.settings` only."""

    name = "evaluation"
    default_auto_field = "django.db.models.BigAutoField"
