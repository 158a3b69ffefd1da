"""`manage.py eval_insuranceqa`: retrieval on the Chinese InsuranceQA `valid` split.

Run it with `--settings=evaluation.settings` (`make eval`). The pool and the baselines are
`evaluation.insuranceqa`; everything it creates is rolled back, the embedding cache kept.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.insuranceqa import DEFAULT_POOL, DEFAULT_QUESTIONS, format_results, run_insuranceqa
from evaluation.metrics import SEARCH_VARIANTS
from evaluation.throwaway import add_embedder_argument, evaluation_embedder, rolled_back_keeping_embeddings
from openclaw_site.teams.assistant_settings import SettingsError, validate_settings


class Command(BaseCommand):
    help = (
        "Index a pool of InsuranceQA-zh answers (valid split) in a throwaway assistant and print "
        "recall@1/5/10 and MRR@10 of every search mode, BM25 on character bigrams and on jieba "
        "words, and exact cosine, on the same pool."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--questions", type=int, default=DEFAULT_QUESTIONS, help="questions asked (>= 1)")
        parser.add_argument("--pool", type=int, default=DEFAULT_POOL, help="answers indexed")
        parser.add_argument(
            "--query-settings",
            default="{}",
            help="memorySearch.query settings as JSON, e.g. '{\"minScore\": 0.3}' (default: the defaults)",
        )
        parser.add_argument(
            "--modes",
            default=",".join(SEARCH_VARIANTS),
            help=f"comma-separated search variants (default all): {', '.join(SEARCH_VARIANTS)}",
        )
        add_embedder_argument(parser)
        parser.add_argument("--json", action="store_true", help="print the results as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        import insuranceqa_data

        if options["questions"] < 1 or options["pool"] < 1:
            raise CommandError("--questions and --pool must be at least 1")
        modes = [mode.strip() for mode in options["modes"].split(",") if mode.strip()]
        unknown = [mode for mode in modes if mode not in SEARCH_VARIANTS]
        if unknown or not modes:
            raise CommandError(f"--modes: choose from {', '.join(SEARCH_VARIANTS)}")
        try:
            query = json.loads(options["query_settings"])
            settings = validate_settings({"memorySearch": {"query": query}})
        except (ValueError, SettingsError) as error:
            raise CommandError(f"--query-settings: {error}") from None
        try:
            embedder = evaluation_embedder(options["embedder"])
        except LookupError as error:
            raise CommandError(str(error)) from None
        progress = (lambda line: self.stderr.write(line)) if options["verbosity"] >= 1 else (lambda _: None)
        run = rolled_back_keeping_embeddings(
            lambda: run_insuranceqa(
                valid=insuranceqa_data.load_valid(),  # never the test split (docs/evaluation.md)
                answers=insuranceqa_data.load_answers(),
                embedder=embedder,
                questions=options["questions"],
                pool_size=options["pool"],
                settings=settings,
                variants=tuple(modes),
                progress=progress,
            )
        )
        self.stdout.write(json.dumps(run, indent=2) if options["json"] else format_results(run) + "\n")
