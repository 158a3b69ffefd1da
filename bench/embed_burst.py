#!/usr/bin/env python
"""Vector catch-up after a burst, with 1, 2 and 4 embedding processes (part of make bench-scale).

    .venv/bin/python bench/embed_burst.py [--messages 4000] [--processes 1,2,4] [--json]

In a database of its own (`openclaw_burst`, migrated, dropped at the end): a burst of
``--messages`` real messages (bench/search.py's real texts: LoCoMo turns and notes, 4 to a chunk, over 8 transcripts of
one assistant)
stored as a burst leaves them, text first and without vectors (`model = 'fts-only'`). Then, for
each count N of ``--processes``: the OpenAI-compatible embedding service of bench/embed_server.py
with N e5 processes, and N workers running `memory_app.index.vector_fill.fill_waiting` against it
through the product's OpenAI provider (`EMBEDDING_PROVIDER=openai`), all started at once; the
catch-up time is until the last worker finds nothing left. Each run starts from the same
text-only rows and an empty embedding cache. The service counts the texts it embedded: more
than the burst's chunks would mean two workers embedded the same chunk.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection, connections  # noqa: E402

from memory_app.index.vector_fill import backlog, fill_waiting  # noqa: E402
from memory_app.models import FTS_ONLY_MODEL, EmbeddingCache, MemoryChunk  # noqa: E402
from memory_app.search.textsearch import TS_CONFIG, index_text  # noqa: E402
from openclaw_site.models import Assistant, Team  # noqa: E402
from providers.embeddings import reset_embedders  # noqa: E402

BURST_DB = "openclaw_burst"
PER_CHUNK = 4
SESSIONS = 8


def burst_messages(count: int) -> list[str]:
    """Return ``count`` distinct real messages: bench/search.py's texts (LoCoMo turns and notes)."""
    import search as search_bench
    from scale import locomo_path

    return search_bench.real_texts(locomo_path(), count, seed=17)


def store_burst(assistant: Assistant, messages: list[str]) -> int:
    """Write the burst's chunks text-only, as the text-first write leaves them; return their count."""
    chunks = ["\n".join(messages[i : i + PER_CHUNK]) for i in range(0, len(messages), PER_CHUNK)]
    per_session = -(-len(chunks) // SESSIONS)
    import hashlib

    with connection.cursor() as cursor:
        for n, text in enumerate(chunks):
            session, line = divmod(n, per_session)
            cursor.execute(
                "INSERT INTO memory_app_memorychunk (assistant_id, source, generation, session_pk, path, "
                "start_line, end_line, line_numbers, text, hash, source_hash, model, dims, tsv, timestamp, "
                f"created_at) VALUES (%s, 'sessions', 1, %s, %s, %s, %s, %s, %s, %s, %s, %s, 0, "
                f"to_tsvector('{TS_CONFIG}', %s), now(), now())",
                [
                    assistant.pk,
                    session + 1,
                    f"sessions/burst-{session + 1}.jsonl",
                    line * PER_CHUNK + 1,
                    line * PER_CHUNK + PER_CHUNK,
                    list(range(line * PER_CHUNK + 1, line * PER_CHUNK + PER_CHUNK + 1)),
                    text,
                    hashlib.sha256(text.encode()).hexdigest(),
                    hashlib.sha256(str(session).encode()).hexdigest(),
                    FTS_ONLY_MODEL,
                    index_text(text),
                ],
            )
    return len(chunks)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(port: int, out: Any) -> None:
    connections.close_all()
    settings.EMBEDDING_PROVIDER = "openai"
    settings.EMBEDDING_BASE_URL = f"http://127.0.0.1:{port}/v1"
    settings.EMBEDDING_API_KEY = "local"
    settings.EMBEDDING_MODEL = "multilingual-e5-small"
    settings.EMBEDDING_DIMENSIONS = 384
    settings.EMBEDDING_QUERY_INPUT_TYPE = "query"
    settings.EMBEDDING_DOCUMENT_INPUT_TYPE = "passage"
    reset_embedders()
    filled = 0
    while True:
        outcome = fill_waiting()
        filled += outcome.filled
        if outcome.error is not None:
            out.put({"filled": filled, "error": outcome.error})
            return
        if not outcome.more:
            break
    out.put({"filled": filled, "error": None})
    connections.close_all()


def wait_for(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the embedding service did not start")


def one_run(processes: int, chunks: int) -> dict[str, Any]:
    MemoryChunk.objects.update(model=FTS_ONLY_MODEL, dims=0, embedding=None)
    EmbeddingCache.objects.all().delete()
    port = free_port()
    counts = ROOT / "var" / "bench" / f"embed-counts-{port}"
    counts.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "embed_server.py"),
            "--port",
            str(port),
            "--processes",
            str(processes),
            "--counts-dir",
            str(counts),
        ]
    )
    try:
        wait_for(port)
        time.sleep(2.0)  # every process loads its model (about 0.1 s each, longer on a busy machine)
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        connections.close_all()
        workers = [ctx.Process(target=_worker, args=(port, queue)) for _ in range(processes)]
        started = time.perf_counter()
        for w in workers:
            w.start()
        results = [queue.get() for _ in workers]
        for w in workers:
            w.join()
        seconds = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait()
    embedded = sum(int(p.read_text() or 0) for p in counts.glob("*.count"))
    shutil.rmtree(counts, ignore_errors=True)
    errors = [r["error"] for r in results if r["error"]]
    return {
        "processes": processes,
        "workers": processes,
        "chunks": chunks,
        "filled": sum(r["filled"] for r in results),
        "texts_embedded_by_service": embedded,
        "left_waiting": backlog(),
        "errors": errors,
        "catch_up_s": round(seconds, 1),
        "per_s": round(chunks / seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    counts = [int(x) for x in args.processes.split(",")]
    connection.settings_dict["TEST"]["NAME"] = BURST_DB
    original = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        team = Team.objects.create(slug="burst", name="Burst")
        assistant = Assistant.objects.create(team=team, slug="burst", name="Burst")
        chunks = store_burst(assistant, burst_messages(args.messages))
        runs = {}
        for n in counts:
            print(
                f"burst of {args.messages} messages ({chunks} chunks), {n} embedding process(es) ...",
                file=sys.stderr,
                flush=True,
            )
            runs[str(n)] = one_run(n, chunks)
            print(f"  caught up in {runs[str(n)]['catch_up_s']} s", file=sys.stderr, flush=True)
    finally:
        connections.close_all()
        connection.creation.destroy_test_db(original, verbosity=0)
    report = {"messages": args.messages, "chunks": chunks, "cores": os.cpu_count(), "runs": runs}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
