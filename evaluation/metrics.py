"""Retrieval evaluation of memory search: recall@k and recall within what the model reads.

Used by `manage.py eval_locomo`. A question comes with its evidence turns,
each known by the path and line a search result cites and by the transcript line it renders as.
Every method answers a question with a ranked list of `Hit`s:

* recall@k: an evidence turn counts when its line lies inside the line range of the chunk of one
  of the first k hits (the ranking, whatever the snippet shows);
* recall within a budget (4000 characters): the snippets are read in rank order until the budget
  is spent (the last one cut at the budget), and a turn counts when its whole transcript line is
  among the text read (what the model actually sees).

A question's recall is the share of its evidence turns found; the figures are the mean over
questions, in percent, overall and by category. A question is *answered* at k when one of the
first k hits holds any of its evidence (what counts when any one answer will do, as in
InsuranceQA), and MRR@10 is the mean of 1/rank of that first hit (0 beyond 10).

The methods are the real search path (`search.run_search`, in vector, text and hybrid mode, with
MMR or temporal decay) and baselines over the very same chunk rows: BM25 (`rank_bm25`, Okapi,
with the corpus's tokenizers) and exact cosine similarity over the stored embeddings. The baselines
show their chunks as the search does (each line once, the same snippet policy), so only the ranking
differs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np
from rank_bm25 import BM25Okapi

from memory_app.models import IndexState, MemoryChunk
from memory_app.search.dedup import ShownLines
from memory_app.search.hybrid import SearchOptions, run_search
from memory_app.search.snippets import make_snippet
from memory_app.search.textsearch import query_terms
from openclaw_site.models import Assistant
from providers.embeddings import Embedder

DEFAULT_BUDGET_CHARS = 4000
DEFAULT_KS = (5, 10)
MRR_DEPTH = 10
_BM25_TOKEN_RE = re.compile(r"\w+")


@dataclass(frozen=True)
class EvidenceTurn:
    """A turn that answers a question: where results cite it, and its line in the transcript."""

    path: str
    line: int
    text: str


@dataclass(frozen=True)
class EvalQuestion:
    text: str
    category: int
    evidence: tuple[EvidenceTurn, ...]


@dataclass(frozen=True)
class Hit:
    """One ranked result: its chunk's line range and the snippet it shows (with its lines)."""

    path: str
    start_line: int
    end_line: int
    snippet: str
    snippet_start: int
    snippet_end: int


# --- the metrics (pure) ------------------------------------------------------------------------


def found_at_k(hits: Sequence[Hit], turn: EvidenceTurn, k: int) -> bool:
    """Tell whether the turn's line lies in the chunk of one of the first ``k`` hits."""
    return any(h.path == turn.path and h.start_line <= turn.line <= h.end_line for h in hits[:k])


def read_within(hits: Sequence[Hit], budget: int) -> list[tuple[Hit, str]]:
    """Return the snippets read in rank order until ``budget`` characters (the last one cut)."""
    shown: list[tuple[Hit, str]] = []
    left = budget
    for hit in hits:
        if left <= 0:
            break
        text = hit.snippet[:left]
        shown.append((hit, text))
        left -= len(text)
    return shown


def found_in(shown: Sequence[tuple[Hit, str]], turn: EvidenceTurn) -> bool:
    """Tell whether the turn's whole line is in a snippet read that cites its line."""
    return any(
        hit.path == turn.path and hit.snippet_start <= turn.line <= hit.snippet_end and turn.text in text
        for hit, text in shown
    )


def share(evidence: Sequence[EvidenceTurn], found: Callable[[EvidenceTurn], bool]) -> float:
    """Return the share of the evidence turns that ``found`` accepts (0 for no evidence)."""
    return sum(1 for turn in evidence if found(turn)) / len(evidence) if evidence else 0.0


def first_rank(hits: Sequence[Hit], evidence: Sequence[EvidenceTurn]) -> int | None:
    """Return the 1-based rank of the first hit holding an evidence turn (None: no hit does)."""
    for rank, hit in enumerate(hits, start=1):
        if any(hit.path == t.path and hit.start_line <= t.line <= hit.end_line for t in evidence):
            return rank
    return None


