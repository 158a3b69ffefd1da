"""`manage.py eval_locomo_consolidation FILE`: LoCoMo recall of memory before and after consolidating.

Run it with `--settings=evaluation.settings` (`make eval`). The planting, reviewing and measuring
is `evaluation.locomo_memory`; everything it creates is rolled back, the embeddings it computed
are kept (`evaluation.throwaway`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.locomo import LocomoFormatError
from evaluation.locomo_memory import report, run_memory_evaluation
from evaluation.metrics import DEFAULT_BUDGET_CHARS
from evaluation.throwaway import add_embedder_argument, evaluation_embedder, rolled_back_keeping_embeddings


class Command(BaseCommand):
    help = (
        "Turn LoCoMo conversations into assistants' memories with planted duplicates, and print the "
        "recall of memory search on their questions before and after a reviewed consolidation."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="LoCoMo JSON, e.g. ../shared/data/locomo/locomo_dev5.json")
        parser.add_argument("--limit-conversations", type=int, default=None)
        parser.add_argument(
            "--budget", type=int, default=DEFAULT_BUDGET_CHARS, help="characters the model reads"
        )
        add_embedder_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        try:
            samples = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise CommandError(f"cannot read {path}: {error}") from None
        if not isinstance(samples, list) or not all(isinstance(item, dict) for item in samples):
            raise CommandError(f"{path} is not a LoCoMo file (a JSON list of conversations)")
        samples = samples[: options["limit_conversations"]] if options["limit_conversations"] else samples
        try:
            embedder = evaluation_embedder(options["embedder"])
        except LookupError as error:
            raise CommandError(str(error)) from None
        progress = (lambda line: self.stderr.write(line)) if options["verbosity"] >= 1 else (lambda _: None)
        try:
            run = rolled_back_keeping_embeddings(
                lambda: run_memory_evaluation(
                    samples=samples, embedder=embedder, budget=options["budget"], progress=progress
                )
            )
        except (LocomoFormatError, KeyError, TypeError) as error:
            raise CommandError(f"{path}: not in LoCoMo's format ({error})") from None
        self.stdout.write("\n".join(report(run, budget=options["budget"])))
