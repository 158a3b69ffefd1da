#!/usr/bin/env python
"""Streaming benchmark: 50 streamed turns of a slow model while health checks and searches stay fast.

    .venv/bin/python bench/streams.py [--streams 50] [--reply-seconds 10]      (make bench-streams)

It starts the server as production runs it (`manage.py runall` with DEBUG off: gunicorn with
uvicorn workers serving config.asgi) on the bench database of the embedded PostgreSQL,
with the scripted OpenAI-compatible model of tests/fake_openai.py streaming every reply over
`--reply-seconds` (docs/design.md, Streaming). It measures `GET /healthz` and a memory search
from one sequential client, first on an idle server and then while `--streams` clients each
stream a turn (`POST /sessions/{id}/messages/` with "respond": true, "stream": true), and prints
each figure beside its target. The search is timed twice per round: a repeated query (its
vector comes from the query cache) and a new one (embedded). The model and the streaming clients run in processes of their
own, so that the timed client shares no interpreter lock with them. Nothing here is a test:
figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

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
    pct,
    setup_team,
    wait_for,
)

from tests.fake_openai import FakeOpenAI, Reply, chunked_reply  # noqa: E402

TARGETS = {"healthz_p95_ms": 100.0, "search_p95_ms": 100.0, "new_search_p95_ms": 100.0}
PROBES = (("healthz", "GET /healthz"), ("search", "search (repeated)"), ("new_search", "search (new query)"))
REPLY_CHUNKS = 20
IDLE_PROBE_SECONDS = 5.0
WARM_UP_SECONDS = 2.0


def slow_model(reply_seconds: float) -> Any:
    words = [f"word{i} " for i in range(REPLY_CHUNKS)]

    def answer(request: dict[str, Any]) -> Reply:
        return chunked_reply(*words, chunk_delay_seconds=reply_seconds / (REPLY_CHUNKS - 1))

    return answer


def serve_model(reply_seconds: float, ports: Any, stop: Any) -> None:
    """Run the scripted model in this (child) process until `stop` is set."""
    fake = FakeOpenAI(default_chat=slow_model(reply_seconds)).start()
    ports.put(fake.base_url)
    stop.wait()
    fake.stop()


def stream_turns(port: int, key: str, session_ids: list[int], results: Any) -> None:
    """Stream one turn per session, all at once, from this (child) process; report their timings."""
    timings: list[dict[str, float]] = []
    threads = [
        threading.Thread(target=stream_turn, args=(port, key, session_id, timings), daemon=True)
        for session_id in session_ids
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put(timings)


def stream_turn(port: int, key: str, session_id: int, into: list[dict[str, float]]) -> None:
    """Stream one turn; record seconds to the first delta and to `done`."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    body = json.dumps({"role": "user", "content": "tell me", "respond": True, "stream": True})
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    started = time.perf_counter()
    connection.request("POST", f"/api/v1/sessions/{session_id}/messages/", body=body, headers=headers)
    response = connection.getresponse()
    first = done = None
    for raw in response:
        line = raw.decode().strip()
        if line == "event: delta" and first is None:
            first = time.perf_counter() - started
        elif line in ("event: done", "event: error"):
            done = time.perf_counter() - started if line == "event: done" else None
            break
    connection.close()
    into.append({"first_delta_s": first or -1.0, "done_s": done or -1.0})


_fresh = itertools.count()  # a new search query each time: its vector is not cached


def probe(api: Api, port: int, seconds: float) -> dict[str, list[float]]:
    """Alternate GET /healthz, a repeated and a new search for `seconds`; return their latencies (ms)."""
    health = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    times: dict[str, list[float]] = {name: [] for name, _ in PROBES}
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        health.request("GET", "/healthz")
        health.getresponse().read()
        times["healthz"].append((time.perf_counter() - started) * 1000)
        for name, query in (("search", "launch+date"), ("new_search", f"launch+date+{next(_fresh)}")):
            status, _, ms = api.call("GET", f"/assistants/bench/search/?q={query}")
            if status != 200:
                raise SystemExit(f"search answered {status}")
            times[name].append(ms)
        time.sleep(0.02)
    return times


