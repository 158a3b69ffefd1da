#!/usr/bin/env python
"""Search at a million chunks over many assistants, and vector catch-up with more embedders.

    .venv/bin/python bench/scale.py [--chunks 1000000] [--rebuild] [--skip-burst]   (make bench-scale)

Not part of the test suite. What it does (docs/benchmarks.md, "Search at a million chunks"):

1. The corpus, built once and kept: ``--chunks`` chunk rows over 10 assistants in 3 teams, uneven
   (40% in one assistant, 2% in the smallest), in a database of its own in the embedded
   PostgreSQL (`openclaw_scale_<chunks>`), migrated with the project's migrations. Every row
   joins two of the 10,000 real texts of bench/search.py, its vector the mix of their real
   default-embedder vectors (cached under var/bench/) with a little noise (`assistant_mix`): no
   two rows are near-identical copies of one text. Rows are loaded with COPY, then each assistant
   large enough gets its own HNSW index (`memory_app.index.vectors`), as the product builds them. A second run finds the
   database and its recorded build figures and skips all of this (``--rebuild`` starts over).
2. In the largest and the smallest assistant: p50/p95 of hybrid search with the query vector
   given and of pgvector-only search, interleaved, through `memory_app.search.service.search_memory`
   (the search REST, MCP and the model's tool run, the index's state included); the
   HNSW recall@10 against exact search over the same assistant's vectors (numpy).
3. The largest assistant's graph built again on ``halfvec``: build time, size and recall beside
   the ``vector`` one (then dropped).
4. 32 concurrent search clients (4 processes of 8 threads, each client on one of the ten
   assistants, so all three teams) for ``--seconds``: searches per second and p95.
5. Unless ``--no-shared-baseline``, while the corpus is built: nearest-10 latency and recall with
   the former layout first, one HNSW graph over every assistant (its build given 3 GB of
   ``maintenance_work_mem`` so the graph of a million vectors fits), so the two can be compared.
6. Unless ``--skip-burst``: vector catch-up after a 4,000-message burst with 1, 2 and 4
   embedding processes behind the OpenAI-compatible provider (`bench/embed_burst.py`).

Prints each figure beside its target, and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
import search as search_bench  # noqa: E402  (bench/search.py: texts, vectors, noise, timings)
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, connections  # noqa: E402

from memory_app.index import config  # noqa: E402
from memory_app.index.text_index import ensure_text_index, text_index_name  # noqa: E402
from memory_app.index.vectors import OWN_INDEX_MIN_ROWS, create_index_sql, index_name  # noqa: E402
from memory_app.models import IndexState  # noqa: E402
from memory_app.search.candidates import forget_lexeme_stats  # noqa: E402
from memory_app.search.hybrid import resolve_options, run_search  # noqa: E402
from memory_app.search.service import search_memory  # noqa: E402
from memory_app.search.textsearch import TS_CONFIG, index_text  # noqa: E402
from openclaw_site.models import Assistant, Team  # noqa: E402
from providers.embeddings import reset_embedders  # noqa: E402

SHARES = (0.40, 0.15, 0.10, 0.08, 0.07, 0.06, 0.05, 0.04, 0.03, 0.02)
TEAMS = 3
DIMS = 384
CORPUS_VERSION = 3  # bump when the corpus' content changes: a kept database of another is rebuilt
# A row's vector: w * first + (1 - w) * second, w in this range, plus noise of this length.
MIX_WEIGHT = (0.5, 0.8)
MIX_NOISE = 0.05
TARGETS = {"hybrid_p95_ms": 25.0, "ratio": 1.5, "recall_at_10": 0.95}


def locomo_path() -> Path:
    """The LoCoMo file beside the main checkout (a worktree sits one level deeper)."""
    for base in (ROOT.parent, ROOT.parent.parent):
        path = base / "shared" / "data" / "locomo" / "locomo_dev5.json"
        if path.exists():
            return path
    raise SystemExit("LoCoMo dev file not found (../shared/data/locomo/locomo_dev5.json)")


# --- the corpus ----------------------------------------------------------------------------------


def sizes(chunks: int) -> list[int]:
    out = [int(chunks * share) for share in SHARES]
    out[0] += chunks - sum(out)
    return out


@dataclass(frozen=True)
class Base:
    """The real texts, their real e5 vectors, and which texts are transcript lines."""

    texts: list[str]
    vectors: np.ndarray
    sessions: np.ndarray  # bool per text

    @classmethod
    def of(cls, texts: list[str], vectors: np.ndarray) -> Base:
        sessions = np.array([t.startswith(("User:", "Assistant:")) for t in texts])
        return cls(texts, vectors, sessions)


@dataclass(frozen=True)
class Mix:
    """One assistant's rows: row i joins text ``first[i]`` and text ``second[i]``."""

    first: np.ndarray
    second: np.ndarray
    vectors: np.ndarray


