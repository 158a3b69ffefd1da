"""`make stop`: stop what `make run` started, from any terminal.

See docs/design.md, Stack: the embedded database's lifetime.

`manage.py runall` writes its process id to ``<VAR_DIR>/runall.pid``; this sends it SIGTERM, which
it handles as Ctrl-C: the web server, both task clusters, then the embedded PostgreSQL if runall
started it. The embedded database is then stopped too if it still runs with nobody connected (a
command killed before it could stop what it started). Django is not loaded: its settings would
start the embedded database only to stop it. VAR_DIR and DATABASE_URL are read as settings.py reads
them (the environment, then ``.env``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil

from openclaw_site.platform import db
from openclaw_site.platform.env import env_str, load_dotenv

BASE_DIR = Path(__file__).resolve().parents[2]
PID_FILE_NAME = "runall.pid"
# runall waits up to 30 s for each child (runall.STOP_TIMEOUT_SECONDS); three of them, then the database.
STOP_WAIT_SECONDS = 120.0


def var_dir() -> Path:
    """Return the settings' VAR_DIR: ``OPENCLAW_VAR_DIR``, else ``var/`` beside manage.py."""
    return Path(env_str("OPENCLAW_VAR_DIR") or BASE_DIR / "var")


def write_pid_file(var: Path) -> Path:
    """Record this process as the running `make run` (runall calls it as it starts)."""
    var.mkdir(parents=True, exist_ok=True)
    path = var / PID_FILE_NAME
    path.write_text(f"{os.getpid()}\n")
    return path


def remove_pid_file(var: Path) -> None:
    """Forget the pid file if it still names this process (runall calls it as it exits)."""
    path = var / PID_FILE_NAME
    if _read_pid(path) == os.getpid():
        path.unlink(missing_ok=True)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _runall_process(var: Path) -> psutil.Process | None:
    """Return the live runall process the pid file names (a reused pid is not one)."""
    pid = _read_pid(var / PID_FILE_NAME)
    if pid is None:
        return None
    try:
        process = psutil.Process(pid)
        return process if "runall" in process.cmdline() else None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def stop_runall(var: Path, *, timeout: float = STOP_WAIT_SECONDS) -> bool:
    """Ask the running `make run` to stop and wait for it; return whether one was running."""
    process = _runall_process(var)
    if process is None:
        (var / PID_FILE_NAME).unlink(missing_ok=True)  # left by a runall that was killed
        return False
    process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(process):
        if time.monotonic() > deadline:
            raise SystemExit(f"make run (pid {process.pid}) did not stop within {timeout:.0f} s.")
        time.sleep(0.2)
    return True


def _alive(process: psutil.Process) -> bool:
    """Tell whether the process still runs (an exited one its parent has not reaped yet does not)."""
    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def stop_unused_database(var: Path) -> bool:
    """Stop the embedded PostgreSQL under ``var`` if it runs and nobody is connected to it."""
    pgdata = var / "pgdata"
    if env_str("DATABASE_URL") or not db.is_running(pgdata) or db.other_clients(pgdata):
        return False
    return db.stop_embedded_database(pgdata)


def main() -> int:
    load_dotenv(BASE_DIR / ".env")
    var = var_dir()
    if stop_runall(var):
        print("Stopped make run (the web server, the task workers and what it started).")
    else:
        print("make run is not running.")
    if stop_unused_database(var):
        print("Stopped the embedded PostgreSQL, which nothing was using.")
    elif db.is_running(var / "pgdata"):
        print("The embedded PostgreSQL keeps running: another process is connected to it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
