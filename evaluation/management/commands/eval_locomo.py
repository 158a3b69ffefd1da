"""`manage.py eval_locomo FILE`: retrieval recall of memory search on LoCoMo.

Run it with `--settings=evaluation.settings` (`make eval`), which installs this app. The loading
of conversations as sessions is `evaluation.locomo`, the measuring `evaluation.metrics`.
Everything it creates is rolled back at the end; only the embedding cache (vectors keyed by text
hash) is kept, so the next run does not embed the same chunks again.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.locomo import CATEGORY_NAMES, EvalConfig, EvalRun, LocomoFormatError, run_evaluation
from evaluation.metrics import DEFAULT_BUDGET_CHARS, SEARCH_VARIANTS, format_table
from evaluation.throwaway import add_embedder_argument, evaluation_embedder, rolled_back_keeping_embeddings
from openclaw_site.teams.assistant_settings import SettingsError, parse_settings
from providers.embeddings import Embedder

# OpenClaw's defaults (docs/openclaw-behaviour.md §4.1, §4.7): 400/80 chunks for every source, 700-char head
# snippets.
OPENCLAW = EvalConfig(
    label="OpenClaw defaults",
    chunking={"tokens": 400, "overlap": 80, "sessions": {"tokens": None, "overlap": None}},
    query={"snippetMaxChars": 700, "snippetMode": "head", "hybrid": {"vectorWeight": 0.7, "textWeight": 0.3}},
)


def _list(kind: type) -> Any:
    def parse(value: str) -> list[Any]:
        try:
            return [kind(item) for item in value.split(",") if item.strip()]
        except ValueError:
            raise ValueError(f"expected a comma-separated list of {kind.__name__}") from None

    parse.__name__ = f"list of {kind.__name__}"
    return parse


class Command(BaseCommand):
    help = (
        "Load LoCoMo conversations into throwaway assistants, index their transcripts and print "
        "recall@5, recall@10 and recall within a character budget for each search mode and two "
        "baselines (BM25, exact cosine) on the same chunks. List options (a,b,...) compare settings."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="LoCoMo JSON, e.g. ../shared/data/locomo/locomo_dev5.json")
        parser.add_argument("--limit-conversations", type=int, default=None)
        parser.add_argument(
            "--chunk-tokens", type=_list(int), help="memorySearch.chunking.tokens (all sources)"
        )
        parser.add_argument("--chunk-overlap", type=_list(int), help="memorySearch.chunking.overlap")
        parser.add_argument("--session-chunk-tokens", type=_list(int), help="chunking.sessions.tokens")
        parser.add_argument("--session-chunk-overlap", type=_list(int), help="chunking.sessions.overlap")
        parser.add_argument("--snippet-chars", type=_list(int), help="query.snippetMaxChars (0: whole chunk)")
        parser.add_argument("--snippet-mode", type=_list(str), help="query.snippetMode: head, best")
        parser.add_argument("--vector-weight", type=_list(float), help="query.hybrid.vectorWeight")
        parser.add_argument(
            "--text-weight",
            type=_list(float),
            help="query.hybrid.textWeight (default: 1 - vector weight when that is given)",
        )
        parser.add_argument("--min-score", type=_list(float), help="query.minScore")
        parser.add_argument(
            "--candidate-multiplier", type=_list(int), help="query.hybrid.candidateMultiplier"
        )
        parser.add_argument(
            "--with-openclaw",
            action="store_true",
            help="also evaluate OpenClaw's defaults (400/80 chunks, 700-char head snippets)",
        )
        parser.add_argument(
            "--max-results",
            type=int,
            default=40,
            help="results asked per query (enough to fill the budget; at least 10)",
        )
        parser.add_argument(
            "--budget", type=int, default=DEFAULT_BUDGET_CHARS, help="characters the model reads"
        )
        parser.add_argument(
            "--modes",
            type=_list(str),
            default=list(SEARCH_VARIANTS),
            help=f"search variants to run (default all): {', '.join(SEARCH_VARIANTS)}",
        )
        add_embedder_argument(parser)
        parser.add_argument("--json", action="store_true", help="print the results as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        samples = self._samples(Path(options["file"]), options["limit_conversations"])
        configs = self._configs(options)
        if not 10 <= options["max_results"] <= 100:
            raise CommandError("--max-results must be between 10 and 100")
        unknown = [mode for mode in options["modes"] if mode not in SEARCH_VARIANTS]
        if unknown:
            raise CommandError(f"unknown mode {unknown[0]!r}; choose from: {', '.join(SEARCH_VARIANTS)}")
        embedder = self._embedder(options["embedder"])
        run = self._run(samples, configs, embedder, options)
        if options["json"]:
            self.stdout.write(json.dumps(_as_dict(run), indent=2))
        else:
            self.stdout.write(_as_text(run))

    def _samples(self, path: Path, limit: int | None) -> list[dict[str, Any]]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise CommandError(f"cannot read {path}: {error}") from None
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise CommandError(f"{path} is not a LoCoMo file (a JSON list of conversations)")
        return data[:limit] if limit else data

    def _configs(self, options: dict[str, Any]) -> list[EvalConfig]:
        configs = [OPENCLAW] if options["with_openclaw"] else []
        for chunking, query in itertools.product(_chunkings(options), _queries(options)):
            config = EvalConfig(label="", chunking=chunking, query=query)
            try:
                configs.append(EvalConfig(label=_label(config), chunking=chunking, query=query))
            except SettingsError as error:
                raise CommandError(str(error)) from None
        return configs

    def _embedder(self, choice: str) -> Embedder:
        try:
            return evaluation_embedder(choice)
        except LookupError as error:
            raise CommandError(str(error)) from None

    def _run(
        self,
        samples: list[dict[str, Any]],
        configs: list[EvalConfig],
        embedder: Embedder,
        options: dict[str, Any],
    ) -> EvalRun:
        progress = (lambda line: self.stderr.write(line)) if options["verbosity"] >= 1 else (lambda _: None)
        try:
            return rolled_back_keeping_embeddings(
                lambda: run_evaluation(
                    samples=samples,
                    configs=configs,
                    embedder=embedder,
                    max_results=options["max_results"],
                    budget=options["budget"],
                    variants=options["modes"],
                    progress=progress,
                )
            )
        except (LocomoFormatError, SettingsError) as error:
            raise CommandError(str(error)) from None


def _chunkings(options: dict[str, Any]) -> list[dict[str, Any]]:
    result = []
    for tokens, overlap, s_tokens, s_overlap in itertools.product(
        options["chunk_tokens"] or [None],
        options["chunk_overlap"] or [None],
        options["session_chunk_tokens"] or [None],
        options["session_chunk_overlap"] or [None],
    ):
        chunking: dict[str, Any] = {
            k: v for k, v in (("tokens", tokens), ("overlap", overlap)) if v is not None
        }
        sessions = {k: v for k, v in (("tokens", s_tokens), ("overlap", s_overlap)) if v is not None}
        if sessions:
            chunking["sessions"] = sessions
        result.append(chunking)
    return result


def _queries(options: dict[str, Any]) -> list[dict[str, Any]]:
    result = []
    text_weights = options["text_weight"] or [None]
    for chars, mode, vector, text, min_score, multiplier in itertools.product(
        options["snippet_chars"] or [None],
        options["snippet_mode"] or [None],
        options["vector_weight"] or [None],
        text_weights,
        options["min_score"] or [None],
        options["candidate_multiplier"] or [None],
    ):
        query: dict[str, Any] = {
            k: v
            for k, v in (("snippetMaxChars", chars), ("snippetMode", mode), ("minScore", min_score))
            if v is not None
        }
        hybrid = {
            k: v for k, v in (("vectorWeight", vector), ("candidateMultiplier", multiplier)) if v is not None
        }
        if text is not None or vector is not None:
            hybrid["textWeight"] = text if text is not None else round(1 - vector, 6)
        if hybrid:
            query["hybrid"] = hybrid
        result.append(query)
    return result


def _label(config: EvalConfig) -> str:
    """Describe a config by its effective settings (defaults included)."""
    search = parse_settings(config.settings()).memory_search
    sessions, memory, query = search.session_chunking, search.chunking, search.query
    return (
        f"sessions {sessions.tokens}/{sessions.overlap} tokens, memory {memory.tokens}/{memory.overlap}; "
        f"snippet {query.snippet_mode} {query.snippet_max_chars}; "
        f"weights {query.hybrid.vector_weight:g}/{query.hybrid.text_weight:g}; minScore {query.min_score:g}"
    )


def _as_dict(run: EvalRun) -> dict[str, Any]:
    return {
        "conversations": run.conversations,
        "questions": run.questions,
        "skipped_questions": run.skipped_questions,
        "messages": run.messages,
        "categories": {str(k): v for k, v in CATEGORY_NAMES.items() if k != 5},
        "configs": run.configs,
    }


def _as_text(run: EvalRun) -> str:
    categories = {k: v for k, v in CATEGORY_NAMES.items() if k != 5}
    out = [
        f"LoCoMo: {len(run.conversations)} conversations ({', '.join(run.conversations)}), {run.messages} turns, "
        f"{run.questions} questions of categories 1-4 ({run.skipped_questions} skipped: no evidence turn)"
    ]
    for config in run.configs:
        summaries = config["methods"]
        out += [
            "",
            f"== {config['label']}",
            f"   {config['chunks']} chunks, {config['mean_chunk_chars']} characters on average; "
            f"{config['max_results']} results asked per query",
        ]
        for metric, title in (
            ("at_5", "recall@5 (%)"),
            ("at_10", "recall@10 (%)"),
            ("in_budget", f"recall within {config['budget_chars']} characters (%)"),
        ):
            out += ["", format_table(summaries, metric=metric, title=title, categories=categories)]
        width = max(len(s["method"]) for s in summaries)
        out += ["", f"{'method':<{width}}  chars read  results read  ms/query"]
        out += [
            f"{s['method']:<{width}}  {s['mean_chars_read']:>10}  {s['mean_results_read']:>12}  "
            f"{s['ms_per_query']:>8}"
            for s in summaries
        ]
    return "\n".join(out) + "\n"