def assistant_mix(base: Base, index: int, rows: int) -> Mix:
    """Return one assistant's rows (deterministic): each a mix of two different real texts.

    Each assistant takes every text as the first of a row in its own order (so in turn, as many
    rows per text as it holds rows per text), and as the second a random other text of the same
    kind (a transcript line with a transcript line, a note with a note), never the same pair
    twice in one assistant. The row's text is the two texts one after the other; its vector the
    normalised mix ``w * first + (1 - w) * second`` of their real vectors, ``w`` drawn from
    `MIX_WEIGHT`, plus a little noise (`MIX_NOISE`). So no two rows are near-identical, in
    vector or in words, and a row's neighbours are rows that share a text or mean something
    alike, as in a real memory; not 40 noisy copies of one text, whose exact order only the
    noise decides (docs/benchmarks.md, "Search at a million chunks").
    """
    rng = np.random.default_rng(2000 + index)
    n = len(base.texts)
    first = rng.permutation(n)[np.arange(rows) % n]
    second = np.empty(rows, dtype=np.int64)
    pools = {kind: np.flatnonzero(base.sessions == kind) for kind in (True, False)}
    todo = np.arange(rows)
    while len(todo):
        for kind, pool in pools.items():
            mine = todo[base.sessions[first[todo]] == kind]
            second[mine] = pool[rng.integers(0, len(pool), size=len(mine))]
        pair = np.minimum(first, second) * n + np.maximum(first, second)
        _, seen_first = np.unique(pair, return_index=True)
        again = np.ones(rows, dtype=bool)
        again[seen_first] = False
        todo = np.flatnonzero(again | (first == second))
    weight = rng.uniform(*MIX_WEIGHT, size=(rows, 1)).astype(np.float32)
    mixed = weight * base.vectors[first] + (1 - weight) * base.vectors[second]
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    sigma = MIX_NOISE / np.sqrt(base.vectors.shape[1])
    mixed += rng.normal(0.0, sigma, size=mixed.shape).astype(np.float32)
    unit: np.ndarray = (mixed / np.linalg.norm(mixed, axis=1, keepdims=True)).astype(np.float32)
    return Mix(first, second, unit)


def joined(base: Base, a: int, b: int) -> str:
    """The text of a row mixing texts ``a`` and ``b``."""
    return f"{base.texts[a]}\n{base.texts[b]}"


def mix_fidelity(base: Base, sample: int = 200) -> dict[str, float]:
    """How near a row's mixed vector is to the real e5 vector of its joined text, on a sample of
    rows drawn as the largest assistant's are (the e5 model embeds the sample's texts)."""
    mix = assistant_mix(base, 0, sample)
    texts = [joined(base, a, b) for a, b in zip(mix.first.tolist(), mix.second.tolist())]
    real = search_bench.encode(search_bench._embedder(), texts).astype(np.float32)
    real /= np.linalg.norm(real, axis=1, keepdims=True)
    return {
        "rows": sample,
        "mix_to_real": round(float(np.mean(np.sum(real * mix.vectors, axis=1))), 3),
        "first_text_to_real": round(float(np.mean(np.sum(real * base.vectors[mix.first], axis=1))), 3),
        "unrelated_rows": round(float(np.mean(np.sum(mix.vectors[:-1] * mix.vectors[1:], axis=1))), 3),
    }


# --- the kept database ---------------------------------------------------------------------------


def corpus_key(chunks: int) -> str:
    return f"v{CORPUS_VERSION}-{chunks}-{'-'.join(str(n) for n in sizes(chunks))}"


