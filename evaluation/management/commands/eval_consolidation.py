"""`manage.py eval_consolidation`: precision and recall of consolidation proposals.

Run it with `--settings=evaluation.settings` (`make eval`). The dev set and the scoring are
`evaluation.consolidation`; everything it creates is rolled back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from evaluation.consolidation import DEV_SET, evaluate, load_cases
from providers.chat import get_chat_model


class Command(BaseCommand):
    help = (
        "Load each memory of the consolidation dev set into a throwaway assistant and print the "
        "precision and recall of the deterministic pass, and of the model path when a chat model is configured."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dev_set", nargs="?", default=str(DEV_SET), help="the dev set (JSON)")
        parser.add_argument("--no-model", action="store_true", help="score the deterministic pass only")

    def handle(self, *args: Any, **options: Any) -> None:
        cases = load_cases(Path(options["dev_set"]))
        model = None if options["no_model"] else get_chat_model()
        with transaction.atomic():
            scores = evaluate(cases, model=model)
            transaction.set_rollback(True)
        expected = scores["deterministic"].expected
        self.stdout.write(f"consolidation dev set: {len(cases)} memories, {expected} expected proposals")
        for label, score in scores.items():
            self.stdout.write(score.line(f"{label} pass" if label == "deterministic" else "model path"))
        if model is None:
            self.stdout.write("model path: no chat model configured (LLM_MODEL), not measured")
