#!/usr/bin/env python
"""OpenClaw plugin benchmark: what the plugin adds to each OpenClaw turn, at 100 and 5,000 stored messages.

    .venv/bin/python bench/plugin.py [--turns 200] [--warm-up 20] [--json]      (make bench-plugin)

It starts the server as production runs it (`manage.py runall` with DEBUG off: gunicorn with
uvicorn workers and the task clusters) on the bench database of the embedded PostgreSQL, with the
instant OpenAI-compatible model of tests/fake_openai.py for the server's own flush and summary
(bench/sessions.py: the same server, database and helpers). It seeds OpenClaw sessions through
the plugin's own import endpoint (`sessions/by-key/{key}/bootstrap/`, 500 messages a batch), then
runs bench/plugin_turns.mjs under Node 24: the plugin's `SiteContextEngine`, `SiteClient` and
`Spool` (integrations/openclaw/lib/) doing, per turn, `assemble` (tokenBudget 200,000: what
OpenClaw passes for a 200k-token model) and then `commitTurn` of the user's message and the
model's answer, back to back, as OpenClaw does around a model that answers at once. Loopback,
one client, the spool on the local disk (each commit is written and fsynced before it is sent).

All sessions are seeded first; then the cases take turns (`--rounds`, 2 by default), each round
`--warm-up` untimed turns and then its share of `--turns` timed ones, so that the other load of a
shared machine falls on every case alike. The cases:

* **100 messages**: a short session; the context is all of it (about 9k tokens at the start).
* **5,000 messages, compacted**: the realistic long session. Its history (about 470k tokens) is
  far over the 200k window, so the server compacts it while it is imported (threshold
  compactions, in the background); then one turn is committed and the session compacted once
  more (the plugin's compact endpoint), so the timed turns start where a session stands after a
  compaction: the summary and the newest messages (keepRecentTokens, 20,000 by default).
* **5,000 messages, uncompacted**: the same history on an assistant with a 1M-token window and a
  tokenBudget of 1,000,000, under its compaction threshold, so every assemble carries all 5,000
  messages (about 460k tokens). What a long session costs per turn before any compaction on a
  model with a 1M window; not what the target is about (no 200k session holds that).

Each figure is printed beside its target: p50 and p95 of assemble + commit, of each part, and the
5,000 (compacted) / 100 ratio. The machine's load average is printed before and after. Nothing
here is a test: figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from sessions import (  # noqa: E402  (bench/sessions.py: the same server, database and client)
    PYTHON,
    Api,
    Db,
    _instant_model,
    _port_open,
    child_env,
    descendants,
    drop_embedded_database,
    embedded_database_url,
    free_port,
    pct,
    setup_team,
    wait_for,
)

from tests.fake_openai import FakeOpenAI  # noqa: E402

NODE = ROOT / "var" / "openclaw" / "node24" / "bin" / "node"  # make openclaw-deps
DRIVER = ROOT / "bench" / "plugin_turns.mjs"
VAR = Path(os.environ.get("OPENCLAW_VAR_DIR") or ROOT / "var")  # as embedded_database_url has it
POSTMASTER_PID = VAR / "pgdata" / "postmaster.pid"  # the embedded PostgreSQL's
SERVER_LOG = VAR / "bench" / "plugin-server.log"  # the server's output, kept for a failed run
TOKEN_BUDGET = 200_000  # OpenClaw's tokenBudget for a model with a 200k-token window
LONG_BUDGET = 1_000_000  # the uncompacted case: a 1M-token window
BATCH = 500  # the server's most messages per request (MAX_BATCH_MESSAGES)
USER_WORDS, ASSISTANT_WORDS = 25, 120  # about 35 and 155 tokens: seeded and committed messages alike
TARGETS = {"turn_p50_ms": 30.0, "turn_p95_ms": 80.0, "ratio": 1.3}


def words(i: int, count: int, salt: int) -> str:
    return " ".join(f"w{(i * 31 + k * 7 + salt) % 997}" for k in range(count))


def history(count: int) -> list[dict[str, Any]]:
    """``count`` messages as OpenClaw stores them: user and assistant turns, an hour apart."""
    start = int(time.time() * 1000) - count * 3_600_000
    messages: list[dict[str, Any]] = []
    for i in range(count):
        if i % 2 == 0:
            text = f"Turn {i // 2}: {words(i, USER_WORDS, 1)}"
            messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        else:
            text = f"Answer {i // 2}: {words(i, ASSISTANT_WORDS, 2)}"
            messages.append(
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": text}],
                    "api": "openai-completions",
                    "provider": "bench",
                    "model": "instant",
                    "stopReason": "stop",
                }
            )
        messages[-1]["timestamp"] = start + i * 3_600_000
    return messages


@dataclass
class Case:
    """One timed session: what is seeded, the budget it is timed with, and the timings so far."""

    label: str
    slug: str
    key: str
    count: int
    budget: int
    stored_before: int = 0
    raw: dict[str, Any] = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)  # server CPU over the rounds, by kind
    cpu_turns: int = 0  # the turns (warm-up included) that CPU was spent on

    def add_cpu(self, seconds: dict[str, float], turns: int) -> None:
        for kind, value in seconds.items():
            self.cpu_s[kind] = self.cpu_s.get(kind, 0.0) + value
        self.cpu_turns += turns

    def cpu_ms_per_turn(self) -> dict[str, float]:
        return {kind: 1000 * value / self.cpu_turns for kind, value in self.cpu_s.items()}

    def add(self, raw: dict[str, Any]) -> None:
        """Pool a round's timings; keep the first round's first context and the last one's last."""
        for name, values in raw.items():
            if isinstance(values, list):
                self.raw.setdefault(name, []).extend(values)
        self.raw.setdefault("first_context", raw["first_context"])
        self.raw["last_context"] = raw["last_context"]
        self.raw["spool_left"] = self.raw.get("spool_left", 0) + raw["spool_left"]