@dataclass(frozen=True)
class QuestionScore:
    category: int
    at_k: dict[int, float]
    in_budget: float
    chars_read: int
    results_read: int
    first_rank: int | None = None

    @property
    def reciprocal_rank(self) -> float:
        """Return 1/rank of the first evidence hit within `MRR_DEPTH`, else 0."""
        return 1 / self.first_rank if self.first_rank is not None and self.first_rank <= MRR_DEPTH else 0.0


def score_question(
    question: EvalQuestion,
    hits: Sequence[Hit],
    *,
    ks: Sequence[int] = DEFAULT_KS,
    budget: int = DEFAULT_BUDGET_CHARS,
) -> QuestionScore:
    """Return the question's recall@k for each k and its recall within ``budget`` characters."""
    shown = read_within(hits, budget)
    return QuestionScore(
        category=question.category,
        at_k={k: share(question.evidence, partial(found_at_k, hits, k=k)) for k in ks},
        in_budget=share(question.evidence, lambda turn: found_in(shown, turn)),
        chars_read=sum(len(text) for _, text in shown),
        results_read=len(shown),
        first_rank=first_rank(hits, question.evidence),
    )


@dataclass
class MethodScores:
    """Every question's score for one method, with the time its queries took."""

    name: str
    scores: list[QuestionScore] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self, ks: Sequence[int]) -> dict[str, Any]:
        """Return mean recall in percent, overall ("all") and by category, and reading figures."""
        groups: dict[str, list[QuestionScore]] = {"all": self.scores}
        for score in self.scores:
            groups.setdefault(str(score.category), []).append(score)
        recall = {
            name: _means(group, ks)
            for name, group in sorted(groups.items(), key=lambda g: _group_order(g[0]))
        }
        count = len(self.scores) or 1
        return {
            "method": self.name,
            "questions": len(self.scores),
            "recall": recall,
            "mean_chars_read": round(sum(s.chars_read for s in self.scores) / count),
            "mean_results_read": round(sum(s.results_read for s in self.scores) / count, 1),
            "ms_per_query": round(1000 * self.seconds / count, 1),
        }


def _group_order(name: str) -> tuple[int, str]:
    return (0, "") if name == "all" else (1, name)


def _means(scores: Sequence[QuestionScore], ks: Sequence[int]) -> dict[str, Any]:
    count = len(scores) or 1
    means: dict[str, Any] = {f"at_{k}": round(100 * sum(s.at_k[k] for s in scores) / count, 1) for k in ks}
    means["in_budget"] = round(100 * sum(s.in_budget for s in scores) / count, 1)
    means[f"mrr_at_{MRR_DEPTH}"] = round(sum(s.reciprocal_rank for s in scores) / count, 3)
    for k in ks:  # the share of questions with an evidence hit among the first k
        hits = sum(1 for s in scores if s.first_rank is not None and s.first_rank <= k)
        means[f"answered_at_{k}"] = round(100 * hits / count, 1)
    means["questions"] = len(scores)
    return means


# --- the methods -------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalCorpus:
    """One assistant's indexed data and the questions asked of it."""

    assistant: Assistant
    questions: list[EvalQuestion]
    now: datetime  # "now" for temporal decay: the end of the conversation


@dataclass(frozen=True)
class Method:
    """A named way to rank: ``run(question, query_vector)`` returns hits, best first."""

    name: str
    run: Callable[[str, Sequence[float]], list[Hit]]


SEARCH_VARIANTS: dict[str, dict[str, Any]] = {
    "vector only": {"mode": "vector"},
    "text only": {"mode": "text"},
    "hybrid": {"mode": "hybrid", "mmr": False, "decay": False},
    "hybrid + MMR": {"mode": "hybrid", "mmr": True, "decay": False},
    "hybrid + decay": {"mode": "hybrid", "mmr": False, "decay": True},
}
BM25_NAME = "BM25 (rank_bm25)"
COSINE_NAME = "exact cosine"


