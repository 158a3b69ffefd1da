"""The Chinese retrieval set: InsuranceQA-zh's `valid` split as memory documents (`eval_insuranceqa`).

`insuranceqa-data` 1.0 (a development dependency, docs/dependencies.md) ships the Chinese
InsuranceQA corpus: about 27,000 answers, and questions in `train`, `valid` and `test` splits,
each with the ids of its correct answers. Only `valid` is read here (the development set,
docs/evaluation.md); `test` stays out of every tuning decision.

The pool: the first `questions` questions of `valid` (by id), all their correct answers, and as
many of their listed negative answers (in order) as fill the pool to `pool` answers. Each answer
is one memory document `memory/answers/<id>.md`, indexed through the real path
(`indexing.reindex_assistant`); a question's evidence is its correct answers' documents (with
those of a question asked in the same words, `correct_answers_by_text`).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evaluation.locomo import refresh_statistics
from evaluation.metrics import (
    SEARCH_VARIANTS,
    EvalCorpus,
    EvalQuestion,
    EvidenceTurn,
    QueryVectors,
    Tokenizer,
    evaluate,
)
from memory_app.index.rebuild import reindex_assistant
from memory_app.models import MemoryChunk, MemoryDocument, content_hash
from memory_app.search.hybrid import resolve_options
from openclaw_site.models import Assistant, Team
from openclaw_site.teams.settings_document import SettingsDocument
from providers.embeddings import Embedder

DEFAULT_QUESTIONS = 300
DEFAULT_POOL = 2000
KS = (1, 5, 10)
MAX_RESULTS = 10
BIGRAM_BM25 = "BM25 character bigrams"
JIEBA_BM25 = "BM25 jieba words"
_HAN_OR_WORD_RE = re.compile(r"\w+")


@dataclass(frozen=True)
class Pool:
    """The answers indexed and the questions asked of them."""

    answers: dict[str, str]  # answer id -> Chinese text
    questions: list[tuple[str, tuple[str, ...]]]  # (question text, ids of its correct answers)


def build_pool(valid: dict[str, Any], answers: dict[str, Any], *, questions: int, pool: int) -> Pool:
    """Return the first ``questions`` valid questions and a pool of ``pool`` answers (module docstring)."""
    asked = [valid[key] for key in sorted(valid, key=int)[:questions]]
    chosen: dict[str, None] = {}
    for item in asked:
        chosen.update(dict.fromkeys(item["answers"]))
    for item in asked:
        for negative in item["negatives"]:
            if len(chosen) >= pool:
                break
            chosen.setdefault(negative)
    texts = {key: answers[key]["zh"].strip() for key in chosen if answers[key]["zh"].strip()}
    correct = correct_answers_by_text(asked)
    return Pool(
        answers=texts,
        questions=[
            (text, tuple(a for a in correct[text] if a in texts))
            for text in (item["zh"].strip() for item in asked)
        ],
    )


def correct_answers_by_text(asked: Sequence[dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Return each question text's correct answers: those of every question asked in those words.

    `valid` holds a few questions twice in the same Chinese words with different correct answers
    (租金保险涵盖什么？ with answer 22723 and again with 529); the words are the query, so an answer
    judged correct for either is correct for both.
    """
    correct: dict[str, dict[str, None]] = {}
    for item in asked:
        correct.setdefault(item["zh"].strip(), {}).update(dict.fromkeys(item["answers"]))
    return {text: tuple(ids) for text, ids in correct.items()}


def answer_path(answer_id: str) -> str:
    return f"memory/answers/{answer_id}.md"


def bigram_tokens(text: str) -> list[str]:
    """Return the character bigrams of every word run (a one-character run as itself)."""
    tokens: list[str] = []
    for run in _HAN_OR_WORD_RE.findall(text.lower()):
        tokens.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
    return tokens


def jieba_tokens(text: str) -> list[str]:
    """Return jieba's words of ``text`` without punctuation and spaces."""
    import jieba

    jieba.setLogLevel(logging.WARNING)  # not its dictionary-building chatter on every run
    return [word for word in jieba.lcut(text.lower()) if _HAN_OR_WORD_RE.fullmatch(word)]