def use_database(name: str, *, key: str, rebuild: bool) -> dict[str, Any] | None:
    """Point Django at the kept benchmark database; return its recorded build figures, or None
    when it has to be built (it did not exist, was built for another corpus, or ``rebuild``)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        exists = cursor.fetchone() is not None
    recorded = _recorded(name) if exists and not rebuild else None
    if recorded is None or recorded.get("key") != key:
        with connection.cursor() as cursor:
            if exists:
                cursor.execute(f"DROP DATABASE {name} WITH (FORCE)")
            cursor.execute(f"CREATE DATABASE {name}")
        recorded = None
    connections.close_all()
    connection.settings_dict["NAME"] = name
    call_command("migrate", verbosity=0, interactive=False)
    return recorded


def _recorded(name: str) -> dict[str, Any] | None:
    original = connection.settings_dict["NAME"]
    connections.close_all()
    connection.settings_dict["NAME"] = name
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('bench_scale_meta') IS NOT NULL")
            if not cursor.fetchone()[0]:
                return None
            cursor.execute("SELECT value FROM bench_scale_meta WHERE key = 'build'")
            row = cursor.fetchone()
            return None if row is None else dict(json.loads(row[0]) if isinstance(row[0], str) else row[0])
    finally:
        connections.close_all()
        connection.settings_dict["NAME"] = original


def record(build: dict[str, Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_scale_meta (key text PRIMARY KEY, value jsonb)")
        cursor.execute(
            "INSERT INTO bench_scale_meta VALUES ('build', %s::jsonb) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [json.dumps(build)],
        )


# --- loading -------------------------------------------------------------------------------------


def make_assistants(chunks: int) -> list[Assistant]:
    teams = [Team.objects.create(slug=f"scale-team-{t}", name=f"Team {t}") for t in range(TEAMS)]
    return [
        Assistant.objects.create(
            team=teams[i % TEAMS], slug=f"scale-{i}", name=f"Assistant {i} ({n:,} chunks)"
        )
        for i, n in enumerate(sizes(chunks))
    ]


def bench_assistants() -> list[Assistant]:
    return list(Assistant.objects.filter(slug__startswith="scale-").order_by("pk"))


def load(assistants: list[Assistant], chunks: int, base: Base, model: str) -> float:
    """COPY every assistant's rows in (`assistant_mix`), their tsvectors computed as the
    product computes them; return seconds."""
    from pgvector.psycopg import register_vector
    from psycopg.types import TypeInfo

    started = time.perf_counter()
    connection.ensure_connection()
    register_vector(connection.connection)
    vector_oid = TypeInfo.fetch(connection.connection, "vector").oid
    with connection.cursor() as cursor:
        raw = cursor.cursor
        cursor.execute("CREATE TEMP TABLE stage (n int, body text, hash text, itext text, emb vector)")
        session = "(s.body LIKE 'User:%%' OR s.body LIKE 'Assistant:%%')"
        for index, (assistant, rows) in enumerate(zip(assistants, sizes(chunks))):
            mix = assistant_mix(base, index, rows)
            with raw.copy("COPY stage (n, body, hash, itext, emb) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["int4", "text", "text", "text", vector_oid])
                for n, (a, b, vector) in enumerate(zip(mix.first.tolist(), mix.second.tolist(), mix.vectors)):
                    body = joined(base, a, b)
                    digest = hashlib.sha256(body.encode()).hexdigest()
                    copy.write_row((n, body, digest, index_text(body), vector))
            # Each file holds 50 rows, row k at lines 10k+1 onwards (one line per line of text).
            cursor.execute(
                "INSERT INTO memory_app_memorychunk (assistant_id, source, generation, path, start_line, "
                "end_line, line_numbers, text, hash, source_hash, model, dims, embedding, tsv, timestamp, "
                f"created_at) SELECT %s, CASE WHEN {session} THEN 'sessions' ELSE 'memory' END, 1, "
                f"CASE WHEN {session} THEN 'sessions/scale-' || (s.n / 50) || '.jsonl' "
                "ELSE 'memory/scale/' || (s.n / 50) || '.md' END, "
                "l.first, l.first + l.lines - 1, ARRAY(SELECT generate_series(l.first, l.first + l.lines - 1)), "
                "s.body, s.hash, s.hash, %s, %s, s.emb, to_tsvector(%s, s.itext), "
                "now() - (s.n %% 400) * interval '1 day', now() "
                "FROM stage s, LATERAL (SELECT (s.n %% 50) * 10 + 1 AS first, "
                "array_length(string_to_array(s.body, E'\\n'), 1) AS lines) l ORDER BY s.n",
                [assistant.pk, model, DIMS, TS_CONFIG],
            )
            cursor.execute("TRUNCATE stage")
            print(f"  loaded {assistant.name}", flush=True)
        cursor.execute("DROP TABLE stage")
    return time.perf_counter() - started


def build_index(assistant: Assistant, *, kind: str = "") -> tuple[float, float]:
    """Build one assistant's HNSW index as the product does; return (seconds, MB)."""
    sql = create_index_sql(DIMS, assistant.pk, kind=kind)
    name = sql.split(" IF NOT EXISTS ")[1].split(" ")[0]
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        started = time.perf_counter()
        cursor.execute(sql)
        seconds = time.perf_counter() - started
        cursor.execute("RESET maintenance_work_mem")
    return seconds, relation_mb(name)