def search_method(name: str, *, corpus: EvalCorpus, options: SearchOptions, embedder: Embedder) -> Method:
    """Return a method that runs the real search with ``options`` and returns its hits."""

    def run(query: str, vector: Sequence[float]) -> list[Hit]:
        response = run_search(
            assistant=corpus.assistant,
            query=query,
            options=options,
            now=corpus.now,
            embedder=embedder,
            query_vector=vector,
        )
        return [
            Hit(
                path=r.path,
                start_line=r.explain["chunk_lines"][0] if r.explain else r.start_line,
                end_line=r.explain["chunk_lines"][1] if r.explain else r.end_line,
                snippet=r.snippet,
                snippet_start=r.start_line,
                snippet_end=r.end_line,
            )
            for r in response.results
        ]

    return Method(name, run)


@dataclass(frozen=True)
class ChunkSet:
    """The active chunk rows of an assistant, loaded once for the baselines."""

    paths: list[str]
    starts: list[int]
    ends: list[int]
    line_numbers: list[list[int]]
    texts: list[str]
    vectors: np.ndarray  # unit rows; zeros where a chunk has no embedding

    @classmethod
    def load(cls, assistant: Assistant, *, model: str) -> ChunkSet:
        state = IndexState.objects.get(assistant=assistant)
        rows = list(
            MemoryChunk.objects.filter(assistant=assistant, generation=state.active_generation)
            .order_by("id")
            .values_list("path", "start_line", "end_line", "line_numbers", "text", "embedding", "model")
        )
        dims = max((len(r[5]) for r in rows if r[5] is not None and r[6] == model), default=1)
        vectors = np.zeros((len(rows), dims), dtype=np.float32)
        for index, row in enumerate(rows):
            if row[5] is not None and row[6] == model:
                vectors[index] = np.asarray(row[5], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        return cls(
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[2] for r in rows],
            [list(r[3]) for r in rows],
            [r[4] for r in rows],
            vectors,
        )

    def hits(self, order: Iterable[int], *, query: str, options: SearchOptions) -> list[Hit]:
        """Return the first ``max_results`` chunks in ``order`` as the search would show them.

        The search's rules (`search._without_repeats`): each line once, so a chunk that only
        repeats lines a better one shows is skipped (the pieces of one long answer, overlapping
        transcript chunks), and the snippet policy on what is new.
        """
        terms = query_terms(query)
        seen = ShownLines()
        result: list[Hit] = []
        for index in order:
            if len(result) == options.max_results:
                break
            path = self.paths[index]
            fresh = seen.unseen(path, self.texts[index], self.line_numbers[index])
            if fresh is None:
                continue
            snippet = make_snippet(fresh.text, fresh.numbers, policy=options.snippet, terms=terms)
            if not snippet.text.strip():
                continue
            seen.show(path, snippet.start_line, snippet.end_line)
            result.append(
                Hit(
                    path=path,
                    start_line=self.starts[index],
                    end_line=self.ends[index],
                    snippet=snippet.text,
                    snippet_start=snippet.start_line,
                    snippet_end=snippet.end_line,
                )
            )
        return result


Tokenizer = Callable[[str], list[str]]


def bm25_tokens(text: str) -> list[str]:
    """Return the lowercased words of ``text`` (the baseline's plain tokenizer)."""
    return _BM25_TOKEN_RE.findall(text.lower())


def bm25_method(
    chunks: ChunkSet, *, options: SearchOptions, tokenize: Tokenizer = bm25_tokens, name: str = BM25_NAME
) -> Method:
    """Return the BM25 (Okapi) baseline over the chunk texts, split into tokens by ``tokenize``."""
    index = BM25Okapi([tokenize(text) for text in chunks.texts]) if chunks.texts else None

    def run(query: str, vector: Sequence[float]) -> list[Hit]:
        if index is None:
            return []
        scores = index.get_scores(tokenize(query))
        order = (i for i in np.argsort(-scores, kind="stable") if scores[i] > 0)
        return chunks.hits(order, query=query, options=options)

    return Method(name, run)


