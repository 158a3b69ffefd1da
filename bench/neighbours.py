#!/usr/bin/env python
"""Noisy-neighbour benchmark: one team's search and import storm against another team's search.

    .venv/bin/python bench/neighbours.py [--searchers 15] [--documents 2000] [--embedder e5]
    (make bench-neighbours)

It starts the server as production runs it (`manage.py runall`, DEBUG off: gunicorn with uvicorn
workers and both task clusters) on the bench database of the embedded PostgreSQL, with two teams.
Team B (quiet) is measured twice, on a quiet server and while team A (noisy) runs `--searchers`
clients that each search with a long query (about 1,500 characters) as fast as they are
answered, and imports a workspace of `--documents` small notes (`manage.py import_workspace`,
the path the dashboard's upload takes). Team B's figures: the p95 of its searches (one sequential
client) and, five times, how long a note it writes takes to be found by its search. They are
printed beside the targets of docs/design.md (Limits and refusals, fair sharing): B's search p95
within 2x of quiet, and its writes searchable within the usual seconds (at most 5 s). Also printed: how many of A's searches were refused 429 `team_busy` (its share). Nothing
here is a test: figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from sessions import (  # noqa: E402  (bench/sessions.py: the same server, database and client)
    PYTHON,
    Api,
    _port_open,
    child_env,
    drop_embedded_database,
    embedded_database_url,
    free_port,
    manage,
    pct,
    setup_team,
    wait_for,
)

from tests.fake_openai import FakeOpenAI  # noqa: E402

PROBE_SECONDS = 20.0
WRITES = 5
SEARCHABLE_TARGET_S = 5.0
LONG_QUERY = " ".join(
    f"harbour{n} schedule ferry timetable weather" for n in range(40)
)  # within the 2000-character limit


def serve_model(ports: Any, stop: Any) -> None:
    """Run the scripted OpenAI-compatible server (chat and the instant embedder) until `stop` is set."""
    fake = FakeOpenAI().start()
    ports.put(fake.base_url)
    stop.wait()
    fake.stop()


class _ModelAddress:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url


def second_team(env: dict[str, str], slug: str) -> str:
    """Create team ``slug`` with an all-scopes key; return the key."""
    manage(env, "create_team", slug)
    scopes = ("sessions:read", "sessions:write", "memory:read", "memory:write", "admin")
    return manage(env, "create_api_key", "--team", slug, "--name", slug, "--scopes", *scopes).strip()


def search_p95(api: Api, seconds: float) -> tuple[float, int]:
    """Search B's memory one request after another for ``seconds``; return (p95 ms, count)."""
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        status, body, ms = api.call("GET", "/assistants/quiet/search/?q=launch+date")
        if status != 200:
            raise SystemExit(f"team B's search answered {status}: {json.dumps(body)[:300]}")
        times.append(ms)
        time.sleep(0.05)
    return pct(times, 95), len(times)


def searchable_seconds(api: Api, round_: str) -> list[float]:
    """Write a note with a new word, then search until it is found; return each wait in seconds."""
    waits = []
    for n in range(WRITES):
        word = f"zephyr{round_}x{n}"
        api.ok(
            "PUT", f"/assistants/quiet/memory/memory/{word}.md", {"content": f"the {word} sails at noon\n"}
        )
        started = time.perf_counter()
        while True:
            status, body, _ = api.call("GET", f"/assistants/quiet/search/?q={word}")
            if status == 200 and any(word in r.get("snippet", "") for r in body["results"]):
                break
            if time.perf_counter() - started > 600:
                raise SystemExit(f"{word} was not searchable after 600 s")
            time.sleep(0.1)
        waits.append(time.perf_counter() - started)
    return waits