def text_indexes(assistants: list[Assistant]) -> dict[str, Any]:
    """Give each large enough assistant its own full-text index as the product does
    (`memory_app.index.text_index`; a kept corpus built before it existed gets them here)."""
    out: dict[str, Any] = {}
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '512MB'")
    for assistant in assistants:
        name = text_index_name(assistant.pk)
        existed = relation_exists(name)
        started = time.perf_counter()
        if ensure_text_index(assistant.pk):
            seconds = None if existed else round(time.perf_counter() - started, 1)
            out[assistant.slug] = {"seconds": seconds, "mb": relation_mb(name)}
    with connection.cursor() as cursor:
        cursor.execute("RESET maintenance_work_mem")
    return out


def relation_exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        return bool(cursor.fetchone()[0])


def relation_mb(name: str) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size(%s::regclass)", [name])
        return round(float(cursor.fetchone()[0]) / 2**20, 1)


def vacuum_analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) memory_app_memorychunk")
    forget_lexeme_stats()


def table_mb() -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_table_size('memory_app_memorychunk')")
        return round(float(cursor.fetchone()[0]) / 2**20, 1)


def mark_indexed(assistants: list[Assistant]) -> None:
    embedder = search_bench._embedder()
    for assistant in assistants:
        IndexState.objects.update_or_create(
            assistant=assistant,
            defaults={"fingerprint": config.fingerprint(assistant, embedder), "active_generation": 1},
        )


def build(args: argparse.Namespace, base: Base) -> dict[str, Any]:
    """Load the corpus, optionally measure the shared-graph layout, build the product's indexes."""
    model = search_bench._embedder().model
    assistants = make_assistants(args.chunks)
    mark_indexed(assistants)
    print(f"loading {args.chunks:,} chunks ...", flush=True)
    load_s = load(assistants, args.chunks, base, model)
    vacuum_analyze()
    out: dict[str, Any] = {"key": corpus_key(args.chunks), "load_seconds": round(load_s, 1)}
    out["mix"] = mix_fidelity(base)
    print(f"  a row's vector against the real e5 vector of its text: {out['mix']}", flush=True)
    if args.shared_baseline:
        print("the former layout: one HNSW graph for every assistant ...", flush=True)
        out["shared"] = shared_baseline(args, assistants, base)
    indexes: dict[str, Any] = {}
    for assistant, rows in zip(assistants, sizes(args.chunks)):
        if rows >= OWN_INDEX_MIN_ROWS:
            seconds, mb = build_index(assistant)
            indexes[assistant.slug] = {"rows": rows, "seconds": round(seconds, 1), "mb": mb}
            print(f"  index of {assistant.name}: {seconds:.1f} s, {mb} MB", flush=True)
    vacuum_analyze()
    out["indexes"] = indexes
    out["index_seconds"] = round(sum(i["seconds"] for i in indexes.values()), 1)
    out["index_mb"] = round(sum(i["mb"] for i in indexes.values()), 1)
    out["table_mb"] = table_mb()
    print("the largest assistant's graph on halfvec ...", flush=True)
    out["halfvec"] = halfvec_figures(args, assistants[0], base)
    return out


# --- measurements --------------------------------------------------------------------------------


@dataclass
class Probe:
    """The queries of one measured assistant, with the exact top 10 of each within it."""

    assistant: Assistant
    rows: int
    queries: list[str]
    vectors: np.ndarray
    exact: list[set[int]]


def make_probe(
    assistant: Assistant, index: int, rows: int, base: Base, asked: list[str], qv: np.ndarray
) -> Probe:
    """Exact top 10 by numpy over the assistant's own vectors (regenerated: row i has the i-th id)."""
    vectors = assistant_mix(base, index, rows).vectors
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT array_agg(id ORDER BY id) FROM memory_app_memorychunk WHERE assistant_id = %s",
            [assistant.pk],
        )
        ids = np.asarray(cursor.fetchone()[0])
    exact = [set(ids[np.argsort(-(vectors @ v), kind="stable")[:10]].tolist()) for v in qv]
    return Probe(assistant, rows, asked, qv, exact)