def cosine_method(chunks: ChunkSet, *, options: SearchOptions) -> Method:
    """Return exact cosine similarity over the stored chunk embeddings (no index)."""

    def run(query: str, vector: Sequence[float]) -> list[Hit]:
        if not chunks.texts:
            return []
        q = np.asarray(vector, dtype=np.float32)
        q = q / (np.linalg.norm(q) or 1.0)
        scores = chunks.vectors @ q
        order = np.argsort(-scores, kind="stable")
        return chunks.hits(order, query=query, options=options)

    return Method(COSINE_NAME, run)


def corpus_methods(
    corpus: EvalCorpus,
    *,
    options: SearchOptions,
    embedder: Embedder,
    variants: Sequence[str] = tuple(SEARCH_VARIANTS),
    tokenizers: dict[str, Tokenizer] | None = None,
) -> list[Method]:
    """Return the search variants and the baselines for one corpus, all with ``options``.

    ``tokenizers``: one BM25 baseline per named tokenizer (default: plain words).
    """
    explained = replace(options, explain=True)
    methods = [
        search_method(
            name, corpus=corpus, options=replace(explained, **SEARCH_VARIANTS[name]), embedder=embedder
        )
        for name in variants
    ]
    chunks = ChunkSet.load(corpus.assistant, model=embedder.model)
    bm25 = [
        bm25_method(chunks, options=options, tokenize=tokenize, name=name)
        for name, tokenize in (tokenizers or {BM25_NAME: bm25_tokens}).items()
    ]
    return [*methods, *bm25, cosine_method(chunks, options=options)]


# --- running ------------------------------------------------------------------------------------


@dataclass
class QueryVectors:
    """Query embeddings computed once per question text and reused by every method and config."""

    embedder: Embedder
    cache: dict[str, list[float]] = field(default_factory=dict)

    def get(self, query: str) -> list[float]:
        if query not in self.cache:
            self.cache[query] = self.embedder.embed_queries([query])[0]
        return self.cache[query]


def evaluate(
    corpora: Sequence[EvalCorpus],
    *,
    options: SearchOptions,
    vectors: QueryVectors,
    ks: Sequence[int] = DEFAULT_KS,
    budget: int = DEFAULT_BUDGET_CHARS,
    variants: Sequence[str] = tuple(SEARCH_VARIANTS),
    tokenizers: dict[str, Tokenizer] | None = None,
) -> list[MethodScores]:
    """Ask every question of every corpus with every method; return the scores by method."""
    if options.max_results < max(ks):
        raise ValueError(f"max_results must be at least {max(ks)} to measure recall@{max(ks)}")
    results: dict[str, MethodScores] = {}
    for corpus in corpora:
        methods = corpus_methods(
            corpus, options=options, embedder=vectors.embedder, variants=variants, tokenizers=tokenizers
        )
        for method in methods:
            scores = results.setdefault(method.name, MethodScores(method.name))
            for question in corpus.questions:
                vector = vectors.get(question.text)
                started = time.perf_counter()
                hits = method.run(question.text, vector)
                scores.seconds += time.perf_counter() - started
                scores.scores.append(score_question(question, hits, ks=ks, budget=budget))
    return list(results.values())


def format_table(
    summaries: Sequence[dict[str, Any]], *, metric: str, title: str, categories: dict[int, str]
) -> str:
    """Return one metric (``at_5``, ``at_10``, ``in_budget``) as a text table by category."""
    groups = ["all", *[str(c) for c in sorted(categories)]]
    labels = ["all", *[f"{c} {categories[c]}" for c in sorted(categories)]]
    width = max(len(s["method"]) for s in summaries) if summaries else 10
    lines = [title, f"{'method':<{width}}  " + "  ".join(f"{label:>13}" for label in labels)]
    for summary in summaries:
        cells = [summary["recall"].get(group, {}).get(metric) for group in groups]
        lines.append(
            f"{summary['method']:<{width}}  "
            + "  ".join(f"{cell:>13.1f}" if cell is not None else f"{'-':>13}" for cell in cells)
        )
    return "\n".join(lines)