class _ModelAddress:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url


def run(database_url: str, *, streams: int, reply_seconds: float) -> dict[str, Any]:
    spawn = multiprocessing.get_context("spawn")
    ports, stop = spawn.Queue(), spawn.Event()
    model = spawn.Process(target=serve_model, args=(reply_seconds, ports, stop), daemon=True)
    model.start()
    env = child_env(database_url, _ModelAddress(ports.get(timeout=60)))  # type: ignore[arg-type]
    key = setup_team(env)
    port = free_port()
    command = [PYTHON, "manage.py", "runall", "--addr", f"127.0.0.1:{port}"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: _port_open(port), timeout=120, what="the web server")
        api = Api(port, key)
        api.ok("POST", "/assistants/", {"slug": "bench", "name": "bench", "context_window": 200_000})
        api.ok(
            "POST",
            "/assistants/bench/memory/",
            {"path": "MEMORY.md", "content": "The launch date is 2026-12-15.\n"},
        )
        sessions = [api.ok("POST", "/assistants/bench/sessions/", {})[0]["id"] for _ in range(streams)]
        probe(api, port, WARM_UP_SECONDS)  # first requests load code, the embedder client, connections
        idle = probe(api, port, IDLE_PROBE_SECONDS)
        timings = spawn.Queue()
        clients = spawn.Process(target=stream_turns, args=(port, key, sessions, timings), daemon=True)
        started = time.perf_counter()
        clients.start()
        busy = probe(api, port, reply_seconds)
        results: list[dict[str, float]] = timings.get(timeout=reply_seconds * 20)
        wall = time.perf_counter() - started
        clients.join(timeout=30)
        done = [r["done_s"] for r in results if r["done_s"] > 0]
        return {
            "streams": streams,
            "streams_done": len(done),
            "wall_s": wall,
            "first_delta_p95_s": pct([r["first_delta_s"] for r in results if r["first_delta_s"] > 0], 95),
            "turn_p50_s": pct(done, 50) if done else None,
            "turn_max_s": max(done) if done else None,
            "idle_healthz_p95_ms": pct(idle["healthz"], 95),
            "idle_search_p95_ms": pct(idle["search"], 95),
            "idle_new_search_p95_ms": pct(idle["new_search"], 95),
            "healthz_p95_ms": pct(busy["healthz"], 95),
            "search_p95_ms": pct(busy["search"], 95),
            "new_search_p95_ms": pct(busy["new_search"], 95),
            "probes_under_load": len(busy["healthz"]),
        }
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        stop.set()
        model.join(timeout=30)


def report(figures: dict[str, Any]) -> None:
    print(
        f"\n{figures['streams_done']}/{figures['streams']} streamed turns finished in {figures['wall_s']:.1f} s"
    )
    print(f"  first delta p95      {figures['first_delta_p95_s']:.2f} s")
    print(f"  turn p50 / max       {figures['turn_p50_s']:.2f} / {figures['turn_max_s']:.2f} s")
    for name, label in PROBES:
        value, target = figures[f"{name}_p95_ms"], TARGETS[f"{name}_p95_ms"]
        verdict = "met" if value <= target else "MISSED"
        idle = figures[f"idle_{name}_p95_ms"]
        print(
            f"  {label:<18} p95 {value:7.1f} ms under load (idle {idle:.1f} ms)   target <= {target:.0f} ms  {verdict}"
        )
    print(f"  ({figures['probes_under_load']} probes of each while the streams ran)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--reply-seconds", type=float, default=10.0)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    print(
        f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; {args.streams} streams of {args.reply_seconds:g} s"
    )
    database_url = embedded_database_url()
    try:
        figures = run(database_url, streams=args.streams, reply_seconds=args.reply_seconds)
    finally:
        drop_embedded_database()
    report(figures)
    if args.json:
        print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