def latency(probe: Probe, warm: Sequence[tuple[str, np.ndarray]]) -> dict[str, dict[str, float]]:
    """p50/p95 of hybrid (query vector given) and pgvector-only search, interleaved, once the
    assistant is warm; and the p50/p95 of the hybrid searches that warmed it.

    A server that answers an assistant's searches keeps the pages they read (its HNSW graph, about
    2 KB per vector, and its full-text index) in shared buffers. Just after the server starts, or
    after other assistants' searches took those buffers, each search reads hundreds of graph pages
    back from the operating system's cache: a cost of the buffer cache, not of the search. So the
    assistant is first searched with ``warm``, other questions than the measured ones (reported
    apart, as its first searches), and then measured (docs/benchmarks.md).
    """
    kinds: dict[str, Callable[[str, np.ndarray], Any]] = {
        "hybrid": lambda q, v: search_memory(assistant=probe.assistant, query=q, query_vector=v.tolist()),
        "pgvector": lambda q, v: search_memory(
            assistant=probe.assistant, query=q, mode="vector", query_vector=v.tolist()
        ),
    }
    timings = search_bench.Timings()
    for q, v in warm:
        started = time.perf_counter()
        kinds["hybrid"](q, v)
        timings.add("first", (time.perf_counter() - started) * 1000)
    for i, (q, v) in enumerate(zip(probe.queries, probe.vectors)):
        for name in list(kinds)[i % 2 :] + list(kinds)[: i % 2]:
            started = time.perf_counter()
            response = kinds[name](q, v)
            timings.add(name, (time.perf_counter() - started) * 1000)
            if response.mode != {"hybrid": "hybrid", "pgvector": "vector"}[name]:
                raise SystemExit(f"{name} search ran as {response.mode} ({response.fallback})")
    return {
        n: {"p50": round(timings.pct(n, 50), 2), "p95": round(timings.pct(n, 95), 2)}
        for n in (*kinds, "first")
    }


def recall(probe: Probe) -> float:
    """Mean share of the exact top 10 that the product's vector search returns."""
    options = replace(resolve_options(probe.assistant, max_results=10, min_score=0.0), mode="vector")
    embedder = search_bench._embedder()
    total = 0.0
    for q, v, exact in zip(probe.queries, probe.vectors, probe.exact):
        response = run_search(
            assistant=probe.assistant, query=q, options=options, embedder=embedder, query_vector=v.tolist()
        )
        total += len(exact & {r.chunk_id for r in response.results}) / 10
    return round(total / len(probe.queries), 4)


def raw_vector_search(probe: Probe, cast: str, *, generic: bool) -> tuple[float, float]:
    """(p95 ms, recall@10) of a bare nearest-10 query with ``cast``; ``generic``: the assistant a
    parameter under a generic plan, as the former search sent it (one plan for every assistant)."""
    import psycopg

    who = "%s" if generic else str(probe.assistant.pk)
    sql = (
        f"SELECT id FROM memory_app_memorychunk m WHERE m.dims = {DIMS} AND m.assistant_id = {who} "
        f"AND m.generation = 1 ORDER BY (embedding::{cast}) <=> (%s)::{cast} LIMIT 10"
    )
    found, times = 0.0, []
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute("SET plan_cache_mode = " + ("force_generic_plan" if generic else "auto"))
        for v, exact in zip(probe.vectors, probe.exact):
            literal = "[" + ",".join(f"{x:.7g}" for x in v) + "]"
            params = [probe.assistant.pk, literal] if generic else [literal]
            started = time.perf_counter()
            cursor.execute(sql, params, prepare=True)
            ids = {row[0] for row in cursor.fetchall()}
            times.append((time.perf_counter() - started) * 1000)
            found += len(exact & ids) / 10
        cursor.execute("RESET plan_cache_mode")
    times.sort()
    return round(times[round(0.95 * (len(times) - 1))], 2), round(found / len(probe.vectors), 4)