def prepare(api: Api, db: Db, case: Case) -> None:
    """Seed the case's session and let the server finish what the import called for."""
    print(f"... {case.label}: seeding {case.count:,} messages", flush=True)
    started = time.perf_counter()
    seed(api, case.slug, case.key, case.count)
    # The budget becomes the session's window before the server's own work is waited for.
    path = f"/assistants/{case.slug}/sessions/by-key/{case.key}"
    api.ok("POST", f"{path}/context/", {"token_budget": case.budget})
    settle(db)
    if case.label == "5000":
        compact_now(api, case.slug, case.key, case.budget)
        settle(db)
    state = session_state(api, case.slug, case.key)
    case.stored_before = state["stored_messages"]
    print(
        f"    seeded and settled in {time.perf_counter() - started:.1f} s ({state['compactions']} compactions)",
        flush=True,
    )


def seed(api: Api, slug: str, key: str, count: int) -> None:
    """Import ``count`` messages into a new session through the plugin's bootstrap endpoint."""
    path = f"/assistants/{slug}/sessions/by-key/{key}/bootstrap/"
    after = 0
    messages = history(count)
    for start in range(0, count, BATCH):
        answer, _ = api.ok("POST", path, {"messages": messages[start : start + BATCH], "after_seq": after})
        if not answer["bootstrapped"]:
            raise SystemExit(f"the import of {key} stopped at message {start}")
        after = answer["last_seq"]


def compact_now(api: Api, slug: str, key: str, budget: int) -> None:
    """Leave the session as a compaction leaves it: the summary and keepRecentTokens of messages.

    The threshold compactions of the import keep whatever arrived while they summarised, and a
    compaction right after one is refused; so one turn goes in first (as OpenClaw commits it).
    """
    path = f"/assistants/{slug}/sessions/by-key/{key}"
    now = int(time.time() * 1000)
    turn = [{**message, "timestamp": now + i} for i, message in enumerate(history(2))]
    api.ok("POST", f"{path}/turns/", {"advancement_key": "bench-before-compaction", "messages": turn})
    answer, _ = api.ok("POST", f"{path}/compact/", {"token_budget": budget, "reason": "manual"})
    if not answer["compacted"]:
        raise SystemExit(f"the compaction of {key} did not compact: {answer['reason']}")


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU a process has used so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def server_cpu(server_pid: int) -> dict[str, float]:
    """CPU seconds so far of the web processes, the task workers and PostgreSQL (the embedded
    server's postmaster and backends), each summed over its processes."""
    totals = {"web": 0.0, "workers": 0.0, "postgres": 0.0}
    for pid, command in descendants(server_pid):
        kind = "web" if "gunicorn" in command else "workers" if "qcluster" in command else None
        if kind:
            totals[kind] += cpu_seconds(pid)
    postmaster = int(POSTMASTER_PID.read_text().split()[0])
    totals["postgres"] = cpu_seconds(postmaster) + sum(cpu_seconds(pid) for pid, _ in descendants(postmaster))
    return totals


def settle(db: Db) -> float:
    """Wait until no task is queued or running (exports, indexes, flushes, compactions)."""
    return wait_for(lambda: db.pending_tasks() == 0, timeout=300, what="the task queue", every=0.2)