TOKENIZERS: dict[str, Tokenizer] = {BIGRAM_BM25: bigram_tokens, JIEBA_BM25: jieba_tokens}


def load_pool(assistant: Assistant, pool: Pool) -> None:
    """Store every answer as a memory document and index them through the real path."""
    MemoryDocument.objects.bulk_create(
        [
            MemoryDocument(
                assistant=assistant, path=answer_path(key), content=text, content_hash=content_hash(text)
            )
            for key, text in pool.answers.items()
        ],
        batch_size=500,
    )
    reindex_assistant(assistant.pk)
    refresh_statistics()


def eval_questions(pool: Pool) -> list[EvalQuestion]:
    """Return the questions that have a correct answer in the pool, each answer as evidence."""
    return [
        EvalQuestion(text=text, category=1, evidence=tuple(EvidenceTurn(answer_path(a), 1, "") for a in ids))
        for text, ids in pool.questions
        if ids
    ]


def run_insuranceqa(
    *,
    valid: dict[str, Any],
    answers: dict[str, Any],
    embedder: Embedder,
    questions: int = DEFAULT_QUESTIONS,
    pool_size: int = DEFAULT_POOL,
    settings: SettingsDocument | None = None,
    variants: Sequence[str] = tuple(SEARCH_VARIANTS),
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Index the pool in a throwaway assistant and score every method; the caller rolls back."""
    pool = build_pool(valid, answers, questions=questions, pool=pool_size)
    team = Team.objects.create(slug=f"insuranceqa-eval-{uuid.uuid4().hex[:8]}", name="InsuranceQA evaluation")
    assistant = Assistant.objects.create(
        team=team, slug="insuranceqa", name="InsuranceQA", settings=settings or {}
    )
    started = time.perf_counter()
    load_pool(assistant, pool)
    chunks = MemoryChunk.objects.filter(assistant=assistant).count()
    progress(f"indexed {len(pool.answers)} answers as {chunks} chunks ({time.perf_counter() - started:.0f}s)")
    corpus = EvalCorpus(assistant=assistant, questions=eval_questions(pool), now=assistant.created_at)
    options = resolve_options(assistant, max_results=MAX_RESULTS)
    started = time.perf_counter()
    scores = evaluate(
        [corpus],
        options=options,
        vectors=QueryVectors(embedder),
        ks=KS,
        variants=variants,
        tokenizers=TOKENIZERS,
    )
    progress(f"evaluated {len(corpus.questions)} questions ({time.perf_counter() - started:.0f}s)")
    return {
        "answers": len(pool.answers),
        "chunks": chunks,
        "questions": len(corpus.questions),
        "model": embedder.model,
        "methods": [s.summary(KS) for s in scores],
    }


def format_results(run: dict[str, Any]) -> str:
    """Return recall@1/5/10 and MRR@10 of every method as a text table.

    R@k: the question is answered when one of its correct answers is among the first k results
    (any one answers it); "all@10": the share of all its correct answers in the first 10.
    """
    width = max(len(m["method"]) for m in run["methods"])
    lines = [
        f"InsuranceQA-zh valid: {run['questions']} questions, {run['answers']} answers "
        f"({run['chunks']} chunks), embedder {run['model']}",
        f"{'method':<{width}}  {'R@1':>6}  {'R@5':>6}  {'R@10':>6}  {'MRR@10':>6}  {'all@10':>6}  ms/query",
    ]
    for method in run["methods"]:
        r = method["recall"]["all"]
        lines.append(
            f"{method['method']:<{width}}  {r['answered_at_1'] / 100:>6.3f}  {r['answered_at_5'] / 100:>6.3f}  "
            f"{r['answered_at_10'] / 100:>6.3f}  {r['mrr_at_10']:>6.3f}  {r['at_10'] / 100:>6.3f}  "
            f"{method['ms_per_query']:>8}"
        )
    return "\n".join(lines)