def shared_baseline(args: argparse.Namespace, assistants: list[Assistant], base: Base) -> dict[str, Any]:
    """The former layout, one graph over every assistant: its build and its filtered searches."""
    name = "memchunk_hnsw_384"
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '3GB'")
        started = time.perf_counter()
        cursor.execute(
            f"CREATE INDEX {name} ON memory_app_memorychunk USING hnsw ((embedding::vector({DIMS})) "
            f"vector_cosine_ops) WITH (m = 16, ef_construction = 128) WHERE dims = {DIMS}"
        )
        seconds = time.perf_counter() - started
        cursor.execute("RESET maintenance_work_mem")
    out: dict[str, Any] = {"build_seconds": round(seconds, 1), "mb": relation_mb(name)}
    asked, qv = args.asked, args.query_vectors
    for label, index in (("largest", 0), ("smallest", len(assistants) - 1)):
        probe = make_probe(assistants[index], index, sizes(args.chunks)[index], base, asked, qv)
        p95, rec = raw_vector_search(probe, f"vector({DIMS})", generic=True)
        out[label] = {"pgvector_p95_ms": p95, "recall_at_10": rec}
        print(f"  shared graph, {label}: nearest-10 p95 {p95} ms, recall@10 {rec}", flush=True)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {name}")
    return out


def halfvec_figures(args: argparse.Namespace, assistant: Assistant, base: Base) -> dict[str, Any]:
    """The largest assistant's graph on halfvec beside its vector one: build, size, recall, p95."""
    seconds, mb = build_index(assistant, kind=f"halfvec({DIMS})")
    probe = make_probe(assistant, 0, sizes(args.chunks)[0], base, args.asked, args.query_vectors)
    p95_half, rec_half = raw_vector_search(probe, f"halfvec({DIMS})", generic=False)
    name = index_name(DIMS, assistant.pk) + "_halfvec"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {name}")
    p95_vec, rec_vec = raw_vector_search(probe, f"vector({DIMS})", generic=False)
    return {
        "halfvec": {"seconds": round(seconds, 1), "mb": mb, "p95_ms": p95_half, "recall_at_10": rec_half},
        "vector": {"p95_ms": p95_vec, "recall_at_10": rec_vec},
    }


# --- 32 concurrent clients -----------------------------------------------------------------------