def drive(port: int, key: str, case: Case, *, turns: int, warm_up: int) -> Any:
    """Run the Node driver on one session; return its timings and what its assembles answered."""
    with tempfile.TemporaryDirectory(prefix="bench-plugin-spool-") as spool:
        done = subprocess.run(
            [
                str(NODE),
                str(DRIVER),
                *("--base-url", f"http://127.0.0.1:{port}", "--assistant", case.slug),
                *("--session-key", case.key, "--turns", str(turns), "--warm-up", str(warm_up)),
                *("--token-budget", str(case.budget), "--spool-dir", spool),
                *("--user-words", str(USER_WORDS), "--assistant-words", str(ASSISTANT_WORDS)),
            ],
            env={**os.environ, "OPENCLAW_SITE_API_KEY": key},
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"the driver failed on {case.key}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def figures_of(raw: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "turns": len(raw["turn_ms"]),
        "first_context": raw["first_context"],
        "context": raw["last_context"],
        **context,
    }
    for part in ("turn", "assemble", "commit", "assemble_http", "commit_http"):
        out[f"{part}_p50_ms"] = pct(raw[f"{part}_ms"], 50)
        out[f"{part}_p95_ms"] = pct(raw[f"{part}_ms"], 95)
    out["spool_left"] = raw["spool_left"]
    return out


def session_state(api: Api, slug: str, key: str) -> dict[str, Any]:
    session, _ = api.ok("GET", f"/assistants/{slug}/sessions/by-key/{key}/")
    return {
        "stored_messages": session.get("message_count"),
        "compactions": session.get("compaction_count"),
    }


