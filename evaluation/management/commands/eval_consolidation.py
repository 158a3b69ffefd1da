"""`manage.py eval_consolidation`: precision and recall of consolidation proposals.

Run it with `--settings=evaluation.settings` (`make eval`). The dev set and the scoring are
`evaluation.consolidation`, the scripted model `evaluation.scripted_model`; everything it creates
is rolled back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from evaluation.consolidation import DEV_SET, ModelPath, Score, evaluate, load_cases
from evaluation.scripted_model import ScriptedModel
from providers.chat import get_chat_model


class Command(BaseCommand):
    help = (
        "Load each memory of the consolidation dev set into a throwaway assistant and print the "
        "precision and recall of the deterministic pass, of the model path with the scripted model "
        "(its checks), and with the configured chat model when there is one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dev_set", nargs="?", default=str(DEV_SET), help="the dev set (JSON)")
        parser.add_argument("--no-model", action="store_true", help="leave the configured chat model out")
        parser.add_argument("--no-scripted", action="store_true", help="leave the scripted model out")
        # -v 2 also shows each request and the reason each discarded proposal was discarded.

    def handle(self, *args: Any, **options: Any) -> None:
        cases = load_cases(Path(options["dev_set"]))
        model = None if options["no_model"] else get_chat_model()
        with ExitStack() as stack:
            if options["verbosity"] < 2:  # each request and each discarded proposal is logged
                stack.enter_context(_quiet("httpx", "httpx2", "memory_app.governance.model_consolidation"))
            paths = []
            scripted = None
            if not options["no_scripted"]:
                scripted = stack.enter_context(ScriptedModel())
                paths.append(scripted.path())
            if model is not None:
                paths.append(ModelPath(f"model {model.name}", model))
            with transaction.atomic():
                scores = evaluate(cases, paths=paths)
                transaction.set_rollback(True)
        expected = scores["deterministic"].expected
        self.stdout.write(f"consolidation dev set: {len(cases)} memories, {expected} expected proposals")
        self.stdout.write(scores.pop("deterministic").line("deterministic pass"))
        for label, score in scores.items():
            self.stdout.write(_model_line(label, score, scripted))
        if model is None and not options["no_model"]:
            self.stdout.write(
                "model path, configured model: none configured (LLM_BASE_URL and LLM_MODEL), not measured"
            )
        elif model is not None:
            self.stdout.write(f"  (the configured model: {model.name} at {settings.LLM_BASE_URL})")


@contextmanager
def _quiet(*names: str) -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _model_line(label: str, score: Score, scripted: ScriptedModel | None) -> str:
    line = score.line(f"model path, {label}") + f"; {score.discarded} discarded by the checks"
    if label == ScriptedModel.label and scripted is not None:
        line += f" (it planted {scripted.planted} faulty proposals beside the careful ones)"
    return line