def _client_process(
    slot: int, threads: int, seconds: float, work: list[tuple[int, list[str], list[list[float]]]], out: Any
) -> None:
    connections.close_all()
    search_bench._embedder()  # the configured embedder, loaded before the clock starts
    results: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(number: int) -> None:
        assistant_id, queries, vectors = work[number % len(work)]
        assistant = Assistant.objects.get(pk=assistant_id)
        mine: list[float] = []
        i = number
        while time.monotonic() < deadline:
            q, v = queries[i % len(queries)], vectors[i % len(vectors)]
            started = time.perf_counter()
            search_memory(assistant=assistant, query=q, query_vector=v)
            mine.append((time.perf_counter() - started) * 1000)
            i += 7
        connection.close()
        with lock:
            results.extend(mine)

    workers = [threading.Thread(target=client, args=(slot * threads + t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put(results)


def concurrent(args: argparse.Namespace, assistants: list[Assistant]) -> dict[str, float]:
    """32 clients (4 processes x 8 threads), client i on assistant i mod 10: every team searching."""
    work = [(a.pk, args.asked, args.query_vectors.tolist()) for a in assistants]
    processes, threads = 4, args.clients // 4
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    connections.close_all()
    procs = [
        ctx.Process(target=_client_process, args=(p, threads, args.seconds, work, queue))
        for p in range(processes)
    ]
    started = time.perf_counter()
    for p in procs:
        p.start()
    latencies: list[float] = []
    for _ in procs:
        latencies.extend(queue.get())
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "clients": processes * threads,
        "searches": len(latencies),
        "qps": round(len(latencies) / elapsed, 1),
        "p50_ms": round(latencies[len(latencies) // 2], 1),
        "p95_ms": round(latencies[round(0.95 * (len(latencies) - 1))], 1),
    }


# --- the run -------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_LOCAL_MODEL = "multilingual-e5-small"
    reset_embedders()
    embedder = search_bench._embedder()
    texts = search_bench.real_texts(locomo_path(), search_bench.BASE_TEXTS)
    base = Base.of(texts, search_bench.cached_embeddings(embedder, texts).astype(np.float32))
    asked = search_bench.questions(locomo_path(), args.queries + args.warm_queries)
    vectors = search_bench.encode(embedder, asked, queries=True).astype(np.float32)
    args.asked, args.query_vectors = asked[: args.queries], vectors[: args.queries]
    warm = list(zip(asked[args.queries :], vectors[args.queries :]))
    report: dict[str, Any] = {"chunks": args.chunks, "assistants": len(SHARES), "teams": TEAMS}
    report["machine"] = search_bench.machine()
    report["warm_queries"] = len(warm)
    started = time.perf_counter()
    recorded = use_database(
        f"openclaw_scale_{args.chunks}", key=corpus_key(args.chunks), rebuild=args.rebuild
    )
    if recorded is None:
        recorded = build(args, base)
        record(recorded)
        report["built_now"] = True
    else:
        report["built_now"] = False
        print("reusing the kept corpus (built before; its build figures are the recorded ones)", flush=True)
    report["build"] = recorded
    assistants = bench_assistants()
    print("each assistant's own full-text index ...", flush=True)
    report["text_indexes"] = text_indexes(assistants)
    rows = sizes(args.chunks)
    report["sizes"] = rows
    report["measured"] = {}
    for label, index in (("largest", 0), ("smallest", len(assistants) - 1)):
        probe = make_probe(assistants[index], index, rows[index], base, args.asked, args.query_vectors)
        print(f"searching the {label} assistant ({rows[index]:,} chunks) ...", flush=True)
        lat = latency(probe, warm)
        report["measured"][label] = {
            "rows": rows[index],
            "own_index": rows[index] >= OWN_INDEX_MIN_ROWS,
            "latency_ms": lat,
            "recall_at_10": recall(probe),
        }
    print(f"{args.clients} concurrent clients for {args.seconds:.0f} s ...", flush=True)
    report["concurrent"] = concurrent(args, assistants)
    report["search_minutes"] = round((time.perf_counter() - started) / 60, 1)
    print(json.dumps({"search": report["measured"], "concurrent": report["concurrent"]}), flush=True)
    if not args.skip_burst:
        report["burst"] = burst(args)
    return report


def burst(args: argparse.Namespace) -> dict[str, Any]:
    """Vector catch-up after a burst with 1, 2 and 4 embedding processes (bench/embed_burst.py)."""
    command = [
        sys.executable,
        str(ROOT / "bench" / "embed_burst.py"),
        "--messages",
        str(args.burst_messages),
        "--processes",
        args.processes,
        "--json",
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"bench/embed_burst.py failed ({done.returncode})")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def table(report: dict[str, Any]) -> str:
    b = report["build"]
    lines = [f"Machine: {report['machine']}", f"Load average at the start: {report['load_average']}"]
    lines.append(
        f"{report['chunks']:,} chunks over {report['assistants']} assistants in {report['teams']} teams "
        f"({', '.join(f'{n:,}' for n in report['sizes'])})"
    )
    lines.append(
        f"Build{' (recorded when the corpus was built)' if not report['built_now'] else ''}: load {b['load_seconds']} s, "
        f"per-assistant HNSW {b['index_seconds']} s ({len(b['indexes'])} indexes, {b['index_mb']} MB), "
        f"table {b['table_mb']} MB"
    )
    t = report.get("text_indexes") or {}
    built = [i["seconds"] for i in t.values() if i["seconds"] is not None]
    lines.append(
        f"Per-assistant full-text (GIN) indexes: {len(t)}, {round(sum(i['mb'] for i in t.values()), 1)} MB"
        + (f", built now in {round(sum(built), 1)} s" if built else " (kept from an earlier run)")
    )
    if "mix" in b:
        x = b["mix"]
        lines.append(
            f"Rows mix two real texts: cosine of a row's vector to the real e5 vector of its text "
            f"{x['mix_to_real']} (its first text's own vector: {x['first_text_to_real']}; "
            f"two unrelated rows: {x['unrelated_rows']}; {x['rows']} rows embedded)"
        )
    for label, m in report["measured"].items():
        lat = m["latency_ms"]
        ratio = lat["hybrid"]["p95"] / lat["pgvector"]["p95"]
        how = "own HNSW index" if m["own_index"] else "exact (below the own-index threshold)"
        lines.append(f"{label} assistant, {m['rows']:,} chunks, {how}:")
        lines.append(
            f"  hybrid p95 {lat['hybrid']['p95']:.1f} ms (target <= 25), p50 {lat['hybrid']['p50']:.1f} ms"
        )
        lines.append(
            f"  pgvector-only p95 {lat['pgvector']['p95']:.1f} ms; hybrid/pgvector {ratio:.2f}x (target <= 1.5x)"
        )
        lines.append(
            f"  its first {report['warm_queries']} hybrid searches (other questions, warming it): "
            f"p50 {lat['first']['p50']:.1f} ms, p95 {lat['first']['p95']:.1f} ms (reported)"
        )
        lines.append(
            f"  HNSW recall@10 vs exact within the assistant: {m['recall_at_10']:.3f} (target >= 0.95)"
        )
    h = b["halfvec"]
    lines.append(
        f"Largest assistant's graph: vector {b['indexes'][next(iter(b['indexes']))]['mb']} MB in "
        f"{b['indexes'][next(iter(b['indexes']))]['seconds']} s, recall {h['vector']['recall_at_10']}, "
        f"p95 {h['vector']['p95_ms']} ms; halfvec {h['halfvec']['mb']} MB in {h['halfvec']['seconds']} s, "
        f"recall {h['halfvec']['recall_at_10']}, p95 {h['halfvec']['p95_ms']} ms (reported)"
    )
    if "shared" in b:
        s = b["shared"]
        lines.append(
            f"Former layout, one graph for all ({s['mb']} MB, {s['build_seconds']} s): largest p95 "
            f"{s['largest']['pgvector_p95_ms']} ms recall {s['largest']['recall_at_10']}; smallest p95 "
            f"{s['smallest']['pgvector_p95_ms']} ms recall {s['smallest']['recall_at_10']}"
        )
    c = report["concurrent"]
    lines.append(
        f"{c['clients']} concurrent clients over every team: {c['qps']} searches/s, p50 {c['p50_ms']} ms, "
        f"p95 {c['p95_ms']} ms (reported)"
    )
    if "burst" in report:
        for n, figures in report["burst"]["runs"].items():
            lines.append(
                f"Burst of {report['burst']['messages']} messages, {n} embedding process(es): vectors caught up "
                f"in {figures['catch_up_s']} s ({figures['chunks']} chunks, {figures['per_s']}/s; "
                f"the service embedded {figures['texts_embedded_by_service']} texts, target = chunks)"
            )
    return "\n".join(lines)


def summary(report: dict[str, Any]) -> dict[str, Any]:
    m, b = report["measured"], report["build"]
    worst = max(m.values(), key=lambda x: x["latency_ms"]["hybrid"]["p95"])
    out = {
        "chunks": report["chunks"],
        "assistants": report["assistants"],
        "hybrid_p95_ms": max(x["latency_ms"]["hybrid"]["p95"] for x in m.values()),
        "pgvector_p95_ms": worst["latency_ms"]["pgvector"]["p95"],
        "hybrid_p95_ms_by_assistant": {k: x["latency_ms"]["hybrid"]["p95"] for k, x in m.items()},
        "pgvector_p95_ms_by_assistant": {k: x["latency_ms"]["pgvector"]["p95"] for k, x in m.items()},
        "first_searches_hybrid_p95_ms_by_assistant": {
            k: x["latency_ms"]["first"]["p95"] for k, x in m.items()
        },
        "recall_at_10": min(x["recall_at_10"] for x in m.values()),
        "recall_at_10_by_assistant": {k: x["recall_at_10"] for k, x in m.items()},
        "search_qps_32_clients": report["concurrent"]["qps"],
        "search_p95_ms_32_clients": report["concurrent"]["p95_ms"],
        "build_seconds": round(b["load_seconds"] + b["index_seconds"], 1),
        "index_seconds": b["index_seconds"],
        "index_mb": b["index_mb"],
        "table_mb": b["table_mb"],
        "halfvec_index_mb_largest": b["halfvec"]["halfvec"]["mb"],
        "halfvec_index_seconds_largest": b["halfvec"]["halfvec"]["seconds"],
        "built_now": report["built_now"],
    }
    if "burst" in report:
        out["burst_catch_up_s"] = {n: r["catch_up_s"] for n, r in report["burst"]["runs"].items()}
        out["burst_texts_embedded"] = {
            n: r["texts_embedded_by_service"] for n, r in report["burst"]["runs"].items()
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=100, help="LoCoMo questions per measured assistant")
    parser.add_argument(
        "--warm-queries", type=int, default=200, help="other LoCoMo questions searched first, per assistant"
    )
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the concurrent clients search")
    parser.add_argument("--rebuild", action="store_true", help="build the corpus again even if one is kept")
    parser.add_argument("--shared-baseline", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--skip-burst", action="store_true")
    parser.add_argument("--burst-messages", type=int, default=4000)
    parser.add_argument("--processes", default="1,2,4", help="embedding processes per burst run")
    args = parser.parse_args()
    load_average = os.getloadavg()
    report = run(args)
    report["load_average"] = " ".join(f"{x:.1f}" for x in load_average)
    print(table(report))
    print(json.dumps(summary(report)))


if __name__ == "__main__":
    main()