def storm(port: int, key: str, searchers: int, stop: Any, answers: Any) -> None:
    """Run ``searchers`` threads of team A searching with a long query until ``stop``; put the
    count of each answer status on ``answers``.

    A process of its own, as team A's clients are other programs than team B's: threads of one
    Python process share its interpreter lock, so B's client measured beside them would time
    their turns too, not only the server's answers.
    """
    api = Api(port, key)
    counts: dict[str, int] = {}
    lock = threading.Lock()

    def search() -> None:
        while not stop.is_set():
            status, _, _ = api.call("GET", f"/assistants/noisy/search/?q={quote(LONG_QUERY)}")
            with lock:
                counts[str(status)] = counts.get(str(status), 0) + 1
            if status == 429:
                time.sleep(1)  # Retry-After

    threads = [threading.Thread(target=search, daemon=True) for _ in range(searchers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    answers.put(counts)


def workspace(directory: Path, documents: int) -> Path:
    for n in range(documents):
        folder = directory / "memory" / f"batch{n // 500}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note{n}.md").write_text(f"note {n}: harbour{n % 50} ferry timetable and weather\n")
    return directory


def run(database_url: str, *, searchers: int, documents: int, embedder: str) -> dict[str, Any]:
    spawn = multiprocessing.get_context("spawn")
    ports, stop_model = spawn.Queue(), spawn.Event()
    model = spawn.Process(target=serve_model, args=(ports, stop_model), daemon=True)
    model.start()
    env = child_env(database_url, _ModelAddress(ports.get(timeout=60)), embedder=embedder)  # type: ignore[arg-type]
    setup_team(env)
    noisy_key, quiet_key = second_team(env, "noisy"), second_team(env, "quiet")
    port = free_port()
    command = [PYTHON, "manage.py", "runall", "--addr", f"127.0.0.1:{port}"]
    server = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _port_open(port), timeout=180, what="the web server")
        noisy, quiet = Api(port, noisy_key), Api(port, quiet_key)
        for api, slug in ((noisy, "noisy"), (quiet, "quiet")):
            api.ok("POST", "/assistants/", {"slug": slug, "name": slug, "context_window": 200_000})
            api.ok(
                "PUT", f"/assistants/{slug}/memory/MEMORY.md", {"content": "The launch date is 2026-12-15.\n"}
            )
        searchable_seconds(quiet, "warm")  # first requests load code, the embedder, connections
        quiet_p95, quiet_count = search_p95(quiet, PROBE_SECONDS)
        quiet_waits = searchable_seconds(quiet, "quiet")

        stop, answers = spawn.Event(), spawn.Queue()
        storming = spawn.Process(target=storm, args=(port, noisy_key, searchers, stop, answers))
        storming.start()
        with tempfile.TemporaryDirectory() as directory:
            source = str(workspace(Path(directory), documents))
            importer = subprocess.Popen(
                [
                    PYTHON,
                    "manage.py",
                    "import_workspace",
                    source,
                    "--team",
                    "noisy",
                    "--assistant",
                    "imported",
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            time.sleep(2)  # the storm under way
            busy_p95, busy_count = search_p95(quiet, PROBE_SECONDS)
            busy_waits = searchable_seconds(quiet, "busy")
            import_s = time.perf_counter()
            importer.wait(timeout=3600)
            import_s = time.perf_counter() - import_s
        stop.set()
        counts = answers.get(timeout=180)
        storming.join(timeout=60)
        return {
            "searchers": searchers,
            "documents": documents,
            "embedder": embedder,
            "quiet_search_p95_ms": quiet_p95,
            "quiet_searches": quiet_count,
            "busy_search_p95_ms": busy_p95,
            "busy_searches": busy_count,
            "quiet_searchable_max_s": max(quiet_waits),
            "busy_searchable_max_s": max(busy_waits),
            "busy_searchable_s": busy_waits,
            "noisy_answers": counts,
            "import_exit": importer.returncode,
            "import_left_after_probes_s": import_s,
        }
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        stop_model.set()
        model.join(timeout=30)


def report(f: dict[str, Any]) -> None:
    print(f"\nteam A: {f['searchers']} long-query searchers and an import of {f['documents']} notes")
    print(f"  A's searches answered   {json.dumps(f['noisy_answers'])} (429: over its share)")
    print(f"  A's import exit status  {f['import_exit']}")
    ratio = f["busy_search_p95_ms"] / f["quiet_search_p95_ms"]
    verdict = "met" if ratio <= 2 else "MISSED"
    print(
        f"  B's search p95          {f['busy_search_p95_ms']:.1f} ms under the storm, "
        f"{f['quiet_search_p95_ms']:.1f} ms quiet: {ratio:.2f}x   target <= 2x   {verdict}"
    )
    verdict = "met" if f["busy_searchable_max_s"] <= SEARCHABLE_TARGET_S else "MISSED"
    print(
        f"  B's write searchable    max {f['busy_searchable_max_s']:.1f} s under the storm, "
        f"{f['quiet_searchable_max_s']:.1f} s quiet   target <= {SEARCHABLE_TARGET_S:.0f} s   {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--searchers", type=int, default=15)
    parser.add_argument("--documents", type=int, default=2000)
    parser.add_argument("--embedder", choices=("e5", "instant"), default="e5")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; embedder {args.embedder}")
    database_url = embedded_database_url()
    try:
        figures = run(
            database_url, searchers=args.searchers, documents=args.documents, embedder=args.embedder
        )
    finally:
        drop_embedded_database()
    report(figures)
    if args.json:
        print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