def run(database_url: str, *, turns: int, warm_up: int, rounds: int, uncompacted: bool) -> dict[str, Any]:
    fake = FakeOpenAI(default_chat=_instant_model).start()
    SERVER_LOG.parent.mkdir(parents=True, exist_ok=True)
    env = child_env(database_url, fake)
    key = setup_team(env)
    port = free_port()
    command = [PYTHON, "manage.py", "runall", "--addr", f"127.0.0.1:{port}"]
    log = SERVER_LOG.open("w")
    server = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True, stdout=log, stderr=log)
    try:
        wait_for(lambda: _port_open(port), timeout=120, what="the web server")
        api, db = Api(port, key), Db(database_url)
        api.ok("POST", "/assistants/", {"slug": "bench", "name": "bench", "context_window": TOKEN_BUDGET})
        api.ok(
            "POST", "/assistants/", {"slug": "bench-1m", "name": "bench-1m", "context_window": LONG_BUDGET}
        )
        api.ok(
            "POST",
            "/assistants/bench/memory/",
            {"path": "MEMORY.md", "content": "# Memory\n- The launch date is 2026-12-15.\n"},
        )
        cases = [
            Case("100", "bench", "agent:main:bench-100", 100, TOKEN_BUDGET),
            Case("5000", "bench", "agent:main:bench-5000", 5_000, TOKEN_BUDGET),
        ]
        if uncompacted:
            cases.append(
                Case("5000_uncompacted", "bench-1m", "agent:main:bench-5000-long", 5_000, LONG_BUDGET)
            )
        for case in cases:
            prepare(api, db, case)
        # The cases take turns, `rounds` times each, so that a change in the machine's other load
        # falls on all of them alike; each round warms up first (a new connection, maybe to the
        # other web worker).
        for round_ in range(rounds):
            for case in cases:
                print(
                    f"... {case.label}: round {round_ + 1}, {warm_up} + {turns // rounds} turns", flush=True
                )
                before = server_cpu(server.pid)
                case.add(drive(port, key, case, turns=turns // rounds, warm_up=warm_up))
                settle(db)  # the commits' exports and indexes, before the next case is timed
                after = server_cpu(server.pid)
                case.add_cpu({kind: after[kind] - before[kind] for kind in after}, warm_up + turns // rounds)
        figures: dict[str, Any] = {}
        for case in cases:
            after = session_state(api, case.slug, case.key)
            figures[case.label] = figures_of(
                case.raw,
                {
                    "seeded": case.count,
                    "budget": case.budget,
                    "stored_before": case.stored_before,
                    "stored_after": after["stored_messages"],
                    "compactions": after["compactions"],
                    "cpu_ms_per_turn": {**case.cpu_ms_per_turn(), "plugin": pct(case.raw["cpu_ms"], 50)},
                },
            )
        figures["ratio_p50"] = figures["5000"]["turn_p50_ms"] / figures["100"]["turn_p50_ms"]
        figures["ratio_p95"] = figures["5000"]["turn_p95_ms"] / figures["100"]["turn_p95_ms"]
        serving = {
            label: figures[label]["cpu_ms_per_turn"]["web"] + figures[label]["cpu_ms_per_turn"]["postgres"]
            for label in ("100", "5000")
        }
        figures["cpu_ratio"] = serving["5000"] / serving["100"]
        failed = db.one("SELECT COUNT(*) FROM openclaw_site_taskrecord WHERE state = 'failed'")
        figures["tasks_failed"] = int(failed or 0)
        return figures
    finally:
        # SIGTERM to runall only (it stops gunicorn and the clusters in order), SIGKILL after a minute.
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
        fake.stop()


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


CASES = {
    "100": "100 messages",
    "5000": "5,000 messages, compacted",
    "5000_uncompacted": "5,000 messages, uncompacted, 1M budget",
}


def report(figures: dict[str, Any]) -> None:
    def verdict(value: float, target: float) -> str:
        return "met" if value <= target else "MISSED"

    for label, title in CASES.items():
        case = figures.get(label)
        if case is None:
            continue
        first, last = case["first_context"], case["context"]
        print(
            f"\n{title}: {case['stored_before']:,} stored messages before the turns, {case['stored_after']:,}"
            f" after; {case['compactions']} compactions{'; a summary first' if last['summary_first'] else ''}"
            f"\n  the context: {first['messages']:,} messages, {first['estimated_tokens']:,} tokens,"
            f" {first['json_bytes'] / 1024:,.0f} KiB at the first turn; {last['messages']:,},"
            f" {last['estimated_tokens']:,}, {last['json_bytes'] / 1024:,.0f} KiB at the last"
        )
        targeted = label != "5000_uncompacted"
        for part, name in (
            ("turn", "assemble + commit"),
            ("assemble", "  assemble"),
            ("commit", "  commitTurn"),
            ("assemble_http", "  assemble, HTTP"),
            ("commit_http", "  commit, HTTP"),
        ):
            p50, p95 = case[f"{part}_p50_ms"], case[f"{part}_p95_ms"]
            line = f"  {name:<20} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms"
            if part == "turn" and targeted:
                line += (
                    f"   target p50 <= {TARGETS['turn_p50_ms']:.0f} ({verdict(p50, TARGETS['turn_p50_ms'])}),"
                    f" p95 <= {TARGETS['turn_p95_ms']:.0f} ({verdict(p95, TARGETS['turn_p95_ms'])})"
                )
            print(line)
        cpu = case["cpu_ms_per_turn"]
        print(
            f"  CPU per turn: plugin {cpu['plugin']:.1f} ms (p50), web {cpu['web']:.1f} ms,"
            f" PostgreSQL {cpu['postgres']:.1f} ms, task workers {cpu['workers']:.1f} ms"
        )
        print(f"  ({case['turns']} timed turns; {case['spool_left']} left in the spool)")
    ratio = TARGETS["ratio"]
    print(
        f"\n5,000 (compacted) / 100: p50 {figures['ratio_p50']:.2f}x, p95 {figures['ratio_p95']:.2f}x"
        f"   target flat, <= {ratio:g}x ({verdict(max(figures['ratio_p50'], figures['ratio_p95']), ratio)})"
    )
    print(
        f"  the web's and PostgreSQL's CPU per turn, 5,000 (compacted) / 100: {figures['cpu_ratio']:.2f}x"
        " (what other load on the machine does not change)"
    )
    print(f"tasks failed during the run: {figures['tasks_failed']}")
    print(f"load average before / after: {figures['load_before']} / {figures['load_after']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="timed turns per session")
    parser.add_argument("--warm-up", type=int, default=20, help="untimed turns before each round")
    parser.add_argument("--rounds", type=int, default=2, help="the cases take turns this many times")
    parser.add_argument("--no-uncompacted", action="store_true", help="skip the 1M-budget uncompacted case")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    if not NODE.exists():
        raise SystemExit(f"no Node 24 at {NODE}: run `make openclaw-deps`")
    before = load_average()
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; load average {before}", flush=True)
    drop_embedded_database()  # one an interrupted run left behind
    database_url = embedded_database_url()
    started = time.perf_counter()
    try:
        figures = run(
            database_url,
            turns=args.turns,
            warm_up=args.warm_up,
            rounds=args.rounds,
            uncompacted=not args.no_uncompacted,
        )
    finally:
        drop_embedded_database()
    figures.update(load_before=before, load_after=load_average(), wall_s=time.perf_counter() - started)
    report(figures)
    print(f"whole run {figures['wall_s']:.0f} s")
    if args.json:
        print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
